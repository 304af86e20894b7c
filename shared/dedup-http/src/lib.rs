//! Calling an external API so that retries cannot double its effect (S6, S7).
//!
//! No transaction spans DynamoDB and a payments or collections API. What carries "once" across
//! that gap is the `Idempotency-Key` header (IETF draft `draft-ietf-httpapi-idempotency-key-header`,
//! Stripe's convention): the caller sends the key derived from the event
//! (`DedupKey::idempotency_key`), the same on every retry and in every process, and the provider
//! applies the first request and replays its answer to the others.
//!
//! # Layout
//! - [`IdempotentClient`]: one POST with the key; the answer classified:
//!   - 2xx: done (a replay by the provider is done too);
//!   - 409 (same key in flight), 429, 5xx, timeouts, broken connections: [`HandlerError::Transient`], retry later with the same key;
//!   - 422 (same key, different payload) and other 4xx: [`HandlerError::Invalid`], dead-letter.

use std::time::Duration;

use dedup_batch::HandlerError;

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

/// A client for one external API.
#[derive(Debug, Clone)]
pub struct IdempotentClient {
    http: reqwest::Client,
    base_url: String,
}

impl IdempotentClient {
    /// A client for the API at `base_url`; every call gives up after `timeout` (and is then a
    /// retry: the provider may or may not have applied it, and the same key makes that safe).
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
        })
    }

    /// POSTs `body` as JSON to `path` with `Idempotency-Key: idempotency_key`.
    pub async fn post(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> Result<Receipt, HandlerError> {
        let url = format!("{}/{}", self.base_url, path.trim_start_matches('/'));
        let resp = self
            .http
            .post(&url)
            .header("Idempotency-Key", idempotency_key)
            .json(body)
            .send()
            .await
            .map_err(|e| {
                let what = if e.is_timeout() {
                    "timed out"
                } else {
                    "failed"
                };
                HandlerError::Transient(format!("POST {path} {what}: {e}"))
            })?;
        let status = resp.status().as_u16();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let text = resp.text().await.map_err(|e| {
            HandlerError::Transient(format!("POST {path}: reading the answer failed: {e}"))
        })?;
        classify(path, status).map(|()| Receipt {
            status,
            body: text,
            replayed,
        })
    }
}

/// What a status means for the caller. Response bodies are not quoted: they may echo personal
/// data.
fn classify(path: &str, status: u16) -> Result<(), HandlerError> {
    match status {
        200..=299 => Ok(()),
        409 => Err(HandlerError::Transient(format!(
            "POST {path}: 409, a request with this key is still in flight at the provider"
        ))),
        422 => Err(HandlerError::Invalid(format!(
            "POST {path}: 422, the provider holds this idempotency key for a different payload"
        ))),
        429 | 500..=599 => Err(HandlerError::Transient(format!("POST {path}: {status}"))),
        _ => Err(HandlerError::Invalid(format!(
            "POST {path}: {status}, refused by the provider"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_done_retry_or_invalid() {
        assert!(classify("p", 201).is_ok());
        assert!(classify("p", 200).is_ok());
        for s in [409, 429, 500, 502, 503] {
            assert!(
                matches!(classify("p", s), Err(HandlerError::Transient(_))),
                "{s}"
            );
        }
        for s in [400, 401, 404, 422] {
            assert!(
                matches!(classify("p", s), Err(HandlerError::Invalid(_))),
                "{s}"
            );
        }
    }
}
