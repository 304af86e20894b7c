//! HTTP surface: the provider API under `/v1` and the test controls under
//! `/_admin`.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::{CONTENT_TYPE, HeaderName};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::state::{self, Claim, Lookup, StoredResponse};
use crate::{Fault, FaultKind, Provider};

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

pub(crate) fn router(provider: Provider) -> Router {
    Router::new()
        .route("/v1/{resource}", post(create))
        .route("/_admin/faults", post(add_fault).delete(clear_faults))
        .route("/_admin/rejections", post(add_rejection))
        .route("/_admin/key-retention", post(set_key_retention))
        .route("/_admin/clock", post(advance_clock))
        .route("/_admin/effects", get(effects))
        .route("/_admin/reset", post(reset))
        // A wrong method is "not matched" too: callers only need to know
        // the route does not exist for them.
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .with_state(provider)
}

async fn create(
    State(provider): State<Provider>,
    Path(resource): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    provider.lock().count_request();
    let key = match idempotency_key(&headers) {
        Ok(key) => key,
        Err(bad) => return error(StatusCode::BAD_REQUEST, bad.to_string()),
    };
    // Parsed by hand rather than with `Json<Value>` so a bad body gets the
    // same `{"error": ...}` shape as every other refusal, whatever its
    // Content-Type.
    let request: Value = match json_body(&body, "request body is not valid JSON") {
        Ok(request) => request,
        Err(bad) => return error(StatusCode::BAD_REQUEST, bad.to_string()),
    };

    // Faults model the network and the provider's health, which do not care
    // whether the key is known, so they are drawn before the lookup. Only
    // well-formed requests draw one: a malformed request never reaches the
    // provider's business logic and should not use up a test's fault.
    let fault = provider.lock().take_fault(&resource);
    let kind = fault.map(|hit| hit.kind);
    let delay = fault.map_or(Duration::ZERO, |hit| Duration::from_millis(hit.delay_ms));
    if kind == Some(FaultKind::Error5xx) {
        tracing::debug!(%key, %resource, "injected 503");
        return after(delay, error(StatusCode::SERVICE_UNAVAILABLE, "injected")).await;
    }
    let request = state::Request {
        resource,
        body: request,
    };
    match admit(&provider, key, request) {
        Admission::Claimed(claim) => apply(claim, kind, delay).await,
        Admission::Answered(answer) => after(delay, answer).await,
    }
}

/// What a well-formed request's key gets it.
enum Admission {
    /// The key, held for this request to apply.
    Claimed(Claim),
    /// The answer, with nothing applied: a key refused for good, a replay, another payload
    /// under the key, or the key in flight.
    Answered(Response),
}

fn admit(provider: &Provider, key: String, request: state::Request) -> Admission {
    let resource = &request.resource;
    // A key refused for good: nothing applied, nothing stored, every time.
    let refusal = provider.lock().refusal(&key);
    if let Some(status) = refusal {
        tracing::debug!(%key, %resource, status, "key rejected");
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
        return Admission::Answered(error(status, "request rejected"));
    }
    // Bound first so the guard is dropped before the claim takes the lock again.
    let lookup = provider.lock().lookup(&key, &request);
    match lookup {
        Lookup::Claimed(claim) => {
            Admission::Claimed(Claim::new(provider.clone(), key, claim, request))
        }
        Lookup::Replay(stored) => Admission::Answered(stored_response(stored, true)),
        Lookup::Mismatch => Admission::Answered(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency key reused with a different payload",
        )),
        Lookup::InProgress => Admission::Answered(error(
            StatusCode::CONFLICT,
            "a request with this idempotency key is in progress",
        )),
    }
}

/// Applies a claimed request, slowly or with its answer held back if a fault says so.
async fn apply(claim: Claim, kind: Option<FaultKind>, delay: Duration) -> Response {
    let stored = match kind {
        Some(FaultKind::Slow) => {
            // In its own task because hyper drops the handler when the client
            // hangs up, and a real provider finishes the work anyway; it also
            // keeps "did the effect happen?" independent of client timeouts.
            let work = tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                claim.apply()
            });
            match work.await {
                Ok(stored) => stored,
                // The claim's drop already freed the key during the unwind.
                Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
            }
        }
        Some(FaultKind::ApplyThenTimeout) => {
            let stored = claim.apply();
            tokio::time::sleep(delay).await;
            stored
        }
        // No fault (an `Error5xx` was answered before the claim).
        _ => claim.apply(),
    };
    match stored {
        Some(stored) => stored_response(stored, false),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "provider was reset while the request was in flight",
        ),
    }
}

/// A request body that is not the JSON its route takes: what a 400 says.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
struct BadBody {
    /// What is wrong (`invalid fault`).
    what: &'static str,
    /// Why, as the JSON parser says.
    source: serde_json::Error,
}

/// `body` as JSON of type `T`, or what a 400 says: `what` is wrong, and why.
fn json_body<T: serde::de::DeserializeOwned>(
    body: &Bytes,
    what: &'static str,
) -> Result<T, BadBody> {
    serde_json::from_slice(body).map_err(|source| BadBody { what, source })
}

async fn add_fault(State(provider): State<Provider>, body: Bytes) -> Response {
    let fault: Fault = match json_body(&body, "invalid fault") {
        Ok(fault) => fault,
        Err(bad) => return error(StatusCode::BAD_REQUEST, bad.to_string()),
    };
    if fault.count == 0 {
        // Rejected rather than ignored: a test asking for zero faults has a bug.
        return error(StatusCode::BAD_REQUEST, "fault count must be at least 1");
    }
    let pending = {
        let mut state = provider.lock();
        state.push_fault(fault);
        state.pending_faults()
    };
    (
        StatusCode::CREATED,
        Json(json!({ "pending_faults": pending })),
    )
        .into_response()
}

/// `{"key": "...", "status": 422}`: see [`Provider::reject_key`]; only 4xx.
async fn add_rejection(State(provider): State<Provider>, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Rejection {
        key: String,
        status: u16,
    }
    let rejection: Rejection = match json_body(&body, "invalid rejection") {
        Ok(rejection) => rejection,
        Err(bad) => return error(StatusCode::BAD_REQUEST, bad.to_string()),
    };
    if !(400..=499).contains(&rejection.status) {
        return error(StatusCode::BAD_REQUEST, "a rejection is a 4xx status");
    }
    provider.reject_key(&rejection.key, rejection.status);
    StatusCode::NO_CONTENT.into_response()
}

/// `{"retention_ms": n}` (or `null`: remember for ever): see
/// [`Provider::set_key_retention`].
async fn set_key_retention(State(provider): State<Provider>, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct KeyRetention {
        retention_ms: Option<u64>,
    }
    match json_body::<KeyRetention>(&body, "invalid key retention") {
        Ok(k) => {
            provider.set_key_retention(k.retention_ms.map(Duration::from_millis));
            StatusCode::NO_CONTENT.into_response()
        }
        Err(bad) => error(StatusCode::BAD_REQUEST, bad.to_string()),
    }
}

/// `{"advance_ms": n}`: see [`Provider::advance`].
async fn advance_clock(State(provider): State<Provider>, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Advance {
        advance_ms: u64,
    }
    match json_body::<Advance>(&body, "invalid advance") {
        Ok(a) => {
            provider.advance(Duration::from_millis(a.advance_ms));
            StatusCode::NO_CONTENT.into_response()
        }
        Err(bad) => error(StatusCode::BAD_REQUEST, bad.to_string()),
    }
}

async fn clear_faults(State(provider): State<Provider>) -> StatusCode {
    provider.clear_faults();
    StatusCode::NO_CONTENT
}

async fn effects(State(provider): State<Provider>) -> Json<Value> {
    let state = provider.lock();
    let effects: serde_json::Map<String, Value> = state
        .effects()
        .iter()
        .map(|(key, effect)| {
            let entry = json!({ "resource": effect.resource, "count": effect.count });
            (key.clone(), entry)
        })
        .collect();
    Json(json!({
        "total_effects": state.total_effects(),
        "requests": state.requests(),
        "effects": effects,
    }))
}

async fn reset(State(provider): State<Provider>) -> StatusCode {
    provider.reset();
    StatusCode::NO_CONTENT
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

async fn after(delay: Duration, response: Response) -> Response {
    tokio::time::sleep(delay).await;
    response
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

fn stored_response(stored: StoredResponse, replayed: bool) -> Response {
    let mut response = (
        stored.status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        stored.body,
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// The key as the client meant it. The IETF draft sends it as a structured
/// field string (`Idempotency-Key: "abc"`) while Stripe-style clients send it
/// bare (`Idempotency-Key: abc`); both name the key `abc`.
fn idempotency_key(headers: &HeaderMap) -> Result<String, &'static str> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Err("missing Idempotency-Key header");
    };
    let raw = value
        .to_str()
        .map_err(|_| "Idempotency-Key header must be visible ASCII")?
        .trim();
    let key = match raw.strip_prefix('"') {
        Some(quoted) => {
            unquote(quoted).ok_or("Idempotency-Key header is a malformed quoted string")?
        }
        None => raw.to_owned(),
    };
    if key.is_empty() {
        return Err("empty Idempotency-Key header");
    }
    Ok(key)
}

/// Decodes the rest of an RFC 8941 string after its opening quote.
fn unquote(rest: &str) -> Option<String> {
    let mut key = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                escaped @ ('"' | '\\') => key.push(escaped),
                _ => return None,
            },
            '"' => return chars.next().is_none().then_some(key),
            other => key.push(other),
        }
    }
    None
}
