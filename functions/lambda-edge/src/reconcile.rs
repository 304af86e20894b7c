//! Late events go to reconciliation (S10). The library reports an event older than the retention
//! window as rejected with code `late_event`: the mark table cannot say whether it was handled.
//! With `DEDUP_RECONCILIATION_QUEUE_URL` set, such a message is sent to that queue (its body and
//! string attributes, plus `dedup-reason`) and then acknowledged; if the send fails, or no queue is
//! configured, it stays a batch item failure and ends in the DLQ like any rejection.

use std::collections::HashSet;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::MessageAttributeValue;
use dedup_batch::{BatchReport, Outcome};
use tokio::sync::OnceCell;

/// The code the library gives a late event.
pub const LATE_EVENT: &str = "late_event";

/// Where late events go.
#[derive(Debug)]
struct Queue {
    client: aws_sdk_sqs::Client,
    url: String,
}

/// Built once per container, on the first late event (most containers never see one, so cold
/// starts do not pay for an SQS client).
static QUEUE: OnceCell<Option<Queue>> = OnceCell::const_new();

async fn queue() -> Option<&'static Queue> {
    QUEUE
        .get_or_init(|| async {
            let url = std::env::var("DEDUP_RECONCILIATION_QUEUE_URL")
                .ok()
                .filter(|u| !u.trim().is_empty())?;
            let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .load()
                .await;
            Some(Queue {
                client: aws_sdk_sqs::Client::new(&conf),
                url,
            })
        })
        .await
        .as_ref()
}

/// Sends the report's late events to the reconciliation queue and takes the ones sent off the
/// failures (they are acknowledged). The account is unchanged: they stay `rejected` (S14).
pub async fn route_late_events(event: &SqsEvent, report: &mut BatchReport) {
    let late: HashSet<&str> = report
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Rejected { code, .. } if *code == LATE_EVENT))
        .map(|(id, _)| id.as_str())
        .collect();
    if late.is_empty() {
        return;
    }
    let Some(queue) = queue().await else {
        tracing::warn!(
            late = late.len(),
            "late events and no DEDUP_RECONCILIATION_QUEUE_URL: they go to the DLQ"
        );
        return;
    };
    let mut sent = Vec::new();
    for record in &event.records {
        let Some(id) = record.message_id.as_deref().filter(|id| late.contains(id)) else {
            continue;
        };
        let mut send = queue
            .client
            .send_message()
            .queue_url(&queue.url)
            .message_body(record.body.clone().unwrap_or_default());
        let attributes = record
            .message_attributes
            .iter()
            .filter_map(|(k, a)| Some((k.as_str(), a.string_value.as_deref()?)))
            .chain([("dedup-reason", LATE_EVENT)]);
        for (name, value) in attributes {
            if let Ok(v) = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
            {
                send = send.message_attributes(name, v);
            }
        }
        match send.send().await {
            Ok(_) => {
                tracing::info!(message_id = id, "late event sent to reconciliation");
                sent.push(id.to_owned());
            }
            Err(e) => tracing::warn!(message_id = id,
                error = %aws_sdk_sqs::error::DisplayErrorContext(&e),
                "could not send a late event to reconciliation; it will be retried"),
        }
    }
    report.failures.retain(|id| !sent.contains(id));
}
