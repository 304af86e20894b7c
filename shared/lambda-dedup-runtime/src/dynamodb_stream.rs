//! DynamoDB Streams as a source (feature `dynamodb-streams`): stream records become
//! [`Message`]s, each item's order is kept, and the partial batch response names the first
//! record not done by its sequence number — the same rules as [`crate::kinesis`].
//!
//! A record's body is plain JSON read from the stream's DynamoDB JSON with `serde_dynamo`:
//! `{"eventName", "keys", "newImage", "oldImage"}`, so a key spec takes the event's identity from
//! the item (`IdentitySource::JsonPointer("/newImage/order_id")`, say), never from the record's
//! sequence number or event id, which are transport ids (S1). Records of one item (same keys)
//! are one group, processed in order.

use std::future::Future;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_dedup::Message;
use lambda_dedup_batch::BatchReport;
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};

fn plain(item: &serde_dynamo::Item) -> Value {
    if item.is_empty() {
        return Value::Null;
    }
    serde_dynamo::from_item(item.clone()).unwrap_or(Value::Null)
}

/// A record's id: its sequence number (or, without one, its event id).
fn id(r: &EventRecord) -> String {
    r.change
        .sequence_number
        .clone()
        .unwrap_or_else(|| r.event_id.clone())
}

/// The records of `event` as library messages.
pub fn messages(event: &Event) -> Vec<Message> {
    event
        .records
        .iter()
        .map(|r| {
            let keys = plain(&r.change.keys);
            let body = json!({"eventName": r.event_name, "keys": keys,
                              "newImage": plain(&r.change.new_image),
                              "oldImage": plain(&r.change.old_image)});
            Message {
                message_id: id(r),
                body: body.to_string().into_bytes(),
                group_id: Some(keys.to_string()),
                ..Message::default()
            }
        })
        .collect()
}

/// The response naming the first record (in the batch's order) not acknowledged, or none.
pub fn response(report: &BatchReport) -> DynamoDbEventResponse {
    let mut resp = DynamoDbEventResponse::default();
    if let Some(id) = crate::sqs::first_not_done(report) {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(id);
        resp.batch_item_failures.push(failure);
    }
    resp
}

/// Runs one DynamoDB Streams invocation like [`crate::kinesis::run_kinesis`].
pub async fn run_dynamodb_stream<F, Fut>(
    function: &str,
    event: LambdaEvent<Event>,
    process: F,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error>
where
    F: FnOnce(Vec<Message>) -> Fut,
    Fut: Future<Output = BatchReport>,
{
    let batch = messages(&event.payload);
    let report = crate::sqs::accounted(
        crate::emf::NAMESPACE,
        function,
        &event.context,
        batch,
        process,
    )
    .await;
    Ok(response(&report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{Effect, IdentitySource, Item, KeySpec, Retention, Scope, Value as V};
    use lambda_dedup_batch::{Deduplicator, HandlerError, Plan, run_batch};
    use lambda_dedup_memory::MemoryStore;
    use std::time::Duration;

    fn record(seq: u64, order: &str, total: i64) -> serde_json::Value {
        json!({"eventID": format!("e{seq}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
               "awsRegion": "us-east-1",
               "dynamodb": {"ApproximateCreationDateTime": 1_700_000_000,
                            "Keys": {"order_id": {"S": order}},
                            "NewImage": {"order_id": {"S": order}, "customer": {"S": "c-1"},
                                         "total": {"N": total.to_string()}},
                            "SequenceNumber": format!("{seq:021}"), "SizeBytes": 40,
                            "StreamViewType": "NEW_IMAGE"}})
    }

    /// The identity comes from the item, so the same order seen twice (a replayed record, a
    /// re-inserted item) is one event; the sequence number only reports the record.
    #[tokio::test]
    async fn stream_records_are_deduplicated_by_the_item_not_the_record() {
        let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
        store.create_table("totals", "customer");
        let spec = KeySpec::new(
            Scope::new("t", "orders").expect("scope"),
            IdentitySource::JsonPointer("/newImage/order_id".into()),
        );
        let dedup = Deduplicator::new(spec, store.clone());
        let plan = |e: &lambda_dedup::Derived| {
            let image = e
                .body
                .as_ref()
                .map(|b| b["newImage"].clone())
                .ok_or_else(|| HandlerError::Invalid("no new image".into()))?;
            let effect = Effect::update("totals", Item::new().with("customer", "c-1"))
                .expression("ADD total :t")
                .value(":t", image["total"].as_i64().unwrap_or(0));
            Ok(Plan {
                effects: vec![effect],
                result: None,
            })
        };
        let records = vec![
            record(1, "o-1", 5),
            record(2, "o-2", 7),
            record(3, "o-1", 5),
        ];
        let event: Event =
            serde_json::from_value(json!({ "Records": records })).expect("stream event");
        let resp = run_dynamodb_stream(
            "orders",
            LambdaEvent::new(event, lambda_runtime::Context::default()),
            |batch| {
                let (dedup, plan) = (&dedup, &plan);
                run_batch(batch, 10, move |m| async move {
                    dedup.transactional(&m, plan).await
                })
            },
        )
        .await
        .expect("handled");
        assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
        let total = store
            .item("totals", &Item::new().with("customer", "c-1"))
            .and_then(|i| i.0.get("total").cloned());
        assert_eq!(total, Some(V::N("12".into())), "o-1 counted once");
    }
}
