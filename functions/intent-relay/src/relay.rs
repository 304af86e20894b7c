//! Applying intents from the stream.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use dedup::{Effect, Item};
use dedup_batch::HandlerError;
use dedup_dynamodb::Client;
use dedup_http::IdempotentClient;

/// A new collection intent, as read from a stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) intent_id: String,
    pub(crate) fine_id: String,
    pub(crate) amount_cents: i64,
}

/// The intent of a record, if it is the insertion of a pending intent. Updates (our own
/// `CONFIRMED` writes) and TTL or manual deletions are not intents to apply.
pub(crate) fn intent(record: &EventRecord) -> Result<Option<Intent>, String> {
    if record.event_name != "INSERT" {
        return Ok(None);
    }
    // DynamoDB JSON: {"attr": {"S": "..."}} / {"N": "..."}.
    let image = serde_json::to_value(&record.change.new_image).map_err(|e| e.to_string())?;
    let s = |name: &str| {
        image
            .get(name)
            .and_then(|v| v.get("S"))
            .and_then(|v| v.as_str())
    };
    if s("status") != Some("PENDING") {
        return Ok(None);
    }
    let field = |name: &str| {
        s(name)
            .map(str::to_owned)
            .ok_or(format!("new image has no `{name}`"))
    };
    let amount_cents = image
        .get("amount_cents")
        .and_then(|v| v.get("N"))
        .and_then(|v| v.as_str())
        .and_then(|n| n.parse().ok())
        .ok_or("new image has no numeric `amount_cents`")?;
    Ok(Some(Intent {
        intent_id: field("intent_id")?,
        fine_id: field("fine_id")?,
        amount_cents,
    }))
}

/// The relay: the collection API and the intents table.
#[derive(Debug)]
pub(crate) struct Relay {
    pub(crate) api: IdempotentClient,
    pub(crate) intents: String,
    pub(crate) client: Client,
}

impl Relay {
    /// Applies the records in order. At the first record that fails, stops and reports it:
    /// Lambda retries the batch from that record, so order is kept and nothing is skipped.
    pub(crate) async fn handle(&self, event: &Event) -> DynamoDbEventResponse {
        let mut resp = DynamoDbEventResponse::default();
        let (mut applied, mut skipped) = (0u32, 0u32);
        for record in &event.records {
            match self.apply(record).await {
                Ok(true) => applied += 1,
                Ok(false) => skipped += 1,
                Err(reason) => {
                    tracing::warn!(event_id = %record.event_id, reason = %reason,
                        "intent not confirmed; the stream retries from this record");
                    let mut failure = DynamoDbBatchItemFailure::default();
                    failure.item_identifier = record.change.sequence_number.clone();
                    resp.batch_item_failures.push(failure);
                    break;
                }
            }
        }
        tracing::info!(
            records = event.records.len(),
            applied,
            skipped,
            failed = resp.batch_item_failures.len(),
            "stream batch done"
        );
        resp
    }

    async fn apply(&self, record: &EventRecord) -> Result<bool, String> {
        let Some(intent) = intent(record)? else {
            return Ok(false);
        };
        let body = serde_json::json!({
            "fine_id": intent.fine_id,
            "amount_cents": intent.amount_cents,
        });
        let receipt = self
            .api
            .post("/v1/collections", &intent.intent_id, &body)
            .await
            .map_err(|e| match e {
                HandlerError::Transient(r) | HandlerError::Invalid(r) => r,
            })?;
        // Bookkeeping only: the API's idempotency already made the effect once; the condition
        // makes a repeated confirmation a no-op.
        let confirm = Effect::update(
            &self.intents,
            Item::new().with("intent_id", intent.intent_id.as_str()),
        )
        .expression("SET #status = :confirmed, #receipt = :receipt")
        .condition("#status = :pending")
        .name("#status", "status")
        .name("#receipt", "receipt")
        .value(":confirmed", "CONFIRMED")
        .value(":pending", "PENDING")
        .value(":receipt", receipt.body);
        dedup_dynamodb::write_effects(&self.client, &[confirm])
            .await
            .map_err(|e| format!("confirming the intent: {e}"))?;
        tracing::info!(intent_id = %intent.intent_id, replayed = receipt.replayed, "intent confirmed");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(name: &str, image: serde_json::Value) -> EventRecord {
        serde_json::from_value(json!({
            "awsRegion": "us-east-1", "eventID": "1", "eventName": name, "eventSource": "aws:dynamodb",
            "dynamodb": {"ApproximateCreationDateTime": 1700000000, "Keys": {}, "NewImage": image,
                         "SequenceNumber": "100", "SizeBytes": 10, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        }))
        .expect("record")
    }

    #[test]
    fn s7_inserted_pending_intents_are_applied_and_nothing_else() {
        let image = json!({"intent_id": {"S": "ldd-1"}, "fine_id": {"S": "fine-1"},
                           "amount_cents": {"N": "10000"}, "status": {"S": "PENDING"}});
        assert_eq!(
            intent(&record("INSERT", image.clone())).expect("ok"),
            Some(Intent {
                intent_id: "ldd-1".into(),
                fine_id: "fine-1".into(),
                amount_cents: 10000
            })
        );
        assert_eq!(intent(&record("MODIFY", image)).expect("ok"), None);
        let confirmed = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "CONFIRMED"}});
        assert_eq!(intent(&record("INSERT", confirmed)).expect("ok"), None);
        let broken = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "PENDING"}});
        assert!(intent(&record("INSERT", broken)).is_err());
    }
}
