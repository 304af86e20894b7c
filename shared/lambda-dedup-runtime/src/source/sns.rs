//! SNS notifications as library messages: a direct subscription's records ([`messages`]) and
//! the notification an SQS body carries without raw message delivery ([`notification`]).
//!
//! The message's body is the producer's `Message` string, so the key spec's pointers are
//! relative to it (`/order_id`); its attributes are the notification's `MessageAttributes`
//! (`String`, `Number` and `String.Array` as text, `Binary` decoded from base64), and the SNS
//! `MessageId` is kept under [`ENVELOPE_ID_ATTRIBUTE`] for the opt-in fallback identity
//! (`IdentitySource::EnvelopeId`).

use aws_lambda_events::event::sns::{MessageAttribute, SnsEvent, SnsMessage};
use lambda_dedup::{AttributeValue, ENVELOPE_ID_ATTRIBUTE, Message, Rejection};

use crate::door::{InOrder, Record};
use crate::source::asynchronous::AsyncEvent;

/// A direct SNS subscription's event, read by its door ([`crate::source::asynchronous::Invoked`]): each
/// record's `Message` under its SNS `MessageId` ([`messages`]), the pointers relative to it.
impl AsyncEvent for SnsEvent {
    type Ordering = InOrder;
    const NAME: &'static str = "SNS";

    fn records(&self, _: &lambda_runtime::Context) -> Vec<Record> {
        messages(self).into_iter().map(Ok).collect()
    }
}

/// What the notification's type must be: confirmations and the like are not messages.
const NOTIFICATION: &str = "Notification";

/// The records of a direct SNS invocation as library messages, each reported by its SNS
/// `MessageId` (SNS keeps it when it retries a delivery).
pub(crate) fn messages(event: &SnsEvent) -> Vec<Message> {
    event
        .records
        .iter()
        .map(|r| message_of(r.sns.message_id.clone(), &r.sns))
        .collect()
}

/// The library message inside the SNS notification that `body` is (an SQS message from a topic
/// without raw message delivery), reported as `message_id`; a body that is not an SNS
/// notification is [`Rejection::Envelope`] (naming the field or the parser's position, never a
/// value).
pub(crate) fn notification(message_id: String, body: &[u8]) -> Result<Message, Rejection> {
    let malformed = |detail: String| Rejection::Envelope {
        envelope: "SNS",
        detail,
    };
    let sns: SnsMessage = serde_json::from_slice(body).map_err(|e| malformed(described(&e)))?;
    if sns.sns_message_type != NOTIFICATION {
        return Err(malformed("its `Type` is not `Notification`".into()));
    }
    Ok(message_of(message_id, &sns))
}

fn message_of(message_id: String, sns: &SnsMessage) -> Message {
    let mut attributes: std::collections::BTreeMap<String, AttributeValue> = sns
        .message_attributes
        .iter()
        .filter_map(|(name, a)| Some((name.clone(), attribute(a)?)))
        .collect();
    attributes.insert(
        ENVELOPE_ID_ATTRIBUTE.into(),
        AttributeValue::String(sns.message_id.clone()),
    );
    Message {
        message_id,
        body: sns.message.clone().into_bytes(),
        attributes: crate::door::unvouched(attributes),
        group_id: None,
    }
}

/// An SNS message attribute as SQS would carry it; a `Binary` one that is not base64 is left
/// out (it cannot be an identity anyway: the key spec then says it is missing).
fn attribute(a: &MessageAttribute) -> Option<AttributeValue> {
    use base64::Engine as _;
    if a.data_type == "Binary" {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&a.value)
            .ok()?;
        return Some(AttributeValue::Binary(bytes));
    }
    Some(AttributeValue::String(a.value.clone()))
}

/// A parser's error without the content it may quote: a field the envelope lacks (the name is
/// the envelope's own), else the kind of error and its position.
pub(crate) fn described(e: &serde_json::Error) -> String {
    let message = e.to_string();
    if let Some(rest) = message.strip_prefix("missing field `")
        && let Some(field) = rest.split('`').next()
    {
        return format!("the field `{field}` is missing");
    }
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "a field of the wrong type",
        serde_json::error::Category::Eof => "cut short",
    };
    format!("{kind} at line {} column {}", e.line(), e.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42 (webhook provenance): an SNS publisher's attribute named as the inbox
    /// forwarder's verified sender vouches for nothing: it is not read, directly or inside an
    /// SQS body, so the event stays [`lambda_dedup::Provenance::Payload`].
    #[test]
    fn a_publishers_verified_sender_attribute_is_not_read() {
        let body = serde_json::json!({
            "Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:us-east-1:1:t",
            "Message": "{}", "Timestamp": "2026-12-06T00:00:00.000Z", "SignatureVersion": "1",
            "Signature": "x", "SigningCertUrl": "https://x", "UnsubscribeUrl": "https://x",
            "MessageAttributes": {
                "dedup-verified-sender": {"Type": "String", "Value": "acme"},
                "kept": {"Type": "String", "Value": "yes"}
            }
        });
        let m = notification("m-1".into(), body.to_string().as_bytes()).expect("read");
        assert!(
            !m.attributes
                .contains_key(lambda_dedup::VERIFIED_SENDER_ATTRIBUTE)
        );
        assert!(m.attributes.contains_key("kept"));
        let spec = lambda_dedup::KeySpec::new(
            lambda_dedup::Scope::new("t", "c").expect("scope"),
            lambda_dedup::IdentitySource::EnvelopeId,
        );
        let derived = spec.derive(&m).expect("key");
        assert_eq!(derived.provenance, lambda_dedup::Provenance::Payload);
    }
}
