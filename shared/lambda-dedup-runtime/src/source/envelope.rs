//! Opening the envelope an SQS message's body is in ([`Envelope`], chosen on the builder): SNS →
//! SQS without raw message delivery, an EventBridge rule targeting the queue. The work gets its
//! payload from inside, and the key spec's pointers are relative to the inner message
//! ([`crate::source::sns`], [`crate::source::eventbridge`]); the SQS `messageId` still reports
//! the message, and the FIFO group stays the queue's.

use lambda_dedup::{Message, Reason};
use lambda_dedup_engine::Outcome;

use crate::service::Envelope;

impl Envelope {
    /// The message inside `m`'s body, or the rejection of a body that is not this envelope
    /// (`envelope_malformed`: dead-lettered through the batch response, counted, never
    /// processed).
    pub fn open(self, m: Message) -> Result<Message, Outcome> {
        let (group_id, id) = (m.group_id.clone(), m.message_id.clone());
        let opened = match self {
            Envelope::Sns => super::sns::notification(m.message_id, &m.body),
            Envelope::EventBridge => super::eventbridge::event(m.message_id, &m.body),
            #[cfg(feature = "s3")]
            Envelope::S3 => super::s3::in_queue(m.message_id, &m.body),
        };
        match opened {
            Ok(inner) => Ok(Message { group_id, ..inner }),
            Err(rejection) => {
                // Logged as a rejection at the key is: the code and the reason (which names
                // the envelope's fields, never a value), so the DLQ's message can be explained.
                tracing::warn!(message_id = %id, code = rejection.code(), reason = %rejection,
                    "rejected: not the envelope; dead-lettering");
                Err(Outcome::Rejected {
                    code: Reason::from(&rejection),
                    reason: rejection.to_string(),
                    key: None,
                    invalid: None,
                })
            }
        }
    }
}

/// `m` opened from `envelope`, if the function has one: the message, or its rejection.
pub(crate) fn opened(envelope: Option<Envelope>, m: Message) -> Result<Message, Outcome> {
    match envelope {
        Some(envelope) => envelope.open(m),
        None => Ok(m),
    }
}
