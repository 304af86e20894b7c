//! Webhooks as a source (feature `webhook`): an HTTP request becomes a [`Message`], is verified,
//! deduplicated, and recorded in an inbox table in the same transaction as its mark; the answer
//! says which of the documented outcomes it had.
//!
//! # What each request gets (exactly one outcome, counted in EMF)
//! | request | status | outcome |
//! | --- | --- | --- |
//! | not `POST` | 405 | `MethodNotAllowed` |
//! | body over `WEBHOOK_MAX_BODY_BYTES` | 413 | `TooLarge` |
//! | signature missing, forged, or timestamp outside the window | 401 | `Unauthorized` |
//! | new event | 200, the answer stored with the mark | `Applied` |
//! | same event again (a sender's retry) | 200, the first answer, `idempotent-replayed: true` | `Duplicate` |
//! | same identity, another body | 409 | `Conflict` |
//! | no identity, a body that is not UTF-8 (or not JSON where the identity is a pointer) | 400, a code | `Rejected` |
//! | the store failed or timed out | 503, `retry-after` | `Retry` |
//!
//! Every request counts `Requests` and its outcome. Those that passed the checks and reached the
//! deduplicator also count `Received`, so for them the account of the SQS functions holds
//! (received = applied + duplicate + retry + conflict + rejected, S14) and
//! `cargo xtask audit` checks it against the marks; and requests = received + method not allowed
//! + too large + unauthorized.
//!
//! The size is checked first (without reading the body into anything), then the signature,
//! before anything is parsed or stored: an unsigned request costs no DynamoDB call.
//!
//! Nothing answered 2xx is lost: the inbox item is written with the mark in one transaction,
//! before the answer. A stream consumer (the `inbox` module, feature `inbox`) hands inbox items on to a queue.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use lambda_dedup::signature::Verifier;
use lambda_dedup::{
    AttributeValue, Derived, Effect, FingerprintSource, IdentitySource, Item, KeySpec, Message,
    Scope, TenantSource,
};
use lambda_dedup_batch::{Deduplicator, HandlerError, Outcome, Plan};
use lambda_http::http::{HeaderMap, Method};
use lambda_http::{Body, Request, RequestExt, Response};

use crate::settings::SettingsError;

/// The header naming the event's identity by default (as Standard Webhooks does).
pub const DEFAULT_ID_HEADER: &str = "webhook-id";
/// The header carrying the signature's timestamp (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The header carrying the signature(s), `v1=<hex>`, separated by commas or spaces.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
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

/// Where the event's identity comes from: what the sender declares, never a hash of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityFrom {
    /// A request header (lower case).
    Header(String),
    /// A JSON pointer into the body.
    JsonPointer(String),
}

impl std::str::FromStr for IdentityFrom {
    type Err = String;

    /// `header:<name>` or `json:<pointer>`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("header", name)) if !name.trim().is_empty() => {
                Ok(Self::Header(name.trim().to_ascii_lowercase()))
            }
            Some(("json", pointer)) if pointer.starts_with('/') => {
                Ok(Self::JsonPointer(pointer.to_owned()))
            }
            _ => Err(format!(
                "'{s}' is neither header:<name> nor json:</pointer> (a body hash is never the default identity)"
            )),
        }
    }
}

/// The receiver's configuration.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The secrets held (all accepted, for rotation) and the tolerance window.
    pub verifier: Verifier,
    /// Where the identity comes from.
    pub identity: IdentityFrom,
    /// The sender (the keys' tenant, S1).
    pub tenant: String,
    /// The largest body accepted.
    pub max_body_bytes: usize,
    /// The inbox table (key `event_key`).
    pub inbox_table: String,
}

impl WebhookConfig {
    /// From `WEBHOOK_SECRETS` (comma-separated; each at least 16 bytes), `WEBHOOK_TOLERANCE_SECONDS`
    /// (default 300), `WEBHOOK_ID_FROM` (default `header:webhook-id`), `WEBHOOK_TENANT` (the
    /// sender), `WEBHOOK_MAX_BODY_BYTES` (default 262144) and `INBOX_TABLE`.
    pub fn from_env() -> Result<Self, SettingsError> {
        let secrets: Vec<Vec<u8>> = crate::required("WEBHOOK_SECRETS")?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let tolerance = Duration::from_secs(crate::optional(
            "WEBHOOK_TOLERANCE_SECONDS",
            DEFAULT_TOLERANCE_SECS,
        )?);
        let verifier = Verifier::new(secrets, tolerance)
            .map_err(|e| SettingsError::Refused(format!("WEBHOOK_SECRETS: {e}")))?;
        let identity =
            crate::optional::<String>("WEBHOOK_ID_FROM", format!("header:{DEFAULT_ID_HEADER}"))?
                .parse()
                .map_err(|e| SettingsError::Refused(format!("WEBHOOK_ID_FROM: {e}")))?;
        let max_body_bytes = crate::optional("WEBHOOK_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
        if max_body_bytes == 0 {
            return Err(SettingsError::Refused(
                "WEBHOOK_MAX_BODY_BYTES must be positive".into(),
            ));
        }
        Ok(Self {
            verifier,
            identity,
            tenant: crate::required("WEBHOOK_TENANT")?,
            max_body_bytes,
            inbox_table: crate::required("INBOX_TABLE")?,
        })
    }

    /// The key spec: the declared identity within the sender (tenant) and the function's scope,
    /// with the whole body as the fingerprint (the same identity with another body is a
    /// conflict, S11).
    pub fn key_spec(&self, scope: Scope) -> KeySpec {
        let identity = match &self.identity {
            IdentityFrom::Header(name) => IdentitySource::MessageAttribute(name.clone()),
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
    dedup: Deduplicator,
    function: String,
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
    pub fn new(function: &str, config: WebhookConfig, dedup: Deduplicator) -> Self {
        Self {
            config,
            dedup,
            function: function.to_owned(),
        }
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
                "body_too_large",
                &format!("the body is over {} bytes", self.config.max_body_bytes),
            );
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Err(e) = self.config.verifier.verify(
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            body,
            now,
        ) {
            tracing::warn!(request_id, code = e.code(), reason = %e, "webhook refused: signature");
            return Answer::error(401, "Unauthorized", e.code(), "the signature is not valid");
        }
        let message = Message {
            message_id: request_id.to_owned(),
            body: body.to_vec(),
            attributes: headers
                .iter()
                .filter_map(|(name, value)| {
                    Some((
                        name.as_str().to_owned(),
                        AttributeValue::String(value.to_str().ok()?.to_owned()),
                    ))
                })
                .collect::<BTreeMap<_, _>>(),
            group_id: None,
        };
        let received_at = lambda_dedup::clock::epoch_millis(now);
        let inbox = self.config.inbox_table.as_str();
        // The answer of a new event is the one its plan stores with the mark.
        let mut first_answer = None;
        let outcome = self
            .dedup
            .transactional(&message, |event| {
                let plan = inbox_plan(inbox, event, body, received_at)?;
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
        let context = request.lambda_context();
        let request_id = context.request_id.clone();
        let body: &[u8] = request.body().as_ref();
        let answer = crate::bound::within(
            crate::bound::cutoff(&context),
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
                Outcome::Retry {
                    reason: crate::bound::ABANDONED.into(),
                },
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

/// The inbox item, written with the mark: the event's key, the sender, the body as sent (the
/// queue's consumer reads the sender's own bytes) and when it was received; the answer stored
/// with the mark names the key.
fn inbox_plan(
    table: &str,
    event: &Derived,
    body: &[u8],
    received_at: u64,
) -> Result<Plan, HandlerError> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(HandlerError::Invalid("body not UTF-8".into()));
    };
    let key = event.key.as_str();
    let item = Item::new()
        .with("event_key", key)
        .with("tenant", event.tenant.as_str())
        .with("body", text)
        .with("received_at", received_at);
    let result = serde_json::json!({
        "status": "accepted",
        "inbox_key": key,
        "received_at": received_at,
    });
    Ok(Plan {
        effects: vec![Effect::put(table, item).condition("attribute_not_exists(event_key)")],
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
        Outcome::Rejected { code, .. } if code == "body_too_large" => {
            Answer::error(413, "Rejected", code, "the body is too large")
        }
        Outcome::Rejected { code, reason } => Answer::error(400, "Rejected", code, &reason),
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

    const SECRET: &[u8] = b"whsec-test-0123456789";
    const NOW: u64 = 1_800_000_000;

    fn receiver(max_body_bytes: usize) -> (Receiver, MemoryStore) {
        let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
        store.create_table("inbox", "event_key");
        (receiver_on(store.clone(), max_body_bytes), store)
    }

    fn receiver_on(store: MemoryStore, max_body_bytes: usize) -> Receiver {
        let config = WebhookConfig {
            verifier: Verifier::new(
                vec![b"old-secret-0123456789".to_vec(), SECRET.to_vec()],
                Duration::from_secs(300),
            )
            .expect("verifier"),
            identity: IdentityFrom::Header(DEFAULT_ID_HEADER.into()),
            tenant: "acme".into(),
            max_body_bytes,
            inbox_table: "inbox".into(),
        };
        let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
        Receiver::new("webhook-receiver", config, Deduplicator::new(spec, store))
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// The headers a sender sends for `body` with event id `id`, signed at `ts` under `secret`.
    fn signed(id: &str, body: &str, ts: u64, secret: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        let mut set = |name: &'static str, v: String| {
            h.insert(name, HeaderValue::from_str(&v).expect("header"));
        };
        set(DEFAULT_ID_HEADER, id.into());
        set(TIMESTAMP_HEADER, ts.to_string());
        set(SIGNATURE_HEADER, sign(secret, ts, body.as_bytes()));
        h
    }

    async fn post(r: &Receiver, headers: &HeaderMap, body: &str, now: u64) -> Answer {
        r.answer(&Method::POST, headers, body.as_bytes(), "req", at(now))
            .await
    }

    fn inbox_len(store: &MemoryStore) -> usize {
        store.items("inbox").len()
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

        // A later retry signs again with a new timestamp: still the same event.
        let resigned = post(
            &r,
            &signed("evt-1", body, NOW + 120, SECRET),
            body,
            NOW + 120,
        )
        .await;
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
        let forged = post(
            &r,
            &signed("evt-3", body, NOW, b"guessed-secret-000000"),
            body,
            NOW,
        )
        .await;
        assert_eq!(forged.status, 401);
        let mut swapped = signed("evt-1", body, NOW, SECRET);
        swapped.insert(DEFAULT_ID_HEADER, HeaderValue::from_static("evt-1"));
        let altered = post(&r, &swapped, r#"{"id":"evt-1","amount":99}"#, NOW).await;
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

    /// An unsigned request is refused before any store call; requests without an identity, or
    /// not POSTed, get their own answers and write nothing.
    #[tokio::test]
    async fn nothing_is_stored_for_refused_requests() {
        let (_, store) = receiver(1024);
        let r = receiver_on(store.unreachable(), 1024);
        let body = r#"{"id":"evt-1"}"#;
        let mut unsigned = signed("evt-1", body, NOW, SECRET);
        unsigned.remove(SIGNATURE_HEADER);
        let a = post(&r, &unsigned, body, NOW).await;
        assert_eq!(
            (a.status, a.outcome),
            (401, "Unauthorized"),
            "no store call made"
        );
        let get = r
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
        let down = post(&r, &signed("evt-1", body, NOW, SECRET), body, NOW).await;
        assert_eq!((down.status, down.outcome), (503, "Retry"));
        assert_eq!(down.headers, vec![("retry-after", "5".to_owned())]);

        let (r, store) = receiver(1024);
        let mut anonymous = signed("evt-1", body, NOW, SECRET);
        anonymous.remove(DEFAULT_ID_HEADER);
        let a = post(&r, &anonymous, body, NOW).await;
        assert_eq!((a.status, a.outcome), (400, "Rejected"));
        assert!(a.body.contains("identity_missing"), "{}", a.body);
        let mut latin1 = signed("evt-9", "", NOW, SECRET);
        latin1.insert(
            SIGNATURE_HEADER,
            HeaderValue::from_str(&sign(SECRET, NOW, b"caf\xe9")).expect("header"),
        );
        let a = r
            .answer(&Method::POST, &latin1, b"caf\xe9", "req", at(NOW))
            .await;
        assert_eq!((a.status, a.outcome), (400, "Rejected"), "{a:?}");
        assert_eq!(inbox_len(&store), 0);
    }

    #[test]
    fn identity_settings_are_parsed_and_a_body_hash_is_refused() {
        assert_eq!(
            "header:Webhook-Id".parse(),
            Ok(IdentityFrom::Header("webhook-id".into()))
        );
        assert_eq!(
            "json:/data/id".parse(),
            Ok(IdentityFrom::JsonPointer("/data/id".into()))
        );
        assert!("sha256".parse::<IdentityFrom>().is_err());
        assert!("json:data".parse::<IdentityFrom>().is_err());
    }
}
