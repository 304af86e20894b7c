//! The Lambda event as the front sends it, read before `lambda_http` makes it a request: what
//! its conversion drops, kept.
//!
//! - A REST API (payload 1.0) and an ALB with multi-value headers send every value of a
//!   repeated header in `multiValueHeaders` and the last one in `headers`; `lambda_http` merges
//!   them with `headers` replacing, so two `Idempotency-Key` headers arrive as one. Here a header
//!   in `multiValueHeaders` keeps all its values, and the door refuses the repeat (400
//!   `idempotency_key_repeated`, `caller_ambiguous`).
//! - A REST API's authorizer is `requestContext.authorizer` itself: a Lambda authorizer's
//!   `principalId` and context beside it, a Cognito user pool authorizer's `claims`. The typed
//!   event reads only HTTP APIs' `lambda` and `jwt` members, and dropped both. Here they are
//!   read into those members, so the caller is the REST authorizer's too.

use lambda_http::request::LambdaRequest;
use serde_json::{Map, Value};

/// Why an event is not an HTTP request this door answers.
#[derive(Debug, thiserror::Error)]
#[error("the event is not an API Gateway, ALB or Function URL request: {0}")]
pub(crate) struct NotHttp(#[from] serde_json::Error);

/// The event `raw` as `lambda_http`'s request, its repeated headers and its REST authorizer
/// kept.
pub(crate) fn read(mut raw: Value) -> Result<LambdaRequest, NotHttp> {
    rest_authorizer(&mut raw);
    // `LambdaRequest` reads a raw JSON text (it tries each front's shape on it).
    let mut request: LambdaRequest = serde_json::from_str(&raw.to_string())?;
    match &mut request {
        LambdaRequest::ApiGatewayV1(r) => {
            for name in r.multi_value_headers.keys() {
                r.headers.remove(name);
            }
        }
        LambdaRequest::Alb(r) => {
            for name in r.multi_value_headers.keys() {
                r.headers.remove(name);
            }
        }
        _ => {}
    }
    Ok(request)
}

/// A REST API's authorizer (payload 1.0: no `version` 2.0, no `lambda`, `jwt` nor `iam`
/// member) read into the members the typed event keeps: its `principalId` and context into
/// `lambda`, its Cognito `claims` (the text ones) into `jwt.claims`.
fn rest_authorizer(raw: &mut Value) {
    if raw.get("version").and_then(Value::as_str) == Some("2.0") {
        return;
    }
    let Some(authorizer) = raw
        .get_mut("requestContext")
        .and_then(|c| c.get_mut("authorizer"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if ["lambda", "jwt", "iam"]
        .iter()
        .any(|m| authorizer.contains_key(*m))
    {
        return;
    }
    let claims: Option<Map<String, Value>> = authorizer
        .get("claims")
        .and_then(Value::as_object)
        .map(|claims| {
            claims
                .iter()
                .filter(|(_, v)| v.is_string())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
    let context: Map<String, Value> = authorizer
        .iter()
        .filter(|(k, v)| {
            k.as_str() != "claims" && (v.is_string() || v.is_number() || v.is_boolean())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if context.contains_key("principalId") {
        authorizer.insert("lambda".into(), Value::Object(context));
    }
    if let Some(claims) = claims {
        authorizer.insert("jwt".into(), serde_json::json!({ "claims": claims }));
    }
}
