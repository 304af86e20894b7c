//! The HTTP `Idempotency-Key` door on DynamoDB (the local emulator, Dynoxide), as `orders-api`'s
//! `main` wires it (`Dedup::read(..).on(Items::dynamodb(..))`, `orders_api::service`): requests
//! racing under one key create one order, committed with the key's mark (S4, S5).

use lambda_dedup_runtime::http::HttpConfig;
use lambda_dedup_runtime::{Dedup, Env, store::Items};
use lambda_http::tower::ServiceExt;
use lambda_http::{Body, Request};

fn post(key: &str, body: &str) -> Request {
    lambda_http::http::Request::builder()
        .method("POST")
        .uri("/orders")
        .header("idempotency-key", format!("\"{key}\""))
        .header("x-caller-id", "shop-race")
        .body(Body::Text(body.to_owned()))
        .expect("request")
}

/// S4, S5 against the real emulator: eight requests racing under one key end with one order in
/// the table and one completed mark; every 201 carries that order (the first's answer, or its
/// replay), and any other answer is the draft's 409 with nothing written.
#[tokio::test]
async fn s5_idempotency_key_requests_racing_on_dynamodb_create_one_order() {
    let client = dedup_tests::client();
    let marks = dedup_tests::mark_table(&client).await;
    let orders = dedup_tests::effect_table(&client, "order_id").await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("DEDUP_MARK_TABLE", marks.as_str()),
        ("ORDERS_TABLE", orders.as_str()),
        ("HTTP_CALLER_FROM", "header:x-caller-id"),
        // As the local stack: nothing verifies the header here, said openly.
        ("HTTP_CALLER_FRONT", "unverified"),
    ]);
    let dedup = Dedup::read(&env, orders_api::FUNCTION).expect("settings");
    let config = HttpConfig::read(&env).expect("config");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    let service = orders_api::service(dedup.on(store), config).expect("service");
    let key = dedup_tests::unique("race");
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let racers = (0..8).map(|_| {
        let s = service.clone();
        let r = post(&key, body);
        tokio::spawn(async move {
            let answer = s.oneshot(r).await.expect("answer");
            let status = answer.status().as_u16();
            let text = match answer.body() {
                Body::Text(t) => t.clone(),
                other => format!("{other:?}"),
            };
            (status, text)
        })
    });
    let mut answers = Vec::new();
    for r in racers {
        answers.push(r.await.expect("racer"));
    }
    let created: Vec<&String> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert!(!created.is_empty(), "{answers:?}");
    assert!(
        created.iter().all(|b| *b == created[0]),
        "one order answered: {answers:?}"
    );
    assert!(
        answers.iter().all(|(s, _)| *s == 201 || *s == 409),
        "{answers:?}"
    );
    let items = local_dynamodb::items::scan(&client, &orders)
        .await
        .expect("scan");
    assert_eq!(items.len(), 1, "one order for one key: {answers:?}");
    let id: serde_json::Value = serde_json::from_str(created[0]).expect("json");
    assert_eq!(
        items[0]
            .get("order_id")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        id["id"].as_str()
    );
    // And the retry after the race is the stored answer.
    let again = service
        .clone()
        .oneshot(post(&key, body))
        .await
        .expect("answer");
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap_or("")),
        Some("true")
    );
}
