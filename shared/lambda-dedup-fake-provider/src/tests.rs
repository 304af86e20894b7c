//! Drives the real server over loopback: what the Lambda tests rely on is the
//! HTTP behaviour, not the internals.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::{Fault, Provider};

struct Server {
    provider: Provider,
    base: String,
    client: reqwest::Client,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start() -> Server {
    let provider = Provider::new();
    let (base, task) = provider.serve().await.expect("bind a loopback port");
    Server {
        provider,
        base,
        client: client(None),
        task,
    }
}

fn client(timeout: Option<Duration>) -> reqwest::Client {
    // No proxy: a developer's HTTP_PROXY must not intercept loopback calls.
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    builder.build().expect("build reqwest client")
}

/// Status, `Idempotent-Replayed` header and raw body of one call.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    replayed: Option<String>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("response body is JSON")
    }
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn post(&self, resource: &str, key: Option<&str>, body: &str) -> Reply {
        self.post_with(&self.client, resource, key, body)
            .await
            .expect("request reaches the provider")
    }

    /// One payment of [`PAYMENT`] under the idempotency key `key`.
    async fn pay(&self, key: &str) -> Reply {
        self.post("payments", Some(key), PAYMENT).await
    }

    async fn post_with(
        &self,
        client: &reqwest::Client,
        resource: &str,
        key: Option<&str>,
        body: &str,
    ) -> reqwest::Result<Reply> {
        let mut request = client
            .post(self.url(&format!("/v1/{resource}")))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await?;
        let status = response.status();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .map(|value| value.to_str().expect("ASCII header").to_owned());
        let body = response.bytes().await?.to_vec();
        Ok(Reply {
            status,
            replayed,
            body,
        })
    }

    /// One payment (`k-1`) by a client that gives up after `patience`, with `fault` queued
    /// first.
    async fn post_impatient(&self, fault: Fault, patience: Duration) -> reqwest::Result<Reply> {
        self.provider.inject(fault);
        let impatient = client(Some(patience));
        self.post_with(&impatient, "payments", Some("k-1"), PAYMENT)
            .await
    }

    /// The retry of `k-1`'s payment after its client gave up: the stored answer, replayed.
    async fn retry_is_replayed(&self) -> Reply {
        let retry = self.pay("k-1").await;
        assert_eq!(retry.status, StatusCode::CREATED);
        assert_eq!(retry.replayed.as_deref(), Some("true"));
        retry
    }

    /// A `POST` of `body` to the admin path `path`.
    async fn admin(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    async fn admin_effects(&self) -> Value {
        self.client
            .get(self.url("/_admin/effects"))
            .send()
            .await
            .expect("GET /_admin/effects")
            .json()
            .await
            .expect("effects are JSON")
    }

    /// Waits for background work (a request whose client gave up) to land.
    async fn wait_for_effects(&self, total: u64) {
        for _ in 0..200 {
            if self.provider.total_effects() >= total {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "expected {total} effects, still {} after 2s",
            self.provider.total_effects()
        );
    }
}

fn counts(pairs: &[(&str, u64)]) -> std::collections::BTreeMap<String, u64> {
    pairs
        .iter()
        .map(|(key, count)| ((*key).to_owned(), *count))
        .collect()
}

const PAYMENT: &str = r#"{"amount":1200,"currency":"eur","customer":"c-1"}"#;

#[tokio::test]
async fn first_request_applies_once_and_returns_201() {
    let server = start().await;

    let reply = server.pay("k-1").await;

    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.replayed, None, "a first answer is not a replay");
    assert_eq!(
        reply.json(),
        json!({
            "id": "payments_1",
            "resource": "payments",
            "idempotency_key": "k-1",
            "request": {"amount": 1200, "currency": "eur", "customer": "c-1"},
        })
    );
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
    assert_eq!(server.provider.total_effects(), 1);
}

#[tokio::test]
async fn same_key_same_payload_replays_the_stored_answer() {
    let server = start().await;
    let first = server.pay("k-1").await;

    let second = server.pay("k-1").await;

    assert_eq!(second.status, first.status);
    assert_eq!(second.body, first.body, "replay must be byte-identical");
    assert_eq!(second.replayed.as_deref(), Some("true"));
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
    assert_eq!(server.provider.requests(), 2);
}

#[tokio::test]
async fn same_key_different_payload_is_422_and_not_an_effect() {
    let server = start().await;
    server.pay("k-1").await;

    let other_amount = server
        .post(
            "payments",
            Some("k-1"),
            r#"{"amount":9999,"currency":"eur","customer":"c-1"}"#,
        )
        .await;
    // The key space is global, so the same body for another resource is a
    // different request too.
    let other_resource = server.post("collections", Some("k-1"), PAYMENT).await;

    for reply in [other_amount, other_resource] {
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            reply.json(),
            json!({"error": "idempotency key reused with a different payload"})
        );
        assert_eq!(reply.replayed, None);
    }
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn json_key_order_and_whitespace_do_not_change_the_fingerprint() {
    let server = start().await;
    let first = server
        .post(
            "payments",
            Some("k-1"),
            r#"{"amount":1200,"meta":{"a":1,"b":[{"x":1,"y":2}]}}"#,
        )
        .await;

    let reordered = server
        .post(
            "payments",
            Some("k-1"),
            "{\n  \"meta\": { \"b\": [ {\"y\": 2, \"x\": 1} ], \"a\": 1 },\n  \"amount\": 1200\n}",
        )
        .await;

    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(reordered.status, StatusCode::CREATED);
    assert_eq!(reordered.replayed.as_deref(), Some("true"));
    assert_eq!(reordered.body, first.body);
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn same_key_while_the_first_is_in_flight_is_409() {
    let server = start().await;
    server
        .provider
        .inject(Fault::slow(1, Duration::from_millis(1_000)));
    let slow_client = server.client.clone();
    let base = server.base.clone();
    let first = tokio::spawn(async move {
        slow_client
            .post(format!("{base}/v1/payments"))
            .header("Idempotency-Key", "k-1")
            .body(PAYMENT)
            .send()
            .await
            .expect("slow request completes")
    });
    // The second request must arrive while the first holds the key.
    for _ in 0..200 {
        if server.provider.requests() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(server.provider.requests(), 1, "first request never arrived");

    let second = server.pay("k-1").await;
    let first = first.await.expect("first request task");

    assert_eq!(second.status, StatusCode::CONFLICT);
    assert_eq!(
        second.json(),
        json!({"error": "a request with this idempotency key is in progress"})
    );
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn concurrent_same_key_requests_apply_exactly_once() {
    let server = start().await;
    server
        .provider
        .inject(Fault::slow(1, Duration::from_millis(500)));

    let (a, b) = tokio::join!(server.pay("k-1"), server.pay("k-1"),);

    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::CREATED, StatusCode::CONFLICT]);
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn missing_or_empty_key_and_non_json_body_are_400() {
    let server = start().await;

    let missing = server.post("payments", None, PAYMENT).await;
    let empty = server.pay("").await;
    let empty_quoted = server.pay("\"\"").await;
    let not_json = server.post("payments", Some("k-1"), "amount=1200").await;

    for reply in [missing, empty, empty_quoted, not_json] {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{reply:?}");
        let error = reply.json();
        assert!(
            error["error"].as_str().is_some_and(|text| !text.is_empty()),
            "error body: {error}"
        );
    }
    assert_eq!(server.provider.total_effects(), 0);
    assert!(server.provider.effects().is_empty());
    // The key of the non-JSON request was not burnt.
    let later = server.pay("k-1").await;
    assert_eq!(later.status, StatusCode::CREATED);
    assert_eq!(later.replayed, None);
}

#[tokio::test]
async fn injected_5xx_applies_nothing_and_a_retry_is_a_first_request() {
    let server = start().await;
    server.provider.inject(Fault::error_5xx(2));

    let first = server.pay("k-1").await;
    let second = server.pay("k-1").await;

    for reply in [&first, &second] {
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(reply.json(), json!({"error": "injected"}));
    }
    assert_eq!(server.provider.total_effects(), 0);
    assert!(server.provider.effects().is_empty());

    let retry = server.pay("k-1").await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.replayed, None, "nothing was stored by the 503s");
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
    assert_eq!(server.provider.requests(), 3);
}

#[tokio::test]
async fn apply_then_timeout_applies_and_the_retry_gets_the_replay() {
    let server = start().await;
    let fault = Fault::apply_then_timeout(1, Duration::from_secs(30));

    let attempt = server
        .post_impatient(fault, Duration::from_millis(300))
        .await;

    let error = attempt.expect_err("the answer comes after the client's timeout");
    assert!(error.is_timeout(), "expected a timeout, got {error:?}");
    server.wait_for_effects(1).await;
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));

    let retry = server.retry_is_replayed().await;
    assert_eq!(retry.json()["id"], "payments_1");
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn slow_request_abandoned_by_its_client_still_completes() {
    let server = start().await;
    let fault = Fault::slow(1, Duration::from_millis(300));

    let attempt = server
        .post_impatient(fault, Duration::from_millis(50))
        .await;
    assert!(attempt.is_err_and(|error| error.is_timeout()));
    server.wait_for_effects(1).await;

    // Not stuck in flight: the retry sees the finished first request.
    server.retry_is_replayed().await;
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn faults_match_their_resource_and_queue_in_order() {
    let server = start().await;
    server
        .provider
        .inject(Fault::error_5xx(1).for_resource("collections"));
    server
        .provider
        .inject(Fault::slow(1, Duration::from_millis(1)).for_resource("refunds"));
    server.provider.inject(Fault::error_5xx(1));

    // Skips the `collections` and `refunds` faults, takes the catch-all one.
    let payment = server.pay("p-1").await;
    let payment_retry = server.pay("p-1").await;
    let collection = server.post("collections", Some("c-1"), PAYMENT).await;
    let collection_retry = server.post("collections", Some("c-1"), PAYMENT).await;

    assert_eq!(payment.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(payment_retry.status, StatusCode::CREATED);
    assert_eq!(collection.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(collection_retry.status, StatusCode::CREATED);
    assert_eq!(server.provider.effects(), counts(&[("c-1", 1), ("p-1", 1)]));
}

#[tokio::test]
async fn quoted_and_bare_keys_name_the_same_key() {
    let server = start().await;

    let bare = server.pay("k-1").await;
    let quoted = server.pay("\"k-1\"").await;

    assert_eq!(bare.status, StatusCode::CREATED);
    assert_eq!(quoted.replayed.as_deref(), Some("true"));
    assert_eq!(quoted.body, bare.body);
    assert_eq!(server.provider.effects(), counts(&[("k-1", 1)]));
}

#[tokio::test]
async fn admin_api_over_http() {
    let server = start().await;

    let queued = server
        .admin("/_admin/faults", json!({"kind": "error_5xx", "count": 1}))
        .await;
    assert_eq!(queued.status(), StatusCode::CREATED);
    let failed = server.pay("k-1").await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);

    let bad_fault = server
        .admin("/_admin/faults", json!({"kind": "explode", "count": 1}))
        .await;
    assert_eq!(bad_fault.status(), StatusCode::BAD_REQUEST);

    // Queued then cleared: the next request is unaffected.
    let fault = json!({"kind": "error_5xx", "count": 5, "resource": "payments"});
    server.admin("/_admin/faults", fault).await;
    let cleared = server
        .client
        .delete(server.url("/_admin/faults"))
        .send()
        .await
        .expect("DELETE /_admin/faults");
    assert!(cleared.status().is_success());
    let applied = server.pay("k-1").await;
    assert_eq!(applied.status, StatusCode::CREATED);
    server.post("collections", Some("k-2"), "[1,2]").await;

    assert_eq!(
        server.admin_effects().await,
        json!({
            "total_effects": 2,
            "requests": 3,
            "effects": {
                "k-1": {"resource": "payments", "count": 1},
                "k-2": {"resource": "collections", "count": 1},
            },
        })
    );

    let reset = server
        .client
        .post(server.url("/_admin/reset"))
        .send()
        .await
        .expect("POST /_admin/reset");
    assert!(reset.status().is_success());
    assert_eq!(
        server.admin_effects().await,
        json!({"total_effects": 0, "requests": 0, "effects": {}})
    );
    // The key is forgotten too: the same request is a first request again.
    let again = server.pay("k-1").await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.replayed, None);
    assert_eq!(again.json()["id"], "payments_1");
}

#[tokio::test]
async fn unmatched_requests_are_404() {
    let server = start().await;

    let cases = [
        server.client.get(server.url("/v1/payments")),
        server.client.post(server.url("/v1")),
        server.client.post(server.url("/v1/payments/extra")),
        server.client.post(server.url("/v2/payments")),
        server.client.get(server.url("/")),
        server.client.put(server.url("/_admin/reset")),
    ];
    for request in cases {
        let response = request.send().await.expect("request is answered");
        assert_eq!(
            response.status(),
            StatusCode::NOT_FOUND,
            "{}",
            response.url()
        );
        let body: Value = response.json().await.expect("404 body is JSON");
        assert_eq!(body, json!({"error": "not found"}));
    }
    assert_eq!(server.provider.requests(), 0);
}

#[tokio::test]
async fn reset_while_in_flight_records_nothing_in_the_fresh_state() {
    let server = start().await;
    server
        .provider
        .inject(Fault::slow(1, Duration::from_millis(300)));
    let pending = server.pay("k-1");
    let reset_midway = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.provider.reset();
    };

    let (reply, ()) = tokio::join!(pending, reset_midway);

    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(server.provider.effects().is_empty());
    let fresh = server.pay("k-1").await;
    assert_eq!(fresh.status, StatusCode::CREATED);
    assert_eq!(fresh.replayed, None);
}

#[tokio::test]
async fn a_rejected_key_is_refused_every_time_and_applies_nothing() {
    let server = start().await;
    server.provider.reject_key("k-bad", 422);
    // A queued fault still comes first: it is the network or the provider's health.
    server.provider.inject(Fault::error_5xx(1));

    let unhealthy = server.pay("k-bad").await;
    let refused = server.pay("k-bad").await;
    let again = server.pay("k-bad").await;
    let other = server.pay("k-good").await;

    assert_eq!(unhealthy.status, StatusCode::SERVICE_UNAVAILABLE);
    for reply in [&refused, &again] {
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(reply.replayed, None);
        assert_eq!(reply.json(), json!({"error": "request rejected"}));
    }
    assert_eq!(other.status, StatusCode::CREATED);
    assert_eq!(server.provider.effects(), counts(&[("k-good", 1)]));
    assert_eq!(server.provider.rejections(), 2);

    server.provider.reset();
    let after_reset = server.pay("k-bad").await;
    assert_eq!(
        after_reset.status,
        StatusCode::CREATED,
        "a reset forgets rejections"
    );
}

#[tokio::test]
async fn keys_are_forgotten_once_older_than_the_key_retention() {
    let server = start().await;
    server
        .provider
        .set_key_retention(Some(Duration::from_secs(86_400)));

    let first = server.pay("k-1").await;
    server.provider.advance(Duration::from_secs(86_399));
    let replay = server.pay("k-1").await;
    assert_eq!(replay.replayed.as_deref(), Some("true"));
    assert_eq!(replay.body, first.body);
    assert_eq!(server.provider.forgotten_keys(), 0);

    // A day after it was stored, the key is gone: the same request applies again.
    server.provider.advance(Duration::from_secs(1));
    let forgotten = server.pay("k-1").await;
    assert_eq!(forgotten.status, StatusCode::CREATED);
    assert_eq!(forgotten.replayed, None);
    assert_ne!(forgotten.json()["id"], first.json()["id"]);
    assert_eq!(server.provider.effects(), counts(&[("k-1", 2)]));
    assert_eq!(server.provider.forgotten_keys(), 1);

    // The retention and the clock survive a reset; without a retention nothing is forgotten.
    server.provider.reset();
    server.pay("k-2").await;
    server.provider.advance(Duration::from_secs(86_400));
    let gone = server.pay("k-2").await;
    assert_eq!(gone.replayed, None, "the retention outlived the reset");
    server.provider.set_key_retention(None);
    server.provider.advance(Duration::from_secs(10 * 86_400));
    let kept = server.pay("k-2").await;
    assert_eq!(kept.replayed.as_deref(), Some("true"));
    assert_eq!(server.provider.effects(), counts(&[("k-2", 2)]));
}

#[tokio::test]
async fn a_slow_first_request_is_in_flight_until_it_applies() {
    let server = start().await;
    assert_eq!(server.provider.in_flight(), 0);
    let fault = Fault::slow(1, Duration::from_millis(200));
    let gave_up = server
        .post_impatient(fault, Duration::from_millis(50))
        .await;
    assert!(gave_up.is_err_and(|error| error.is_timeout()));
    assert_eq!(server.provider.in_flight(), 1, "still working on it");
    server.wait_for_effects(1).await;
    assert_eq!(server.provider.in_flight(), 0);
}

#[tokio::test]
async fn permanent_faults_over_the_admin_api() {
    let server = start().await;

    let rejected = server
        .admin("/_admin/rejections", json!({"key": "k-bad", "status": 403}))
        .await;
    assert_eq!(rejected.status(), StatusCode::NO_CONTENT);
    let not_4xx = server
        .admin("/_admin/rejections", json!({"key": "k-bad", "status": 503}))
        .await;
    assert_eq!(not_4xx.status(), StatusCode::BAD_REQUEST);
    let refused = server.pay("k-bad").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let retention = server
        .admin("/_admin/key-retention", json!({"retention_ms": 60_000}))
        .await;
    assert_eq!(retention.status(), StatusCode::NO_CONTENT);
    server.pay("k-1").await;
    let advanced = server
        .admin("/_admin/clock", json!({"advance_ms": 60_000}))
        .await;
    assert_eq!(advanced.status(), StatusCode::NO_CONTENT);
    let again = server.pay("k-1").await;
    assert_eq!(again.replayed, None, "forgotten after a minute");
    assert_eq!(server.provider.effects(), counts(&[("k-1", 2)]));

    let bad = server
        .admin("/_admin/clock", json!({"advance_ms": -1}))
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}
