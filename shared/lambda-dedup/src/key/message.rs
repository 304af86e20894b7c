//! One delivery, in the library's own terms.

use std::collections::BTreeMap;

/// Default largest body accepted, in bytes: 1 MiB, what SQS messages and Lambda's SQS trigger
/// carry since January 2026 (it was 256 KiB before). Functions read theirs from
/// `DEDUP_MAX_BODY_BYTES`.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// The message attribute under which a source puts the id of the envelope a message came in
/// (an SNS `MessageId`, an EventBridge `id`, a direct invocation's request id), for
/// [`IdentitySource::EnvelopeId`](super::IdentitySource::EnvelopeId). SQS and SNS refuse
/// attribute names that start with `AWS.`, so no producer's attribute can stand in for it.
pub const ENVELOPE_ID_ATTRIBUTE: &str = "AWS.lambda-dedup.envelope-id";

/// The message attribute that names the sender a webhook receiver verified (by its signature),
/// written by the inbox forwarder from the inbox item, never from the body. A message carrying it
/// is [`Provenance::Sender`](super::Provenance::Sender): its tenant must be that sender's and its
/// key lies in the sender's own key space ([`KeySpec::derive`](super::KeySpec::derive)). Only the
/// forwarder writes it; the queue's policy names who may send at all (an internal producer could
/// set it too, and would only bind its own messages).
pub const VERIFIED_SENDER_ATTRIBUTE: &str = "dedup-verified-sender";

/// A message attribute value, as SQS carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeValue {
    /// `String` and `Number` data types.
    String(String),
    /// `Binary` data type.
    Binary(Vec<u8>),
}

/// One delivery, in the library's own terms (the functions convert from `aws_lambda_events`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// The broker's id of this delivery (SQS `messageId`).
    pub message_id: String,
    /// The raw body.
    pub body: Vec<u8>,
    /// Message attributes by name.
    pub attributes: BTreeMap<String, AttributeValue>,
    /// The FIFO message group, if the queue is FIFO (order is kept within a group, S12).
    pub group_id: Option<String>,
}
