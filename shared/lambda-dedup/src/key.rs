//! Dedup keys and the explicit extractors that derive them (S1–S3).
//!
//! A key is `(namespace, consumer, tenant, event identity)`. The namespace and consumer are
//! configuration and stay readable in the partition key; the tenant and the event identity come
//! from the message and only ever appear hashed, so no personal data reaches the table or the logs
//! in clear (S3).
//!
//! The event identity is what the producer declares, chosen explicitly with [`IdentitySource`].
//! There is no default: the SQS `messageId` and a body hash exist only as named variants with their
//! caveats documented (S1).

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use serde_json::Value as Json;

use crate::fingerprint::{Fingerprint, FingerprintSource};
use crate::hash_parts;
use crate::retention::ConfigError;

/// Longest accepted identity or tenant value, in bytes.
pub const MAX_IDENTITY_BYTES: usize = 1024;
/// Default largest body accepted, in bytes: 1 MiB, what SQS messages and Lambda's SQS trigger
/// carry since January 2026 (it was 256 KiB before). Functions read theirs from
/// `DEDUP_MAX_BODY_BYTES`.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest namespace or consumer name.
pub const MAX_SCOPE_NAME: usize = 64;

/// Where the dedup key is valid: the environment (`prod`, `dev`) and the consuming application.
/// Two consumers of one event each handle it once (S1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    namespace: String,
    consumer: String,
}

impl Scope {
    /// A scope. Both names: 1–64 characters of `A-Z a-z 0-9 . _ -`.
    pub fn new(namespace: &str, consumer: &str) -> Result<Self, ConfigError> {
        for (what, name) in [("namespace", namespace), ("consumer", consumer)] {
            let ok = !name.is_empty()
                && name.len() <= MAX_SCOPE_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(ConfigError::BadName {
                    what,
                    name: name.to_owned(),
                });
            }
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            consumer: consumer.to_owned(),
        })
    }

    /// The environment namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The consumer name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }
}

/// The partition key of a mark: `namespace#consumer#<sha256 hex of tenant and identity>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey(String);

impl DedupKey {
    /// Derives the key of an event from its scope, tenant and identity components. The components
    /// name what they are (e.g. `["cloudevents", source, id]`) so two extractors never collide.
    /// Values are checked by the extractors; use this directly only for sources that are not
    /// messages (a webhook header, say), after checking the values yourself.
    pub fn new(scope: &Scope, tenant: &str, identity: &[&str]) -> Self {
        let digest = hash_parts(
            "lambda-dedup/key/v1",
            std::iter::once(tenant.as_bytes()).chain(identity.iter().map(|s| s.as_bytes())),
        );
        Self(format!(
            "{}#{}#{}",
            scope.namespace,
            scope.consumer,
            hex::encode(digest)
        ))
    }

    /// Rebuilds a key from a stored partition key value.
    pub fn from_stored(pk: String) -> Self {
        Self(pk)
    }

    /// The partition key value.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The idempotency key to hand to an external API for this event (S6, S7): derived only from
    /// the dedup key, so it is the same on every retry, in every process, under every lease.
    pub fn idempotency_key(&self) -> String {
        let digest = hash_parts("lambda-dedup/idempotency-key/v1", [self.0.as_bytes()]);
        // 32 hex chars (128 bits): fits every provider's limit (Stripe: 255, IETF draft: any).
        format!("ldd-{}", &hex::encode(digest)[..32])
    }
}

impl DedupKey {
    /// A `ClientRequestToken` for one write attempt on this key: derived from the key and the
    /// attempt's own random token, so the SDK's retries of that one call share it (and DynamoDB
    /// cannot apply it twice), while two deliveries of the same event never do (a shared token
    /// would let DynamoDB answer the second with the first's success, and count it applied twice).
    pub fn request_token(&self, attempt: &crate::mark::OwnerToken) -> String {
        let digest = hash_parts(
            "lambda-dedup/request-token/v1",
            [self.0.as_bytes(), attempt.as_str().as_bytes()],
        );
        hex::encode(&digest[..16]) // 32 characters; DynamoDB allows up to 36
    }
}

impl fmt::Display for DedupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

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

/// How to derive the key and fingerprint of a message.
#[derive(Debug, Clone)]
pub struct KeySpec {
    scope: Scope,
    tenant: TenantSource,
    identity: IdentitySource,
    fingerprint: FingerprintSource,
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
    /// When the producer says the event happened: the CloudEvents `time` attribute, when the
    /// identity is CloudEvents and the producer set it. Judges late events (S10).
    pub event_time: Option<SystemTime>,
}

impl KeySpec {
    /// A spec with the given identity source, a single tenant, no fingerprint and the default body
    /// limit. Set the rest with the builder methods.
    pub fn new(scope: Scope, identity: IdentitySource) -> Self {
        Self {
            scope,
            tenant: TenantSource::Single,
            identity,
            fingerprint: FingerprintSource::None,
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
    }

    /// Derives the key of `msg`, or says why it cannot (S2: no key, no processing).
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

        let mut event_time = None;
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
                    let what = || format!("CloudEvents attribute `{required}`");
                    let v = ce
                        .get(required)
                        .ok_or_else(|| Rejection::Missing { what: what() })?;
                    checked(&what(), &json_text(&what(), v, false)?)?;
                }
                let source = ce_attr(ce, "source")?;
                let id = ce_attr(ce, "id")?;
                event_time = ce.get("time").map(ce_time).transpose()?;
                vec!["cloudevents".into(), source, id]
            }
            IdentitySource::MessageAttribute(name) => {
                let what = format!("message attribute `{name}`");
                vec![
                    "attribute".into(),
                    name.clone(),
                    attribute(msg, &what, name)?,
                ]
            }
            IdentitySource::JsonPointer(ptr) => {
                let what = format!("body field `{ptr}`");
                let v = pointer(body.as_ref(), ptr, &what)?;
                vec!["pointer".into(), ptr.clone(), v]
            }
            IdentitySource::SqsMessageId => {
                let what = "SQS messageId";
                vec!["sqs-message-id".into(), checked(what, &msg.message_id)?]
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
        let tenant = self.tenant_of(msg, body.as_ref())?;
        let parts: Vec<&str> = identity.iter().map(String::as_str).collect();
        let key = DedupKey::new(&self.scope, &tenant, &parts);
        let fingerprint = self.fingerprint.compute(&msg.body, body.as_ref());
        Ok(Derived {
            key,
            fingerprint,
            tenant,
            body,
            event_time,
        })
    }

    fn tenant_of(&self, msg: &Message, body: Option<&Json>) -> Result<String, Rejection> {
        Ok(match &self.tenant {
            TenantSource::Single => String::new(),
            TenantSource::Fixed(t) => t.clone(),
            TenantSource::MessageAttribute(name) => {
                attribute(msg, &format!("tenant message attribute `{name}`"), name)?
            }
            TenantSource::CloudEventsExtension(name) => {
                let what = format!("tenant CloudEvents extension `{name}`");
                let v = body
                    .and_then(Json::as_object)
                    .and_then(|o| o.get(name))
                    .ok_or_else(|| Rejection::Missing { what: what.clone() })?;
                checked(&what, &json_text(&what, v, false)?)?
            }
            TenantSource::JsonPointer(ptr) => {
                pointer(body, ptr, &format!("tenant body field `{ptr}`"))?
            }
        })
    }
}

fn ce_attr(ce: &serde_json::Map<String, Json>, name: &str) -> Result<String, Rejection> {
    let what = format!("CloudEvents attribute `{name}`");
    let v = ce
        .get(name)
        .ok_or_else(|| Rejection::Missing { what: what.clone() })?;
    checked(&what, &json_text(&what, v, false)?)
}

/// The CloudEvents `time` attribute: an RFC 3339 timestamp (CloudEvents spec, "time").
fn ce_time(v: &Json) -> Result<SystemTime, Rejection> {
    let what = "CloudEvents attribute `time`";
    let text = json_text(what, v, false)?;
    let t = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| Rejection::WrongType {
        what: what.into(),
        found: "not an RFC 3339 timestamp",
    })?;
    let millis = u64::try_from(t.timestamp_millis()).map_err(|_| Rejection::WrongType {
        what: what.into(),
        found: "a time before 1970",
    })?;
    Ok(crate::clock::from_epoch_millis(millis))
}

fn attribute(msg: &Message, what: &str, name: &str) -> Result<String, Rejection> {
    match msg.attributes.get(name) {
        None => Err(Rejection::Missing { what: what.into() }),
        Some(AttributeValue::String(s)) => checked(what, s),
        Some(AttributeValue::Binary(b)) => {
            let s = std::str::from_utf8(b).map_err(|_| Rejection::NotUtf8 { what: what.into() })?;
            checked(what, s)
        }
    }
}

fn pointer(body: Option<&Json>, ptr: &str, what: &str) -> Result<String, Rejection> {
    let v = body
        .and_then(|b| b.pointer(ptr))
        .ok_or_else(|| Rejection::Missing { what: what.into() })?;
    checked(what, &json_text(what, v, true)?)
}

/// The text of a JSON identity value: a string, or (where allowed) an integer in its canonical
/// decimal form. Floats, booleans, null, arrays and objects are not identities.
fn json_text<'a>(
    what: &str,
    v: &'a Json,
    allow_integer: bool,
) -> Result<std::borrow::Cow<'a, str>, Rejection> {
    match v {
        Json::String(s) => Ok(s.as_str().into()),
        Json::Number(n) if allow_integer && (n.is_i64() || n.is_u64()) => Ok(n.to_string().into()),
        other => Err(Rejection::WrongType {
            what: what.into(),
            found: json_kind(other),
        }),
    }
}

fn json_kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Length and character checks on an identity or tenant value; the checked value, owned.
fn checked(what: &str, v: &str) -> Result<String, Rejection> {
    if v.trim().is_empty() {
        return Err(Rejection::Empty { what: what.into() });
    }
    if v.len() > MAX_IDENTITY_BYTES {
        return Err(Rejection::TooLong {
            what: what.into(),
            len: v.len(),
            max: MAX_IDENTITY_BYTES,
        });
    }
    if v.chars().any(char::is_control) {
        return Err(Rejection::BadCharacters { what: what.into() });
    }
    Ok(v.to_owned())
}

/// Why a message is not processed: it has no key (S2), or it is too old to judge (S10). Messages name the field, never its value: values may be personal
/// data (S3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The body is larger than the configured limit.
    #[error("body is {len} bytes, over the {max}-byte limit")]
    BodyTooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body had to be JSON but is not UTF-8.
    #[error("body is not valid UTF-8")]
    BodyNotUtf8,
    /// The body had to be JSON but does not parse.
    #[error("body is not valid JSON: {detail}")]
    BodyNotJson {
        /// The parser's error (position and kind).
        detail: String,
    },
    /// A field the key needs is absent.
    #[error("{what} is missing")]
    Missing {
        /// The field.
        what: String,
    },
    /// A field the key needs is empty or blank.
    #[error("{what} is empty")]
    Empty {
        /// The field.
        what: String,
    },
    /// A field the key needs is too long.
    #[error("{what} is {len} bytes, over the {max}-byte limit")]
    TooLong {
        /// The field.
        what: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A binary field the key needs is not UTF-8.
    #[error("{what} is not valid UTF-8")]
    NotUtf8 {
        /// The field.
        what: String,
    },
    /// A field the key needs contains control characters.
    #[error("{what} contains control characters")]
    BadCharacters {
        /// The field.
        what: String,
    },
    /// A field the key needs has the wrong JSON type.
    #[error("{what} has the wrong type ({found})")]
    WrongType {
        /// The field.
        what: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// The event is older than the retention window: the mark table can no longer say whether
    /// it was handled, so it goes to reconciliation instead of being applied (S10).
    #[error("event is {age_secs} s old, beyond the {retention_secs}-second retention window")]
    Late {
        /// How old the event is, by its own time.
        age_secs: u64,
        /// The retention window.
        retention_secs: u64,
    },
    /// The event says it happens further in the future than clocks can disagree
    /// ([`MAX_CLOCK_SKEW`]). Its age cannot be trusted, so neither can the late-event rule: a
    /// replay of it after its mark expired would otherwise pass as new. It goes to
    /// reconciliation like a late event (S10).
    #[error(
        "event time is {ahead_secs} s in the future, beyond the {skew_secs}-second clock skew allowed"
    )]
    FromTheFuture {
        /// How far ahead of the store's clock the event's time is.
        ahead_secs: u64,
        /// The skew allowed.
        skew_secs: u64,
    },
}

/// How far ahead of the store's clock an event's declared time may be (clocks disagree); an
/// event further ahead is [`Rejection::FromTheFuture`] (S10).
pub const MAX_CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Rejection {
    /// A stable, low-cardinality code for metrics and log fields.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::BodyTooLarge { .. } => "body_too_large",
            Rejection::BodyNotUtf8 => "body_not_utf8",
            Rejection::BodyNotJson { .. } => "body_not_json",
            Rejection::Missing { .. } => "identity_missing",
            Rejection::Empty { .. } => "identity_empty",
            Rejection::TooLong { .. } => "identity_too_long",
            Rejection::NotUtf8 { .. } => "identity_not_utf8",
            Rejection::BadCharacters { .. } => "identity_bad_characters",
            Rejection::WrongType { .. } => "identity_wrong_type",
            Rejection::Late { .. } => "late_event",
            Rejection::FromTheFuture { .. } => "implausible_time",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope() -> Scope {
        Scope::new("prod", "ledger").expect("scope")
    }

    fn msg(body: &str) -> Message {
        Message {
            message_id: "m-1".into(),
            body: body.as_bytes().to_vec(),
            ..Message::default()
        }
    }

    fn ce(id: &str) -> String {
        json!({"specversion": "1.0", "type": "credit", "source": "/bank", "id": id,
               "tenantid": "acme", "data": {"account": "credito-17", "amount": 10}})
        .to_string()
    }

    fn ce_spec() -> KeySpec {
        KeySpec::cloudevents(scope(), "tenantid")
    }

    /// S1: the key depends on the declared identity, not on the delivery: a producer retry with a
    /// new messageId and re-serialised JSON keeps its key.
    #[test]
    fn s1_cloudevents_key_is_stable_across_redeliveries_and_reserialisation() {
        let a = ce_spec().derive(&msg(&ce("evt-1"))).expect("derive");
        let mut retry = msg(
            r#"{ "data": {"amount": 10, "account": "credito-17"}, "id": "evt-1",
                 "source": "/bank", "type": "credit", "specversion": "1.0", "tenantid": "acme" }"#,
        );
        retry.message_id = "m-2".into();
        let b = ce_spec().derive(&retry).expect("derive");
        assert_eq!(a.key, b.key);
        assert_eq!(
            a.fingerprint, b.fingerprint,
            "S11: same payload, same fingerprint"
        );
        assert!(a.body.is_some(), "the parsed body is handed back");
        let c = ce_spec().derive(&msg(&ce("evt-2"))).expect("derive");
        assert_ne!(a.key, c.key);
    }

    /// S1: namespace, consumer and tenant each separate keys.
    #[test]
    fn s1_scope_and_tenant_are_part_of_the_key() {
        let k = |ns: &str, consumer: &str, tenant: &str| {
            DedupKey::new(
                &Scope::new(ns, consumer).expect("scope"),
                tenant,
                &["x", "1"],
            )
        };
        let base = k("prod", "ledger", "acme");
        assert_ne!(base, k("dev", "ledger", "acme"));
        assert_ne!(base, k("prod", "billing", "acme"));
        assert_ne!(base, k("prod", "ledger", "globex"));
        assert!(base.as_str().starts_with("prod#ledger#"));
    }

    /// S1: components are length-prefixed: shifting a boundary changes the key.
    #[test]
    fn s1_identity_components_cannot_be_confused() {
        let s = scope();
        assert_ne!(
            DedupKey::new(&s, "", &["ab", "c"]),
            DedupKey::new(&s, "", &["a", "bc"])
        );
        assert_ne!(
            DedupKey::new(&s, "a", &["b"]),
            DedupKey::new(&s, "", &["a", "b"])
        );
    }

    /// S1: each extractor, and the explicit (documented) messageId and body-hash choices.
    #[test]
    fn s1_every_extractor_derives_a_key() {
        let mut m = msg(r#"{"order":{"id":42},"note":"x"}"#);
        m.attributes
            .insert("event-id".into(), AttributeValue::String("evt-9".into()));
        let attr = KeySpec::new(scope(), IdentitySource::MessageAttribute("event-id".into()));
        let ptr = KeySpec::new(scope(), IdentitySource::JsonPointer("/order/id".into()));
        let mid = KeySpec::new(scope(), IdentitySource::SqsMessageId);
        let hash = KeySpec::new(scope(), IdentitySource::BodySha256);
        let keys: Vec<DedupKey> = [attr, ptr, mid, hash.clone()]
            .iter()
            .map(|s| s.derive(&m).expect("derive").key)
            .collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b, "extractors never collide");
            }
        }
        // The body hash changes with the bytes, even for equal JSON (its documented caveat).
        let reserialised = msg(r#"{"note":"x","order":{"id":42}}"#);
        assert_ne!(hash.derive(&reserialised).expect("derive").key, keys[3]);
    }

    /// S3: personal data never appears in the key in clear.
    #[test]
    fn s3_no_identity_or_tenant_value_in_clear() {
        let body = json!({"plate": "1234-ABC", "email": "ana@example.com"}).to_string();
        let spec = KeySpec::new(scope(), IdentitySource::JsonPointer("/plate".into()))
            .tenant(TenantSource::JsonPointer("/email".into()));
        let key = spec.derive(&msg(&body)).expect("derive").key;
        assert!(!key.as_str().contains("1234"));
        assert!(!key.as_str().contains("ana"));
        assert_eq!(key.as_str().len(), "prod#ledger#".len() + 64);
    }

    fn rejected(spec: &KeySpec, m: &Message) -> Rejection {
        spec.derive(m).expect_err("must be rejected")
    }

    /// S2: no key, no processing: every way a message can lack an identity is a typed rejection
    /// with a reason that names the field, never its value.
    #[test]
    fn s2_messages_without_a_derivable_identity_are_rejected_with_a_reason() {
        let spec = ce_spec();
        let cases: Vec<(&str, Message, &str)> = vec![
            ("not JSON", msg("{not json"), "body_not_json"),
            (
                "not UTF-8",
                Message {
                    body: vec![0xff, 0xfe, b'{'],
                    ..msg("")
                },
                "body_not_utf8",
            ),
            (
                "no id",
                msg(
                    &json!({"specversion":"1.0","type":"t","source":"/s","tenantid":"a"})
                        .to_string(),
                ),
                "identity_missing",
            ),
            ("empty id", msg(&ce("")), "identity_empty"),
            ("blank id", msg(&ce("   ")), "identity_empty"),
            (
                "huge id",
                msg(&ce(&"x".repeat(MAX_IDENTITY_BYTES + 1))),
                "identity_too_long",
            ),
            (
                "control chars",
                msg(&ce("evt\u{0}1")),
                "identity_bad_characters",
            ),
            (
                "numeric id",
                msg(
                    &json!({"specversion":"1.0","type":"t","source":"/s","id":7,"tenantid":"a"})
                        .to_string(),
                ),
                "identity_wrong_type",
            ),
            (
                "no specversion",
                msg(&json!({"type":"t","source":"/s","id":"1","tenantid":"a"}).to_string()),
                "identity_missing",
            ),
            (
                "no tenant",
                msg(&json!({"specversion":"1.0","type":"t","source":"/s","id":"1"}).to_string()),
                "identity_missing",
            ),
            ("array body", msg("[1,2]"), "identity_wrong_type"),
        ];
        for (name, m, code) in cases {
            let r = rejected(&spec, &m);
            assert_eq!(r.code(), code, "{name}: {r}");
        }
        // The reason never quotes the value.
        let r = rejected(&spec, &msg(&ce(&format!("secret-{}", "y".repeat(2000)))));
        assert!(!r.to_string().contains("secret"), "{r}");
    }

    #[test]
    fn s2_attribute_and_size_rejections() {
        let spec = KeySpec::new(scope(), IdentitySource::MessageAttribute("event-id".into()))
            .max_body_bytes(16);
        let mut m = msg("small");
        assert_eq!(rejected(&spec, &m).code(), "identity_missing");
        m.attributes
            .insert("event-id".into(), AttributeValue::Binary(vec![0xc3, 0x28]));
        assert_eq!(rejected(&spec, &m).code(), "identity_not_utf8");
        m.attributes
            .insert("event-id".into(), AttributeValue::String(String::new()));
        assert_eq!(rejected(&spec, &m).code(), "identity_empty");
        m.attributes
            .insert("event-id".into(), AttributeValue::String("ok".into()));
        assert!(spec.derive(&m).is_ok());
        m.body = vec![b'x'; 17];
        assert_eq!(rejected(&spec, &m).code(), "body_too_large");

        // The default is the platform's limit (1 MiB), not the 256 KiB of before 2026: a valid
        // 300 KiB message is processed, one over 1 MiB is not.
        let default = KeySpec::new(scope(), IdentitySource::MessageAttribute("event-id".into()));
        m.body = vec![b'x'; 300 * 1024];
        assert!(
            default.derive(&m).is_ok(),
            "300 KiB is within the platform limit"
        );
        m.body = vec![b'x'; 1024 * 1024 + 1];
        assert_eq!(rejected(&default, &m).code(), "body_too_large");

        let mid = KeySpec::new(scope(), IdentitySource::SqsMessageId);
        assert_eq!(rejected(&mid, &Message::default()).code(), "identity_empty");
        let hash = KeySpec::new(scope(), IdentitySource::BodySha256);
        assert_eq!(
            rejected(&hash, &Message::default()).code(),
            "identity_empty"
        );
    }

    #[test]
    fn scope_names_are_checked() {
        assert!(Scope::new("", "x").is_err());
        assert!(Scope::new("prod", "has space").is_err());
        assert!(Scope::new("prod", "has#hash").is_err());
        assert!(Scope::new(&"p".repeat(65), "x").is_err());
        assert!(Scope::new("prod-1", "ledger_projector.v2").is_ok());
    }

    /// S10: the CloudEvents `time` is read as the event's time; an offset is honoured; a
    /// malformed one rejects the message; without one the age is unknown.
    #[test]
    fn s10_cloudevents_time_is_the_event_time() {
        let with_time = |t: Json| {
            let body = json!({"specversion": "1.0", "type": "t", "source": "/s", "id": "1",
                              "tenantid": "a", "time": t});
            ce_spec().derive(&msg(&body.to_string()))
        };
        let at = |ms: u64| Some(crate::clock::from_epoch_millis(ms));
        let z = with_time(json!("2026-11-29T10:00:00Z")).expect("derive");
        assert_eq!(z.event_time, at(1_795_946_400_000));
        let offset = with_time(json!("2026-11-29T11:00:00.5+01:00")).expect("derive");
        assert_eq!(offset.event_time, at(1_795_946_400_500));
        for bad in [
            json!("yesterday"),
            json!("2026-11-29"),
            json!(1_795_946_400),
        ] {
            let r = with_time(bad).expect_err("malformed time");
            assert_eq!(r.code(), "identity_wrong_type");
        }
        let none =
            json!({"specversion": "1.0", "type": "t", "source": "/s", "id": "1", "tenantid": "a"});
        assert_eq!(
            ce_spec()
                .derive(&msg(&none.to_string()))
                .expect("derive")
                .event_time,
            None
        );
    }
}
