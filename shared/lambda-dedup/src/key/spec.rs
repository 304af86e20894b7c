//! How a message derives to its key, fingerprint and body (S1, S2, S11).

use std::time::SystemTime;

use serde_json::Value as Json;

use super::checks::{Named, check, checked, json_text, pointer};
use super::cloudevents::ce_attr;
use super::time::EventTimeSource;
use super::{
    AttributeValue, DEFAULT_MAX_BODY_BYTES, DedupKey, Message, Rejection, Scope,
    VERIFIED_SENDER_ATTRIBUTE,
};
use crate::fingerprint::{Fingerprint, FingerprintSource};
use crate::hash_parts;

/// Where the event identity comes from (S1). Chosen explicitly; there is no default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentitySource {
    /// Structured-mode CloudEvents JSON body: `source` + `id` (the spec makes this pair unique).
    /// `specversion` and `type` must be present too.
    CloudEvents,
    /// A named SQS message attribute of type String or Number.
    MessageAttribute(String),
    /// A JSON pointer (RFC 6901, e.g. `/order/id`) into a JSON body; the value must be a string or
    /// an integer.
    JsonPointer(String),
    /// The SQS `messageId`. **Only protects against broker redelivery**: a producer that retries a
    /// send gets a new `messageId`, and the event is processed twice. Choose it only when the
    /// producer has no identity to offer.
    SqsMessageId,
    /// The id of the envelope the message came in ([`ENVELOPE_ID_ATTRIBUTE`](super::ENVELOPE_ID_ATTRIBUTE)):
    /// an SNS `MessageId`, an EventBridge `id`, a direct invocation's request id. **Only
    /// protects against the broker's own redelivery**: SNS keeps the `MessageId` when it
    /// retries a delivery and Lambda keeps the request id across its async retries, but a
    /// producer that publishes again, or puts the same event again, gets a new one. An opt-in
    /// fallback for producers with no identity of their own.
    EnvelopeId,
    /// SHA-256 of the raw body bytes. **Breaks on re-serialisation** (a producer that re-encodes
    /// the same event with other whitespace or key order makes a new identity) and **merges two
    /// legitimate identical actions** (two equal payments become one). Choose it knowingly.
    BodySha256,
}

/// Where the tenant comes from (S1): keeps customers' identities apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantSource {
    /// No tenants: every event belongs to one tenant.
    Single,
    /// A fixed tenant for this consumer.
    Fixed(String),
    /// A named SQS message attribute.
    MessageAttribute(String),
    /// A top-level CloudEvents extension attribute of the JSON body (e.g. `tenantid`).
    CloudEventsExtension(String),
    /// A JSON pointer into the body.
    JsonPointer(String),
}

/// Who vouched for an event's tenant and caller (S1): what the consumer may rely on beyond the
/// payload itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Provenance {
    /// Only the payload: whoever could put the message on the door named its tenant. Relied on
    /// only where the function declares its producers trusted (an internal queue whose policy
    /// names them).
    #[default]
    Payload,
    /// A sender verified by its signature (a webhook receiver), carried from the inbox item by
    /// the inbox forwarder in [`VERIFIED_SENDER_ATTRIBUTE`]. A tenant read from the message must
    /// be this sender, and the key lies in the sender's own key space, apart from every other
    /// producer's.
    Sender(String),
}

/// How to derive the key and fingerprint of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    scope: Scope,
    tenant: TenantSource,
    identity: IdentitySource,
    fingerprint: FingerprintSource,
    time: EventTimeSource,
    max_body_bytes: usize,
}

/// What a message derives to: its key, its fingerprint, and the parsed JSON body when the spec
/// needed to parse it (so the handler does not parse twice).
#[derive(Debug, Clone)]
pub struct Derived {
    /// The dedup key.
    pub key: DedupKey,
    /// The payload fingerprint, unless the spec has none.
    pub fingerprint: Option<Fingerprint>,
    /// The tenant the key is scoped to (empty for a single-tenant spec). Effects key their
    /// items within it ([`crate::tenant_scoped`]), so tenants stay apart in the data too (S1).
    /// Not for logs.
    pub tenant: String,
    /// The body as JSON, when it was parsed.
    pub body: Option<Json>,
    /// When the producer says the event happened, read as the spec's [`EventTimeSource`] says
    /// (by default the CloudEvents `time` of a CloudEvents spec), when the producer declared it.
    /// Judges late events (S10).
    pub event_time: Option<SystemTime>,
    /// Who vouched for the tenant: a verified sender, or only the payload.
    pub provenance: Provenance,
}

impl KeySpec {
    /// A spec with the given identity source, a single tenant, no fingerprint and the default body
    /// limit; the event's time is the CloudEvents `time` for a CloudEvents identity, and none
    /// otherwise. Set the rest with the builder methods.
    pub fn new(scope: Scope, identity: IdentitySource) -> Self {
        let time = match identity {
            IdentitySource::CloudEvents => EventTimeSource::CloudEvents,
            _ => EventTimeSource::None,
        };
        Self {
            scope,
            tenant: TenantSource::Single,
            identity,
            fingerprint: FingerprintSource::None,
            time,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// The usual spec for structured CloudEvents: the event identity is `source` + `id`, the
    /// tenant is the extension attribute `tenant_extension`, and the fingerprint covers `data`
    /// (S1, S11). Every part stays explicit in the call; change any with the builder methods.
    pub fn cloudevents(scope: Scope, tenant_extension: &str) -> Self {
        Self::new(scope, IdentitySource::CloudEvents)
            .tenant(TenantSource::CloudEventsExtension(tenant_extension.into()))
            .fingerprint(FingerprintSource::CloudEventsData)
    }

    /// Where the tenant comes from.
    pub fn tenant(mut self, tenant: TenantSource) -> Self {
        self.tenant = tenant;
        self
    }

    /// What part of the message the fingerprint covers (S11).
    pub fn fingerprint(mut self, fingerprint: FingerprintSource) -> Self {
        self.fingerprint = fingerprint;
        self
    }

    /// Where the event's time comes from (S10): a late event is judged by it.
    pub fn event_time(mut self, time: EventTimeSource) -> Self {
        self.time = time;
        self
    }

    /// Where the event's time comes from.
    pub fn event_time_source(&self) -> &EventTimeSource {
        &self.time
    }

    /// The largest body accepted; larger ones are rejected.
    pub fn max_body_bytes(mut self, max: usize) -> Self {
        self.max_body_bytes = max;
        self
    }

    /// The scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    fn needs_json(&self) -> bool {
        matches!(
            self.identity,
            IdentitySource::CloudEvents | IdentitySource::JsonPointer(_)
        ) || matches!(
            self.tenant,
            TenantSource::CloudEventsExtension(_) | TenantSource::JsonPointer(_)
        ) || self.fingerprint.needs_json()
            || self.time.needs_json()
    }

    /// Derives the key of `msg`, or says why it cannot (S2: no key, no processing).
    ///
    /// A message carrying [`VERIFIED_SENDER_ATTRIBUTE`] is [`Provenance::Sender`]: a tenant this
    /// spec reads from the message (an attribute, a CloudEvents extension, a body field) must be
    /// that sender, or the message is [`Rejection::NotTheSender`]; and its key is derived in the
    /// sender's own key space (the identity prefixed with `verified-sender` and the sender), so
    /// an event a sender forwards can never be taken for another producer's event with the same
    /// identity, nor shadow it. A fixed or single tenant is the consumer's own declaration, not
    /// the message's, and is kept.
    pub fn derive(&self, msg: &Message) -> Result<Derived, Rejection> {
        if msg.body.len() > self.max_body_bytes {
            return Err(Rejection::BodyTooLarge {
                len: msg.body.len(),
                max: self.max_body_bytes,
            });
        }
        let body = if self.needs_json() {
            let text = std::str::from_utf8(&msg.body).map_err(|_| Rejection::BodyNotUtf8)?;
            let json: Json = serde_json::from_str(text).map_err(|e| Rejection::BodyNotJson {
                // serde's message names line/column and the kind of error, never the content.
                detail: e.to_string(),
            })?;
            Some(json)
        } else {
            None
        };

        let identity: Vec<String> = match &self.identity {
            IdentitySource::CloudEvents => {
                let ce = body
                    .as_ref()
                    .and_then(Json::as_object)
                    .ok_or(Rejection::WrongType {
                        what: "CloudEvents body".into(),
                        found: "not a JSON object",
                    })?;
                for required in ["specversion", "type"] {
                    let what = Named("CloudEvents attribute", required);
                    let v = ce.get(required).ok_or_else(|| Rejection::Missing {
                        what: what.to_string(),
                    })?;
                    check(&what, &json_text(&what, v, false)?)?;
                }
                let source = ce_attr(ce, "source")?;
                let id = ce_attr(ce, "id")?;
                vec!["cloudevents".into(), source, id]
            }
            IdentitySource::MessageAttribute(name) => {
                let what = Named("message attribute", name);
                vec![
                    "attribute".into(),
                    name.clone(),
                    attribute(msg, &what, name)?,
                ]
            }
            IdentitySource::JsonPointer(ptr) => {
                let what = Named("body field", ptr);
                let v = pointer(body.as_ref(), ptr, &what)?;
                vec!["pointer".into(), ptr.clone(), v]
            }
            IdentitySource::EnvelopeId => {
                let what = "envelope id";
                let name = super::ENVELOPE_ID_ATTRIBUTE;
                vec!["envelope-id".into(), attribute(msg, &what, name)?]
            }
            IdentitySource::SqsMessageId => {
                let what = "SQS messageId";
                vec!["sqs-message-id".into(), checked(&what, &msg.message_id)?]
            }
            IdentitySource::BodySha256 => {
                if msg.body.is_empty() {
                    return Err(Rejection::Empty {
                        what: "body (identity is its hash)".into(),
                    });
                }
                vec![
                    "body-sha256".into(),
                    hex::encode(hash_parts("body", [msg.body.as_slice()])),
                ]
            }
        };
        let event_time = self.time.read(msg, body.as_ref())?;
        let tenant = self.tenant_of(msg, body.as_ref())?;
        let provenance = match msg.attributes.get(VERIFIED_SENDER_ATTRIBUTE) {
            None => Provenance::Payload,
            Some(_) => Provenance::Sender(attribute(
                msg,
                &Named("message attribute", VERIFIED_SENDER_ATTRIBUTE),
                VERIFIED_SENDER_ATTRIBUTE,
            )?),
        };
        let mut identity = identity;
        if let Provenance::Sender(sender) = &provenance {
            if self.tenant_from_message() && tenant != *sender {
                return Err(Rejection::NotTheSender {
                    what: self.tenant_name(),
                });
            }
            identity.splice(0..0, ["verified-sender".to_owned(), sender.clone()]);
        }
        let parts: Vec<&str> = identity.iter().map(String::as_str).collect();
        let key = DedupKey::new(&self.scope, &tenant, &parts);
        let fingerprint = self
            .fingerprint
            .try_compute(&msg.body, body.as_ref())
            .map_err(|error| Rejection::Embedded {
                what: "fingerprint field".into(),
                error,
            })?;
        Ok(Derived {
            key,
            fingerprint,
            tenant,
            body,
            event_time,
            provenance,
        })
    }

    /// Whether the tenant is read from the message (a producer names it), not declared by the
    /// consumer (fixed, or none).
    fn tenant_from_message(&self) -> bool {
        !matches!(self.tenant, TenantSource::Single | TenantSource::Fixed(_))
    }

    /// The tenant's field, as a rejection names it (never its value, S3).
    fn tenant_name(&self) -> String {
        match &self.tenant {
            TenantSource::Single | TenantSource::Fixed(_) => "tenant".into(),
            TenantSource::MessageAttribute(name) => format!("tenant message attribute `{name}`"),
            TenantSource::CloudEventsExtension(name) => {
                format!("tenant CloudEvents extension `{name}`")
            }
            TenantSource::JsonPointer(ptr) => format!("tenant body field `{ptr}`"),
        }
    }

    fn tenant_of(&self, msg: &Message, body: Option<&Json>) -> Result<String, Rejection> {
        Ok(match &self.tenant {
            TenantSource::Single => String::new(),
            TenantSource::Fixed(t) => t.clone(),
            TenantSource::MessageAttribute(name) => {
                attribute(msg, &Named("tenant message attribute", name), name)?
            }
            TenantSource::CloudEventsExtension(name) => {
                let what = Named("tenant CloudEvents extension", name);
                let v = body
                    .and_then(Json::as_object)
                    .and_then(|o| o.get(name))
                    .ok_or_else(|| Rejection::Missing {
                        what: what.to_string(),
                    })?;
                checked(&what, &json_text(&what, v, false)?)?
            }
            TenantSource::JsonPointer(ptr) => pointer(body, ptr, &Named("tenant body field", ptr))?,
        })
    }
}

pub(super) fn attribute(
    msg: &Message,
    what: &dyn std::fmt::Display,
    name: &str,
) -> Result<String, Rejection> {
    match msg.attributes.get(name) {
        None => Err(Rejection::Missing {
            what: what.to_string(),
        }),
        Some(AttributeValue::String(s)) => checked(what, s),
        Some(AttributeValue::Binary(b)) => {
            let s = std::str::from_utf8(b).map_err(|_| Rejection::NotUtf8 {
                what: what.to_string(),
            })?;
            checked(what, s)
        }
    }
}
