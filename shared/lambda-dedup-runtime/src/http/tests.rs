//! The door on the memory store, through the builder's service (`Dedup::http`): every answer of
//! the module's table, and what each leaves in the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lambda_dedup::{Effect, Item};
use lambda_dedup_memory::MemoryStore;
use lambda_http::tower::ServiceExt;
use lambda_http::{Body, Request, RequestExt};

use super::builder::HttpEvent;
use super::{HttpConfig, Reply};
use crate::testing::on_memory;
use crate::{Dedup, HandlerError, HttpService};
use lambda_dedup_config::Env;

const ORDERS: &str = "orders";

/// Behind an ALB that authenticates and sets x-caller; `post` comes through it.
fn env() -> Env {
    crate::testing::env(&[
        ("HTTP_CALLER_FROM", "header:x-caller"),
        ("HTTP_CALLER_FRONT", "alb"),
    ])
}

/// `request` as an ALB hands it over (its request context).
fn through_alb(request: Request) -> Request {
    request.with_request_context(lambda_http::request::RequestContext::Alb(Default::default()))
}

#[derive(Debug, serde::Deserialize)]
struct Order {
    item: String,
    #[serde(default)]
    pad: usize,
}

/// The work: an order keyed by the request's key, 201 with it; `runs` counts each run.
fn order(e: HttpEvent<Order>, runs: &AtomicUsize) -> Result<Reply, HandlerError> {
    runs.fetch_add(1, Ordering::SeqCst);
    let id = e.key.idempotency_key();
    let n = runs.load(Ordering::SeqCst);
    let body = serde_json::json!({ "id": id, "item": e.payload.item, "run": n,
        "pad": "x".repeat(e.payload.pad) });
    Ok(Reply::created(body)
        .header("location", format!("/orders/{id}"))
        .header("x-not-replayed", "1")
        .effect(Effect::put(
            ORDERS,
            Item::new()
                .with("order_id", id.as_str())
                .with("item", e.payload.item.as_str()),
        )))
}

fn service_with(env: &Env) -> (HttpService, MemoryStore, Arc<AtomicUsize>) {
    service_answering(env, |_, _| None)
}

/// [`service_with`] whose work gives the answer `early` says (its own 5xx) instead of the order.
fn service_answering(
    env: &Env,
    early: impl Fn(&HttpEvent<Order>, &AtomicUsize) -> Option<Reply> + Send + Sync + 'static,
) -> (HttpService, MemoryStore, Arc<AtomicUsize>) {
    let (dedup, store) = on_memory(Dedup::read(env, "orders-api").expect("settings"));
    store.create_table(ORDERS, "order_id");
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let config = HttpConfig::read(env).expect("config");
    let service = dedup
        .http(config, move |e: HttpEvent<Order>| match early(&e, &r) {
            Some(reply) => Ok(reply),
            None => order(e, &r),
        })
        .expect("service");
    (service, store, runs)
}

fn service() -> (HttpService, MemoryStore, Arc<AtomicUsize>) {
    service_with(&env())
}

/// [`env`] with the caller from the request's authorizer (IAM, a Lambda authorizer's
/// principal), no front declared.
fn authorizer_env() -> Env {
    env()
        .with("HTTP_CALLER_FROM", "authorizer")
        .with("HTTP_CALLER_FRONT", "")
}

fn post(key: Option<&str>, caller: Option<&str>, body: &str) -> Request {
    let mut b = lambda_http::http::Request::builder()
        .method("POST")
        .uri("/orders");
    if let Some(k) = key {
        b = b.header("idempotency-key", format!("\"{k}\""));
    }
    if let Some(c) = caller {
        b = b.header("x-caller", c);
    }
    through_alb(b.body(Body::Text(body.to_owned())).expect("request"))
}

#[derive(Debug)]
struct Got {
    status: u16,
    replayed: bool,
    location: Option<String>,
    other: bool,
    retry_after: bool,
    body: String,
}

impl Got {
    fn code(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.body).expect("json")["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// `got` is refused with `status` and the error code `code`.
#[track_caller]
fn assert_refused(got: &Got, status: u16, code: &str) {
    assert_eq!((got.status, got.code().as_str()), (status, code), "{got:?}");
}

async fn send(service: &HttpService, request: Request) -> Got {
    let r = service.clone().oneshot(request).await.expect("answer");
    let header = |n: &str| {
        r.headers()
            .get(n)
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    };
    Got {
        status: r.status().as_u16(),
        replayed: header("idempotent-replayed").as_deref() == Some("true"),
        location: header("location"),
        other: header("x-not-replayed").is_some(),
        retry_after: header("retry-after").is_some(),
        body: match r.body() {
            Body::Text(t) => t.clone(),
            other => format!("{other:?}"),
        },
    }
}

const BODY: &str = r#"{"item":"book"}"#;

/// S8 / the draft: a retry gets the first answer — its status, the allow-listed headers and the
/// identical body — with `idempotent-replayed: true`; the work ran once, one order exists.
#[tokio::test]
async fn idempotency_key_retry_replays_the_stored_answer() {
    let (service, store, runs) = service();
    let first = send(&service, post(Some("k-1"), Some("alice"), BODY)).await;
    assert_eq!((first.status, first.replayed), (201, false), "{first:?}");
    assert!(first.other, "the first answer carries every header");
    let again = send(&service, post(Some("k-1"), Some("alice"), BODY)).await;
    assert_eq!((again.status, again.replayed), (201, true), "{again:?}");
    assert_eq!(again.body, first.body, "the identical body");
    assert_eq!(
        again.location, first.location,
        "an allow-listed header replayed"
    );
    assert!(!again.other, "a header off the allow-list is not stored");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        store.items(ORDERS).len(),
        1,
        "one order, committed with the mark"
    );
}

/// The draft's 400s: no key where required, one of 256 characters, a control character, two
/// headers; nothing is claimed, so the same key sent properly then runs.
#[tokio::test]
async fn idempotency_key_missing_or_malformed_is_400_and_claims_nothing() {
    let (service, store, runs) = service();
    let missing = send(&service, post(None, Some("alice"), BODY)).await;
    assert_refused(&missing, 400, "idempotency_key_missing");
    let long = send(&service, post(Some(&"k".repeat(256)), Some("alice"), BODY)).await;
    assert_refused(&long, 400, "idempotency_key_too_long");
    let control = lambda_http::http::Request::builder()
        .method("POST")
        .uri("/orders")
        .header("x-caller", "alice")
        .header("idempotency-key", "\"a\tb\"")
        .body(Body::Text(BODY.into()))
        .expect("request");
    let control = through_alb(control);
    let control = send(&service, control).await;
    assert_refused(&control, 400, "idempotency_key_malformed");
    let mut twice = post(Some("k-2"), Some("alice"), BODY);
    twice
        .headers_mut()
        .append("idempotency-key", "\"k-3\"".parse().expect("value"));
    let twice = send(&service, twice).await;
    assert_refused(&twice, 400, "idempotency_key_repeated");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(store.items(ORDERS).is_empty());
    let ok = send(&service, post(Some(&"k".repeat(255)), Some("alice"), BODY)).await;
    assert_eq!(ok.status, 201, "255 characters is a key");
}

/// Hostile bodies: over `HTTP_MAX_BODY_BYTES` 413, not JSON 400; neither claims the key, so a
/// good body under the same key then runs (validation failures are not stored, as Stripe).
#[tokio::test]
async fn idempotency_key_hostile_bodies_are_refused_before_any_claim() {
    let env = env().with("HTTP_MAX_BODY_BYTES", "64");
    let (service, _, runs) = service_with(&env);
    let big = format!(r#"{{"item":"{}"}}"#, "b".repeat(64));
    let big = send(&service, post(Some("k-4"), Some("alice"), &big)).await;
    assert_refused(&big, 413, "body_too_large");
    let text = send(&service, post(Some("k-4"), Some("alice"), "item=book")).await;
    assert_refused(&text, 400, "not_json");
    let misfit = send(&service, post(Some("k-4"), Some("alice"), r#"{"item":3}"#)).await;
    assert_refused(&misfit, 400, "misfit");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let ok = send(&service, post(Some("k-4"), Some("alice"), BODY)).await;
    assert_eq!((ok.status, ok.replayed), (201, false));
}

/// The draft's 422 (S11): the key reused with another body is refused, and the first answer
/// stays the key's; another path is another request too.
#[tokio::test]
async fn idempotency_key_reused_with_another_payload_is_422() {
    let (service, store, runs) = service();
    assert_eq!(
        send(&service, post(Some("k-5"), Some("alice"), BODY))
            .await
            .status,
        201
    );
    let other = send(
        &service,
        post(Some("k-5"), Some("alice"), r#"{"item":"pen"}"#),
    )
    .await;
    assert_refused(&other, 422, "idempotency_key_reused");
    let mut path = post(Some("k-5"), Some("alice"), BODY);
    *path.uri_mut() = "/orders/again".parse().expect("uri");
    assert_eq!(
        send(&service, path).await.status,
        422,
        "the path is fingerprinted"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(store.items(ORDERS).len(), 1);
    assert!(
        send(&service, post(Some("k-5"), Some("alice"), BODY))
            .await
            .replayed
    );
}

/// Caller scoping: caller B sending A's key (and A's body) never gets A's answer — its own
/// request runs; a request with no caller where one is configured is 401.
#[tokio::test]
async fn idempotency_key_is_scoped_by_caller() {
    let (service, store, runs) = service();
    let a = send(&service, post(Some("shared"), Some("alice"), BODY)).await;
    let b = send(&service, post(Some("shared"), Some("bob"), BODY)).await;
    assert_eq!((a.status, b.status, b.replayed), (201, 201, false));
    assert_ne!(a.body, b.body, "B's own answer");
    assert_ne!(a.location, b.location, "B's own order");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(store.items(ORDERS).len(), 2);
    let nobody = send(&service, post(Some("shared"), None, BODY)).await;
    assert_refused(&nobody, 401, "caller_missing");
    let b_again = send(&service, post(Some("shared"), Some("bob"), BODY)).await;
    assert_eq!((b_again.replayed, b_again.body), (true, b.body));
}

/// The caller from AWS's published API Gateway v2 sample events: the IAM principal of
/// `apigw-v2-request-iam.json` scopes the key; the sample without an authorizer is 401.
#[tokio::test]
async fn idempotency_key_is_scoped_by_the_authorizers_principal_of_aws_samples() {
    let (service, _, runs) = service_with(&authorizer_env());
    let sample = |name: &str, key: &str| {
        let mut event = aws_sample(name);
        event["requestContext"]["http"]["method"] = "POST".into();
        event["headers"]["idempotency-key"] = format!("\"{key}\"").into();
        event["body"] = BODY.into();
        lambda_http::request::from_str(&event.to_string()).expect("an API Gateway v2 request")
    };
    let first = send(&service, sample("apigw-v2-request-iam.json", "k-iam")).await;
    assert_eq!(first.status, 201, "{first:?}");
    let again = send(&service, sample("apigw-v2-request-iam.json", "k-iam")).await;
    assert_eq!((again.status, again.replayed), (201, true));
    let nobody = send(
        &service,
        sample("apigw-v2-request-no-authorizer.json", "k-iam"),
    )
    .await;
    assert_refused(&nobody, 401, "caller_missing");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The draft's 409: a request whose key is held in flight is answered 409 with `retry-after`,
/// its effects not written; with `HTTP_IN_FLIGHT_WAIT_MS` it waits and gets the holder's answer
/// replayed. Issue 45: the door claims nothing (its mark and effects are one commit), so the
/// key is held here as a door that claims first holds it: a live lease on the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn idempotency_key_in_flight_is_409_or_the_bounded_wait() {
    use lambda_dedup::{Claim, MarkStore};
    for wait in [None, Some("5000")] {
        let mut env = env();
        if let Some(w) = wait {
            env = env.with("HTTP_IN_FLIGHT_WAIT_MS", w);
        }
        let (service, store, _) = service_with(&env);
        let scope = Dedup::read(&env, "orders-api")
            .expect("settings")
            .settings
            .scope;
        // The key the door derives for `alice`'s `k-6` (the caller as `caller::of` names it).
        let key =
            lambda_dedup::DedupKey::new(&scope, "header:5:alice", &["idempotency-key", "k-6"]);
        let Ok(Claim::Claimed(lease)) = store.claim(&key, None, None).await else {
            panic!("the key is held");
        };
        let second = tokio::spawn({
            let s = service.clone();
            async move { send(&s, post(Some("k-6"), Some("alice"), BODY)).await }
        });
        if wait.is_none() {
            let second = second.await.expect("second");
            assert_eq!(
                (second.status, second.retry_after),
                (409, true),
                "{second:?}"
            );
            assert_eq!(second.code(), "in_flight");
            assert!(store.items(ORDERS).is_empty(), "nothing of it written");
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let held = super::reply::Stored {
                status: 201,
                headers: vec![],
                body: r#"{"id":"held"}"#.into(),
            };
            store
                .complete(&lease, Some(&held.to_result()))
                .await
                .expect("completed");
            let second = second.await.expect("second");
            assert_eq!((second.status, second.replayed), (201, true), "{second:?}");
            assert_eq!(second.body, held.body);
            assert!(store.items(ORDERS).is_empty(), "the holder's answer only");
        }
    }
}

/// 5xx is not stored: the work's 503 releases the mark, the client's retry runs again and its
/// 201 is what is then stored and replayed; the 503's effects are never written.
#[tokio::test]
async fn idempotency_key_5xx_is_not_stored_and_the_retry_runs() {
    let (service, store, runs) = service_answering(&env(), |_, r| {
        (r.load(Ordering::SeqCst) == 0).then(|| {
            r.fetch_add(1, Ordering::SeqCst);
            let put = Effect::put(ORDERS, Item::new().with("order_id", "failed"));
            Reply::new(503, serde_json::json!({"error": "busy"})).effect(put)
        })
    });
    let failed = send(&service, post(Some("k-7"), Some("alice"), BODY)).await;
    assert_eq!((failed.status, failed.replayed), (503, false));
    assert!(
        store.items(ORDERS).is_empty(),
        "a 5xx's effects are not written"
    );
    let retry = send(&service, post(Some("k-7"), Some("alice"), BODY)).await;
    assert_eq!((retry.status, retry.replayed), (201, false), "{retry:?}");
    let again = send(&service, post(Some("k-7"), Some("alice"), BODY)).await;
    assert_eq!(
        (again.status, again.replayed, again.body),
        (201, true, retry.body)
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Issue 45: the work runs before the store is asked, so a retry whose work now answers 5xx
/// (in a container that has not cached the key: here no cache at all) still gets the stored
/// answer replayed, as a claim would have found it, and nothing of the 5xx is written.
#[tokio::test]
async fn idempotency_key_retry_whose_work_now_fails_is_replayed() {
    let env = env().with("DEDUP_CACHE_SIZE", "0");
    let (service, store, runs) = service_answering(&env, |_, r| {
        (r.load(Ordering::SeqCst) > 0).then(|| {
            let put = Effect::put(ORDERS, Item::new().with("order_id", "failed"));
            Reply::new(503, serde_json::json!({"error": "busy"})).effect(put)
        })
    });
    let first = send(&service, post(Some("k-again"), Some("alice"), BODY)).await;
    assert_eq!((first.status, first.replayed), (201, false), "{first:?}");
    let retry = send(&service, post(Some("k-again"), Some("alice"), BODY)).await;
    assert_eq!((retry.status, retry.replayed), (201, true), "{retry:?}");
    assert_eq!(retry.body, first.body);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(store.items(ORDERS).len(), 1, "the 503's effect not written");
}

/// S5 + S16: an answer over the store's result bound is refused before the commit — 500 with a
/// typed reason, its order not written, the key released so a retry runs again.
#[tokio::test]
async fn idempotency_key_answer_too_large_to_store_is_refused_before_commit() {
    let (service, store, runs) = service();
    let huge = r#"{"item":"book","pad":70000}"#;
    let refused = send(&service, post(Some("k-8"), Some("alice"), huge)).await;
    assert_refused(&refused, 500, "response_too_large");
    assert!(
        store.items(ORDERS).is_empty(),
        "no effect without its stored answer"
    );
    let again = send(&service, post(Some("k-8"), Some("alice"), huge)).await;
    assert_eq!(again.status, 500, "released: the retry ran again");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// `DEDUP_DEADLINE_MARGIN_MS` bounds the door: with the margin past the invocation's deadline
/// the request is 503 with `retry-after` and nothing is claimed; the retry then runs.
#[tokio::test]
async fn idempotency_key_past_the_deadline_is_503_and_claims_nothing() {
    let env = crate::testing::with_margin(env(), Some("60000"));
    let (service, store, runs) = service_with(&env);
    let late = post(Some("k-9"), Some("alice"), BODY)
        .with_lambda_context(crate::service::tests::context_due_in(30));
    let late = send(&service, late).await;
    assert_eq!(
        (late.status, late.retry_after, late.code().as_str()),
        (503, true, "deadline")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(store.items(ORDERS).is_empty());
    // The same key with no deadline: it runs (a claim left behind would answer 409).
    let retry = send(&service, post(Some("k-9"), Some("alice"), BODY)).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
}

/// `HTTP_IDEMPOTENCY_KEY=optional`: a request without a key runs each time, never replayed.
#[tokio::test]
async fn idempotency_key_optional_runs_unkeyed_requests_each_time() {
    let env = env().with("HTTP_IDEMPOTENCY_KEY", "optional");
    let (service, store, runs) = service_with(&env);
    for _ in 0..2 {
        let mut r = post(None, Some("alice"), BODY);
        let mut context = lambda_runtime::Context::default();
        context.request_id = format!("req-{}", runs.load(Ordering::SeqCst));
        r = r.with_lambda_context(context);
        let got = send(&service, r).await;
        assert_eq!((got.status, got.replayed), (201, false));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(store.items(ORDERS).len(), 2);
}

/// The door uses only `MarkStore`, so a store of another effect type (a PostgreSQL statement, a
/// Valkey command: here `Recording` of strings) runs it too: its effect committed once with the
/// mark, the retry replayed.
#[tokio::test]
async fn idempotency_key_door_runs_on_a_store_of_another_effect_type() {
    let dedup = Dedup::read(&env(), "orders-api").expect("settings");
    let (dedup, store) = crate::testing::on_memory_recording::<String>(dedup);
    let service = dedup
        .http(
            HttpConfig::read(&env()).expect("config"),
            |e: HttpEvent<Order>| {
                let insert = format!("INSERT INTO orders (item) VALUES ({})", e.payload.item);
                Ok(Reply::created(serde_json::json!({ "item": e.payload.item })).effect(insert))
            },
        )
        .expect("service");
    let call = |r: Request| {
        let s = service.clone();
        async move { s.oneshot(r).await.expect("answer") }
    };
    let first = call(post(Some("k-pg"), Some("alice"), BODY)).await;
    assert_eq!(first.status().as_u16(), 201);
    let again = call(post(Some("k-pg"), Some("alice"), BODY)).await;
    assert_eq!(
        (
            again.status().as_u16(),
            again.headers().contains_key("idempotent-replayed")
        ),
        (201, true)
    );
    assert_eq!(store.effects(), ["INSERT INTO orders (item) VALUES (book)"]);
}

// ---- Issue 42: the HTTP door's callers, keys, fingerprints and answers. ----

/// AWS's published sample event `name` (events/), as a JSON value.
fn aws_sample(name: &str) -> serde_json::Value {
    crate::testing::read_json(format!(
        "{}/../../events/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// An HTTP API (payload 2.0) or Function URL event from AWS's sample `name`: `POST /orders`
/// with `key` and `BODY`, and `edit` applied.
fn v2_event(name: &str, key: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Request {
    let mut event = aws_sample(name);
    event["requestContext"]["http"]["method"] = "POST".into();
    event["rawPath"] = "/orders".into();
    event["requestContext"]["http"]["path"] = "/orders".into();
    event["headers"]["idempotency-key"] = format!("\"{key}\"").into();
    event["body"] = BODY.into();
    edit(&mut event);
    lambda_http::request::from_str(&event.to_string()).expect("an API Gateway v2 request")
}

/// A REST API (payload 1.0) event as API Gateway sends it (AWS's sample): `POST /orders` with
/// `BODY`, each header in `headers` (its last value) and in `multiValueHeaders` (all of them),
/// the identity and authorizer of `edit`.
fn rest_event(
    headers: &[(&str, &[&str])],
    edit: impl FnOnce(&mut serde_json::Value),
) -> serde_json::Value {
    let mut event = aws_sample("apigw-rest-request.json");
    event["path"] = "/orders".into();
    event["resource"] = "/orders".into();
    event["requestContext"]["path"] = "/orders".into();
    event["requestContext"]["resourcePath"] = "/orders".into();
    event["pathParameters"] = serde_json::Value::Null;
    event["body"] = BODY.into();
    // A Lambda authorizer's route: no IAM caller, no API key.
    for field in [
        "userArn",
        "user",
        "caller",
        "accessKey",
        "apiKey",
        "apiKeyId",
    ] {
        event["requestContext"]["identity"][field] = serde_json::Value::Null;
    }
    for (name, values) in headers {
        event["headers"][*name] = (*values.last().expect("a value")).into();
        event["multiValueHeaders"][*name] = serde_json::json!(values);
    }
    edit(&mut event);
    event
}

/// What Lambda returns to the front for `event`, through the service as `main` runs it
/// (`lambda_runtime::run_concurrent(service)`: the raw event).
async fn invoke(service: &HttpService, event: serde_json::Value) -> (u16, String) {
    static INVOCATIONS: AtomicUsize = AtomicUsize::new(0);
    let mut context = lambda_runtime::Context::default();
    context.request_id = format!("rest-{}", INVOCATIONS.fetch_add(1, Ordering::SeqCst));
    let answer = ServiceExt::<lambda_runtime::LambdaEvent<serde_json::Value>>::oneshot(
        service.clone(),
        lambda_runtime::LambdaEvent::new(event, context),
    )
    .await
    .expect("answer");
    let answer = serde_json::to_value(answer).expect("a response");
    let status = answer["statusCode"].as_u64().expect("status") as u16;
    (
        status,
        answer["body"].as_str().unwrap_or_default().to_owned(),
    )
}

fn code_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body).expect("json")["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Issue 42: `header:<name>` behind a Function URL with `AuthType: NONE` let any client name
/// any caller. With `HTTP_CALLER_FRONT=iam` the header counts only on a request the IAM front
/// signed; the same header on a Function URL event without an authorizer is 401
/// `caller_front_missing`, and an ALB's front refuses a Function URL's request too.
#[tokio::test]
async fn caller_header_counts_only_behind_the_declared_front() {
    let iam = env().with("HTTP_CALLER_FRONT", "iam");
    let (service, store, runs) = service_with(&iam);
    let with_caller = |e: &mut serde_json::Value| e["headers"]["x-caller"] = "alice".into();
    let forged = send(
        &service,
        v2_event(
            "apigw-v2-request-no-authorizer.json",
            "k-front",
            with_caller,
        ),
    )
    .await;
    assert_refused(&forged, 401, "caller_front_missing");
    let signed = send(
        &service,
        v2_event("apigw-v2-request-iam.json", "k-front", with_caller),
    )
    .await;
    assert_eq!(signed.status, 201, "{signed:?}");
    let (alb, _, _) = service_with(&env());
    let url = send(
        &alb,
        v2_event("apigw-v2-request-iam.json", "k-front", with_caller),
    )
    .await;
    assert_refused(&url, 401, "caller_front_missing");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(store.items(ORDERS).len(), 1);
}

/// Issue 42: a REST API sends a repeated header's values in `multiValueHeaders` and only the
/// last in `headers`; `lambda_http` kept the last, so two `Idempotency-Key`s ran as the second.
/// Read from the raw event, the repeat is 400 `idempotency_key_repeated`; one key runs.
#[tokio::test]
async fn rest_idempotency_key_sent_twice_is_400_repeated() {
    let (service, store, runs) = service_with(&authorizer_env());
    let twice = rest_event(&[("Idempotency-Key", &["\"k-a\"", "\"k-b\""])], |_| {});
    let (status, body) = invoke(&service, twice).await;
    assert_eq!(
        (status, code_of(&body).as_str()),
        (400, "idempotency_key_repeated"),
        "{body}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let once = rest_event(&[("Idempotency-Key", &["\"k-b\""])], |_| {});
    let (status, body) = invoke(&service, once).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(store.items(ORDERS).len(), 1);
}

/// Issue 42: a REST Lambda authorizer's `principalId` (`requestContext.authorizer`, AWS's
/// sample) is the caller with `HTTP_CALLER_FROM=authorizer` (it was 401 `caller_missing`): each
/// principal's key is its own, and its retry is replayed.
#[tokio::test]
async fn rest_lambda_authorizer_principal_id_is_the_caller() {
    let (service, store, runs) = service_with(&authorizer_env());
    let by = |principal: &str| {
        let principal = principal.to_owned();
        rest_event(&[("Idempotency-Key", &["\"k-rest\""])], move |e| {
            e["requestContext"]["authorizer"]["principalId"] = principal.into();
        })
    };
    let (admin, first) = invoke(&service, by("admin")).await;
    assert_eq!(admin, 201, "{first}");
    let (again, replayed) = invoke(&service, by("admin")).await;
    assert_eq!(
        (again, &replayed),
        (201, &first),
        "the principal's retry replayed"
    );
    let (other, theirs) = invoke(&service, by("someone-else")).await;
    assert_eq!(other, 201);
    assert_ne!(theirs, first, "another principal's own answer");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(store.items(ORDERS).len(), 2);
}

/// Issue 42: the IAM caller of a Function URL or HTTP API with `AWS_IAM` is its principal, not
/// the assumed role's session name the caller chooses: the same role under two session names
/// is one caller (its retry replayed), another role another caller.
#[tokio::test]
async fn caller_iam_is_scoped_by_principal_id_not_session_name() {
    let (service, _, runs) = service_with(&authorizer_env());
    let session = |role_id: &'static str, session: &'static str| {
        v2_event("apigw-v2-request-iam.json", "k-role", move |e| {
            let iam = &mut e["requestContext"]["authorizer"]["iam"];
            iam["userArn"] =
                format!("arn:aws:sts::1234567890:assumed-role/Orders/{session}").into();
            iam["userId"] = format!("{role_id}:{session}").into();
            iam["callerId"] = format!("{role_id}:{session}").into();
            iam["cognitoIdentity"] = serde_json::Value::Null;
        })
    };
    let first = send(&service, session("AROAORDERS", "alice")).await;
    assert_eq!(first.status, 201, "{first:?}");
    let renamed = send(&service, session("AROAORDERS", "bob")).await;
    assert_eq!(
        (renamed.status, renamed.replayed),
        (201, true),
        "{renamed:?}"
    );
    let other = send(&service, session("AROAOTHER", "alice")).await;
    assert_eq!((other.status, other.replayed), (201, false));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Issue 42: a field of `HTTP_FINGERPRINT=json:` that cannot be read (the pointer continues
/// past a string that is not JSON) was an empty fingerprint, so another body under the key was
/// replayed the first's answer; it is 400 `fingerprint_unreadable`, and nothing is claimed.
#[tokio::test]
async fn fingerprint_unreadable_field_is_400() {
    let env = env().with("HTTP_FINGERPRINT", "json:/item/name");
    let (service, _, runs) = service_with(&env);
    let first = send(
        &service,
        post(Some("k-fp"), Some("alice"), r#"{"item":"book"}"#),
    )
    .await;
    assert_refused(&first, 400, "fingerprint_unreadable");
    let other = send(
        &service,
        post(Some("k-fp"), Some("alice"), r#"{"item":"pen"}"#),
    )
    .await;
    assert_eq!(other.status, 400);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Issue 42: with `HTTP_FINGERPRINT=body` one key on two routes (or methods) was one request:
/// the second route got the first's answer. The method and path are always fingerprinted: 422.
#[tokio::test]
async fn idempotency_key_on_another_route_is_not_the_same_request() {
    let env = env().with("HTTP_FINGERPRINT", "body");
    let (service, _, runs) = service_with(&env);
    assert_eq!(
        send(&service, post(Some("k-rt"), Some("alice"), BODY))
            .await
            .status,
        201
    );
    let mut other_route = post(Some("k-rt"), Some("alice"), BODY);
    *other_route.uri_mut() = "/refunds".parse().expect("uri");
    let other_route = send(&service, other_route).await;
    assert_refused(&other_route, 422, "idempotency_key_reused");
    let mut other_method = post(Some("k-rt"), Some("alice"), BODY);
    *other_method.method_mut() = lambda_http::http::Method::PUT;
    assert_eq!(send(&service, other_method).await.status, 422);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Issue 42: after a 5xx the released mark kept its fingerprint, so a corrected retry (another
/// body under the key) got 422 for the key's whole retention, although a 5xx is not stored.
/// It runs; its answer is then the key's (the first body now 422).
#[tokio::test]
async fn idempotency_key_after_5xx_a_corrected_retry_runs() {
    let (service, store, runs) = service_answering(&env(), |e, _| {
        let busy = || Reply::new(503, serde_json::json!({"error": "busy"}));
        (e.payload.item == "broken").then(busy)
    });
    let failed = send(
        &service,
        post(Some("k-fix"), Some("alice"), r#"{"item":"broken"}"#),
    )
    .await;
    assert_eq!(failed.status, 503);
    let corrected = send(&service, post(Some("k-fix"), Some("alice"), BODY)).await;
    assert_eq!(
        (corrected.status, corrected.replayed),
        (201, false),
        "{corrected:?}"
    );
    let again = send(&service, post(Some("k-fix"), Some("alice"), BODY)).await;
    assert_eq!((again.status, again.replayed), (201, true));
    let first_body = send(
        &service,
        post(Some("k-fix"), Some("alice"), r#"{"item":"broken"}"#),
    )
    .await;
    assert_eq!(
        first_body.status, 422,
        "the key's answer is the corrected request's now"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(store.items(ORDERS).len(), 1);
}

/// Issue 42: every refusal is an RFC 9457 problem (`application/problem+json`: `type`,
/// `title`, `status`, `detail`) as the IETF draft's examples, with the stable `code` (and the
/// earlier `error`) as extension members; the work's own answers keep their type.
#[tokio::test]
async fn error_bodies_are_rfc9457_problem_json() {
    let (service, _, _) = service();
    let missing = service
        .clone()
        .oneshot(post(None, Some("alice"), BODY))
        .await
        .expect("answer");
    assert_eq!(missing.status().as_u16(), 400);
    assert_eq!(
        missing.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/problem+json"[..])
    );
    let Body::Text(text) = missing.body() else {
        panic!("a text body")
    };
    let problem: serde_json::Value = serde_json::from_str(text).expect("json");
    assert_eq!(
        problem["type"],
        "urn:lambda-dedup:problem:idempotency_key_missing"
    );
    assert_eq!(problem["title"], "Idempotency-Key is missing");
    assert_eq!(problem["status"], 400);
    assert!(problem["detail"].as_str().is_some_and(|d| !d.is_empty()));
    assert_eq!(problem["code"], "idempotency_key_missing");
    assert_eq!(problem["error"], "idempotency_key_missing");
    let created = service
        .oneshot(post(Some("k-pj"), Some("alice"), BODY))
        .await
        .expect("answer");
    assert_eq!(
        created.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
}

/// The raw event's reader changes nothing else: a Function URL / HTTP API event (AWS's IAM
/// sample) through the service as Lambda runs it is answered 201, its retry replayed.
#[tokio::test]
async fn raw_event_path_answers_function_url_events_as_before() {
    let (service, _, runs) = service_with(&authorizer_env());
    let mut event = aws_sample("apigw-v2-request-iam.json");
    event["requestContext"]["http"]["method"] = "POST".into();
    event["rawPath"] = "/orders".into();
    event["headers"]["idempotency-key"] = "\"k-raw\"".into();
    event["body"] = BODY.into();
    let (first, body) = invoke(&service, event.clone()).await;
    assert_eq!(first, 201, "{body}");
    let (again, replayed) = invoke(&service, event).await;
    assert_eq!((again, replayed), (201, body));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
