//! One SQS invocation: event in, partial batch response out (S12, S14).

use std::future::Future;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use dedup::{AttributeValue, Message};
use dedup_batch::{BatchReport, Outcome, run_batch};
use lambda_runtime::LambdaEvent;

/// The SQS messages of `event` as library messages (body, attributes, FIFO group).
pub fn messages(event: &SqsEvent) -> Vec<Message> {
    event
        .records
        .iter()
        .map(|r| Message {
            message_id: r.message_id.clone().unwrap_or_default(),
            body: r.body.clone().unwrap_or_default().into_bytes(),
            attributes: r
                .message_attributes
                .iter()
                .filter_map(|(name, a)| {
                    let value = match (&a.string_value, &a.binary_value) {
                        (Some(s), _) => AttributeValue::String(s.clone()),
                        (None, Some(b)) => AttributeValue::Binary(b.0.clone()),
                        (None, None) => return None,
                    };
                    Some((name.clone(), value))
                })
                .collect(),
            group_id: r.attributes.get("MessageGroupId").cloned(),
        })
        .collect()
}

/// The partial batch response listing exactly the report's failures.
pub fn response(report: &BatchReport) -> SqsBatchResponse {
    let mut resp = SqsBatchResponse::default();
    for id in &report.failures {
        resp.add_failure(id.clone());
    }
    resp
}

/// Runs one SQS invocation message by message: converts the event, processes each message with
/// `process` (bounded by `max_concurrency`, FIFO order kept), prints the account as one
/// CloudWatch EMF line and logs it (S14), and returns the partial batch response (S12).
pub async fn run_sqs<F, Fut>(
    function: &str,
    event: LambdaEvent<SqsEvent>,
    max_concurrency: usize,
    process: F,
) -> Result<SqsBatchResponse, lambda_runtime::Error>
where
    F: Fn(Message) -> Fut,
    Fut: Future<Output = Outcome>,
{
    run_sqs_batch(function, event, |batch| {
        run_batch(batch, max_concurrency, process)
    })
    .await
}

/// Runs one SQS invocation with the whole batch handed to `process` at once (batch-transaction
/// mode: `dedup_batch::run_batch_transactional`), then accounts and answers like [`run_sqs`].
pub async fn run_sqs_batch<F, Fut>(
    function: &str,
    event: LambdaEvent<SqsEvent>,
    process: F,
) -> Result<SqsBatchResponse, lambda_runtime::Error>
where
    F: FnOnce(Vec<Message>) -> Fut,
    Fut: Future<Output = BatchReport>,
{
    let batch = messages(&event.payload);
    let mut report = process(batch).await;
    crate::reconcile::route_late_events(&event.payload, &mut report).await;
    let a = &report.account;
    // EMF must be a bare JSON line on stdout for CloudWatch to extract it, hence not `tracing`.
    println!("{}", a.emf_line("lambda-dedup", function));
    tracing::info!(
        function,
        request_id = %event.context.request_id,
        received = a.received,
        applied = a.applied,
        duplicate = a.duplicate,
        retry = a.retry,
        conflict = a.conflict,
        rejected = a.rejected,
        closes = a.closes(),
        "batch done"
    );
    Ok(response(&report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s12_sqs_event_round_trip() {
        let event: SqsEvent = serde_json::from_value(serde_json::json!({"Records": [
            {"messageId": "m1", "body": "{\"id\":1}", "attributes": {"MessageGroupId": "g1"},
             "messageAttributes": {
                "event-id": {"stringValue": "e-1", "dataType": "String"},
                "blob": {"binaryValue": "aGk=", "dataType": "Binary"}
             }},
            {"messageId": "m2", "body": "x", "attributes": {}, "messageAttributes": {}}
        ]}))
        .expect("event");
        let msgs = messages(&event);
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].message_id, "m1");
        assert_eq!(msgs[0].group_id.as_deref(), Some("g1"));
        assert_eq!(
            msgs[0].attributes.get("event-id"),
            Some(&AttributeValue::String("e-1".into()))
        );
        assert_eq!(
            msgs[0].attributes.get("blob"),
            Some(&AttributeValue::Binary(b"hi".to_vec()))
        );
        assert_eq!(msgs[1].group_id, None);

        let report = BatchReport {
            failures: vec!["m2".into()],
            ..BatchReport::default()
        };
        let json = serde_json::to_value(response(&report)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m2"}]})
        );
    }
}
