//! What each outcome of a request answers ([`Answer`]: status, headers, body, the outcome
//! counted) and the HTTP response it becomes.

use lambda_dedup_engine::{Outcome, Reason};
use lambda_http::{Body, Response};

/// The header on an answer that repeats the first answer to the same event.
pub(crate) const REPLAYED_HEADER: &str = "idempotent-replayed";
/// The answer when none was stored (a mark written by another version).
const ACCEPTED: &str = r#"{"status":"accepted"}"#;
/// What a retry is asked to wait, in seconds.
const RETRY_AFTER_SECS: &str = "5";

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
    pub(super) fn error(status: u16, outcome: &'static str, code: &str, message: &str) -> Self {
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

/// The answer to a deduplicated request.
pub(super) fn answer_for(outcome: Outcome, first_answer: Option<String>) -> Answer {
    #[cfg(feature = "simulation-planted")]
    let outcome = match outcome {
        Outcome::Conflict
            if lambda_dedup::planted::Planted::WebhookConflictAcknowledged.is_on() =>
        {
            Outcome::Duplicate {
                first_seen_at: std::time::SystemTime::UNIX_EPOCH,
                result: None,
            }
        }
        other => other,
    };
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
        // Latest-wins mode is not a webhook's flow; were it, an older event is accepted, unapplied.
        Outcome::Superseded => Answer {
            status: 200,
            headers: Vec::new(),
            body: ACCEPTED.into(),
            outcome: "Superseded",
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

pub(super) fn response(answer: Answer) -> Response<Body> {
    let headers = answer
        .headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()));
    http_response(answer.status, headers, answer.body.clone())
}

/// The HTTP response of `status`, `headers` and the `body` (JSON unless the headers name their
/// own `content-type`); a header HTTP cannot carry: the body alone, 500. The answers of every
/// HTTP door become responses here.
pub(crate) fn http_response<'a>(
    status: u16,
    headers: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    body: String,
) -> Response<Body> {
    let mut builder = Response::builder().status(status);
    if !headers.clone().any(|(name, _)| name == "content-type") {
        builder = builder.header("content-type", "application/json");
    }
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(Body::Text(body.clone())).unwrap_or_else(|_| {
        let mut r = Response::new(Body::Text(body));
        *r.status_mut() = lambda_http::http::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}
