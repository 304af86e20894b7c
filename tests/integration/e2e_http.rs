//! End to end through the HTTP `Idempotency-Key` door, as `cargo xtask test` runs it:
//! `orders-api` over real HTTP through `cargo lambda watch`'s Function URL front, and through
//! the local runtime's invoke API with AWS's published API Gateway v2 request payload; the
//! orders and marks read back from the local DynamoDB (Dynoxide).

use std::time::Duration;

use dedup_tests::{client, get_item, unique};
use lambda_dedup::{DedupKey, Retention, Scope};
use lambda_dedup_dynamodb::DynamoStore;
use serde_json::{Value, json};

use crate::e2e::{env, stack_is_up};
use crate::e2e_doors::header;

/// One POST to `orders-api`'s Function URL: its status, `idempotent-replayed`, `retry-after`
/// and body.
async fn post(
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Option<String>, Option<String>, String) {
    let mut req = reqwest::Client::new()
        .post(env("DEDUP_ORDERS_URL"))
        .header("content-type", "application/json");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = req
        .body(body.to_owned())
        .send()
        .await
        .expect("orders-api answers over HTTP");
    let status = resp.status().as_u16();
    let replayed = header(&resp, "idempotent-replayed");
    let retry_after = header(&resp, "retry-after");
    (
        status,
        replayed,
        retry_after,
        resp.text().await.unwrap_or_default(),
    )
}

fn keyed(key: &str, caller: &str) -> [(&'static str, String); 2] {
    [
        ("idempotency-key", format!("\"{key}\"")),
        ("x-caller-id", caller.to_owned()),
    ]
}

async fn post_keyed(
    key: &str,
    caller: &str,
    body: &str,
) -> (u16, Option<String>, Option<String>, String) {
    let h = keyed(key, caller);
    post(&[(h[0].0, &h[0].1), (h[1].0, &h[1].1)], body).await
}

/// `orders-api`'s key `key` for the caller `shop-a`, and the stack's mark table's store: a test
/// reads there what the door would have written on the transaction path.
fn orders_mark(key: &str) -> (DedupKey, DynamoStore) {
    let scope = Scope::new("demo", "orders-api").expect("scope");
    // The door's caller string: its kind and each part prefixed by its length.
    let dedup_key = DedupKey::new(&scope, "header:6:shop-a", &["idempotency-key", key]);
    let store = DynamoStore::new(
        client(),
        env("DEDUP_TABLE_MARKS"),
        Retention::unchecked(Duration::from_secs(86_400)).expect("retention"),
    );
    (dedup_key, store)
}

fn order_id(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {body}"))
        .to_owned()
}

async fn order_exists(id: &str) -> bool {
    get_item(&client(), &env("DEDUP_TABLE_ORDERS"), "order_id", id)
        .await
        .is_some()
}

fn error_code(body: &str) -> String {
    serde_json::from_str::<Value>(body).map_or_else(
        |_| body.to_owned(),
        |v| v["error"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The draft, over real HTTP: a POST creates its order (201), its own mark; the
/// retry gets the same 201 and body with `idempotent-replayed: true` and no second order; the
/// key with another body is 422; another caller's same key is its own order; no key, a key of
/// 256 characters, two `Idempotency-Key` headers (joined, as a Function URL hands them), a body that is not JSON and one over the limit
/// are refused (400, 413) and store nothing.
#[tokio::test]
async fn e2e_idempotency_key_orders_are_created_once_and_replayed() {
    if !stack_is_up() {
        return;
    }
    let key = unique("order-key");
    let body = r#"{"sku":"book-1","quantity":2}"#;
    let first = post_keyed(&key, "shop-a", body).await;
    assert_eq!((first.0, first.1.as_deref()), (201, None), "{first:?}");
    let id = order_id(&first.3);
    assert!(order_exists(&id).await, "the order is in the orders table");
    let again = post_keyed(&key, "shop-a", body).await;
    assert_eq!(
        (again.0, again.1.as_deref(), &again.3),
        (201, Some("true"), &first.3)
    );

    let other = post_keyed(&key, "shop-a", r#"{"sku":"book-1","quantity":3}"#).await;
    assert_eq!(
        (other.0, error_code(&other.3).as_str()),
        (422, "idempotency_key_reused")
    );
    let b = post_keyed(&key, "shop-b", body).await;
    assert_eq!(
        (b.0, b.1.as_deref()),
        (201, None),
        "another caller's own request"
    );
    assert_ne!(order_id(&b.3), id);

    let none = post(&[("x-caller-id", "shop-a")], body).await;
    assert_eq!(
        (none.0, error_code(&none.3).as_str()),
        (400, "idempotency_key_missing")
    );
    let long = post_keyed(&"k".repeat(256), "shop-a", body).await;
    assert_eq!(
        (long.0, error_code(&long.3).as_str()),
        (400, "idempotency_key_too_long")
    );
    // Two `Idempotency-Key` headers reach a Function URL function joined with a comma (AWS's
    // payload 2.0); `cargo lambda watch`'s front keeps one of them, so the joined form is sent.
    let twice = post(
        &[
            ("idempotency-key", "\"t-1\", \"t-2\""),
            ("x-caller-id", "shop-a"),
        ],
        body,
    )
    .await;
    assert_eq!(
        (twice.0, error_code(&twice.3).as_str()),
        (400, "idempotency_key_repeated")
    );
    let text = post_keyed(&unique("text"), "shop-a", "sku=book-1").await;
    assert_eq!((text.0, error_code(&text.3).as_str()), (400, "not_json"));
    let big = format!(
        r#"{{"sku":"book-1","quantity":1,"pad":"{}"}}"#,
        "x".repeat(300_000)
    );
    assert_eq!(post_keyed(&unique("big"), "shop-a", &big).await.0, 413);
    let nobody = post(&[("idempotency-key", "\"n-1\"")], body).await;
    assert_eq!(
        (nobody.0, error_code(&nobody.3).as_str()),
        (401, "caller_missing")
    );
}

/// Issue 45, through the built function: the order is the key's own mark (one-item mode, one
/// conditional `PutItem`, the one grant of its role). The order read back from DynamoDB carries
/// the key that created it, its id is the id derived from that key, and the mark table holds
/// no mark of it; an invalid order (400) creates nothing and is not stored, so its retry is
/// answered anew, not replayed.
#[tokio::test]
async fn e2e_idempotency_key_order_is_its_own_mark() {
    if !stack_is_up() {
        return;
    }
    let key = unique("own-mark");
    let first = post_keyed(&key, "shop-a", r#"{"sku":"pen-1","quantity":1}"#).await;
    assert_eq!(first.0, 201, "{first:?}");
    let id = order_id(&first.3);
    let (dedup_key, marks) = orders_mark(&key);
    assert_eq!(
        id,
        dedup_key.idempotency_key(),
        "the id derived from the key"
    );
    let order = get_item(&client(), &env("DEDUP_TABLE_ORDERS"), "order_id", &id)
        .await
        .expect("the order");
    let created_by = order
        .get(lambda_dedup::create_once::CREATED_KEY)
        .and_then(|v| v.as_s().ok());
    assert_eq!(created_by, Some(&dedup_key.as_str().to_owned()));
    assert!(
        marks.get(&dedup_key).await.expect("get").is_none(),
        "no mark item"
    );
    let invalid = unique("invalid");
    let zero = r#"{"sku":"pen-1","quantity":0}"#;
    let refused = post_keyed(&invalid, "shop-a", zero).await;
    let again = post_keyed(&invalid, "shop-a", zero).await;
    assert_eq!(
        (refused.0, again.0, again.1.as_deref()),
        (400, 400, None),
        "{again:?}"
    );
}

/// AWS's published API Gateway v2 request (`events/apigw-v2-request-no-authorizer.json`, from
/// `aws_lambda_events`' fixtures) through the local runtime's invoke API: the payload shape
/// Lambda hands an HTTP API or Function URL function. Its POST is answered 201, its retry the
/// same answer with `Idempotent-Replayed: true` in the API Gateway v2 response shape.
#[tokio::test]
async fn e2e_idempotency_key_aws_http_api_payloads_are_answered_and_replayed() {
    if !stack_is_up() {
        return;
    }
    let mut event: Value = serde_json::from_str(include_str!(
        "../../events/apigw-v2-request-no-authorizer.json"
    ))
    .expect("sample event");
    let key = unique("apigw");
    event["rawPath"] = "/orders".into();
    event["requestContext"]["http"]["method"] = "POST".into();
    event["requestContext"]["http"]["path"] = "/orders".into();
    event["headers"]["idempotency-key"] = format!("\"{key}\"").into();
    event["headers"]["x-caller-id"] = "shop-a".into();
    event["headers"]["content-type"] = "application/json".into();
    event["body"] = json!({"sku": "mug-1", "quantity": 4}).to_string().into();
    let invoke = || async {
        reqwest::Client::new()
            .post(format!(
                "{}/2015-03-31/functions/orders-api/invocations",
                env("DEDUP_INVOKE_URL")
            ))
            .json(&event)
            .send()
            .await
            .expect("invoke")
            .json::<Value>()
            .await
            .expect("an API Gateway v2 response")
    };
    let first = invoke().await;
    assert_eq!(first["statusCode"], 201, "{first}");
    let again = invoke().await;
    assert_eq!(again["statusCode"], 201, "{again}");
    assert_eq!(again["headers"]["idempotent-replayed"], "true", "{again}");
    assert_eq!(again["body"], first["body"]);
    let body = first["body"].as_str().expect("body");
    assert!(order_exists(&order_id(body)).await);
}
