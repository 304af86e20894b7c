//! Kinesis as a source (feature `kinesis`): records become [`Message`]s, a shard's order is kept,
//! and the partial batch response names the first record not done by its sequence number.
//!
//! - The event's identity comes from the payload, through the function's key spec; a record's
//!   sequence number is a transport id and is only used to report it (S1).
//! - A batch comes from one shard. Records of one partition key are processed in order and a
//!   key stops at its first record that is not done (`run_batch` groups by `group_id`); the
//!   response names the first such record of the batch, and Lambda retries from there, so every
//!   later record comes again — those already applied are duplicates then (S8, S12).
//! - A record that can never be done (no identity, a conflict, a refused effect) is reported too:
//!   the trigger's `BisectBatchOnFunctionError`, maximum record age and on-failure destination
//!   (which `cargo xtask check-infra` requires of stream triggers) isolate it and hand it on, so
//!   the shard moves on (S15).

use std::future::Future;

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::streams::{KinesisBatchItemFailure, KinesisEventResponse};
use lambda_dedup::Message;
use lambda_dedup_batch::BatchReport;
use lambda_runtime::LambdaEvent;

/// The records of `event` as library messages: id = sequence number, body = the record's data,
/// group = partition key.
pub fn messages(event: &KinesisEvent) -> Vec<Message> {
    event
        .records
        .iter()
        .map(|r| Message {
            message_id: r.kinesis.sequence_number.clone(),
            body: r.kinesis.data.0.clone(),
            group_id: Some(r.kinesis.partition_key.clone()),
            ..Message::default()
        })
        .collect()
}

/// The response naming the first record (in the batch's order) that was not acknowledged, or
/// none: Lambda checkpoints before it and retries from it.
pub fn response(report: &BatchReport) -> KinesisEventResponse {
    let mut resp = KinesisEventResponse::default();
    if let Some(id) = crate::sqs::first_not_done(report) {
        let mut failure = KinesisBatchItemFailure::default();
        failure.item_identifier = Some(id);
        resp.batch_item_failures.push(failure);
    }
    resp
}

/// Runs one Kinesis invocation: converts the records, hands them to `process` (usually
/// `run_batch` with a flow, which keeps each partition key's order), rebuilds the report by
/// record, prints the account as one EMF line, and answers with the first record not done.
pub async fn run_kinesis<F, Fut>(
    function: &str,
    event: LambdaEvent<KinesisEvent>,
    process: F,
) -> Result<KinesisEventResponse, lambda_runtime::Error>
where
    F: FnOnce(Vec<Message>) -> Fut,
    Fut: Future<Output = BatchReport>,
{
    let batch = messages(&event.payload);
    let report = crate::sqs::accounted(function, &event.context, batch, process).await;
    Ok(response(&report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use lambda_dedup::{Effect, Item, KeySpec, Retention, Scope, Value};
    use lambda_dedup_batch::{Deduplicator, HandlerError, Plan, run_batch};
    use lambda_dedup_memory::MemoryStore;
    use serde_json::json;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn record(seq: u64, account: &str, event_id: &str, amount: i64) -> serde_json::Value {
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/k", "id": event_id,
            "tenantid": "acme", "data": {"account": account, "amount": amount}});
        json!({"eventSource": "aws:kinesis", "eventID": format!("shardId-000:{seq}"),
               "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": account,
                           "sequenceNumber": format!("{seq:020}"),
                           "approximateArrivalTimestamp": 1_700_000_000.0,
                           "data": base64::engine::general_purpose::STANDARD.encode(body.to_string())}})
    }

    fn event(records: Vec<serde_json::Value>) -> LambdaEvent<KinesisEvent> {
        let e: KinesisEvent = serde_json::from_value(json!({ "Records": records })).expect("event");
        LambdaEvent::new(e, lambda_runtime::Context::default())
    }

    /// A shard with duplicates and a failure mid-shard: the first record not done is reported,
    /// its partition key stops there, and after Lambda retries from it each event is applied
    /// once.
    #[tokio::test]
    async fn a_shard_keeps_its_order_and_applies_each_event_once_across_a_retry() {
        let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
        store.create_table("balances", "account");
        let spec = KeySpec::cloudevents(Scope::new("t", "k").expect("scope"), "tenantid");
        let dedup = Deduplicator::new(spec, store.clone());
        let down = AtomicBool::new(true);
        let plan = |e: &lambda_dedup::Derived| {
            let data = HandlerError::data(e)?;
            let account = data["account"].as_str().unwrap_or_default().to_owned();
            // The effect's dependency is down while `down` holds, for account b only.
            if account == "b" && down.load(Ordering::Relaxed) {
                return Err(HandlerError::Transient("dependency down".into()));
            }
            let effect = Effect::update("balances", Item::new().with("account", account.as_str()))
                .expression("ADD balance :a")
                .value(":a", data["amount"].as_i64().unwrap_or(0));
            Ok(Plan {
                effects: vec![effect],
                result: None,
            })
        };
        let shard = vec![
            record(1, "a", "e1", 1),
            record(2, "b", "e2", 10),
            record(3, "a", "e1", 1), // a duplicate (a producer retry)
            record(4, "b", "e4", 20),
            record(5, "a", "e5", 2),
        ];
        let run = |records: Vec<serde_json::Value>| {
            let (dedup, plan) = (&dedup, &plan);
            async move {
                run_kinesis("k", event(records), |batch| {
                    run_batch(
                        batch,
                        10,
                        |m| async move { dedup.transactional(&m, plan).await },
                    )
                })
                .await
                .expect("handled")
            }
        };
        let first = run(shard.clone()).await;
        let failed: Vec<_> = first
            .batch_item_failures
            .iter()
            .filter_map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(
            failed,
            vec![format!("{:020}", 2)],
            "the checkpoint is record 2"
        );
        let balance = |account: &str| {
            store
                .item("balances", &Item::new().with("account", account))
                .and_then(|i| i.0.get("balance").cloned())
        };
        assert_eq!(
            balance("a"),
            Some(Value::N("3".into())),
            "a's records went on"
        );
        assert_eq!(
            balance("b"),
            None,
            "b stopped at its first failure, 4 not before 2"
        );
        // Lambda retries from the checkpoint: records 2.. again, the dependency back.
        down.store(false, Ordering::Relaxed);
        let second = run(shard[1..].to_vec()).await;
        assert!(second.batch_item_failures.is_empty(), "{second:?}");
        assert_eq!(balance("a"), Some(Value::N("3".into())), "no second effect");
        assert_eq!(balance("b"), Some(Value::N("30".into())));
    }
}
