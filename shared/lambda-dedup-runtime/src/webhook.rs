//! Webhooks as a source (feature `webhook`): an HTTP request becomes a [`Message`], is verified,
//! deduplicated, and recorded in an inbox table whose item is its mark (create-once mode: one
//! conditional `Put`, the key, fingerprint and answer in the item; no mark item, no
//! transaction); the answer says which of the documented outcomes it had.
//!
//! # What each request gets (exactly one outcome, counted in EMF)
//! | request | status | outcome |
//! | --- | --- | --- |
//! | not `POST` | 405 | `MethodNotAllowed` |
//! | body over `WEBHOOK_MAX_BODY_BYTES` | 413 | `TooLarge` |
//! | signature missing, malformed, forged, of another scheme, made for another id, a signed header sent twice (or a `webhook-id` / `webhook-timestamp` holding a comma: a Function URL joins a repeated header's values with commas), or timestamp outside the window | 401 | `Unauthorized` |
//! | new event | 200, the answer stored in the inbox item | `Applied` |
//! | same event again (a sender's retry) | 200, the first answer, `idempotent-replayed: true` | `Duplicate` |
//! | same identity, another body | 409 | `Conflict` |
//! | no identity, a body that is not UTF-8 (or not JSON where the identity is a pointer) | 400, a code | `Rejected` |
//! | the store failed or timed out | 503, `retry-after` | `Retry` |
//!
//! Every request counts `Requests` and its outcome. Those that passed the checks and reached the
//! deduplicator also count `Received`, so for them the account of the SQS functions holds
//! (received = applied + duplicate + retry + conflict + rejected, S14) and
//! the inbox items are its marks; and requests = received + method not allowed
//! + too large + unauthorized.
//!
//! The body limit bounds what is verified, parsed and stored, not what is received: Lambda
//! hands the function the whole request (up to its synchronous invocation payload, 6 MB), and
//! `lambda_http` has read and decoded all of it before the receiver runs. What the limit
//! guarantees is the order: after the method, the body's length is the first thing checked —
//! before the signature is verified (no HMAC over an oversized body), before anything is parsed,
//! and before any store call — so an oversized request costs one comparison and writes nothing.
//! Then the signature, so an unsigned request costs no DynamoDB call either.
//!
//! # Settings ([`WebhookConfig::from_env`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `WEBHOOK_SCHEME` | how the sender signs ([`Scheme`]): `standard-webhooks` or `stripe`; anything else is refused at start | `standard-webhooks` |
//! | `WEBHOOK_SECRETS` | the sender's secrets, comma-separated, as the sender writes them: `whsec_<base64>` (Standard Webhooks: the key is the decoded bytes) or Stripe's `whsec_…` (the string's bytes); each key 16 bytes or more; all accepted (rotation) | required |
//! | `WEBHOOK_TOLERANCE_SECONDS` | how far a signature's timestamp may be from now, either way: 1 to 3600 (an hour, [`MAX_TOLERANCE`](lambda_dedup::signature::MAX_TOLERANCE)), anything else refused at start | 300 |
//! | `WEBHOOK_ID_FROM` | the event's identity, always covered by the signature: `header:webhook-id` (Standard Webhooks' signed id) or `json:</pointer>` into the signed body; any other header is refused | `header:webhook-id`; Stripe: `json:/id` (the event's `evt_…`) |
//! | `WEBHOOK_TENANT` | the sender (the keys' tenant) | required |
//! | `WEBHOOK_MAX_BODY_BYTES` | the largest body | 262144 |
//! | `INBOX_TABLE` | the inbox table (key `event_key`) | required |
//! | `WEBHOOK_INBOX_RETENTION_SECONDS` | how long an inbox item — the event's mark — is kept: each item carries `expires_at` (epoch seconds) for the table's TTL; at least [`MIN_INBOX_RETENTION`] (3 days, the longest retry horizon of the senders offered: Stripe retries for up to three days), since a sender's retry after its item expired would be a new event | 2592000 (30 days) |
//!
//! The identity is never an unsigned header: a delivery captured inside the window and sent
//! again under another id must not be a new event. GitHub's scheme, which does not sign the
//! delivery id, is not offered.
//!
//! Nothing answered 2xx is lost: the inbox item, which is the mark, is written in one conditional
//! `Put` before the answer, and remembers the event for as long as it lives: the inbox
//! retention, after which the table's TTL removes it (raw bodies are not kept forever; the
//! forwarder ignores the removal). A stream consumer (the `inbox` module, feature `inbox`) hands inbox items on to a queue.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use lambda_dedup::signature::{Scheme, SignatureError, Verifier, VerifierError};
use lambda_dedup::{
    AttributeValue, Derived, Effect, FingerprintSource, IdentitySource, Item, KeySpec, Message,
    Scope, TenantSource,
};
use lambda_dedup_batch::{
    CreateOnceDeduplicator, HandlerError, Invalid, Outcome, Plan, Reason, RetryCause,
};
use lambda_http::http::{HeaderMap, Method};
use lambda_http::{Body, Request, RequestExt, Response};

use crate::settings::{Env, Lookup, SettingRule, SettingsError, optional_in, required_in};

pub use lambda_dedup::signature::{
    STRIPE_SIGNATURE_HEADER, WEBHOOK_ID_HEADER, WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER,
};
/// The header on an answer that repeats the first answer to the same event.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// The default largest body: 256 KiB, well inside a DynamoDB item and an SQS message.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;
/// The default tolerance window of signature timestamps (5 minutes).
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;
/// The answer when none was stored (a mark written by another version).
const ACCEPTED: &str = r#"{"status":"accepted"}"#;
/// What a retry is asked to wait, in seconds.
const RETRY_AFTER_SECS: &str = "5";
/// The signed headers whose values cannot hold a comma, so that a comma in one means the header
/// was sent more than once and joined by the front (Function URL, API Gateway payload 2.0).
/// Not the signature headers: commas are part of their format (`v1,<base64>`, `t=…,v1=…`).
const JOINED_WHEN_REPEATED: [&str; 2] = [WEBHOOK_ID_HEADER, WEBHOOK_TIMESTAMP_HEADER];

/// Where the event's identity comes from: what the sender declares and signs, never a hash of
/// the body, never an unsigned header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityFrom {
    /// Standard Webhooks' `webhook-id` header, which its signature covers.
    WebhookId,
    /// A JSON pointer into the body (signed whole in every scheme).
    JsonPointer(String),
}

impl std::str::FromStr for IdentityFrom {
    type Err = String;

    /// `header:webhook-id` or `json:<pointer>`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("header", name)) if name.trim().eq_ignore_ascii_case(WEBHOOK_ID_HEADER) => {
                Ok(Self::WebhookId)
            }
            Some(("header", name)) => Err(format!(
                "the header '{}' is not signed: only {WEBHOOK_ID_HEADER} (Standard Webhooks) is, or use json:</pointer> into the signed body",
                name.trim()
            )),
            Some(("json", pointer)) if pointer.starts_with('/') => {
                Ok(Self::JsonPointer(pointer.to_owned()))
            }
            _ => Err(format!(
                "'{s}' is neither header:{WEBHOOK_ID_HEADER} nor json:</pointer> (a body hash is never the default identity)"
            )),
        }
    }
}

impl IdentityFrom {
    /// The identity a scheme signs when none is configured: Standard Webhooks' `webhook-id`,
    /// Stripe's event id (the body's top-level `id`).
    pub fn default_for(scheme: Scheme) -> Self {
        match scheme {
            Scheme::StandardWebhooks => Self::WebhookId,
            Scheme::Stripe => Self::JsonPointer("/id".into()),
        }
    }

    /// Whether `scheme`'s signature covers this identity (Stripe signs no id header).
    pub fn signed_by(&self, scheme: Scheme) -> bool {
        match self {
            Self::WebhookId => scheme == Scheme::StandardWebhooks,
            Self::JsonPointer(_) => true,
        }
    }
}

/// The receiver's configuration.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The scheme, the secrets held (all accepted, for rotation) and the tolerance window.
    pub verifier: Verifier,
    /// Where the identity comes from (covered by the signature).
    pub identity: IdentityFrom,
    /// The sender (the keys' tenant, S1).
    pub tenant: String,
    /// The largest body accepted.
    pub max_body_bytes: usize,
    /// The inbox table (key `event_key`).
    pub inbox_table: String,
    /// How long an inbox item is kept (its `expires_at`, for the table's TTL).
    pub inbox_retention: Duration,
}

/// The shortest inbox retention accepted: the longest retry horizon of the senders offered
/// (Stripe retries a delivery for up to three days; Standard Webhooks senders for about a day
/// and a half). A retry after its event's inbox item expired would be taken for a new event.
pub const MIN_INBOX_RETENTION: Duration = Duration::from_secs(3 * 86_400);

/// The inbox retention when `WEBHOOK_INBOX_RETENTION_SECONDS` is unset: 30 days.
pub const DEFAULT_INBOX_RETENTION_SECS: u64 = 30 * 86_400;

/// The TTL attribute of an inbox item: when it expires, epoch seconds.
pub const INBOX_EXPIRES_AT: &str = "expires_at";

impl WebhookConfig {
    /// From `WEBHOOK_SCHEME` (default `standard-webhooks`), `WEBHOOK_SECRETS` (comma-separated,
    /// as the scheme writes them), `WEBHOOK_TOLERANCE_SECONDS` (default 300, at most 3600), `WEBHOOK_ID_FROM`
    /// (default the scheme's signed id), `WEBHOOK_TENANT` (the sender), `WEBHOOK_MAX_BODY_BYTES`
    /// (default 262144) and `INBOX_TABLE`; see the module's table. Refuses an unknown scheme, a
    /// secret the scheme cannot read, a tolerance of zero or over an hour, and an identity its
    /// signature does not cover.
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::read(&Env::process())
    }

    /// The configuration in `env` (see [`from_env`](Self::from_env)).
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let scheme = match env.get("WEBHOOK_SCHEME").filter(|v| !v.trim().is_empty()) {
            None => Scheme::default(),
            Some(v) => v
                .parse()
                .map_err(|e: lambda_dedup::signature::UnknownScheme| {
                    SettingsError::refused("WEBHOOK_SCHEME", SettingRule::Malformed(e.to_string()))
                })?,
        };
        let secrets: Vec<String> = required_in(env, "WEBHOOK_SECRETS")?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let tolerance = Duration::from_secs(optional_in(
            env,
            "WEBHOOK_TOLERANCE_SECONDS",
            DEFAULT_TOLERANCE_SECS,
        )?);
        let verifier = Verifier::new(scheme, &secrets, tolerance).map_err(|e| {
            // Each refusal names the variable it is about, and the rule.
            const TOLERANCE: &str = "WEBHOOK_TOLERANCE_SECONDS";
            match e {
                VerifierError::NoTolerance => SettingsError::refused(TOLERANCE, SettingRule::Zero),
                VerifierError::ToleranceTooLong { secs } => SettingsError::refused(
                    TOLERANCE,
                    SettingRule::AboveMaximum {
                        value: secs,
                        max: lambda_dedup::signature::MAX_TOLERANCE.as_secs(),
                        why: "a captured delivery could be replayed for that long",
                    },
                ),
                VerifierError::NoSecret | VerifierError::BadSecret { .. } => {
                    SettingsError::refused("WEBHOOK_SECRETS", SettingRule::Malformed(e.to_string()))
                }
            }
        })?;
        let identity = match env.get("WEBHOOK_ID_FROM").filter(|v| !v.trim().is_empty()) {
            None => IdentityFrom::default_for(scheme),
            Some(v) => v.trim().parse().map_err(|e| {
                SettingsError::refused("WEBHOOK_ID_FROM", SettingRule::Malformed(e))
            })?,
        };
        if !identity.signed_by(scheme) {
            return Err(SettingsError::refused(
                "WEBHOOK_ID_FROM",
                SettingRule::NotSigned {
                    scheme: scheme.name(),
                },
            ));
        }
        let max_body_bytes = optional_in(env, "WEBHOOK_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
        if max_body_bytes == 0 {
            return Err(SettingsError::refused(
                "WEBHOOK_MAX_BODY_BYTES",
                SettingRule::Zero,
            ));
        }
        let inbox_retention = Duration::from_secs(optional_in(
            env,
            "WEBHOOK_INBOX_RETENTION_SECONDS",
            DEFAULT_INBOX_RETENTION_SECS,
        )?);
        if inbox_retention < MIN_INBOX_RETENTION {
            return Err(SettingsError::refused(
                "WEBHOOK_INBOX_RETENTION_SECONDS",
                SettingRule::BelowMinimum {
                    value: inbox_retention.as_secs(),
                    min: MIN_INBOX_RETENTION.as_secs(),
                    why: "shorter than the senders' retry horizon: a retry after its inbox item \
                          expired would be a new event",
                },
            ));
        }
        Ok(Self {
            verifier,
            identity,
            tenant: required_in(env, "WEBHOOK_TENANT")?,
            max_body_bytes,
            inbox_table: required_in(env, "INBOX_TABLE")?,
            inbox_retention,
        })
    }

    /// The key spec: the declared identity within the sender (tenant) and the function's scope,
    /// with the whole body as the fingerprint (the same identity with another body is a
    /// conflict, S11).
    pub fn key_spec(&self, scope: Scope) -> KeySpec {
        let identity = match &self.identity {
            IdentityFrom::WebhookId => IdentitySource::MessageAttribute(WEBHOOK_ID_HEADER.into()),
            IdentityFrom::JsonPointer(p) => IdentitySource::JsonPointer(p.clone()),
        };
        KeySpec::new(scope, identity)
            .tenant(TenantSource::Fixed(self.tenant.clone()))
            .fingerprint(FingerprintSource::WholeBody)
            .max_body_bytes(self.max_body_bytes)
    }
}

/// The receiver: its configuration and the deduplicator (built with [`WebhookConfig::key_spec`]).
#[derive(Debug)]
pub struct Receiver {
    config: WebhookConfig,
    dedup: CreateOnceDeduplicator,
    function: String,
    margin: std::time::Duration,
}

/// One request's answer, before it becomes an HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: String,
    /// The outcome's name, as counted.
    pub outcome: &'static str,
}

/// The outcomes of requests refused before the deduplicator (method, size, signature).
const REFUSED_BEFORE_DEDUP: [&str; 3] = ["MethodNotAllowed", "TooLarge", "Unauthorized"];

impl Answer {
    fn error(status: u16, outcome: &'static str, code: &str, message: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: serde_json::json!({ "error": code, "message": message }).to_string(),
            outcome,
        }
    }

    /// Whether the request reached the deduplicator (counted as `Received` too).
    pub fn received(&self) -> bool {
        !REFUSED_BEFORE_DEDUP.contains(&self.outcome)
    }
}

impl Receiver {
    /// A receiver for `function` (the `Function` of its metrics).
    pub fn new(function: &str, config: WebhookConfig, dedup: CreateOnceDeduplicator) -> Self {
        Self {
            config,
            dedup,
            function: function.to_owned(),
            margin: crate::bound::DEFAULT_MARGIN,
        }
    }

    /// The time kept before the invocation's deadline to answer (default
    /// [`crate::bound::DEFAULT_MARGIN`]; the builder gives the function's `DEDUP_DEADLINE_MARGIN_MS`).
    pub fn deadline_margin(mut self, margin: std::time::Duration) -> Self {
        self.margin = margin;
        self
    }

    /// Answers one request, given its parts: verifies, deduplicates, records in the inbox.
    /// `request_id` names the request in logs; `now` is the clock signatures are judged by.
    pub async fn answer(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: &[u8],
        request_id: &str,
        now: SystemTime,
    ) -> Answer {
        if method != Method::POST {
            return Answer::error(
                405,
                "MethodNotAllowed",
                "method_not_allowed",
                "webhooks are POSTed",
            );
        }
        // The body is already in memory (lambda_http received it whole); its length is checked
        // before anything costs more than a comparison: no HMAC, no parse, no store call.
        if body.len() > self.config.max_body_bytes {
            tracing::warn!(
                request_id,
                bytes = body.len(),
                max = self.config.max_body_bytes,
                "webhook refused: body too large"
            );
            return Answer::error(
                413,
                "TooLarge",
                Reason::BodyTooLarge.code(),
                &format!("the body is over {} bytes", self.config.max_body_bytes),
            );
        }
        // Each signed header once: otherwise which copy was verified and which one names the
        // event would be ambiguous.
        let header = |name: &str| {
            let mut all = headers.get_all(name).iter();
            match (all.next(), all.next()) {
                (Some(_), Some(_)) => Err(SignatureError::RepeatedHeader),
                (one, _) => {
                    let value = one.and_then(|v| v.to_str().ok());
                    // A Function URL (and API Gateway's payload 2.0) hands a header sent more
                    // than once as one header, its values joined with commas, so the count above
                    // sees one copy. An id or a timestamp never holds a comma: one that does was
                    // sent twice.
                    if JOINED_WHEN_REPEATED.contains(&name)
                        && value.is_some_and(|v| v.contains(','))
                    {
                        Err(SignatureError::RepeatedHeader)
                    } else {
                        Ok(value)
                    }
                }
            }
        };
        if let Err(e) = self.config.verifier.verify(&header, body, now) {
            tracing::warn!(request_id, code = e.code(), reason = %e, "webhook refused: signature");
            return Answer::error(401, "Unauthorized", e.code(), "the signature is not valid");
        }
        let message = Message {
            message_id: request_id.to_owned(),
            body: body.to_vec(),
            // The first value of each header: the signed ones were sent once (checked above).
            attributes: headers
                .iter()
                .fold(BTreeMap::new(), |mut all, (name, value)| {
                    if let Ok(value) = value.to_str() {
                        all.entry(name.as_str().to_owned())
                            .or_insert_with(|| AttributeValue::String(value.to_owned()));
                    }
                    all
                }),
            group_id: None,
        };
        let received_at = lambda_dedup::clock::epoch_millis(now);
        let inbox = self.config.inbox_table.as_str();
        // The answer of a new event is the one its plan stores with the mark.
        let mut first_answer = None;
        let outcome = self
            .dedup
            .create_once(&message, |event| {
                let expires_at = lambda_dedup::clock::epoch_secs(now + self.config.inbox_retention);
                let plan = inbox_plan(inbox, event, body, received_at, expires_at)?;
                first_answer.clone_from(&plan.result);
                Ok(plan)
            })
            .await;
        answer_for(outcome, first_answer)
    }

    /// Answers one Lambda HTTP request (Function URL or API Gateway HTTP API), prints its EMF
    /// count and logs its outcome.
    /// Not answered by the invocation's cutoff ([`crate::bound`]), it is answered 503 with
    /// `retry-after` before the deadline; a commit abandoned meanwhile answers the sender's retry
    /// as a replay.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        // Lambda always gives one; a request without (a hand-built one) gets no deadline.
        let context = request.lambda_context_ref().cloned().unwrap_or_default();
        let request_id = context.request_id.clone();
        let body: &[u8] = request.body().as_ref();
        let answer = crate::bound::within(
            crate::bound::cutoff(&context, self.margin),
            self.answer(
                request.method(),
                request.headers(),
                body,
                &request_id,
                SystemTime::now(),
            ),
        )
        .await
        .unwrap_or_else(|| {
            tracing::warn!(request_id, "not recorded before the invocation's deadline");
            answer_for(
                Outcome::retry(RetryCause::Deadline, crate::bound::ABANDONED),
                None,
            )
        });
        let mut counts = vec![("Requests", "Count", 1), (answer.outcome, "Count", 1)];
        if answer.received() {
            counts.push(("Received", "Count", 1));
        }
        println!("{}", crate::emf::line(&self.function, &counts));
        tracing::info!(function = %self.function, request_id, status = answer.status,
            outcome = answer.outcome, "webhook answered");
        response(answer)
    }
}

/// The inbox item, which is the event's mark (create-once mode: one conditional `Put`): the
/// event's key, the sender, the body as sent (the queue's consumer reads the sender's own bytes)
/// and when it was received; the answer stored in it for the sender's retries names the key.
fn inbox_plan(
    table: &str,
    event: &Derived,
    body: &[u8],
    received_at: u64,
    expires_at: u64,
) -> Result<Plan, HandlerError> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(HandlerError::Invalid(Invalid::NotUtf8));
    };
    let key = event.key.as_str();
    let item = Item::new()
        .with("event_key", key)
        .with("tenant", event.tenant.as_str())
        .with("body", text)
        .with("received_at", received_at)
        .with(INBOX_EXPIRES_AT, expires_at);
    let result = serde_json::json!({
        "status": "accepted",
        "inbox_key": key,
        "received_at": received_at,
    });
    Ok(Plan {
        // Create-once: the put is conditional on no inbox item with this key existing, and
        // carries the mark (key, fingerprint, this answer) in the item itself (S5).
        effects: vec![Effect::put(table, item)],
        result: Some(result.to_string()),
    })
}

/// The answer to a deduplicated request.
fn answer_for(outcome: Outcome, first_answer: Option<String>) -> Answer {
    match outcome {
        Outcome::Applied => Answer {
            status: 200,
            headers: Vec::new(),
            body: first_answer.unwrap_or_else(|| ACCEPTED.into()),
            outcome: "Applied",
        },
        Outcome::Duplicate { result, .. } => Answer {
            status: 200,
            headers: vec![(REPLAYED_HEADER, "true".into())],
            body: result.unwrap_or_else(|| ACCEPTED.into()),
            outcome: "Duplicate",
        },
        Outcome::Conflict => Answer::error(
            409,
            "Conflict",
            "conflict",
            "this event id was received with another body",
        ),
        Outcome::Rejected {
            code: Reason::BodyTooLarge,
            ..
        } => Answer::error(
            413,
            "Rejected",
            Reason::BodyTooLarge.code(),
            "the body is too large",
        ),
        Outcome::Rejected { code, reason, .. } | Outcome::Reconciled { code, reason, .. } => {
            Answer::error(400, "Rejected", code.code(), &reason)
        }
        Outcome::Retry { .. } => Answer {
            headers: vec![("retry-after", RETRY_AFTER_SECS.into())],
            ..Answer::error(503, "Retry", "retry", "not recorded; retry later")
        },
    }
}

fn response(answer: Answer) -> Response<Body> {
    let mut builder = Response::builder()
        .status(answer.status)
        .header("content-type", "application/json");
    for (name, value) in &answer.headers {
        builder = builder.header(*name, value);
    }
    builder
        .body(Body::Text(answer.body.clone()))
        .unwrap_or_else(|_| {
            let mut r = Response::new(Body::Text(answer.body));
            *r.status_mut() = lambda_http::http::StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::signature::sign;
    use lambda_dedup::{Retention, Value};
    use lambda_dedup_memory::MemoryStore;
    use lambda_http::http::HeaderValue;
    use std::collections::HashMap;

    /// Standard Webhooks' published test vector (specification and reference libraries).
    const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SW_TS: u64 = 1_614_265_330;
    const SW_BODY: &str = r#"{"test": 2432232314}"#;
    const SW_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    /// Made by Stripe's own Python library (stripe 16.1.0, `generate_signature_header`).
    const ST_SECRET: &str = "whsec_test_secret";
    const ST_BODY: &str = r#"{"id": "evt_test_webhook", "object": "event"}"#;
    const ST_HEADER: &str =
        "t=1614265330,v1=64776382e3b272a50ff9d6821bb74452794757d5dd79f1b091f36be25190d080";

    /// The secret being rotated out (the base64 of `old-secret-0123456789`) and the current one.
    const OLD: &str = "whsec_b2xkLXNlY3JldC0wMTIzNDU2Nzg5";
    const SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";
    const NOW: u64 = 1_800_000_000;

    /// The configuration `main` reads, from these variables (and nothing else).
    fn config(vars: &[(&str, &str)]) -> Result<WebhookConfig, SettingsError> {
        let map: HashMap<String, String> = [("WEBHOOK_TENANT", "acme"), ("INBOX_TABLE", "inbox")]
            .iter()
            .chain(vars)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        WebhookConfig::read(&Env::from_pairs(map))
    }

    fn refusal(vars: &[(&str, &str)]) -> String {
        match config(vars) {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// A receiver built as `main` builds it, from `vars`, on a memory store.
    fn receiver_from(vars: &[(&str, &str)], max_body: &str) -> (Receiver, MemoryStore) {
        let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
        store.create_table("inbox", "event_key");
        let mut vars = vars.to_vec();
        vars.push(("WEBHOOK_MAX_BODY_BYTES", max_body));
        let config = config(&vars).expect("config");
        let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
        let r = Receiver::new(
            "webhook-receiver",
            config,
            CreateOnceDeduplicator::new(spec, store.clone()),
        );
        (r, store)
    }

    fn receiver(max_body_bytes: usize) -> (Receiver, MemoryStore) {
        let secrets = format!("{OLD},{SECRET}");
        receiver_from(
            &[("WEBHOOK_SECRETS", &secrets)],
            &max_body_bytes.to_string(),
        )
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, v) in pairs {
            h.append(*name, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    /// The headers a Standard Webhooks sender sends for `body` with event id `id`, signed at
    /// `ts` under `secret` (our signer reproduces the published vector: `lambda_dedup`'s tests).
    fn signed(id: &str, body: &str, ts: u64, secret: &str) -> HeaderMap {
        let sig = sign(Scheme::StandardWebhooks, secret, id, ts, body.as_bytes()).expect("sign");
        headers(&[
            (WEBHOOK_ID_HEADER, id),
            (WEBHOOK_TIMESTAMP_HEADER, &ts.to_string()),
            (WEBHOOK_SIGNATURE_HEADER, &sig),
        ])
    }

    async fn post(r: &Receiver, headers: &HeaderMap, body: &str, now: u64) -> Answer {
        r.answer(&Method::POST, headers, body.as_bytes(), "req", at(now))
            .await
    }

    fn inbox_len(store: &MemoryStore) -> usize {
        store.items("inbox").len()
    }

    /// The inbox item — the event's mark — carries `expires_at` for the table's TTL, the inbox
    /// retention after the request (so raw bodies are not kept forever); a retention shorter than
    /// the senders' retry horizon is refused at start, naming the variable.
    #[tokio::test]
    async fn the_inbox_item_expires_after_the_inbox_retention_never_before_the_senders_retries() {
        let (r, store) = receiver(1024);
        let body = r#"{"id":"evt-9"}"#;
        let first = post(&r, &signed("evt-9", body, NOW, SECRET), body, NOW).await;
        assert_eq!(first.status, 200, "{first:?}");
        let item = &store.items("inbox")[0];
        let expected = NOW + DEFAULT_INBOX_RETENTION_SECS;
        assert_eq!(
            item.0.get(INBOX_EXPIRES_AT),
            Some(&Value::N(expected.to_string())),
            "{item:?}"
        );
        let secrets = ("WEBHOOK_SECRETS", SECRET);
        let week = config(&[secrets, ("WEBHOOK_INBOX_RETENTION_SECONDS", "604800")]);
        assert_eq!(
            week.expect("a week").inbox_retention,
            Duration::from_secs(604_800)
        );
        let day = config(&[secrets, ("WEBHOOK_INBOX_RETENTION_SECONDS", "86400")]);
        assert_eq!(
            day.map(|_| ()),
            Err(SettingsError::refused(
                "WEBHOOK_INBOX_RETENTION_SECONDS",
                SettingRule::BelowMinimum {
                    value: 86_400,
                    min: MIN_INBOX_RETENTION.as_secs(),
                    why: "shorter than the senders' retry horizon: a retry after its inbox item \
                          expired would be a new event",
                }
            ))
        );
    }

    /// Valid, replayed, re-signed, stale, forged, oversized and conflicting deliveries each get
    /// their documented answer, and the inbox holds the event once.
    #[tokio::test]
    async fn each_delivery_gets_its_documented_answer_and_the_inbox_holds_each_event_once() {
        let (r, store) = receiver(1024);
        let body = r#"{"id":"evt-1","amount":10}"#;
        let first = post(&r, &signed("evt-1", body, NOW, SECRET), body, NOW).await;
        assert_eq!((first.status, first.outcome), (200, "Applied"), "{first:?}");
        assert!(first.headers.is_empty());

        // The sender's retry, byte for byte: the first answer again, marked as a replay.
        let replay = post(&r, &signed("evt-1", body, NOW, SECRET), body, NOW + 10).await;
        assert_eq!((replay.status, replay.outcome), (200, "Duplicate"));
        assert_eq!(replay.body, first.body, "the stored answer");
        assert_eq!(replay.headers, vec![(REPLAYED_HEADER, "true".to_owned())]);

        // A later retry signs again with a new timestamp, under the secret being rotated out.
        let resigned = post(&r, &signed("evt-1", body, NOW + 120, OLD), body, NOW + 120).await;
        assert_eq!(
            (resigned.status, resigned.body.as_str()),
            (200, first.body.as_str())
        );

        // A captured request replayed after the window.
        let stale = post(&r, &signed("evt-2", body, NOW, SECRET), body, NOW + 301).await;
        assert_eq!((stale.status, stale.outcome), (401, "Unauthorized"));
        assert!(stale.body.contains("stale_signature"));
        // Counted: refusals before the deduplicator are not `Received`; the rest are.
        assert!(!stale.received() && first.received() && replay.received());

        // A forger without the secret; and a valid signature over another body.
        let forger = "whsec_Z3Vlc3NlZC1zZWNyZXQtMDAwMDAw";
        let forged = post(&r, &signed("evt-3", body, NOW, forger), body, NOW).await;
        assert_eq!(forged.status, 401);
        let altered = post(
            &r,
            &signed("evt-1", body, NOW, SECRET),
            r#"{"id":"evt-1","amount":99}"#,
            NOW,
        )
        .await;
        assert_eq!((altered.status, altered.outcome), (401, "Unauthorized"));

        // The same id, another body, properly signed: a conflict, never the first answer.
        let other = r#"{"id":"evt-1","amount":99}"#;
        let conflict = post(&r, &signed("evt-1", other, NOW, SECRET), other, NOW).await;
        assert_eq!((conflict.status, conflict.outcome), (409, "Conflict"));
        assert!(!conflict.body.contains("inbox_key"));

        // Too large, whatever its signature.
        let big = format!(r#"{{"id":"evt-4","pad":"{}"}}"#, "x".repeat(1024));
        let large = post(&r, &signed("evt-4", &big, NOW, SECRET), &big, NOW).await;
        assert_eq!((large.status, large.outcome), (413, "TooLarge"));

        assert_eq!(inbox_len(&store), 1, "one event in the inbox");
        let item = &store.items("inbox")[0];
        assert_eq!(item.0.get("body"), Some(&Value::S(body.into())), "as sent");
        assert_eq!(item.0.get("tenant"), Some(&Value::S("acme".into())));
    }

    /// The replay attack the signature is there to stop: a delivery captured inside the window
    /// and sent again under another `webhook-id` (or with a second `webhook-id` after the signed
    /// one) is refused, and the inbox gains nothing.
    #[tokio::test]
    async fn a_delivery_replayed_under_another_id_is_refused() {
        let (r, store) = receiver(1024);
        let body = r#"{"amount":10}"#;
        let captured = signed("evt-1", body, NOW, SECRET);
        assert_eq!(post(&r, &captured, body, NOW).await.status, 200);

        let mut renamed = captured.clone();
        renamed.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("evt-1-again"));
        let a = post(&r, &renamed, body, NOW + 5).await;
        assert_eq!((a.status, a.outcome), (401, "Unauthorized"), "{a:?}");
        assert!(a.body.contains("bad_signature"), "{}", a.body);

        let mut doubled = captured.clone();
        doubled.append(WEBHOOK_ID_HEADER, HeaderValue::from_static("evt-1-again"));
        let a = post(&r, &doubled, body, NOW + 5).await;
        assert_eq!((a.status, a.outcome), (401, "Unauthorized"), "{a:?}");
        assert!(a.body.contains("repeated_header"), "{}", a.body);

        assert_eq!(inbox_len(&store), 1, "no second event");
    }

    /// A Function URL request (API Gateway payload 2.0) as Lambda hands it to `main`, with these
    /// headers (a header sent more than once arrives once, its values joined with commas) and
    /// this body.
    fn function_url_request(headers: &[(&str, &str)], body: &str) -> Request {
        let headers: serde_json::Map<String, serde_json::Value> = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
            .collect();
        let event = serde_json::json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/",
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "accountId": "anonymous",
                "apiId": "receiver",
                "domainName": "receiver.lambda-url.eu-west-1.on.aws",
                "domainPrefix": "receiver",
                "http": {
                    "method": "POST",
                    "path": "/",
                    "protocol": "HTTP/1.1",
                    "sourceIp": "192.0.2.1",
                    "userAgent": "sender"
                },
                "requestId": "req-joined",
                "routeKey": "$default",
                "stage": "$default",
                "time": "03/Dec/2026:08:00:00 +0000",
                "timeEpoch": 1_796_284_800_000_u64
            },
            "body": body,
            "isBase64Encoded": false
        });
        lambda_http::request::from_str(&event.to_string()).expect("a Function URL request")
    }

    async fn status_and_body(r: &Receiver, request: Request) -> (u16, String) {
        let response = r.handle(request).await;
        let status = response.status().as_u16();
        let body = match response.body() {
            Body::Text(t) => t.clone(),
            other => panic!("a JSON text answer: {other:?}"),
        };
        (status, body)
    }

    /// Behind a Function URL, a `webhook-id` or `webhook-timestamp` sent twice reaches the
    /// receiver as one header whose values are joined with a comma, so counting copies cannot
    /// see the repetition. Neither an id nor a timestamp holds a comma: one that does is refused
    /// as a repeated header, even when the signature was made over the joined text, and nothing
    /// is stored.
    #[tokio::test]
    async fn a_webhook_id_or_timestamp_joined_with_a_comma_by_a_function_url_is_refused() {
        let (r, store) = receiver(1024);
        let body = r#"{"amount":10}"#;
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let ts = now.to_string();

        let joined_id = "evt-1,evt-1-again";
        let sig = sign(
            Scheme::StandardWebhooks,
            SECRET,
            joined_id,
            now,
            body.as_bytes(),
        )
        .expect("sign");
        let request = function_url_request(
            &[
                (WEBHOOK_ID_HEADER, joined_id),
                (WEBHOOK_TIMESTAMP_HEADER, &ts),
                (WEBHOOK_SIGNATURE_HEADER, &sig),
            ],
            body,
        );
        assert_eq!(
            request.headers().get_all(WEBHOOK_ID_HEADER).iter().count(),
            1,
            "lambda_http hands the joined values as one header"
        );
        let (status, answer) = status_and_body(&r, request).await;
        assert_eq!(status, 401, "{answer}");
        assert!(answer.contains("repeated_header"), "{answer}");

        let joined_ts = format!("{now},{now}");
        let sig = sign(
            Scheme::StandardWebhooks,
            SECRET,
            "evt-2",
            now,
            body.as_bytes(),
        )
        .expect("sign");
        let request = function_url_request(
            &[
                (WEBHOOK_ID_HEADER, "evt-2"),
                (WEBHOOK_TIMESTAMP_HEADER, &joined_ts),
                (WEBHOOK_SIGNATURE_HEADER, &sig),
            ],
            body,
        );
        let (status, answer) = status_and_body(&r, request).await;
        assert_eq!(status, 401, "{answer}");
        assert!(answer.contains("repeated_header"), "{answer}");

        // The same delivery with each header once is accepted: only the comma was refused.
        let sig = sign(
            Scheme::StandardWebhooks,
            SECRET,
            "evt-2",
            now,
            body.as_bytes(),
        )
        .expect("sign");
        let request = function_url_request(
            &[
                (WEBHOOK_ID_HEADER, "evt-2"),
                (WEBHOOK_TIMESTAMP_HEADER, &ts),
                (WEBHOOK_SIGNATURE_HEADER, &sig),
            ],
            body,
        );
        let (status, answer) = status_and_body(&r, request).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(inbox_len(&store), 1, "only the delivery sent once");
    }

    /// An unsigned request is refused before any store call; requests without an identity, or
    /// not POSTed, get their own answers and write nothing.
    #[tokio::test]
    async fn nothing_is_stored_for_refused_requests() {
        let (r, store) = receiver(1024);
        let body = r#"{"id":"evt-1"}"#;
        let down = {
            let config = r.config.clone();
            let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
            Receiver::new(
                "webhook-receiver",
                config,
                CreateOnceDeduplicator::new(spec, store.unreachable()),
            )
        };
        let mut unsigned = signed("evt-1", body, NOW, SECRET);
        unsigned.remove(WEBHOOK_SIGNATURE_HEADER);
        let a = post(&down, &unsigned, body, NOW).await;
        assert_eq!(
            (a.status, a.outcome),
            (401, "Unauthorized"),
            "no store call made"
        );
        let get = down
            .answer(
                &Method::GET,
                &signed("evt-1", body, NOW, SECRET),
                body.as_bytes(),
                "req",
                at(NOW),
            )
            .await;
        assert_eq!(get.status, 405);
        // The store is down: a signed request is asked to come back, never acknowledged.
        let a = post(&down, &signed("evt-1", body, NOW, SECRET), body, NOW).await;
        assert_eq!((a.status, a.outcome), (503, "Retry"));
        assert_eq!(a.headers, vec![("retry-after", "5".to_owned())]);

        // No webhook-id: nothing to verify the signature over.
        let mut anonymous = signed("evt-1", body, NOW, SECRET);
        anonymous.remove(WEBHOOK_ID_HEADER);
        let a = post(&r, &anonymous, body, NOW).await;
        assert_eq!((a.status, a.outcome), (401, "Unauthorized"));
        assert!(a.body.contains("missing_id"), "{}", a.body);
        let latin1 = {
            let sig = sign(Scheme::StandardWebhooks, SECRET, "evt-9", NOW, b"caf\xe9").expect("s");
            headers(&[
                (WEBHOOK_ID_HEADER, "evt-9"),
                (WEBHOOK_TIMESTAMP_HEADER, &NOW.to_string()),
                (WEBHOOK_SIGNATURE_HEADER, &sig),
            ])
        };
        let a = r
            .answer(&Method::POST, &latin1, b"caf\xe9", "req", at(NOW))
            .await;
        assert_eq!((a.status, a.outcome), (400, "Rejected"), "{a:?}");
        assert_eq!(inbox_len(&store), 0);
    }

    /// The body limit is the first check after the method: an oversized body is answered 413
    /// whatever its signature (none at all here) and with the store down, so no signature was
    /// computed over it and no store call made; nothing is stored.
    #[tokio::test]
    async fn an_oversized_body_is_refused_before_its_signature_or_the_store_is_reached() {
        let (r, store) = receiver(64);
        let down = {
            let config = r.config.clone();
            let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
            Receiver::new(
                "webhook-receiver",
                config,
                CreateOnceDeduplicator::new(spec, store.unreachable()),
            )
        };
        let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(64));
        let a = post(&down, &HeaderMap::new(), &big, NOW).await;
        assert_eq!((a.status, a.outcome), (413, "TooLarge"), "{a:?}");
        assert!(!a.received(), "refused before the deduplicator");
        assert_eq!(inbox_len(&store), 0);
    }

    /// Standard Webhooks' published vector, through the configuration `main` reads: accepted
    /// once, then a duplicate; refused under another id.
    #[tokio::test]
    async fn the_standard_webhooks_vector_is_accepted_through_mains_wiring() {
        let (r, store) = receiver_from(&[("WEBHOOK_SECRETS", SW_SECRET)], "1024");
        let h = headers(&[
            (WEBHOOK_ID_HEADER, SW_ID),
            (WEBHOOK_TIMESTAMP_HEADER, "1614265330"),
            (WEBHOOK_SIGNATURE_HEADER, SW_SIGNATURE),
        ]);
        let a = post(&r, &h, SW_BODY, SW_TS + 60).await;
        assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
        let a = post(&r, &h, SW_BODY, SW_TS + 61).await;
        assert_eq!((a.status, a.outcome), (200, "Duplicate"));
        let mut other = h.clone();
        other.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("msg_other"));
        assert_eq!(post(&r, &other, SW_BODY, SW_TS).await.status, 401);
        assert_eq!(inbox_len(&store), 1);
    }

    /// `WEBHOOK_SCHEME=stripe`: the header Stripe's library makes is accepted, the event is the
    /// signed body's `id`, and a `webhook-id` header (unsigned there) names nothing: the same
    /// delivery under another one is the same event. A body without an `id` is rejected.
    #[tokio::test]
    async fn a_stripe_delivery_is_accepted_and_its_identity_is_the_signed_event_id() {
        let (r, store) = receiver_from(
            &[("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)],
            "1024",
        );
        let h = headers(&[("stripe-signature", ST_HEADER)]);
        let a = post(&r, &h, ST_BODY, SW_TS).await;
        assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
        let mut renamed = h.clone();
        renamed.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("another-id"));
        let a = post(&r, &renamed, ST_BODY, SW_TS + 1).await;
        assert_eq!((a.status, a.outcome), (200, "Duplicate"));
        // Another event id in the body is another signed content: refused.
        let a = post(&r, &h, r#"{"id": "evt_other", "object": "event"}"#, SW_TS).await;
        assert_eq!(a.status, 401);
        // A Standard Webhooks signature is no Stripe signature.
        let a = post(&r, &signed("evt-1", ST_BODY, SW_TS, SECRET), ST_BODY, SW_TS).await;
        assert_eq!((a.status, a.outcome), (401, "Unauthorized"));
        assert!(a.body.contains("missing_signature"), "{}", a.body);

        let no_id = r#"{"object":"event"}"#;
        let header = sign(Scheme::Stripe, ST_SECRET, "", NOW, no_id.as_bytes()).expect("sign");
        let a = post(&r, &headers(&[("stripe-signature", &header)]), no_id, NOW).await;
        assert_eq!((a.status, a.outcome), (400, "Rejected"), "{a:?}");
        assert!(a.body.contains("identity_missing"), "{}", a.body);
        assert_eq!(inbox_len(&store), 1);
    }

    /// `WEBHOOK_SCHEME`: the default, both names, and an unknown one refused at start.
    #[test]
    fn webhook_scheme_is_read_and_an_unknown_one_refused() {
        let sw = |vars: &[(&str, &str)]| config(vars).map(|c| c.verifier.scheme());
        assert_eq!(
            sw(&[("WEBHOOK_SECRETS", SW_SECRET)]),
            Ok(Scheme::StandardWebhooks)
        );
        assert_eq!(
            sw(&[
                ("WEBHOOK_SCHEME", "standard-webhooks"),
                ("WEBHOOK_SECRETS", SW_SECRET)
            ]),
            Ok(Scheme::StandardWebhooks)
        );
        assert_eq!(
            sw(&[("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)]),
            Ok(Scheme::Stripe)
        );
        for unknown in ["github", "v1", "hmac"] {
            let e = refusal(&[("WEBHOOK_SCHEME", unknown), ("WEBHOOK_SECRETS", SW_SECRET)]);
            assert!(
                e.contains("WEBHOOK_SCHEME") && e.contains(unknown) && e.contains("stripe"),
                "{e}"
            );
        }
    }

    /// `WEBHOOK_SECRETS` as each scheme writes them; the former raw secrets, secrets that do not
    /// decode and short keys are refused at start, without quoting the secret.
    #[test]
    fn webhook_secrets_are_read_as_the_scheme_writes_them() {
        let keys = config(&[("WEBHOOK_SECRETS", &format!(" {SW_SECRET} , {OLD} "))])
            .map(|c| format!("{:?}", c.verifier));
        assert!(
            keys.as_ref().is_ok_and(|d| d.contains("secrets: 2")),
            "{keys:?}"
        );
        assert!(keys.is_ok_and(|d| !d.contains("MfKQ")), "never in Debug");
        let e = refusal(&[("WEBHOOK_SECRETS", "local-webhook-secret-2026-11")]);
        assert!(e.contains("WEBHOOK_SECRETS") && e.contains("whsec_"), "{e}");
        assert!(!e.contains("local-webhook-secret"), "{e}");
        let e = refusal(&[("WEBHOOK_SECRETS", "whsec_***not-base64***")]);
        assert!(e.contains("base64"), "{e}");
        let e = refusal(&[("WEBHOOK_SECRETS", "whsec_c2hvcnQ=")]);
        assert!(e.contains("5 bytes"), "{e}");
        let e = refusal(&[("WEBHOOK_SECRETS", " , ")]);
        assert!(e.contains("no secret"), "{e}");
        // Stripe's are not base64: `whsec_test_secret` is its own key.
        assert!(config(&[("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)]).is_ok());
        let e = refusal(&[
            ("WEBHOOK_SCHEME", "stripe"),
            ("WEBHOOK_SECRETS", "sk_test_123"),
        ]);
        assert!(e.contains("whsec_") && !e.contains("sk_test"), "{e}");
    }

    /// `WEBHOOK_TOLERANCE_SECONDS` is bounded: a window longer than an hour would let a captured
    /// delivery be replayed for that long, so it is refused at start, naming the variable and
    /// the bound; so is a zero window (it would refuse everything). An hour is accepted.
    #[test]
    fn webhook_tolerance_seconds_over_an_hour_is_refused_at_start() {
        let sw = ("WEBHOOK_SECRETS", SW_SECRET);
        let tolerance = |v: &str| {
            config(&[sw, ("WEBHOOK_TOLERANCE_SECONDS", v)]).map(|c| c.verifier.tolerance())
        };
        assert_eq!(tolerance("3600"), Ok(Duration::from_secs(3600)));
        assert_eq!(
            config(&[sw]).map(|c| c.verifier.tolerance()),
            Ok(Duration::from_secs(DEFAULT_TOLERANCE_SECS))
        );
        for too_long in ["3601", "86400", "18446744073709551615"] {
            let e = refusal(&[sw, ("WEBHOOK_TOLERANCE_SECONDS", too_long)]);
            assert!(
                e.contains("WEBHOOK_TOLERANCE_SECONDS") && e.contains("3600"),
                "{too_long}: {e}"
            );
        }
        let e = refusal(&[sw, ("WEBHOOK_TOLERANCE_SECONDS", "0")]);
        assert!(e.contains("WEBHOOK_TOLERANCE_SECONDS"), "{e}");
        // Typed: the variable and the rule, the bound with it.
        assert_eq!(
            tolerance("0"),
            Err(SettingsError::refused(
                "WEBHOOK_TOLERANCE_SECONDS",
                SettingRule::Zero
            ))
        );
        assert!(matches!(
            tolerance("7200"),
            Err(SettingsError::Refused {
                var: "WEBHOOK_TOLERANCE_SECONDS",
                rule: SettingRule::AboveMaximum {
                    value: 7200,
                    max: 3600,
                    ..
                },
            })
        ));
    }

    /// `WEBHOOK_ID_FROM`: only an identity the signature covers.
    #[test]
    fn webhook_id_from_takes_only_a_signed_identity() {
        let id = |vars: &[(&str, &str)]| config(vars).map(|c| c.identity);
        let sw = ("WEBHOOK_SECRETS", SW_SECRET);
        assert_eq!(id(&[sw]), Ok(IdentityFrom::WebhookId));
        assert_eq!(
            id(&[sw, ("WEBHOOK_ID_FROM", "header:Webhook-Id")]),
            Ok(IdentityFrom::WebhookId)
        );
        assert_eq!(
            id(&[sw, ("WEBHOOK_ID_FROM", "json:/data/id")]),
            Ok(IdentityFrom::JsonPointer("/data/id".into()))
        );
        let e = refusal(&[sw, ("WEBHOOK_ID_FROM", "header:x-event-id")]);
        assert!(e.contains("not signed"), "{e}");
        assert!(refusal(&[sw, ("WEBHOOK_ID_FROM", "sha256")]).contains("WEBHOOK_ID_FROM"));
        assert!(refusal(&[sw, ("WEBHOOK_ID_FROM", "json:data")]).contains("WEBHOOK_ID_FROM"));
        let st = [("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)];
        assert_eq!(id(&st), Ok(IdentityFrom::JsonPointer("/id".into())));
        assert_eq!(
            id(&[st[0], st[1], ("WEBHOOK_ID_FROM", "header:webhook-id")]),
            Err(SettingsError::refused(
                "WEBHOOK_ID_FROM",
                SettingRule::NotSigned { scheme: "stripe" }
            ))
        );
        let e = refusal(&[st[0], st[1], ("WEBHOOK_ID_FROM", "header:webhook-id")]);
        assert!(
            e.contains("WEBHOOK_ID_FROM") && e.contains("must be signed"),
            "{e}"
        );
    }
}
