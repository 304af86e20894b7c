//! EventBridge events as library messages: a direct target's event ([`message`]) and the event
//! an SQS body carries when a rule targets a queue ([`event`]).
//!
//! EventBridge gives every `PutEvents` entry a new `id`, so a producer that retries a put sends
//! a new `id`: the identity belongs in `detail`. The message's body is the event's `detail`, so
//! the key spec's pointers are relative to it (`/order_id`, or `/payload/order_id` inside a
//! JSON-encoded string field); the `id` is kept under [`ENVELOPE_ID_ATTRIBUTE`] only for the
//! opt-in fallback identity (`IdentitySource::EnvelopeId`), with its limits.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_dedup::{AttributeValue, ENVELOPE_ID_ATTRIBUTE, Message, Rejection};

use crate::door::{InOrder, Record};
use crate::source::asynchronous::AsyncEvent;

/// An EventBridge target's event, read by its door ([`crate::source::asynchronous::Invoked`]): the
/// event's `detail` under its `id` ([`message`]).
impl AsyncEvent for EventBridgeEvent {
    type Ordering = InOrder;
    const NAME: &'static str = "EventBridge";

    fn records(&self, context: &lambda_runtime::Context) -> Vec<Record> {
        vec![Ok(message(self, &context.request_id))]
    }
}

/// The library message of a direct EventBridge invocation, reported by the event's `id` (the
/// request id where it has none).
pub(crate) fn message(event: &EventBridgeEvent, request_id: &str) -> Message {
    let id = event.id.clone().unwrap_or_else(|| request_id.to_owned());
    message_of(id, event)
}

/// The library message inside the EventBridge event that `body` is (an SQS message a rule
/// targeted), reported as `message_id`; a body that is not an EventBridge event is
/// [`Rejection::Envelope`].
pub(crate) fn event(message_id: String, body: &[u8]) -> Result<Message, Rejection> {
    let event: EventBridgeEvent =
        serde_json::from_slice(body).map_err(|e| Rejection::Envelope {
            envelope: "EventBridge",
            detail: super::sns::described(&e),
        })?;
    Ok(message_of(message_id, &event))
}

fn message_of(message_id: String, event: &EventBridgeEvent) -> Message {
    let mut attributes = std::collections::BTreeMap::new();
    if let Some(id) = &event.id {
        attributes.insert(
            ENVELOPE_ID_ATTRIBUTE.to_owned(),
            AttributeValue::String(id.clone()),
        );
    }
    Message {
        message_id,
        body: event.detail.to_string().into_bytes(),
        attributes,
        group_id: None,
    }
}
