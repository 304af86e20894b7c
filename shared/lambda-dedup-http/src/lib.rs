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
//!   - 408, 409 (same key in flight), 425, 429, 5xx, timeouts, broken connections, an answer
//!     over [`MAX_ANSWER_BYTES`]: [`Permanence::Transient`], retry later with the same key;
//!   - a 3xx (redirects are not followed), 401, 403, 404, 405, a TLS failure, a host name that
//!     does not resolve: [`Permanence::Misconfigured`]. These say the client is pointed at the
//!     wrong place or holds the wrong credentials, not that the message is wrong: retried like a
//!     transient fault (the message is redelivered, never dead-lettered as invalid), logged at
//!     error level with the cause named as configuration, each with its own code
//!     (`provider_misconfigured_404`, `provider_misconfigured_tls`…) to count and alarm on;
//!   - 422 (same key, different payload) and every other status (400, 410, 413, …):
//!     [`Permanence::Permanent`], no retry can change it: dead-letter or park.
//! - [`CallError`]: the typed failure of [`IdempotentClient::call`], with its [`Permanence`] and a
//!   reason code that quotes nothing from the answer (defined in `lambda_dedup_engine::provider`
//!   and re-exported here); it converts to a [`HandlerError`] that keeps it, typed
//!   ([`Transient::Provider`] or [`Invalid::Provider`]), so a batch flow's handler returns it
//!   with `?`.
//!
//! [`HandlerError`]: lambda_dedup_engine::HandlerError
//! [`Transient::Provider`]: lambda_dedup_engine::Transient::Provider
//! [`Invalid::Provider`]: lambda_dedup_engine::Invalid::Provider
//!
//! # What the client refuses to do
//! - **Plain HTTP across a network.** The base URL must be `https://`; `http://` only for a
//!   loopback host (`127.0.0.1` and the rest of 127.0.0.0/8, `::1`, `localhost`: tests, a local
//!   stack). Anything else is refused when the client is built ([`BuildError::Insecure`]): the
//!   key, the payload and the provider's credentials would otherwise cross the network in
//!   clear.
//! - **Following redirects.** A redirect would carry the `Idempotency-Key` and the payload to
//!   wherever the `Location` points, and a provider whose endpoint moved is a configuration to
//!   fix. A 3xx is the answer, [`Permanence::Misconfigured`].
//! - **Reading an unbounded answer.** A 2xx body is read up to [`MAX_ANSWER_BYTES`] (1 MiB); a
//!   longer one (declared by `content-length`, or found while reading) fails the call with
//!   [`CallError::AnswerTooLarge`] without reading the rest. It is transient: the provider may
//!   have applied the call, and the retry under the same key is safe; a provider that keeps
//!   answering that much ends in the DLQ by the queue's receive count, under its own code
//!   (`provider_answer_too_large`). The body of a non-2xx answer is not read at all: its status
//!   decides.

#![warn(missing_docs)]

use std::net::IpAddr;
use std::time::Duration;

/// The typed failure of a call, its permanence and the answer bound: defined beside the
/// refusals that carry them (`lambda_dedup_engine::provider`), classified here.
pub use lambda_dedup_engine::provider::{CallError, MAX_ANSWER_BYTES, Permanence};

/// The provider's answer to a successful call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// HTTP status (2xx).
    pub status: u16,
    /// The response body, as the provider sent it (at most [`MAX_ANSWER_BYTES`]).
    pub body: String,
    /// Whether the provider says it replayed an earlier answer (`Idempotent-Replayed: true`).
    pub replayed: bool,
}

/// The HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Its TLS backend failed to initialise.
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The base URL is not an absolute URL with a host.
    #[error("the provider's base URL does not parse as an absolute URL with a host")]
    BadUrl,
    /// The base URL is not `https://`, and not `http://` to a loopback host.
    #[error(
        "the provider's base URL must be https:// (http:// only for a loopback host: 127.0.0.1, ::1, localhost); it is {scheme}:// to {host}"
    )]
    Insecure {
        /// The URL's scheme.
        scheme: String,
        /// The URL's host.
        host: String,
    },
}

/// A client for one external API.
#[derive(Debug, Clone)]
pub struct IdempotentClient {
    http: reqwest::Client,
    base_url: String,
}

impl IdempotentClient {
    /// A client for the API at `base_url` (`https://`, or `http://` to a loopback host; anything
    /// else is [`BuildError::Insecure`]); every call gives up after `timeout` (and is then a
    /// retry: the provider may or may not have applied it, and the same key makes that safe).
    /// Redirects are not followed.
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, BuildError> {
        Self::build(base_url, timeout, |b| b)
    }

    /// [`new`](Self::new), with `tune` given the HTTP client's builder last (the tests' own
    /// resolver).
    fn build(
        base_url: &str,
        timeout: Duration,
        tune: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Self, BuildError> {
        let base_url = base_url.trim().trim_end_matches('/');
        check_secure(base_url)?;
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            // A redirect would carry the Idempotency-Key and the payload elsewhere.
            .redirect(reqwest::redirect::Policy::none());
        let http = tune(builder).build().map_err(BuildError::Client)?;
        Ok(Self {
            http,
            base_url: base_url.to_owned(),
        })
    }

    /// POSTs `body` as JSON to `path` with `Idempotency-Key: idempotency_key`; a failure as a
    /// typed [`CallError`]. A handler of the batch flows returns it with `?` (as a
    /// [`HandlerError`](lambda_dedup_engine::HandlerError): [`Permanence::Transient`] and
    /// [`Permanence::Misconfigured`] ones retry, [`Permanence::Permanent`] ones are `Invalid`,
    /// dead-lettered); a caller that acts on its
    /// [`Permanence`] itself matches it (the intent relay parks permanent refusals).
    pub async fn call(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> Result<Receipt, CallError> {
        let out = self.send(path, idempotency_key, body).await;
        if let Err(e) = &out
            && e.is_misconfigured()
        {
            // Every message fails the same way until someone fixes the configuration: said at
            // error level, with a code to alarm on.
            tracing::error!(
                path,
                code = %e.code(),
                cause = "configuration",
                "provider call failed: the provider's URL, credentials or TLS are wrong, not \
                 the message; retried"
            );
        }
        out
    }

    async fn send(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> Result<Receipt, CallError> {
        let url = format!("{}/{}", self.base_url, path.trim_start_matches('/'));
        let mut resp = self
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
        if !(200..=299).contains(&status) {
            // The status decides; the body (which may be large, or echo the request) is not read.
            return Err(CallError::Status(status));
        }
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
        {
            return Err(CallError::AnswerTooLarge);
        }
        // Read chunk by chunk, so a body without a declared length is bounded too.
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| {
            tracing::warn!(path, error = %e, "reading the answer failed");
            transport(&e)
        })? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(CallError::AnswerTooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        Ok(Receipt {
            status,
            body: text,
            replayed,
        })
    }
}

/// `https://`, or `http://` to a loopback host; the host must be there.
fn check_secure(base_url: &str) -> Result<(), BuildError> {
    let url = reqwest::Url::parse(base_url).map_err(|_| BuildError::BadUrl)?;
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or(BuildError::BadUrl)?;
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        scheme => Err(BuildError::Insecure {
            scheme: scheme.to_owned(),
            host: host.to_owned(),
        }),
    }
}

/// The kind of a transport failure, by the error's type (never its text): a timeout, a name
/// that did not resolve, a TLS handshake that failed, or anything else on the network.
fn transport(e: &reqwest::Error) -> CallError {
    if e.is_timeout() {
        CallError::Timeout
    } else if e.is_dns() {
        CallError::Dns
    } else if is_tls(e) {
        CallError::Tls
    } else {
        CallError::Network
    }
}

/// Whether rustls refused the handshake somewhere in `e`'s causes.
fn is_tls(e: &reqwest::Error) -> bool {
    std::error::Error::source(e).is_some_and(has_rustls)
}

/// Whether `e` or one of its causes is a rustls error. An I/O error carries one as its inner
/// error, which its `source` skips (and hyper wraps one I/O error in another), so the inner
/// error of each is searched too.
fn has_rustls(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<rustls::Error>() {
            return true;
        }
        if let Some(inner) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            return has_rustls(inner);
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests_server;

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_engine::{HandlerError, Invalid, Transient, TransientCause};

    #[test]
    fn s15_statuses_map_to_transient_misconfigured_or_permanent_once() {
        for s in [408, 409, 425, 429, 500, 502, 503, 504] {
            let e = CallError::Status(s);
            assert_eq!(e.permanence(), Permanence::Transient, "{s}");
            assert_eq!(
                HandlerError::from(e),
                HandlerError::Transient(Transient::Provider(e)),
                "{s}"
            );
            assert_eq!(e.code(), format!("provider_{s}"));
        }
        for s in [301, 302, 303, 307, 308, 401, 403, 404, 405] {
            let e = CallError::Status(s);
            assert!(e.is_misconfigured() && !e.is_permanent(), "{s}");
            let HandlerError::Transient(transient) = HandlerError::from(e) else {
                panic!("{s}: retried");
            };
            assert_eq!(transient.cause(), TransientCause::ProviderMisconfigured);
            let reason = transient.to_string();
            assert!(
                reason.contains("configuration") && reason.contains(&e.code()),
                "{reason}"
            );
            assert_eq!(e.code(), format!("provider_misconfigured_{s}"));
        }
        for s in [400, 410, 413, 422] {
            let e = CallError::Status(s);
            assert!(e.is_permanent(), "{s}");
            assert_eq!(
                HandlerError::from(e),
                HandlerError::Invalid(Invalid::Provider(e)),
                "{s}"
            );
            assert_eq!(e.code(), format!("provider_rejected_{s}"));
        }
        for e in [
            CallError::Timeout,
            CallError::Network,
            CallError::AnswerTooLarge,
        ] {
            assert_eq!(e.permanence(), Permanence::Transient);
        }
        for e in [CallError::Dns, CallError::Tls] {
            assert_eq!(e.permanence(), Permanence::Misconfigured);
        }
        assert_eq!(CallError::Timeout.code(), "provider_timeout");
        assert_eq!(CallError::Network.code(), "provider_unreachable");
        assert_eq!(CallError::Dns.code(), "provider_misconfigured_dns");
        assert_eq!(CallError::Tls.code(), "provider_misconfigured_tls");
        assert_eq!(
            CallError::AnswerTooLarge.code(),
            "provider_answer_too_large"
        );
    }
}
