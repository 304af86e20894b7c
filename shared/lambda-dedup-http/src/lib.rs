//! Calling an external API so that retries cannot double its effect (S6, S7).
//!
//! No transaction spans DynamoDB and a payments or collections API. What carries "once" across
//! that gap is the `Idempotency-Key` header (IETF draft `draft-ietf-httpapi-idempotency-key-header`,
//! Stripe's convention): the caller sends the key derived from the event
//! (`DedupKey::idempotency_key`), the same on every retry and in every process, and the provider
//! applies the first request and replays its answer to the others.
//!
//! # Layout
//! - [`IdempotentClient`]: one POST with the key; the answer classified once, here (S15):
//!   - 2xx: done (a replay by the provider is done too);
//!   - 408, 409 (same key in flight), 425, 429, 5xx, timeouts, broken connections:
//!     [`Permanence::Transient`], retry later with the same key;
//!   - 422 (same key, different payload) and every other status (400, 401, 403, 404, …):
//!     [`Permanence::Permanent`], no retry can change it: dead-letter or park.
//! - [`CallError`]: the typed failure of [`IdempotentClient::call`], with its [`Permanence`] and a
//!   reason code that quotes nothing from the answer; it converts to a [`HandlerError`]
//!   (`Transient` or `Invalid`), so a batch flow's handler returns it with `?`.

#![warn(missing_docs)]

use std::time::Duration;

use lambda_dedup_batch::HandlerError;

/// The provider's answer to a successful call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// HTTP status (2xx).
    pub status: u16,
    /// The response body, as the provider sent it.
    pub body: String,
    /// Whether the provider says it replayed an earlier answer (`Idempotent-Replayed: true`).
    pub replayed: bool,
}

/// The HTTP client could not be built (its TLS backend failed to initialise).
#[derive(Debug, thiserror::Error)]
#[error("building the HTTP client: {0}")]
pub struct BuildError(#[source] reqwest::Error);

/// A client for one external API.
#[derive(Debug, Clone)]
pub struct IdempotentClient {
    http: reqwest::Client,
    base_url: String,
}

impl IdempotentClient {
    /// A client for the API at `base_url`; every call gives up after `timeout` (and is then a
    /// retry: the provider may or may not have applied it, and the same key makes that safe).
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, BuildError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(BuildError)?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
        })
    }

    /// POSTs `body` as JSON to `path` with `Idempotency-Key: idempotency_key`; a failure as a
    /// typed [`CallError`]. A handler of the batch flows returns it with `?` (as a
    /// [`HandlerError`]: [`Permanence::Transient`] ones retry, [`Permanence::Permanent`] ones are
    /// `Invalid`, dead-lettered); a caller that acts on its [`Permanence`] itself matches it (the
    /// intent relay parks permanent refusals).
    pub async fn call(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> Result<Receipt, CallError> {
        let url = format!("{}/{}", self.base_url, path.trim_start_matches('/'));
        let resp = self
            .http
            .post(&url)
            .header("Idempotency-Key", idempotency_key)
            .json(body)
            .send()
            .await
            .map_err(|e| {
                // The transport error is logged here; the failure carries only its kind.
                tracing::warn!(path, error = %e, "POST failed");
                transport(&e)
            })?;
        let status = resp.status().as_u16();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let text = resp.text().await.map_err(|e| {
            tracing::warn!(path, error = %e, "reading the answer failed");
            transport(&e)
        })?;
        if !(200..=299).contains(&status) {
            return Err(CallError::Status(status));
        }
        Ok(Receipt {
            status,
            body: text,
            replayed,
        })
    }
}

/// Whether a failed call may succeed if it is made again with the same key (S15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permanence {
    /// It may: the provider is busy, down, slow, or still working on the same key.
    Transient,
    /// It will not: the provider refused the request as it is.
    Permanent,
}

/// Why a call did not end in a 2xx answer. Response bodies and transport error texts are not
/// kept: they may echo personal data (S3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The provider answered with this non-2xx status.
    Status(u16),
    /// No (complete) answer in time: the provider may or may not have applied the request, and
    /// the same key makes a retry safe.
    Timeout,
    /// The connection failed or broke before a complete answer.
    Network,
}

impl CallError {
    /// The one classification of failures (S15): see the crate documentation.
    pub fn permanence(self) -> Permanence {
        match self {
            CallError::Timeout | CallError::Network => Permanence::Transient,
            // 408 Request Timeout, 409 (same key in flight), 425 Too Early, 429 Too Many Requests.
            CallError::Status(408 | 409 | 425 | 429 | 500..=599) => Permanence::Transient,
            CallError::Status(_) => Permanence::Permanent,
        }
    }

    /// Whether no retry can change the answer.
    pub fn is_permanent(self) -> bool {
        self.permanence() == Permanence::Permanent
    }

    /// A stable code naming the failure, for items, logs and metrics: `provider_rejected_422`
    /// for a permanent answer, `provider_503`, `provider_timeout`, `provider_unreachable` for
    /// transient ones.
    pub fn code(self) -> String {
        match self {
            CallError::Status(s) if self.is_permanent() => format!("provider_rejected_{s}"),
            CallError::Status(s) => format!("provider_{s}"),
            CallError::Timeout => "provider_timeout".into(),
            CallError::Network => "provider_unreachable".into(),
        }
    }
}

/// The failure as the batch flows take it: transient ones retry, permanent ones are invalid.
impl From<CallError> for HandlerError {
    fn from(e: CallError) -> Self {
        let reason = format!("provider call failed: {e}");
        match e.permanence() {
            Permanence::Transient => HandlerError::Transient(reason),
            Permanence::Permanent => HandlerError::Invalid(reason),
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status(409) => {
                f.write_str("409, a request with this key is still in flight at the provider")
            }
            CallError::Status(422) => {
                f.write_str("422, the provider holds this idempotency key for a different payload")
            }
            CallError::Status(s) if self.is_permanent() => {
                write!(f, "{s}, refused by the provider")
            }
            CallError::Status(s) => write!(f, "{s}"),
            CallError::Timeout => f.write_str("timed out"),
            CallError::Network => f.write_str("failed (connection)"),
        }
    }
}

/// The kind of a transport failure: a timeout, or anything else on the network.
fn transport(e: &reqwest::Error) -> CallError {
    if e.is_timeout() {
        CallError::Timeout
    } else {
        CallError::Network
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s15_statuses_map_to_transient_or_permanent_once() {
        for s in [408, 409, 425, 429, 500, 502, 503, 504] {
            let e = CallError::Status(s);
            assert_eq!(e.permanence(), Permanence::Transient, "{s}");
            assert!(
                matches!(HandlerError::from(e), HandlerError::Transient(_)),
                "{s}"
            );
            assert_eq!(e.code(), format!("provider_{s}"));
        }
        for s in [400, 401, 403, 404, 410, 413, 422] {
            let e = CallError::Status(s);
            assert!(e.is_permanent(), "{s}");
            assert!(
                matches!(HandlerError::from(e), HandlerError::Invalid(_)),
                "{s}"
            );
            assert_eq!(e.code(), format!("provider_rejected_{s}"));
        }
        for e in [CallError::Timeout, CallError::Network] {
            assert_eq!(e.permanence(), Permanence::Transient);
        }
        assert_eq!(CallError::Timeout.code(), "provider_timeout");
        assert_eq!(CallError::Network.code(), "provider_unreachable");
    }
}
