//! The handler: one SQS invocation of `payment-dispatcher`, callable directly with
//! `LambdaEvent::new` (as its tests do).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::KeySpec;
use lambda_dedup_batch::Deduplicator;
use lambda_dedup_http::IdempotentClient;
use lambda_runtime::{Error, LambdaEvent};

use crate::payment;

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "payment-dispatcher";

/// What the handler needs, built once per container, outside the handler.
#[derive(Debug)]
pub(crate) struct Payments {
    pub(crate) spec: KeySpec,
    pub(crate) dedup: Deduplicator,
    pub(crate) api: IdempotentClient,
    pub(crate) max_concurrency: usize,
}

impl Payments {
    /// From the environment: `lambda_dedup_runtime::settings` plus `PAYMENTS_API_URL`.
    pub(crate) async fn from_env() -> Result<Self, Error> {
        let settings = lambda_dedup_runtime::Settings::from_env(FUNCTION)?;
        let spec = payment::key_spec(settings.scope.clone());
        Ok(Self {
            api: IdempotentClient::new(
                &lambda_dedup_runtime::required("PAYMENTS_API_URL")?,
                settings.provider_timeout,
            )?,
            dedup: settings.deduplicator(spec.clone(), lambda_dedup_dynamodb::connect().await),
            spec,
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
    use super::*;
    use lambda_dedup::{Retention, Scope};
    use lambda_dedup_dynamodb::DynamoStore;
    use std::time::Duration;

    /// The handler, called as Lambda calls it, on the sample payment, twice: the provider
    /// applies it once, under one idempotency key; the second delivery is a duplicate answered
    /// from the stored receipt (S6, S8); nothing is reported failed.
    #[tokio::test]
    async fn the_handler_pays_once() {
        let provider = fake_provider::Provider::new();
        let (addr, _server) = fake_provider::spawn(provider.clone(), ([127, 0, 0, 1], 0).into())
            .await
            .expect("fake provider");
        let client = dedup_tests::client();
        let marks = dedup_tests::mark_table(&client).await;
        let spec = payment::key_spec(Scope::new("test", FUNCTION).expect("scope"));
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let payments = Payments {
            dedup: Deduplicator::new(spec.clone(), DynamoStore::new(client, marks, retention)),
            spec,
            api: IdempotentClient::new(&format!("http://{addr}"), Duration::from_secs(5))
                .expect("client"),
            max_concurrency: 10,
        };
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/payment-request.json"
        );
        let sample: SqsEvent =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("event");
        for _ in 0..2 {
            let answer = handle(
                &payments,
                LambdaEvent::new(sample.clone(), lambda_runtime::Context::default()),
            )
            .await
            .expect("handled");
            assert!(answer.batch_item_failures.is_empty());
        }
        let effects = provider.effects();
        assert_eq!(effects.len(), 1, "one idempotency key");
        assert_eq!(
            effects.values().copied().collect::<Vec<_>>(),
            [1],
            "one payment"
        );
    }
}
