//! An HTTP function's requests sent as Lambda sends them, and its answers read as the front
//! reads them (feature `http`).

use lambda_dedup_runtime::HttpService;
use lambda_dedup_runtime::lambda_http::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use lambda_dedup_runtime::lambda_http::{self, LambdaEvent, tower::ServiceExt};
use lambda_dedup_runtime::lambda_runtime::Context;
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the front (API Gateway, ALB, a Function URL) got back: the status, every header
/// (`multiValueHeaders` and a payload 2.0 answer's `cookies` included), and the body as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The status code.
    pub status: StatusCode,
    /// The headers, each value in the order the answer gave them.
    pub headers: HeaderMap,
    /// The body (base64 when the answer says `isBase64Encoded`); empty when there is none.
    pub body: String,
}

impl Answer {
    /// The status as a number (`201`).
    pub fn status(&self) -> u16 {
        self.status.as_u16()
    }

    /// The first value of the header `name`, if there is one and it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body read as JSON (`Value::Null` when it is not JSON): a stored answer, or a
    /// refusal's problem (`answer.json()["code"]`).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// `event` (one of [`crate::events`]' HTTP builders: `apigw_rest`, `apigw_http`, `alb`,
/// `function_url`; or a sample as JSON) invoked on `service` as Lambda invokes the function, each
/// call under a request id of its own: the answer Lambda would return to the front. The
/// service's error (an event that is not an HTTP request) is the error.
pub async fn send<E: Send + Sync + 'static>(
    service: &HttpService<E>,
    event: impl Serialize,
) -> Result<Answer, lambda_http::Error> {
    static INVOCATIONS: AtomicU64 = AtomicU64::new(0);
    let mut context = Context::default();
    context.request_id = format!("kit-{}", INVOCATIONS.fetch_add(1, Ordering::Relaxed));
    let event = LambdaEvent::new(serde_json::to_value(event)?, context);
    let answer = ServiceExt::<LambdaEvent<Value>>::oneshot(service.clone(), event).await?;
    // What Lambda sends the front is this serialised: read it as the front does.
    read(&serde_json::to_value(answer)?)
}

/// A front's answer (API Gateway REST or HTTP payload, ALB, Function URL), as JSON.
fn read(answer: &Value) -> Result<Answer, lambda_http::Error> {
    let status = answer["statusCode"].as_u64().unwrap_or_default();
    let status = StatusCode::from_u16(u16::try_from(status)?)?;
    let mut headers = HeaderMap::new();
    let multi = answer["multiValueHeaders"]
        .as_object()
        .filter(|m| !m.is_empty());
    if let Some(multi) = multi {
        for (name, values) in multi {
            for value in values.as_array().into_iter().flatten() {
                append(&mut headers, name, value)?;
            }
        }
    } else if let Some(single) = answer["headers"].as_object() {
        for (name, value) in single {
            append(&mut headers, name, value)?;
        }
    }
    for cookie in answer["cookies"].as_array().into_iter().flatten() {
        append(&mut headers, "set-cookie", cookie)?;
    }
    let body = answer["body"].as_str().unwrap_or_default().to_owned();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

fn append(headers: &mut HeaderMap, name: &str, value: &Value) -> Result<(), lambda_http::Error> {
    let value = value.as_str().unwrap_or_default();
    headers.append(
        HeaderName::from_bytes(name.as_bytes())?,
        HeaderValue::from_str(value)?,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each front's answer shape gives the same typed answer: a REST API's and an ALB's
    /// `multiValueHeaders` (a header twice kept twice), an HTTP API's `headers` and `cookies`.
    #[test]
    fn every_fronts_answer_reads_the_same() {
        let rest = json!({
            "statusCode": 201,
            "headers": {"content-type": "application/json"},
            "multiValueHeaders": {"content-type": ["application/json"], "vary": ["a", "b"]},
            "body": "{\"id\":\"o-1\"}",
            "isBase64Encoded": false,
        });
        let read_rest = read(&rest).expect("an answer");
        assert_eq!(read_rest.status(), 201);
        assert_eq!(read_rest.header("content-type"), Some("application/json"));
        let vary: Vec<_> = read_rest.headers.get_all("vary").iter().collect();
        assert_eq!(vary, ["a", "b"]);
        assert_eq!(read_rest.json(), json!({"id": "o-1"}));

        let v2 = json!({
            "statusCode": 409,
            "headers": {"retry-after": "1"},
            "cookies": ["s=1"],
            "body": "not json",
        });
        let read_v2 = read(&v2).expect("an answer");
        assert_eq!(read_v2.status(), 409);
        assert_eq!(read_v2.header("retry-after"), Some("1"));
        assert_eq!(read_v2.header("set-cookie"), Some("s=1"));
        assert_eq!(read_v2.json(), Value::Null);
        assert_eq!(read_v2.body, "not json");
    }

    /// Through a service: a Function URL's `POST` under a key is 201 once and replayed
    /// (`idempotent-replayed`) with the same body; a REST API's request with the key sent twice
    /// is a 400 problem, its code read from the typed answer.
    #[tokio::test]
    async fn send_reads_the_services_answers() {
        use crate::events::{self, HttpRequest};
        use lambda_dedup_runtime::http::{HttpConfig, Reply};
        use lambda_dedup_runtime::{Dedup, HandlerError, HttpEvent, testing};

        let env = testing::env(&[("HTTP_CALLER_FROM", "none")]);
        let (dedup, _) = testing::on_memory(Dedup::read(&env, "orders").expect("settings"));
        let config = HttpConfig::read(&env).expect("config");
        let service = dedup
            .http(config, |e: HttpEvent<Value>| {
                let id = e.key.idempotency_key();
                Ok::<_, HandlerError>(Reply::created(json!({ "id": id })))
            })
            .expect("service");
        let request = HttpRequest::post("/orders", "{}").idempotency_key("o-1");
        let first = send(&service, events::function_url(&request)).await;
        let first = first.expect("an answer");
        assert_eq!(first.status(), 201, "{first:?}");
        assert_eq!(first.header("idempotent-replayed"), None);
        let again = send(&service, events::function_url(&request)).await;
        let again = again.expect("an answer");
        assert_eq!(again.status(), 201);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(again.json(), first.json());
        assert!(first.json()["id"].is_string(), "{first:?}");

        let twice = request.idempotency_key("o-2");
        let refused = send(&service, events::apigw_rest(&twice, None)).await;
        let refused = refused.expect("an answer");
        assert_eq!(refused.status(), 400);
        assert_eq!(refused.json()["code"], "idempotency_key_repeated");
        assert!(
            refused
                .header("content-type")
                .is_some_and(|t| t.starts_with("application/problem+json")),
            "{refused:?}"
        );
    }

    /// An answer that is not one a front takes (no status) is an error, not a panic.
    #[test]
    fn an_answer_without_a_status_is_an_error() {
        assert!(read(&json!({"body": ""})).is_err());
        assert!(read(&json!({"statusCode": 99_999})).is_err());
    }
}
