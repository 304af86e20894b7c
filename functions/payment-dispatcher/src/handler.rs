//! The handler: one SQS invocation of `payment-dispatcher`, callable directly with
//! `LambdaEvent::new` (as its tests do).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::KeySpec;
use lambda_dedup_batch::LeasedDeduplicator;
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::settings::Env;
use lambda_runtime::{Error, LambdaEvent};

use crate::payment;

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "payment-dispatcher";

/// What the handler needs, built once per container, outside the handler.
#[derive(Debug)]
pub(crate) struct Payments {
    pub(crate) spec: KeySpec,
    pub(crate) dedup: LeasedDeduplicator,
    pub(crate) api: IdempotentClient,
    pub(crate) max_concurrency: usize,
}

impl Payments {
    /// From `env` (`main` passes the process environment): `lambda_dedup_runtime::settings`
    /// plus `PAYMENTS_API_URL`; marks through `client`. Every guard of the settings applies,
    /// the provider's key retention included (S16).
    pub(crate) fn new(env: &Env, client: lambda_dedup_dynamodb::Client) -> Result<Self, Error> {
        let settings = lambda_dedup_runtime::Settings::read(env, FUNCTION)?;
        let dedup = settings.leased_deduplicator(payment::key_spec(settings.scope.clone()), client);
        Ok(Self {
            api: IdempotentClient::new(
                &env.required("PAYMENTS_API_URL")?,
                settings.provider_timeout,
            )?,
            spec: dedup.spec().clone(),
            dedup,
            max_concurrency: settings.max_concurrency,
        })
    }
}

/// One invocation: each payment claimed under a lease cut to the invocation's deadline, sent
/// with the event's `Idempotency-Key`, and completed with the provider's receipt (S6, S8).
pub(crate) async fn handle(
    payments: &Payments,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let deadline = lambda_dedup_runtime::deadline(&event.context);
    lambda_dedup_runtime::run_sqs(
        FUNCTION,
        &payments.spec,
        event,
        payments.max_concurrency,
        |m| async move {
            payments
                .dedup
                .leased(&m, deadline, |e, lease| async move {
                    let request = payment::request(&e)?;
                    let receipt = payments
                        .api
                        .post("/v1/payments", &lease.idempotency_key(), &request)
                        .await?;
                    Ok(Some(receipt.body))
                })
                .await
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    //! Every setting `payment-dispatcher` documents, through `Payments::new` — the wiring `main`
    //! runs — on the local DynamoDB and the fake payments API: each test sets one variable and
    //! observes what it changes.

    use super::*;
    use aws_lambda_events::event::sqs::SqsMessage;
    use fake_provider::{Fault, Provider};
    use lambda_dedup::{Claim, ManualClock, Retention};
    use lambda_dedup_dynamodb::DynamoStore;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    struct World {
        provider: Provider,
        client: lambda_dedup_dynamodb::Client,
        env: Env,
        _server: tokio::task::JoinHandle<()>,
    }

    async fn world() -> World {
        let provider = Provider::new();
        let (addr, server) = fake_provider::spawn(provider.clone(), ([127, 0, 0, 1], 0).into())
            .await
            .expect("fake provider");
        let client = dedup_tests::client();
        let marks = dedup_tests::mark_table(&client).await;
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "test".to_owned()),
            ("DEDUP_MARK_TABLE", marks),
            ("PAYMENTS_API_URL", format!("http://{addr}")),
        ]);
        World {
            provider,
            client,
            env,
            _server: server,
        }
    }

    impl World {
        fn payments(&self, vars: &[(&str, &str)]) -> Payments {
            let env = vars
                .iter()
                .fold(self.env.clone(), |env, (k, v)| env.with(k, *v));
            Payments::new(&env, self.client.clone()).expect("settings accepted")
        }
    }

    fn sample() -> SqsEvent {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/payment-request.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("event")
    }

    /// `n` payments with ids unique to this test run.
    fn payments_event(n: usize) -> SqsEvent {
        let mut event = sample();
        let template = event.records.remove(0);
        let run = dedup_tests::unique("pay");
        event.records = (0..n)
            .map(|i| {
                let mut r: SqsMessage = template.clone();
                r.message_id = Some(format!("m-{i}"));
                r.body = r
                    .body
                    .map(|b| b.replace("\"pay-1\"", &format!("\"{run}-{i}\"")));
                r
            })
            .collect();
        event
    }

    async fn invoke(payments: &Payments, event: SqsEvent) -> Vec<String> {
        let event = LambdaEvent::new(event, lambda_runtime::Context::default());
        lambda_dedup_runtime::testing::failed_ids(handle(payments, event).await.expect("handled"))
    }

    /// The handler, called as Lambda calls it, on the sample payment, twice: the provider
    /// applies it once, under one idempotency key; the second delivery is a duplicate answered
    /// from the stored receipt (S6, S8); nothing is reported failed.
    #[tokio::test]
    async fn the_handler_pays_once() {
        let w = world().await;
        let payments = w.payments(&[]);
        let event = payments_event(1);
        for _ in 0..2 {
            assert!(invoke(&payments, event.clone()).await.is_empty());
        }
        let effects = w.provider.effects();
        assert_eq!(effects.len(), 1, "one idempotency key");
        assert_eq!(
            effects.values().copied().collect::<Vec<_>>(),
            [1],
            "one payment"
        );
    }

    /// A first attempt of `event`'s payment, 8 s ago under a 3 s lease: it claimed and died
    /// while its call was out.
    async fn crashed_8s_ago(w: &World, payments: &Payments, event: &SqsEvent) {
        let msg = lambda_dedup_runtime::sqs::message(&event.records[0]);
        let key = payments.spec.derive(&msg).expect("key").key;
        let eight_ago = SystemTime::now() - Duration::from_secs(8);
        let marks = w.env.required("DEDUP_MARK_TABLE").expect("table");
        let crashed = DynamoStore::new(
            w.client.clone(),
            marks,
            Retention::unchecked(Duration::from_secs(30 * 86_400)).expect("retention"),
        )
        .with_lease(Duration::from_secs(3))
        .with_clock(Arc::new(ManualClock::new(eight_ago)));
        assert!(matches!(
            crashed.claim(&key, None, None).await.expect("claim"),
            Claim::Claimed(_)
        ));
    }

    /// S16, `PROVIDER_KEY_RETENTION_SECONDS` through the function's wiring: a first attempt
    /// that crashed while its call was out (its lease long expired), taken over later than the
    /// provider keeps keys, must not call the payments API again — it could charge twice. The
    /// same takeover within the retention calls (the provider answers from its key).
    #[tokio::test]
    async fn s16_provider_key_retention_stops_a_late_takeover_from_calling() {
        let w = world().await;
        let with_retention = |secs| {
            w.payments(&[
                ("DEDUP_LEASE_SECONDS", "3"),
                ("PROVIDER_TIMEOUT_MS", "1000"),
                ("PROVIDER_KEY_RETENTION_SECONDS", secs),
            ])
        };
        let forgetful = with_retention("6");
        let event = payments_event(1);
        crashed_8s_ago(&w, &forgetful, &event).await;
        let failed = invoke(&forgetful, event).await;
        assert_eq!(failed, ["m-0"], "not applied: for reconciliation");
        assert_eq!(
            w.provider.requests(),
            0,
            "the payments API was not called again"
        );

        // With the provider keeping keys longer than the event's age, the takeover calls.
        let patient = with_retention("3600");
        let event = payments_event(1);
        crashed_8s_ago(&w, &patient, &event).await;
        assert!(invoke(&patient, event).await.is_empty());
        assert_eq!(w.provider.total_effects(), 1);
    }

    /// `PROVIDER_TIMEOUT_MS` bounds the call: a provider slower than it is a retry, not a hang.
    #[tokio::test]
    async fn the_provider_timeout_setting_bounds_the_call() {
        let w = world().await;
        w.provider
            .inject(Fault::slow(1, Duration::from_millis(1500)));
        let failed = invoke(
            &w.payments(&[("PROVIDER_TIMEOUT_MS", "300")]),
            payments_event(1),
        )
        .await;
        assert_eq!(failed, ["m-0"], "timed out: retried");
        w.provider.clear_faults();
        w.provider
            .inject(Fault::slow(1, Duration::from_millis(300)));
        assert!(invoke(&w.payments(&[]), payments_event(1)).await.is_empty());
    }

    /// `DEDUP_LEASE_SECONDS`: the claim written while the call is out expires after the lease.
    #[tokio::test]
    async fn the_lease_setting_is_the_claims_lease() {
        let w = world().await;
        w.provider
            .inject(Fault::slow(1, Duration::from_millis(1500)));
        let payments = w.payments(&[("DEDUP_LEASE_SECONDS", "40")]);
        let event = payments_event(1);
        let msg = lambda_dedup_runtime::sqs::message(&event.records[0]);
        let key = payments.spec.derive(&msg).expect("key").key;
        let started = SystemTime::now();
        let (failed, lease) = tokio::join!(invoke(&payments, event), async {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if let Ok(Some(mark)) = payments.dedup.store().get(&key).await
                    && let Some(lease) = mark.lease_expires_at
                {
                    return Some(lease);
                }
            }
            None
        });
        assert!(failed.is_empty());
        let lease = lease
            .and_then(|l| l.duration_since(started).ok())
            .expect("a lease while the call was out");
        assert!(
            (Duration::from_secs(38)..=Duration::from_secs(42)).contains(&lease),
            "lease of {lease:?}, not 40 s"
        );
    }

    /// `DEDUP_MAX_CONCURRENCY`: at most that many calls are out at once.
    #[tokio::test]
    async fn the_concurrency_setting_bounds_calls_in_flight() {
        for (setting, most) in [("1", 1), ("4", 4)] {
            let w = world().await;
            w.provider
                .inject(Fault::slow(8, Duration::from_millis(250)));
            let payments = w.payments(&[("DEDUP_MAX_CONCURRENCY", setting)]);
            let mut seen = 0;
            let (failed, ()) = tokio::join!(invoke(&payments, payments_event(8)), async {
                for _ in 0..60 {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                    seen = seen.max(w.provider.in_flight());
                }
            });
            assert!(failed.is_empty());
            assert_eq!(seen, most, "DEDUP_MAX_CONCURRENCY={setting}");
        }
    }

    /// `DEDUP_CACHE_SIZE`: a duplicate this container saw complete is answered from memory —
    /// with the mark gone from the table, a cached container still calls nothing, and one with
    /// the cache off (0) calls again.
    #[tokio::test]
    async fn the_cache_setting_answers_known_duplicates_from_memory() {
        for (size, calls) in [("10", 1), ("0", 2)] {
            let w = world().await;
            let payments = w.payments(&[("DEDUP_CACHE_SIZE", size)]);
            let event = payments_event(1);
            assert!(invoke(&payments, event.clone()).await.is_empty());
            let marks = w.env.required("DEDUP_MARK_TABLE").expect("table");
            for pk in dedup_tests::mark_keys(&w.client, &marks).await {
                dedup_tests::delete_mark(&w.client, &marks, &pk).await;
            }
            assert!(invoke(&payments, event).await.is_empty());
            assert_eq!(w.provider.requests(), calls, "DEDUP_CACHE_SIZE={size}");
        }
    }

    /// `DEDUP_MAX_BODY_BYTES`: a larger body is rejected (for the DLQ), never sent.
    #[tokio::test]
    async fn the_body_limit_setting_rejects_larger_bodies() {
        let w = world().await;
        let failed = invoke(
            &w.payments(&[("DEDUP_MAX_BODY_BYTES", "64")]),
            payments_event(1),
        )
        .await;
        assert_eq!(failed, ["m-0"]);
        assert_eq!(w.provider.requests(), 0);
    }

    /// The namespace, the consumer and the mark table: the mark is written where they say.
    #[tokio::test]
    async fn namespace_consumer_and_mark_table_place_the_mark() {
        let w = world().await;
        let marks = dedup_tests::mark_table(&w.client).await;
        let payments = w.payments(&[
            ("DEDUP_NAMESPACE", "staging"),
            ("DEDUP_CONSUMER", "payments-v2"),
            ("DEDUP_MARK_TABLE", &marks),
        ]);
        assert!(invoke(&payments, payments_event(1)).await.is_empty());
        let keys = dedup_tests::mark_keys(&w.client, &marks).await;
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert!(keys[0].starts_with("staging#payments-v2#"), "{}", keys[0]);
    }

    /// Settings that cannot work are refused at start, naming the variable.
    #[tokio::test]
    async fn impossible_settings_refuse_to_start() {
        let w = world().await;
        for (name, value) in [
            ("PROVIDER_KEY_RETENTION_SECONDS", "30"),
            ("DEDUP_LEASE_SECONDS", "2"),
            ("PAYMENTS_API_URL", ""),
        ] {
            let env = w.env.clone().with(name, value);
            let Err(err) = Payments::new(&env, w.client.clone()) else {
                panic!("{name}={value} accepted");
            };
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }
}
