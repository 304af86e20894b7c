//! A call to an external provider that did not end in a 2xx answer: the typed [`CallError`]
//! and its [`Permanence`] (S15), which the work's refusal carries when its call fails
//! ([`Transient::Provider`](crate::Transient::Provider) or
//! [`Invalid::Provider`](crate::Invalid::Provider), see [`HandlerError`](crate::HandlerError)). The HTTP client that
//! makes the call and classifies its answer into these is `lambda_dedup_http`, which re-exports
//! them; they live here so that a refusal carries the call's failure typed.

/// The largest answer body read (1 MiB): a receipt is a small JSON document, and a longer
/// answer is not read into memory (see `lambda_dedup_http`).
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Whether a failed call may succeed if it is made again with the same key (S15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permanence {
    /// It may: the provider is busy, down, slow, or still working on the same key.
    Transient,
    /// It may, once the configuration is fixed: the answer says the client is pointed at the
    /// wrong place (a 3xx, 404, 405, a host name that does not resolve, TLS that fails) or holds
    /// the wrong credentials (401, 403), not that the message is wrong. Retried as
    /// [`Transient`](Self::Transient) is, so a bad deployment does not dead-letter every
    /// message one by one as invalid; named apart so it can be counted and alarmed on.
    Misconfigured,
    /// It will not: the provider refused the request as it is.
    Permanent,
}

/// Why a call did not end in a 2xx answer. Response bodies and transport error texts are not
/// kept: they may echo personal data (S3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The provider answered with this non-2xx status (a 3xx too: redirects are not followed).
    Status(u16),
    /// No (complete) answer in time: the provider may or may not have applied the request, and
    /// the same key makes a retry safe.
    Timeout,
    /// The connection failed or broke before a complete answer.
    Network,
    /// The provider's host name did not resolve.
    Dns,
    /// The TLS handshake with the provider failed: a certificate not trusted or not for the
    /// host, or no TLS at that address.
    Tls,
    /// A 2xx answer whose body is over [`MAX_ANSWER_BYTES`]; the rest was not read.
    AnswerTooLarge,
}

impl CallError {
    /// The one classification of failures (S15): see `lambda_dedup_http`'s documentation.
    pub fn permanence(self) -> Permanence {
        match self {
            CallError::Timeout | CallError::Network | CallError::AnswerTooLarge => {
                Permanence::Transient
            }
            CallError::Dns | CallError::Tls => Permanence::Misconfigured,
            // Pointed at the wrong place (a redirect, not found, a method the URL does not
            // take) or with the wrong credentials.
            CallError::Status(300..=399 | 401 | 403 | 404 | 405) => Permanence::Misconfigured,
            // 408 Request Timeout, 409 (same key in flight), 425 Too Early, 429 Too Many Requests.
            CallError::Status(408 | 409 | 425 | 429 | 500..=599) => Permanence::Transient,
            CallError::Status(_) => Permanence::Permanent,
        }
    }

    /// Whether no retry can change the answer.
    pub fn is_permanent(self) -> bool {
        self.permanence() == Permanence::Permanent
    }

    /// Whether the answer says the configuration is wrong rather than the message.
    pub fn is_misconfigured(self) -> bool {
        self.permanence() == Permanence::Misconfigured
    }

    /// A stable code naming the failure, for items, logs and metrics: `provider_rejected_422`
    /// for a permanent answer; `provider_misconfigured_404`, `provider_misconfigured_dns`,
    /// `provider_misconfigured_tls` for a configuration to fix; `provider_503`,
    /// `provider_timeout`, `provider_unreachable`, `provider_answer_too_large` for transient
    /// ones.
    pub fn code(self) -> String {
        match self {
            CallError::Status(s) => match self.permanence() {
                Permanence::Permanent => format!("provider_rejected_{s}"),
                Permanence::Misconfigured => format!("provider_misconfigured_{s}"),
                Permanence::Transient => format!("provider_{s}"),
            },
            CallError::Timeout => "provider_timeout".into(),
            CallError::Network => "provider_unreachable".into(),
            CallError::Dns => "provider_misconfigured_dns".into(),
            CallError::Tls => "provider_misconfigured_tls".into(),
            CallError::AnswerTooLarge => "provider_answer_too_large".into(),
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
            CallError::Status(s @ 300..=399) => write!(
                f,
                "{s}, a redirect (not followed: the provider's base URL is to be fixed)"
            ),
            CallError::Status(s @ (401 | 403)) => {
                write!(f, "{s}, the provider refused the client's credentials")
            }
            CallError::Status(s @ (404 | 405)) => write!(
                f,
                "{s}, no such endpoint at the provider (its base URL or path is wrong)"
            ),
            CallError::Status(s) if self.is_permanent() => {
                write!(f, "{s}, refused by the provider")
            }
            CallError::Status(s) => write!(f, "{s}"),
            CallError::Timeout => f.write_str("timed out"),
            CallError::Network => f.write_str("failed (connection)"),
            CallError::Dns => f.write_str("the provider's host name did not resolve"),
            CallError::Tls => f.write_str(
                "TLS with the provider failed (its certificate, or no TLS at that address)",
            ),
            CallError::AnswerTooLarge => {
                write!(f, "the answer is over {MAX_ANSWER_BYTES} bytes")
            }
        }
    }
}
