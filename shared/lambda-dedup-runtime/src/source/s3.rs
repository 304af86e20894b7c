//! S3 event notifications as a source (feature `s3`): each record of an [`S3Event`] is one
//! event, read here into a [`Message`] or refused with a clear reason.
//!
//! - **Identity** (S1): the record's bucket, object key, version id (empty when the bucket is
//!   not versioned) and `sequencer` — S3 gives a redelivery of one notification the same
//!   sequencer, and each new PUT or DELETE of a key a greater one — put, as a digest, under
//!   [`IDENTITY_ATTRIBUTE`]. Only PUT and DELETE notifications carry a sequencer; a record
//!   without one is refused.
//! - **The object** is its bucket and its **decoded** key: S3 URL-encodes keys in notifications
//!   (a space as `+` or `%20`), EventBridge does not, so the decoded name is the one that means
//!   the same object everywhere. The body the work reads is the record as delivered, with
//!   `s3.object.urlDecodedKey` set to that decoded key (a value the sender put there is
//!   replaced: S3 sends none). The object (a digest of bucket and decoded key) and the
//!   sequencer, padded as [`Sequencer`] orders them, are the attributes `OBJECT_ATTRIBUTE` and
//!   `SEQUENCER_ATTRIBUTE` that the latest-wins flow reads.
//! - **Refused** (`envelope_malformed`, naming the field, never its value): no bucket name, no
//!   key, a key that does not decode to UTF-8 or is over `MAX_KEY_BYTES` once decoded (S3's
//!   own limit), no sequencer, or one that is not hex or over
//!   [`lambda_dedup::latest::MAX_SEQUENCER_DIGITS`] digits (wider than any S3 sends: a forged
//!   one would sort above every real one and hold the object until its high-water expires).
//!   AWS's published sample event
//!   (`events/example-s3-event.json`) carries the placeholder sequencer `"Happy Sequencer"` and
//!   is refused so; real notifications carry hex.

use aws_lambda_events::event::s3::{S3Event, S3EventRecord};
use lambda_dedup::{AttributeValue, Message, Reason, Rejection, Sequencer};

use crate::door::{self, AnyOrder, Refused};
use crate::service::flow::{OBJECT_ATTRIBUTE, SEQUENCER_ATTRIBUTE};
use crate::source::asynchronous::AsyncEvent;
use sha2::{Digest, Sha256};

/// The attribute carrying a record's identity: a digest of bucket, decoded key, version id and
/// sequencer. The door's default identity.
pub(crate) const IDENTITY_ATTRIBUTE: &str = "dedup-s3-event";
/// The longest object key S3 allows, in bytes of UTF-8.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// S3's notifications invoking the function directly, read by their door
/// ([`crate::source::asynchronous::Invoked`]): each record under `"<index>:<x-amz-request-id>"`
/// ([`records`]), keyed by default by [`IDENTITY_ATTRIBUTE`], one that cannot be read refused
/// (`envelope_malformed`).
impl AsyncEvent for S3Event {
    /// Its flow is latest-wins, which orders by the sequencer whatever the delivery's order.
    type Ordering = AnyOrder;
    const NAME: &'static str = "S3";
    const ENVELOPE_ID: bool = false;
    const CLOUDEVENTS_DATA: bool = true;
    const IDENTITY: Option<&'static str> = Some(IDENTITY_ATTRIBUTE);

    fn records(&self, _: &lambda_runtime::Context) -> Vec<door::Record> {
        let read = |r: Record| {
            r.message.map_err(|rejection| {
                tracing::warn!(record = %r.id, code = rejection.code(), reason = %rejection,
                    "rejected: the S3 record cannot be read");
                let m = Message {
                    message_id: r.id,
                    ..Message::default()
                };
                Refused::rejected(&m, Reason::from(&rejection), rejection.to_string())
            })
        };
        records(self).into_iter().map(read).collect()
    }
}

/// One record of an S3 invocation: the id it is reported by, and its message or why not.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// `"<index>:<x-amz-request-id>"`: the record's place in the event and S3's request id.
    pub id: String,
    /// The record as a message, or its refusal.
    pub message: Result<Message, Rejection>,
}

/// The records of `event`, in order.
pub(crate) fn records(event: &S3Event) -> Vec<Record> {
    event
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let request = r
                .response_elements
                .get("x-amz-request-id")
                .map_or("-", String::as_str);
            let id = format!("{i}:{request}");
            Record {
                message: message(id.clone(), r),
                id,
            }
        })
        .collect()
}

fn malformed(detail: impl Into<String>) -> Rejection {
    Rejection::Envelope {
        envelope: "S3",
        detail: detail.into(),
    }
}

/// `record` as a message reported as `id`, or why it cannot be one.
pub(crate) fn message(id: String, record: &S3EventRecord) -> Result<Message, Rejection> {
    let object = &record.s3.object;
    let bucket = non_empty(record.s3.bucket.name.as_deref())
        .ok_or_else(|| malformed("the field `s3.bucket.name` is missing"))?;
    let raw_key = non_empty(object.key.as_deref())
        .ok_or_else(|| malformed("the field `s3.object.key` is missing"))?;
    let key = decoded_key(raw_key)?;
    let sequencer = non_empty(object.sequencer.as_deref()).ok_or_else(|| {
        malformed("the field `s3.object.sequencer` is missing (only PUT and DELETE carry one)")
    })?;
    let sequencer = Sequencer::parse(sequencer)
        .map_err(|e| malformed(format!("`s3.object.sequencer`: {e}")))?;
    let version = object.version_id.as_deref().unwrap_or_default();
    let mut delivered = record.clone();
    delivered.s3.object.url_decoded_key = Some(key.clone());
    let body = serde_json::to_vec(&delivered)
        .map_err(|_| malformed("the record cannot be written as JSON"))?;
    let text = |s: String| AttributeValue::String(s);
    let attributes = [
        (
            IDENTITY_ATTRIBUTE,
            digest(&[bucket, &key, version, sequencer.as_str()]),
        ),
        (OBJECT_ATTRIBUTE, digest(&[bucket, &key])),
        (SEQUENCER_ATTRIBUTE, sequencer.as_str().to_owned()),
    ]
    .into_iter()
    .map(|(name, v)| (name.to_owned(), text(v)))
    .collect();
    Ok(Message {
        message_id: id,
        body,
        attributes,
        group_id: None,
    })
}

/// The one record of the S3 notification `body` is (S3 → SQS), as a message reported as
/// `message_id`; S3's test event, a body of another shape or of other than one record is
/// [`Rejection::Envelope`] (naming what is wrong, never a value).
pub(crate) fn in_queue(message_id: String, body: &[u8]) -> Result<Message, Rejection> {
    let event: S3Event = serde_json::from_slice(body).map_err(|e| {
        malformed(format!(
            "not an S3 notification: {}",
            crate::source::sns::described(&e)
        ))
    })?;
    match &event.records[..] {
        [record] => message(message_id, record),
        records => Err(malformed(format!(
            "{} records in one message, not one",
            records.len()
        ))),
    }
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// The object key as S3 named it: `+` is a space and `%XX` a byte, as S3 encodes keys in
/// notifications; the bytes must be UTF-8 and at most [`MAX_KEY_BYTES`].
pub(crate) fn decoded_key(raw: &str) -> Result<String, Rejection> {
    let spaced = raw.replace('+', " ");
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(&spaced).collect();
    let key = String::from_utf8(bytes)
        .map_err(|_| malformed("`s3.object.key` does not decode to UTF-8"))?;
    if key.len() > MAX_KEY_BYTES {
        return Err(malformed(format!(
            "`s3.object.key` is over {MAX_KEY_BYTES} bytes"
        )));
    }
    Ok(key)
}

/// SHA-256 over length-prefixed parts, in hex: unambiguous, and no name in clear.
fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(b"lambda-dedup/s3");
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests;
