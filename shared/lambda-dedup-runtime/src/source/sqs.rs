//! One SQS invocation: event in, partial batch response out (S12, S14).

use std::borrow::Cow;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup::{AttributeValue, Message};
use lambda_dedup_engine::BatchReport;

use crate::door::{AnyOrder, Door, Record, Refused};

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

/// The SQS door: each message under its `messageId`, opened first when the builder was given
/// an [`Envelope`](crate::Envelope); answered with the partial batch response listing exactly
/// the report's failures. Its queue's policy names who may send, so a verified sender on a
/// message counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sqs {
    pub(crate) envelope: Option<crate::Envelope>,
}

impl Door for Sqs {
    type Event = SqsEvent;
    type Response = SqsBatchResponse;
    type Ordering = AnyOrder;
    const NAME: &'static str = "SQS";
    const SENDER_VOUCHED: bool = true;

    fn messages(&self, event: &SqsEvent, _: &lambda_runtime::Context) -> Vec<Record> {
        let open = |m: Message| {
            let (id, group) = (m.message_id.clone(), m.group_id.clone());
            crate::source::envelope::opened(self.envelope, m).map_err(|outcome| Refused {
                id,
                group,
                outcome: Box::new(outcome),
            })
        };
        messages(event).into_iter().map(open).collect()
    }

    /// A FIFO batch in an envelope goes message by message, so that a message whose envelope is
    /// refused stops its group as any refusal does (S12).
    fn whole(&self, event: &SqsEvent) -> bool {
        let fifo = (event.records.iter()).any(|r| r.attributes.contains_key("MessageGroupId"));
        !(fifo && self.envelope.is_some())
    }

    fn reconciled<'a>(&self, event: &'a SqsEvent, _: &[Message]) -> Option<Cow<'a, SqsEvent>> {
        Some(Cow::Borrowed(event))
    }
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
