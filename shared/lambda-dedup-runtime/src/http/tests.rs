//! The door on the memory store, through the builder's service (`Dedup::http`): every answer of
//! the module's table, and what each leaves in the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lambda_dedup::{Effect, Item};
use lambda_dedup_memory::MemoryStore;
use lambda_http::tower::ServiceExt;
use lambda_http::{Body, Request, RequestExt};

use super::{HttpConfig, Reply};
use crate::service::HttpEvent;
use crate::settings::Env;
use crate::testing::on_memory;
use crate::{Dedup, HttpService, Refusal};

const ORDERS: &str = "orders";

fn env() -> Env {
    Env::from_pairs([
        ("DEDUP_NAMESPACE", "test"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("HTTP_CALLER_FROM", "header:x-caller"),
    ])
}

#[derive(Debug, serde::Deserialize)]
struct Order {
    item: String,
    #[serde(default)]
    pad: usize,
}

/// The work: an order keyed by the request's key, 201 with it; `runs` counts each run.
fn order(e: HttpEvent<Order>, runs: &AtomicUsize) -> Result<Reply, Refusal> {
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
    let (dedup, store) = on_memory(Dedup::read(env, "orders-api").expect("settings"));
    store.create_table(ORDERS, "order_id");
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let config = HttpConfig::read(env).expect("config");
    let service = dedup
        .http(config, move |e: HttpEvent<Order>| order(e, &r))
        .expect("service");
    (service, store, runs)
}

fn service() -> (HttpService, MemoryStore, Arc<AtomicUsize>) {
    service_with(&env())
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
    b.body(Body::Text(body.to_owned())).expect("request")
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
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (400, "idempotency_key_missing")
    );
    let long = send(&service, post(Some(&"k".repeat(256)), Some("alice"), BODY)).await;
    assert_eq!(
        (long.status, long.code().as_str()),
        (400, "idempotency_key_too_long")
    );
    let control = lambda_http::http::Request::builder()
        .method("POST")
        .uri("/orders")
        .header("x-caller", "alice")
        .header("idempotency-key", "\"a\tb\"")
        .body(Body::Text(BODY.into()))
        .expect("request");
    let control = send(&service, control).await;
    assert_eq!(
        (control.status, control.code().as_str()),
        (400, "idempotency_key_malformed")
    );
    let mut twice = post(Some("k-2"), Some("alice"), BODY);
    twice
        .headers_mut()
        .append("idempotency-key", "\"k-3\"".parse().expect("value"));
    let twice = send(&service, twice).await;
    assert_eq!(
        (twice.status, twice.code().as_str()),
        (400, "idempotency_key_repeated")
    );
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
    assert_eq!((big.status, big.code().as_str()), (413, "body_too_large"));
    let text = send(&service, post(Some("k-4"), Some("alice"), "item=book")).await;
    assert_eq!((text.status, text.code().as_str()), (400, "not_json"));
    let misfit = send(&service, post(Some("k-4"), Some("alice"), r#"{"item":3}"#)).await;
    assert_eq!((misfit.status, misfit.code().as_str()), (400, "misfit"));
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
    assert_eq!(
        (other.status, other.code().as_str()),
        (422, "idempotency_key_reused")
    );
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
    assert_eq!(
        (nobody.status, nobody.code().as_str()),
        (401, "caller_missing")
    );
    let b_again = send(&service, post(Some("shared"), Some("bob"), BODY)).await;
    assert_eq!((b_again.replayed, b_again.body), (true, b.body));
}

/// The caller from AWS's published API Gateway v2 sample events: the IAM principal of
/// `apigw-v2-request-iam.json` scopes the key; the sample without an authorizer is 401.
#[tokio::test]
async fn idempotency_key_is_scoped_by_the_authorizers_principal_of_aws_samples() {
    let env = env().with("HTTP_CALLER_FROM", "authorizer");
    let (service, _, runs) = service_with(&env);
    let sample = |name: &str, key: &str| {
        let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut event: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("json");
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
    assert_eq!(
        (nobody.status, nobody.code().as_str()),
        (401, "caller_missing")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The draft's 409: a request whose key is in flight is answered 409 with `retry-after`, runs
/// nothing; with `HTTP_IN_FLIGHT_WAIT_MS` it waits and gets the first's answer replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn idempotency_key_in_flight_is_409_or_the_bounded_wait() {
    for wait in [None, Some("5000")] {
        let mut env = env();
        if let Some(w) = wait {
            env = env.with("HTTP_IN_FLIGHT_WAIT_MS", w);
        }
        let (dedup, store) = on_memory(Dedup::read(&env, "orders-api").expect("settings"));
        store.create_table(ORDERS, "order_id");
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(std::sync::Mutex::new((entered_tx, go_rx)));
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let service = dedup
            .http(
                HttpConfig::read(&env).expect("config"),
                move |e: HttpEvent<Order>| {
                    let gate = gate.lock().expect("gate");
                    let _ = gate.0.send(());
                    let _ = gate.1.recv_timeout(std::time::Duration::from_secs(10));
                    order(e, &r)
                },
            )
            .expect("service");
        let first = tokio::spawn({
            let s = service.clone();
            async move { send(&s, post(Some("k-6"), Some("alice"), BODY)).await }
        });
        entered_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the first is in flight");
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
            go_tx.send(()).expect("go");
            assert_eq!(first.await.expect("first").status, 201);
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            go_tx.send(()).expect("go");
            let first = first.await.expect("first");
            let second = second.await.expect("second");
            assert_eq!((second.status, second.replayed), (201, true), "{second:?}");
            assert_eq!(second.body, first.body);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "wait {wait:?}");
        assert_eq!(store.items(ORDERS).len(), 1);
    }
}

/// 5xx is not stored: the work's 503 releases the mark, the client's retry runs again and its
/// 201 is what is then stored and replayed; the 503's effects are never written.
#[tokio::test]
async fn idempotency_key_5xx_is_not_stored_and_the_retry_runs() {
    let (dedup, store) = on_memory(Dedup::read(&env(), "orders-api").expect("settings"));
    store.create_table(ORDERS, "order_id");
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let service = dedup
        .http(
            HttpConfig::read(&env()).expect("config"),
            move |e: HttpEvent<Order>| {
                if r.load(Ordering::SeqCst) == 0 {
                    r.fetch_add(1, Ordering::SeqCst);
                    let put = Effect::put(ORDERS, Item::new().with("order_id", "failed"));
                    return Ok(Reply::new(503, serde_json::json!({"error": "busy"})).effect(put));
                }
                order(e, &r)
            },
        )
        .expect("service");
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

/// S5 + S16: an answer over the store's result bound is refused before the commit — 500 with a
/// typed reason, its order not written, the key released so a retry runs again.
#[tokio::test]
async fn idempotency_key_answer_too_large_to_store_is_refused_before_commit() {
    let (service, store, runs) = service();
    let huge = r#"{"item":"book","pad":70000}"#;
    let refused = send(&service, post(Some("k-8"), Some("alice"), huge)).await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (500, "response_too_large")
    );
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
