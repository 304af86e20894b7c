//! The handler: one SQS invocation of `ledger-projector`, callable directly with
//! `LambdaEvent::new` (as its tests do).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::KeySpec;
use lambda_dedup_batch::{Deduplicator, run_batch_transactional};
use lambda_runtime::{Error, LambdaEvent};

use ledger_projector::ledger;

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "ledger-projector";

/// What the handler needs, built once per container, outside the handler.
#[derive(Debug)]
pub(crate) struct Ledger {
    pub(crate) spec: KeySpec,
    pub(crate) dedup: Deduplicator,
    pub(crate) balances: String,
    pub(crate) max_concurrency: usize,
}

impl Ledger {
    /// From the environment: `lambda_dedup_runtime::settings` plus `BALANCES_TABLE`.
    pub(crate) async fn from_env() -> Result<Self, Error> {
        let settings = lambda_dedup_runtime::Settings::from_env(FUNCTION)?;
        let spec = ledger::key_spec(settings.scope.clone());
        Ok(Self {
            dedup: settings.deduplicator(spec.clone(), lambda_dedup_dynamodb::connect().await),
            spec,
            balances: lambda_dedup_runtime::required("BALANCES_TABLE")?,
            max_concurrency: settings.max_concurrency,
        })
    }
}

/// One invocation: the batch's marks and balance changes in as few `TransactWriteItems` as
/// possible (S5 per event), answered with a partial batch response (S12).
pub(crate) async fn handle(
    ledger: &Ledger,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    lambda_dedup_runtime::run_sqs_batch(FUNCTION, &ledger.spec, event, |batch| {
        run_batch_transactional(batch, ledger.max_concurrency, &ledger.dedup, |e| {
            ledger::plan(&ledger.balances, e)
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{Retention, Scope};
    use lambda_dedup_dynamodb::DynamoStore;
    use std::time::Duration;

    async fn ledger() -> (Ledger, lambda_dedup_dynamodb::Client) {
        let client = dedup_tests::client();
        let marks = dedup_tests::mark_table(&client).await;
        let balances = dedup_tests::effect_table(&client, "account").await;
        let spec = ledger::key_spec(Scope::new("test", FUNCTION).expect("scope"));
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let dedup = Deduplicator::new(
            spec.clone(),
            DynamoStore::new(client.clone(), marks, retention),
        );
        let ledger = Ledger {
            spec,
            dedup,
            balances,
            max_concurrency: 10,
        };
        (ledger, client)
    }

    fn sample() -> SqsEvent {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/ledger-credit.json"
        );
        let text = std::fs::read_to_string(path).expect("events/ledger-credit.json");
        serde_json::from_str(&text).expect("an SQS event")
    }

    /// The handler, called as Lambda calls it, on the sample batch (a credit, its duplicate,
    /// a debit): the balance moves once per event, within the tenant (S1, S5, S8), and the
    /// same batch again moves nothing; no message is reported failed either time.
    #[tokio::test]
    async fn the_handler_applies_each_event_once() {
        let (ledger, client) = ledger().await;
        for _ in 0..2 {
            let answer = handle(
                &ledger,
                LambdaEvent::new(sample(), lambda_runtime::Context::default()),
            )
            .await
            .expect("handled");
            assert!(answer.batch_item_failures.is_empty());
            let item = lambda_dedup::tenant_scoped("bank-a", "credito-17");
            assert_eq!(
                dedup_tests::balance(&client, &ledger.balances, &item).await,
                Some(7),
                "10 credited once, 3 debited once"
            );
        }
    }

    /// A malformed message is reported failed (for the DLQ); the rest of the batch is applied.
    #[tokio::test]
    async fn a_malformed_message_is_reported_and_the_rest_applied() {
        let (ledger, client) = ledger().await;
        let mut event = sample();
        event.records[1].body = Some("{not json".into());
        let answer = handle(
            &ledger,
            LambdaEvent::new(event, lambda_runtime::Context::default()),
        )
        .await
        .expect("handled");
        let failed: Vec<_> = answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(failed, ["m-2"]);
        let item = lambda_dedup::tenant_scoped("bank-a", "credito-17");
        assert_eq!(
            dedup_tests::balance(&client, &ledger.balances, &item).await,
            Some(7)
        );
    }
}
