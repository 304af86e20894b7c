//! The service: `payment-dispatcher` as `main` builds it, callable directly (as its tests do).

use std::sync::Arc;

use lambda_dedup::Lease;
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::flow::calls;
use lambda_dedup_runtime::{Dedup, Event, HandlerError, SqsService};
use lambda_runtime::Error;

use crate::payment::{self, Request};

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "payment-dispatcher";

/// The function as `main` runs it: each payment request (the settings plus `PAYMENTS_API_URL`)
/// claimed under a lease cut to the invocation's deadline, sent with the event's
/// `Idempotency-Key` within `PROVIDER_TIMEOUT_MS`, and completed with the provider's receipt
/// (S6, S8); a takeover older than the provider keeps keys is not sent again (S16).
pub(crate) fn service(dedup: Dedup) -> Result<SqsService, Error> {
    let timeout = dedup.settings().provider_timeout;
    let api = Arc::new(IdempotentClient::new(
        &dedup.env().required("PAYMENTS_API_URL")?,
        timeout,
    )?);
    Ok(
        payment::configure(dedup).sqs(calls(move |e: Event<Request>, lease: Lease| {
            let api = api.clone();
            async move {
                let request = e.payload.checked()?;
                let receipt = api
                    .call("/v1/payments", &lease.idempotency_key(), &request)
                    .await?;
                Ok::<_, HandlerError>(Some(receipt.body))
            }
        }))?,
    )
}

#[cfg(test)]
mod tests {
    //! Every setting `payment-dispatcher` documents, through `service` — the wiring `main`
    //! runs — on the in-memory store and the fake payments API: each test sets one variable and
    //! observes what it changes.

    use super::*;
    use lambda_dedup::{Claim, ManualClock, MarkStore};
    use lambda_dedup_fake_provider::{Fault, Provider};
    use lambda_dedup_runtime::Env;
    use lambda_dedup_runtime::events::{SqsEvent, SqsMessage};
    use lambda_dedup_runtime::testing::{OnMemory, function_on_memory};
    use lambda_runtime::LambdaEvent;
    use lambda_runtime::tower::ServiceExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, SystemTime};

    struct World {
        provider: Provider,
        env: Env,
        _server: tokio::task::JoinHandle<()>,
    }

    /// The function as `main` builds it, on a memory store built from its own settings.
    type Payments = OnMemory<SqsService>;

    async fn world() -> World {
        let provider = Provider::new();
        let (url, server) = provider.serve().await.expect("fake provider");
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "test".to_owned()),
            ("DEDUP_MARK_TABLE", "marks".to_owned()),
            ("PAYMENTS_API_URL", url),
        ]);
        World {
            provider,
            env,
            _server: server,
        }
    }

    impl World {
        fn env_with(&self, vars: &[(&str, &str)]) -> Env {
            vars.iter()
                .fold(self.env.clone(), |env, (k, v)| env.with(k, *v))
        }

        fn payments(&self, vars: &[(&str, &str)]) -> Payments {
            function_on_memory(&self.env_with(vars), FUNCTION, payment::configure, service)
                .expect("settings accepted")
        }
    }

    fn sample() -> SqsEvent {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/payment-request.json"
        );
        lambda_dedup_runtime::testing::read_json(path)
    }

    static RUN: AtomicUsize = AtomicUsize::new(0);

    /// `n` payments with ids unique to this test.
    fn payments_event(n: usize) -> SqsEvent {
        let mut event = sample();
        let template = event.records.remove(0);
        let run = format!("pay-run{}", RUN.fetch_add(1, Ordering::SeqCst));
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
        let answer = payments.service.clone().oneshot(event).await;
        lambda_dedup_runtime::testing::failed_ids(answer.expect("handled"))
    }

    /// The service, called as Lambda calls it, on the sample payment, twice: the provider
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

    /// A payment the provider cannot take (an invalid currency) is rejected for the DLQ and
    /// never sent; the rest of the batch is paid.
    #[tokio::test]
    async fn an_invalid_payment_is_rejected_unsent() {
        let w = world().await;
        let payments = w.payments(&[]);
        let mut event = payments_event(2);
        event.records[1].body = event.records[1]
            .body
            .as_ref()
            .map(|b| b.replace("\"EUR\"", "\"euro\""));
        assert_eq!(invoke(&payments, event).await, ["m-1"]);
        assert_eq!(w.provider.requests(), 1);
    }

    /// A first attempt of `event`'s payment, 8 s ago under the settings' lease (3 s): it
    /// claimed and died while its call was out.
    async fn crashed_8s_ago(payments: &Payments, event: &SqsEvent) {
        let msg = lambda_dedup_runtime::testing::sqs_message(&event.records[0]);
        let key = payments.key_spec.derive(&msg).expect("key").key;
        let eight_ago = SystemTime::now() - Duration::from_secs(8);
        let crashed = payments
            .store
            .clone()
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
        crashed_8s_ago(&forgetful, &event).await;
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
        crashed_8s_ago(&patient, &event).await;
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
        let msg = lambda_dedup_runtime::testing::sqs_message(&event.records[0]);
        let key = payments.key_spec.derive(&msg).expect("key").key;
        let started = SystemTime::now();
        let (failed, lease) = tokio::join!(invoke(&payments, event), async {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if let Ok(Some(mark)) = payments.store.get(&key).await
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

    /// `DEDUP_CACHE_SIZE`: a duplicate this container saw complete is answered from memory,
    /// asking no store; with the cache off (0) the store is asked. Either way it is paid once.
    #[tokio::test]
    async fn the_cache_setting_answers_known_duplicates_from_memory() {
        for (size, cached) in [("10", true), ("0", false)] {
            let w = world().await;
            let payments = w.payments(&[("DEDUP_CACHE_SIZE", size)]);
            let event = payments_event(1);
            assert!(invoke(&payments, event.clone()).await.is_empty());
            let before = payments.store.calls();
            assert!(invoke(&payments, event).await.is_empty());
            let asked = payments.store.calls() > before;
            assert_eq!(asked, !cached, "DEDUP_CACHE_SIZE={size}");
            assert_eq!(w.provider.requests(), 1, "DEDUP_CACHE_SIZE={size}");
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

    /// The namespace and the consumer: the mark's key is in their scope.
    #[tokio::test]
    async fn namespace_and_consumer_scope_the_mark() {
        let w = world().await;
        let payments = w.payments(&[
            ("DEDUP_NAMESPACE", "staging"),
            ("DEDUP_CONSUMER", "payments-v2"),
        ]);
        assert!(invoke(&payments, payments_event(1)).await.is_empty());
        let marks = payments.store.marks();
        assert_eq!(marks.len(), 1, "{marks:?}");
        let key = marks[0].key.to_string();
        assert!(key.starts_with("staging#payments-v2#"), "{key}");
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
            let env = w.env_with(&[(name, value)]);
            let refused = Dedup::read(&env, FUNCTION)
                .map_err(Error::from)
                .and_then(|dedup| service(lambda_dedup_runtime::testing::on_memory(dedup).0));
            let Err(err) = refused else {
                panic!("{name}={value} accepted");
            };
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }
}
