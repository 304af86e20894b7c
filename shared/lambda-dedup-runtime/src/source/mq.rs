//! Amazon MQ as a source (feature `mq`): ActiveMQ and RabbitMQ brokers. Each message becomes a
//! [`Message`]; Lambda's Amazon MQ trigger has **no partial batch response**, so the batch is
//! acknowledged or redelivered whole, and what this door does is chosen for that:
//!
//! - **Identity** (S1): the one the builder is given, as for SQS. The broker's message id
//!   (ActiveMQ's `messageID`, RabbitMQ's `basicProperties.messageId`) is carried as the
//!   attribute [`MESSAGE_ID_ATTRIBUTE`] and is an identity only when chosen openly
//!   (`.identity(Identity::attribute(mq::MESSAGE_ID_ATTRIBUTE))`): it catches every redelivery of a
//!   message, not a producer that sends an event twice (a new id each send, as SQS's
//!   `messageId`). A producer's own identity is a property or header
//!   (`identity(Identity::attribute("<name>"))`: ActiveMQ `properties`, RabbitMQ `headers` — text, numbers
//!   as text, RabbitMQ's `{"bytes": [...]}` as the bytes' text) or `identity("/pointer")` into
//!   the data. A message with no identity (RabbitMQ leaves `messageId` null unless the producer
//!   sets it) is rejected and parked, never guessed.
//! - **Data**: base64 as Lambda delivers it, decoded into the body; data that is not base64 is
//!   rejected (`body_not_base64`) and parked.
//! - **Poison** (S15): a message that can never apply (no identity, not base64, not JSON, a
//!   conflict, a refused effect: `rejected` or `conflict`) must not cost the rest of the batch.
//!   It is **parked** in `DEDUP_PARKING_QUEUE_URL` (required) — `{"function", "code", "broker",
//!   "queue", "message"}`, the message as delivered, its data included (by reference when too
//!   large: the message without `data`, and `data`: `{"bytes", "sha256", "head",
//!   "headBytes"}`), with the attributes `dedup-reason`, `dedup-mq-queue`,
//!   `dedup-mq-position`, `dedup-mq-message-id` (when the broker gave one) and
//!   `dedup-parked-by` — and the batch is acknowledged. The broker's own dead-letter queue only
//!   ever sees a whole batch, so it is no place for one message.
//! - **Record ids**: each message is reported, accounted and parked by its position in the
//!   invocation (`#<n>`), never by the broker's message id: RabbitMQ's `messageId` is the
//!   producer's (or null), ActiveMQ's `messageID` can be set by a JMS client, so two messages of
//!   one batch may carry the same one, and each is still applied or parked on its own.
//! - **Transient** (S13): if any message may yet apply (`retry`: the store out, a dependency
//!   down, an event in progress elsewhere), or a parking fails, the invocation fails
//!   (`MqError`) and the broker redelivers the **whole batch**; the messages already applied
//!   are then duplicates, caught by their marks (S8), and nothing is parked before the batch is
//!   whole, so a parked message is parked once per batch that reaches it.
//! - Messages of a batch run in parallel (bounded): the trigger's redelivery of a whole batch
//!   keeps no order between its messages, so this door promises none.

mod activemq;
mod rabbitmq;

use std::collections::BTreeMap;

use lambda_dedup::{AttributeValue, Message};

use crate::door::{self, Answered, Cut, Door, InOrder};
use crate::parking::Letter;
use crate::source::stream::{Parcel, StreamRecord, base64_record};

pub(crate) use activemq::messages as activemq_messages;
pub(crate) use rabbitmq::messages as rabbitmq_messages;

/// The message attribute carrying the broker's message id, for `.identity(Identity::attribute(..))` when it
/// is the identity chosen (S1: it misses a producer's resend).
pub const MESSAGE_ID_ATTRIBUTE: &str = "dedup-mq-message-id";

/// Why an Amazon MQ invocation fails, so that the broker redelivers the whole batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MqError {
    /// Messages may yet apply (`retry`): the batch comes again; what applied is a duplicate then.
    #[error("{retries} message(s) may yet apply: the whole batch is redelivered")]
    Redeliver {
        /// How many.
        retries: u64,
    },
    /// Messages that can never apply could not be parked: the batch comes again (nothing lost).
    #[error(
        "{failed} message(s) that can never apply could not be parked: the whole batch is redelivered"
    )]
    ParkingFailed {
        /// How many.
        failed: u64,
    },
}

/// One message of an Amazon MQ invocation, with where it came from.
#[derive(Debug, Clone)]
pub(crate) struct MqMessage {
    /// The broker: the event's `eventSourceArn`.
    pub broker: String,
    /// The queue: ActiveMQ's `destination.physicalName`, RabbitMQ's `"<queue>::<vhost>"`.
    pub queue: String,
    /// The broker's message id, if it gave one: an attribute ([`MESSAGE_ID_ATTRIBUTE`]), never
    /// the record's id (the producer sets it, or RabbitMQ leaves it null: two messages of one
    /// batch can carry the same one).
    pub message_id: Option<String>,
    /// Its position in the batch: the id it is reported, accounted and parked by.
    index: usize,
    /// Properties or headers, as message attributes.
    properties: BTreeMap<String, AttributeValue>,
    /// The data decoded, or `None` when it is not base64.
    data: Option<Vec<u8>>,
    /// The data as received.
    raw: Option<String>,
    /// The message as delivered, for parking.
    delivered: serde_json::Value,
}

impl MqMessage {
    /// Whether the data is base64 (or absent).
    pub(crate) fn decodes(&self) -> bool {
        self.data.is_some()
    }

    /// What parking sends of the message: `{"function", "code", "broker", "queue",
    /// "message"}`, the message as delivered, its data by reference when too large.
    fn parcel<'a>(&'a self, function: &'a str, code: &'a str) -> Parcel<'a> {
        let data = match &self.data {
            Some(d) => d.clone(),
            None => self.raw.clone().unwrap_or_default().into_bytes(),
        };
        Parcel {
            function,
            code,
            from: [("broker", &self.broker), ("queue", &self.queue)],
            delivered: ("message", self.delivered.clone()),
            data: ("data", data),
            attributes: self.letter_attributes(code),
        }
    }

    fn letter_attributes(&self, code: &str) -> Vec<(String, String)> {
        let mut out = vec![
            ("dedup-reason".to_owned(), code.to_owned()),
            ("dedup-mq-queue".to_owned(), self.queue.clone()),
            ("dedup-mq-position".to_owned(), self.index.to_string()),
        ];
        if let Some(id) = &self.message_id {
            out.push(("dedup-mq-message-id".to_owned(), id.clone()));
        }
        out
    }
}

/// The data of a message decoded from base64: `Some(empty)` when absent, `None` when not base64.
fn decoded(data: Option<&str>) -> Option<Vec<u8>> {
    use base64::Engine as _;
    match data {
        None => Some(Vec::new()),
        Some(d) => base64::engine::general_purpose::STANDARD.decode(d).ok(),
    }
}

impl StreamRecord for MqMessage {
    type Response = ();

    /// Its position in the invocation (`#<n>`), unique to it: the broker's message id is the
    /// producer's (RabbitMQ's `messageId`, ActiveMQ's `messageID` as a JMS client may set it),
    /// so two messages of one batch can share it and neither may stand in for the other.
    fn id(&self) -> String {
        format!("#{}", self.index)
    }

    fn message(&self) -> Message {
        let mut attributes = self.properties.clone();
        if let Some(id) = &self.message_id {
            attributes.insert(
                MESSAGE_ID_ATTRIBUTE.to_owned(),
                AttributeValue::String(id.clone()),
            );
        }
        Message {
            message_id: self.id(),
            body: self.data.clone().unwrap_or_default(),
            attributes,
            group_id: None,
        }
    }

    fn parked(&self, function: &str, code: &str) -> Letter {
        self.parcel(function, code).whole()
    }

    fn parked_by_reference(&self, function: &str, code: &str, room: usize) -> Letter {
        self.parcel(function, code).by_reference(room)
    }

    fn respond(_: Option<String>) {}
}

/// An Amazon MQ door (ActiveMQ, RabbitMQ): the broker's messages as its event's reader `0`
/// reads them, each under its position (`#<n>`); no partial batch response, so the batch is
/// acknowledged whole once what can never apply is parked, and redelivered whole while any
/// message may yet apply or a parking fails ([`MqError`]).
pub(crate) struct Mq<E>(pub(crate) fn(&E) -> Vec<MqMessage>);

impl<E: Send + Sync + 'static> Door for Mq<E> {
    type Event = E;
    type Response = ();
    type Ordering = InOrder;
    const NAME: &'static str = "Amazon MQ";
    const ENVELOPE_ID: bool = false;
    const PARKS: bool = true;
    const CUT: Cut = Cut::WholeBatch;

    fn messages(&self, event: &E, _: &lambda_runtime::Context) -> Vec<door::Record> {
        (self.0)(event)
            .iter()
            .map(|m| base64_record(m, m.decodes()))
            .collect()
    }

    async fn answer(&self, event: &E, done: Answered<'_>) -> Result<(), lambda_runtime::Error> {
        let retries = done.report.account.retry;
        if retries > 0 {
            tracing::warn!(
                function = done.function,
                retries,
                "messages may yet apply: failing the invocation, the broker redelivers the batch"
            );
            return Err(MqError::Redeliver { retries }.into());
        }
        let messages = (self.0)(event);
        let parked = (done.parking()?)
            .park_records(done.function, &messages, done.report)
            .await;
        match parked.failed {
            0 => Ok(()),
            failed => Err(MqError::ParkingFailed { failed }.into()),
        }
    }
}

#[cfg(test)]
mod tests;
