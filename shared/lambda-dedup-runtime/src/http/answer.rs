//! What a request is answered ([`Answer`]: status, headers, body, the outcome counted) and the
//! HTTP response it becomes.

use lambda_http::{Body, Response};

use lambda_dedup::{Mark, StoreError};
use lambda_dedup_engine::HandlerError;

use super::key;
use super::reply::Stored;
use crate::webhook::REPLAYED_HEADER;

/// The media type of a refusal's body (RFC 9457).
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";
/// The prefix of a problem's `type`: a name, not a page to fetch (RFC 9457 §3.1.1); the code
/// follows it, and docs/HOSTILE_INPUTS.md describes each.
pub(crate) const PROBLEM_TYPE_PREFIX: &str = "urn:lambda-dedup:problem:";

/// An RFC 9457 problem, as the IETF Idempotency-Key draft's examples write them: `type`,
/// `title`, `status`, `detail`, and the stable `code` as an extension member (also as `error`,
/// and `detail` as `message`, the members of earlier versions, so their clients keep working).
pub(crate) fn problem(status: u16, code: &str, detail: &str) -> serde_json::Value {
    serde_json::json!({
        "type": format!("{PROBLEM_TYPE_PREFIX}{code}"),
        "title": title(status, code),
        "status": status,
        "detail": detail,
        "code": code,
        "error": code,
        "message": detail,
    })
}

/// A problem's short summary: the draft's for its three answers, else by kind.
fn title(status: u16, code: &str) -> &'static str {
    match code {
        "idempotency_key_missing" => "Idempotency-Key is missing",
        "idempotency_key_reused" => "Idempotency-Key is already used",
        "in_flight" => "A request is outstanding for this Idempotency-Key",
        c if c.starts_with("idempotency_key_") => "Idempotency-Key is malformed",
        c if c.starts_with("caller_") => "The caller is not identified",
        _ => match status {
            400 => "Bad Request",
            401 => "Unauthorized",
            409 => "Conflict",
            413 => "Content Too Large",
            422 => "Unprocessable Content",
            503 => "Service Unavailable",
            _ => "Internal Server Error",
        },
    }
}

/// The outcome a request is counted under (S14): one per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// The work ran now and its answer is stored (or, unkeyed, just answered).
    Applied,
    /// The stored answer replayed.
    Duplicate,
    /// Not done; the client retries: 409 in flight, 503, a 5xx of the work.
    Retry,
    /// The key reused with another request: 422.
    Conflict,
    /// Refused: 400, 401, 413, or a 500 with a typed reason (too large to store).
    Rejected,
}

impl Counted {
    /// The metric's name.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Applied => "Applied",
            Self::Duplicate => "Duplicate",
            Self::Retry => "Retry",
            Self::Conflict => "Conflict",
            Self::Rejected => "Rejected",
        }
    }
}

/// One request's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: Vec<(String, String)>,
    /// The body (JSON).
    pub body: String,
    /// How it is counted.
    pub outcome: Counted,
    /// The refusal's stable code, if refused.
    pub code: Option<&'static str>,
}

impl Answer {
    /// A refusal: an RFC 9457 problem (`application/problem+json`) with its stable `code`.
    pub(super) fn error(status: u16, outcome: Counted, code: &'static str, message: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), PROBLEM_JSON.into())],
            body: problem(status, code, message).to_string(),
            outcome,
            code: Some(code),
        }
    }

    /// A stored answer, replayed (with `idempotent-replayed: true`) or first sent.
    pub(super) fn reply(stored: &Stored, replayed: bool) -> Self {
        let mut headers = stored.headers.clone();
        if replayed {
            headers.push((REPLAYED_HEADER.into(), "true".into()));
        }
        Self {
            status: stored.status,
            headers,
            body: stored.body.clone(),
            outcome: if replayed {
                Counted::Duplicate
            } else {
                Counted::Applied
            },
            code: None,
        }
    }

    pub(super) fn counted(mut self, outcome: Counted) -> Self {
        self.outcome = outcome;
        self
    }

    /// The HTTP response (JSON unless the answer names its own `content-type`).
    pub(crate) fn response(self) -> Response<Body> {
        let headers = self
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        crate::webhook::answer::http_response(self.status, headers, self.body.clone())
    }
}

// The door's fixed answers.

pub(super) fn key_refused(e: key::KeyError) -> Answer {
    Answer::error(400, Counted::Rejected, e.code(), &e.to_string())
}

pub(super) fn refused(refusal: &HandlerError) -> Answer {
    match refusal {
        HandlerError::Invalid(invalid) => Answer::error(
            400,
            Counted::Rejected,
            invalid.cause().code(),
            &invalid.to_string(),
        ),
        HandlerError::Transient(transient) => Answer {
            headers: vec![("retry-after".into(), "1".into())],
            ..Answer::error(503, Counted::Retry, transient.cause().code(), "retry later")
        },
    }
}

pub(super) fn replay(mark: &Mark) -> Answer {
    match mark.result.as_deref().and_then(Stored::from_result) {
        Some(stored) => Answer::reply(&stored, true),
        None => Answer::error(
            500,
            Counted::Rejected,
            "stored_answer_unreadable",
            "this Idempotency-Key was used, and its answer cannot be read",
        ),
    }
}

pub(super) fn conflict() -> Answer {
    Answer::error(
        422,
        Counted::Conflict,
        "idempotency_key_reused",
        "this Idempotency-Key was used with another request",
    )
}

pub(super) fn store_failed(e: &StoreError) -> Answer {
    tracing::warn!(error = %e, retryable = e.is_retryable(), "the mark store failed");
    if e.is_retryable() {
        Answer {
            headers: vec![("retry-after".into(), "1".into())],
            ..Answer::error(
                503,
                Counted::Retry,
                "store_unavailable",
                "not recorded; retry later",
            )
        }
    } else {
        Answer::error(
            500,
            Counted::Rejected,
            "store_refused",
            "the store refused the request",
        )
    }
}
