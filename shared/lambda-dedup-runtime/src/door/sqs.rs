//! SQS records as the library's messages, and the partial batch response from a report (S12,
//! S14): what the SQS door reads and answers, and a door of a function's own in SQS bodies.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup::{AttributeValue, Message};
use lambda_dedup_engine::BatchReport;

/// The SQS messages of `event` as library messages (body, attributes, FIFO group).
pub fn messages(event: &SqsEvent) -> Vec<Message> {
    event.records.iter().map(message).collect()
}

/// One SQS record as a library message.
pub fn message(r: &SqsMessage) -> Message {
    Message {
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
    }
}

/// The partial batch response listing exactly the report's failures.
pub fn response(report: &BatchReport) -> SqsBatchResponse {
    let mut resp = SqsBatchResponse::default();
    for id in report.failures() {
        resp.add_failure(id.to_owned());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_engine::{Outcome, RetryCause};

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

        let report = BatchReport::from_outcomes(vec![
            ("m1".into(), Outcome::Applied),
            ("m2".into(), Outcome::retry(RetryCause::Transient, "test")),
        ]);
        let json = serde_json::to_value(response(&report)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m2"}]})
        );
    }
}
