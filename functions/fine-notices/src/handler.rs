//! The handler: one SQS invocation of `fine-notices`, callable directly with
//! `LambdaEvent::new` (as its tests do).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::KeySpec;
use lambda_dedup_batch::{Deduplicator, run_batch_transactional};
use lambda_runtime::{Error, LambdaEvent};

use crate::notice;

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "fine-notices";

/// What the handler needs, built once per container, outside the handler.
#[derive(Debug)]
pub(crate) struct Notices {
    pub(crate) spec: KeySpec,
    pub(crate) dedup: Deduplicator,
    pub(crate) tables: notice::Tables,
    pub(crate) max_concurrency: usize,
}

impl Notices {
    /// From the environment: `lambda_dedup_runtime::settings` plus `FINES_TABLE` and `INTENTS_TABLE`.
    pub(crate) async fn from_env() -> Result<Self, Error> {
        let settings = lambda_dedup_runtime::Settings::from_env(FUNCTION)?;
        let spec = notice::key_spec(settings.scope.clone());
        Ok(Self {
            dedup: settings.deduplicator(spec.clone(), lambda_dedup_dynamodb::connect().await),
            spec,
            tables: notice::Tables {
                fines: lambda_dedup_runtime::required("FINES_TABLE")?,
                intents: lambda_dedup_runtime::required("INTENTS_TABLE")?,
            },
            max_concurrency: settings.max_concurrency,
        })
    }
}

/// One invocation: each notice's fine, intent and mark in one transaction (S5, S7), the batch
/// in as few transactions as possible, answered with a partial batch response (S12).
pub(crate) async fn handle(
    notices: &Notices,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    lambda_dedup_runtime::run_sqs_batch(FUNCTION, &notices.spec, event, |batch| {
        run_batch_transactional(batch, notices.max_concurrency, &notices.dedup, |e| {
            notice::plan(&notices.tables, e)
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

    /// The handler, called as Lambda calls it, on the sample notice, twice: one fine and one
    /// pending collection intent, written once (S5, S7, S8); nothing reported failed.
    #[tokio::test]
    async fn the_handler_writes_the_fine_and_its_intent_once() {
        let client = dedup_tests::client();
        let marks = dedup_tests::mark_table(&client).await;
        let tables = notice::Tables {
            fines: dedup_tests::effect_table(&client, "fine_id").await,
            intents: dedup_tests::effect_table(&client, "intent_id").await,
        };
        let spec = notice::key_spec(Scope::new("test", FUNCTION).expect("scope"));
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let notices = Notices {
            dedup: Deduplicator::new(
                spec.clone(),
                DynamoStore::new(client.clone(), marks, retention),
            ),
            spec,
            tables,
            max_concurrency: 10,
        };
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/fine-notice.json");
        let sample: SqsEvent =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("event");
        for _ in 0..2 {
            let answer = handle(
                &notices,
                LambdaEvent::new(sample.clone(), lambda_runtime::Context::default()),
            )
            .await
            .expect("handled");
            assert!(answer.batch_item_failures.is_empty());
            let count = |table: String, name: &'static str, value: &'static str| {
                let client = client.clone();
                async move {
                    lambda_dedup_dynamodb::scan_where(&client, &table, name, value)
                        .await
                        .expect("scan")
                        .len()
                }
            };
            let fines = count(notices.tables.fines.clone(), "notice_number", "N-1").await;
            let intents = count(notices.tables.intents.clone(), "status", "PENDING").await;
            assert_eq!(fines, 1, "one fine");
            assert_eq!(intents, 1, "one pending intent");
        }
    }
}
