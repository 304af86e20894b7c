//! `orders-api`: POST /orders with `Idempotency-Key` (see `main.rs`). [`service`] is the
//! function as its `main` runs it, and as its tests run it on the memory store.

pub mod order;

use lambda_dedup_runtime::http::{HttpConfig, Reply};
use lambda_dedup_runtime::lambda_http;
use lambda_dedup_runtime::{Dedup, HandlerError, HttpEvent, HttpService};

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub const FUNCTION: &str = "orders-api";

/// `orders-api` as `main` runs it: `POST /orders` creates an order in `ORDERS_TABLE`, keyed by
/// the id derived from the request's key, written as the key's own mark in one conditional
/// `PutItem` (the door's one-item mode, `Dedup::http_create_once`): no mark table. The body is
/// read as a [`order::NewOrder`] before anything is written (a body that is not one: 400);
/// an invalid order is 400, another route 404 and another method 405: answers that create
/// nothing, not stored (a retry answers the same again).
pub fn service(dedup: Dedup, config: HttpConfig) -> Result<HttpService, lambda_http::Error> {
    let orders = dedup.env().required("ORDERS_TABLE")?;
    let table = orders.clone();
    Ok(dedup.http_create_once(
        config,
        &table,
        order::ORDER_ID,
        move |e: HttpEvent<order::NewOrder>| route(&orders, e),
    )?)
}

fn route(orders: &str, e: HttpEvent<order::NewOrder>) -> Result<Reply, HandlerError> {
    match (e.method.as_str(), e.path.trim_end_matches('/')) {
        ("POST", "/orders") => order::create(orders, e),
        (_, "/orders") => Ok(Reply::new(
            405,
            serde_json::json!({ "error": "method_not_allowed" }),
        )),
        _ => Ok(Reply::new(404, serde_json::json!({ "error": "not_found" }))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::lambda_http::tower::ServiceExt;
    use lambda_dedup_runtime::lambda_http::{Body, Request, RequestExt};
    use lambda_dedup_runtime::testing::{env, service_on_memory};
    use lambda_dedup_testkit::events::{self, HttpRequest};

    /// `request` as an ALB hands it over.
    fn through_alb(request: Request) -> Request {
        request.with_request_context(lambda_http::request::RequestContext::Alb(Default::default()))
    }

    fn post(key: &str, body: &str) -> Request {
        let r = lambda_http::http::Request::builder()
            .method("POST")
            .uri("/orders")
            .header("idempotency-key", format!("\"{key}\""))
            .header("x-caller", "shop-1")
            .body(Body::Text(body.to_owned()))
            .expect("request");
        through_alb(r)
    }

    async fn send(s: &HttpService, r: Request) -> (u16, bool, String) {
        let r = s.clone().oneshot(r).await.expect("answer");
        let replayed = r.headers().contains_key("idempotent-replayed");
        let body = match r.body() {
            Body::Text(t) => t.clone(),
            other => format!("{other:?}"),
        };
        (r.status().as_u16(), replayed, body)
    }

    /// The function as `main` builds it: one order per key, committed with its mark; the retry
    /// gets the same 201 replayed; another body under the key 422; a bad quantity a stored 400.
    #[tokio::test]
    async fn idempotency_key_orders_api_creates_one_order_per_key() {
        let (service, store) = built_with(&[]);
        let body = r#"{"sku":"book-1","quantity":2}"#;
        let first = send(&service, post("o-1", body)).await;
        assert_eq!((first.0, first.1), (201, false), "{first:?}");
        let again = send(&service, post("o-1", body)).await;
        assert_eq!((again.0, again.1, &again.2), (201, true, &first.2));
        let orders = store.items("orders");
        assert_eq!(orders.len(), 1);
        let id = serde_json::from_str::<serde_json::Value>(&first.2).expect("json")["id"].clone();
        assert_eq!(
            orders[0].0.get("order_id"),
            Some(&lambda_dedup_testkit::Value::S(
                id.as_str().expect("id").to_owned()
            )),
            "the answer names the stored order"
        );
        let other = send(&service, post("o-1", r#"{"sku":"book-1","quantity":3}"#)).await;
        assert_eq!(other.0, 422);
        let zero = send(&service, post("o-2", r#"{"sku":"book-1","quantity":0}"#)).await;
        assert_eq!(zero.0, 400);
        let again = send(&service, post("o-2", r#"{"sku":"book-1","quantity":0}"#)).await;
        assert_eq!(
            (again.0, again.1, &again.2),
            (400, false, &zero.2),
            "an answer that creates nothing is not stored: the retry answers the same anew"
        );
        assert_eq!(store.items("orders").len(), 1);
    }

    /// Issue 45: the order is the key's own mark (one-item mode): its id is derived from the
    /// request's whole key (scope, caller, `Idempotency-Key`), the item carries the key, the
    /// fingerprint and the answer, and no mark is written apart; another caller's same key is
    /// its own order, under its own id.
    #[tokio::test]
    async fn orders_api_order_is_its_own_mark_keyed_by_the_derived_id() {
        use lambda_dedup::MarkStore;
        use lambda_dedup::create_once::{CREATED_KEY, CREATED_RESULT};
        let (service, store) = built_with(&[]);
        let body = r#"{"sku":"book-1","quantity":2}"#;
        let first = send(&service, post("o-own", body)).await;
        assert_eq!(first.0, 201, "{first:?}");
        let orders = store.items("orders");
        assert_eq!(orders.len(), 1);
        let text = |name: &str| match orders[0].0.get(name) {
            Some(lambda_dedup_testkit::Value::S(s)) => s.clone(),
            other => panic!("{name}: {other:?}"),
        };
        let key = lambda_dedup::DedupKey::from_stored(text(CREATED_KEY));
        assert_eq!(text("order_id"), key.idempotency_key(), "the derived id");
        assert!(
            text(CREATED_RESULT).contains(&key.idempotency_key()),
            "the answer"
        );
        assert!(
            store.get(&key).await.expect("get").is_none(),
            "no mark item"
        );
        let other = lambda_dedup_runtime::lambda_http::http::Request::builder()
            .method("POST")
            .uri("/orders")
            .header("idempotency-key", "\"o-own\"")
            .header("x-caller", "shop-2")
            .body(Body::Text(body.to_owned()))
            .expect("request");
        let theirs = send(&service, through_alb(other)).await;
        assert_eq!((theirs.0, theirs.1), (201, false), "{theirs:?}");
        assert_ne!(theirs.2, first.2, "shop-2's own order");
        assert_eq!(store.items("orders").len(), 2);
    }

    /// Issue 45: a 404 and a 405 create nothing, so in one-item mode they are not stored: the
    /// same key then posted to `/orders` creates its order (the transaction path stored the
    /// 404 and answered the POST 422).
    #[tokio::test]
    async fn orders_api_answers_that_create_nothing_are_not_stored() {
        let (service, store) = built_with(&[("HTTP_FINGERPRINT", "body")]);
        let body = r#"{"sku":"book-1","quantity":2}"#;
        let mut lost = post("o-404", body);
        *lost.uri_mut() = "/nowhere".parse().expect("uri");
        assert_eq!(send(&service, lost).await.0, 404);
        let mut get = post("o-404", body);
        *get.method_mut() = lambda_dedup_runtime::lambda_http::http::Method::PUT;
        assert_eq!(send(&service, get).await.0, 405);
        let created = send(&service, post("o-404", body)).await;
        assert_eq!((created.0, created.1), (201, false), "{created:?}");
        assert_eq!(store.items("orders").len(), 1);
    }

    /// Issue 45: an order with the key's derived id that this key did not create (written by
    /// other means) is refused, never overwritten.
    #[tokio::test]
    async fn orders_api_an_order_the_key_did_not_create_is_not_overwritten() {
        let (service, store) = built_with(&[]);
        let scope = lambda_dedup::Scope::new("t", FUNCTION).expect("scope");
        let key =
            lambda_dedup::DedupKey::new(&scope, "header:6:shop-1", &["idempotency-key", "o-x"]);
        let theirs = lambda_dedup::Item::new()
            .with("order_id", key.idempotency_key().as_str())
            .with("sku", "someone-else");
        store.put_item("orders", theirs.clone()).expect("put");
        let answer = send(&service, post("o-x", r#"{"sku":"book-1","quantity":2}"#)).await;
        assert_eq!(answer.0, 500, "{answer:?}");
        assert_eq!(store.items("orders"), vec![theirs], "untouched");
    }

    /// A POST of `body` from `shop-1`, under `key` when there is one.
    fn post_with(key: Option<&str>, body: &str) -> Request {
        let mut r = lambda_http::http::Request::builder()
            .method("POST")
            .uri("/orders")
            .header("x-caller", "shop-1");
        if let Some(key) = key {
            r = r.header("idempotency-key", format!("\"{key}\""));
        }
        // Each invocation has its own request id, as Lambda gives it.
        static INVOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut context = lambda_dedup_runtime::lambda_runtime::Context::default();
        let n = INVOCATIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        context.request_id = format!("req-{n}");
        through_alb(
            r.body(Body::Text(body.to_owned()))
                .expect("request")
                .with_lambda_context(context),
        )
    }

    /// orders-api built as `main` builds it, from `vars` over the test's own: behind an ALB
    /// that authenticates and sets x-caller (`post` comes through it).
    fn built_with(vars: &[(&str, &str)]) -> (HttpService, lambda_dedup_memory::MemoryStore) {
        let own = [
            ("ORDERS_TABLE", "orders"),
            ("HTTP_CALLER_FROM", "header:x-caller"),
            ("HTTP_CALLER_FRONT", "alb"),
        ];
        let env = vars.iter().fold(env(&own), |env, (k, v)| env.with(k, *v));
        let config = HttpConfig::read(&env).expect("config");
        let orders = [("orders", "order_id")];
        let built = service_on_memory(&env, FUNCTION, &orders, |dedup| service(dedup, config));
        built.expect("service")
    }

    /// Each `HTTP_*` setting the function documents changes what its requests get, through the
    /// function's own wiring: the key optional, the body limit, the replayed headers.
    #[tokio::test]
    async fn idempotency_key_settings_change_what_orders_api_answers() {
        let body = r#"{"sku":"book-1","quantity":2}"#;

        let (required, _) = built_with(&[]);
        assert_eq!(
            send(&required, post_with(None, body)).await.0,
            400,
            "required by default"
        );
        let (optional, store) = built_with(&[("HTTP_IDEMPOTENCY_KEY", "optional")]);
        assert_eq!(send(&optional, post_with(None, body)).await.0, 201);
        assert_eq!(send(&optional, post_with(None, body)).await.0, 201);
        assert_eq!(
            store.items("orders").len(),
            2,
            "without a key, each request runs"
        );

        let (limited, store) = built_with(&[("HTTP_MAX_BODY_BYTES", "16")]);
        assert_eq!(send(&limited, post_with(Some("k-1"), body)).await.0, 413);
        assert!(store.items("orders").is_empty());
        let (default, _) = built_with(&[]);
        assert_eq!(send(&default, post_with(Some("k-1"), body)).await.0, 201);

        let location = |s: HttpService| async move {
            s.clone()
                .oneshot(post_with(Some("k-2"), body))
                .await
                .expect("first");
            let again = s
                .oneshot(post_with(Some("k-2"), body))
                .await
                .expect("replay");
            assert!(again.headers().contains_key("idempotent-replayed"));
            again.headers().contains_key("location")
        };
        assert!(
            location(built_with(&[]).0).await,
            "location replayed by default"
        );
        assert!(
            !location(built_with(&[("HTTP_REPLAY_HEADERS", "content-type")]).0).await,
            "a header off the list is not replayed"
        );
    }

    // ---- Issue 42, through orders-api as `main` runs it. ----

    /// A REST API (payload 1.0) `POST /orders` as API Gateway sends it: `headers` holds each
    /// header's last value, `multiValueHeaders` all of them; a Lambda authorizer's
    /// `principalId`.
    fn rest_post(keys: &[&str], principal: &str, body: &str) -> impl serde::Serialize {
        let request = keys
            .iter()
            .fold(HttpRequest::post("/orders", body), |r, k| {
                r.idempotency_key(k)
            });
        events::apigw_rest(&request, Some(principal))
    }

    /// `event` through the service as Lambda runs it (the raw event): the status and body
    /// Lambda returns to the front.
    async fn invoke(s: &HttpService, event: impl serde::Serialize) -> (u16, serde_json::Value) {
        let answer = lambda_dedup_testkit::http::send(s, event).await;
        let answer = answer.expect("answer");
        (answer.status(), answer.json())
    }

    /// Issue 42, REST: two `Idempotency-Key` headers (API Gateway's `multiValueHeaders`) are
    /// 400 `idempotency_key_repeated` as a problem+json, no order; the Lambda authorizer's
    /// `principalId` is the caller (it was 401 `caller_missing`), each principal's key its own.
    #[tokio::test]
    async fn orders_api_rest_repeated_key_is_400_and_the_authorizers_principal_is_the_caller() {
        let (service, store) = built_with(&[
            ("HTTP_CALLER_FROM", "authorizer"),
            ("HTTP_CALLER_FRONT", ""),
        ]);
        let body = r#"{"sku":"book-1","quantity":2}"#;
        let (status, problem) = invoke(&service, rest_post(&["o-1", "o-2"], "shop-1", body)).await;
        assert_eq!(
            (status, &problem["code"]),
            (400, &"idempotency_key_repeated".into()),
            "{problem}"
        );
        assert_eq!(problem["status"], 400);
        assert!(store.items("orders").is_empty());
        let (first, order) = invoke(&service, rest_post(&["o-2"], "shop-1", body)).await;
        assert_eq!(first, 201, "{order}");
        let (again, replayed) = invoke(&service, rest_post(&["o-2"], "shop-1", body)).await;
        assert_eq!((again, &replayed), (201, &order));
        let (other, theirs) = invoke(&service, rest_post(&["o-2"], "shop-2", body)).await;
        assert_eq!(other, 201);
        assert_ne!(theirs, order, "shop-2's own order");
        assert_eq!(store.items("orders").len(), 2);
    }

    /// Issue 42: orders-api with `HTTP_CALLER_FROM=header:x-caller` does not start without
    /// `HTTP_CALLER_FRONT`; behind its ALB, a request that reached it another way (a Function
    /// URL's) naming a caller in the header is 401 `caller_front_missing`, no order.
    #[tokio::test]
    async fn orders_api_caller_header_needs_its_front() {
        let no_front =
            lambda_dedup_runtime::Env::from_pairs([("HTTP_CALLER_FROM", "header:x-caller")]);
        assert!(HttpConfig::read(&no_front).is_err(), "refused at start");
        let (service, store) = built_with(&[]);
        let request = HttpRequest::post("/orders", r#"{"sku":"book-1","quantity":2}"#)
            .idempotency_key("o-url")
            .header("x-caller", "shop-1");
        let (status, problem) = invoke(&service, events::function_url(&request)).await;
        assert_eq!(
            (status, &problem["code"]),
            (401, &"caller_front_missing".into()),
            "{problem}"
        );
        assert!(store.items("orders").is_empty());
    }

    /// Issue 42: one key on two routes was one request under `HTTP_FINGERPRINT=body`; orders-api
    /// answers the second route 422, not the first route's order.
    #[tokio::test]
    async fn orders_api_key_on_another_route_is_422() {
        let (service, _) = built_with(&[("HTTP_FINGERPRINT", "body")]);
        let body = r#"{"sku":"book-1","quantity":2}"#;
        assert_eq!(send(&service, post("o-r", body)).await.0, 201);
        let mut other = post("o-r", body);
        *other.uri_mut() = "/orders/o-r/cancel".parse().expect("uri");
        let (status, replayed, answer) = send(&service, other).await;
        assert_eq!((status, replayed), (422, false), "{answer}");
    }
}
