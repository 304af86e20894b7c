//! The function as `main` wires it, on the in-memory store, with its mail API played by the fake
//! provider (`lambda-dedup-fake-provider`), which honours `Idempotency-Key`, counts what it sent
//! and fails as told.

use super::*;
use lambda_dedup_fake_provider::{Fault, Provider};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::Env;
use lambda_dedup_runtime::events::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup_runtime::{Item, Value};
use lambda_runtime::tower::ServiceExt;
use std::time::Duration;

/// The mail API, on a port of its own.
async fn mail_api() -> (Provider, String) {
    let mail = Provider::new();
    let (url, _) = mail.serve().await.expect("mail API");
    (mail, format!("{url}/v1"))
}

/// The e-mail sent for each idempotency key: its recipient.
fn emails(mail: &Provider) -> Vec<serde_json::Value> {
    mail.applied()
        .into_values()
        .map(|m| m["to"].clone())
        .collect()
}

fn settings(mail_url: &str) -> Dedup<lambda_dedup_runtime::store::NoStore> {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("ORDERS_TABLE", "orders"),
        ("MAIL_API_URL", mail_url),
        ("PROVIDER_TIMEOUT_MS", "300"),
    ]);
    Dedup::read(&env, "order-placed").expect("settings")
}

fn function(store: &MemoryStore, mail_url: &str) -> SqsService {
    service(settings(mail_url).on(lambda_dedup_runtime::store::Items::new(store.clone())))
        .expect("service")
}

fn store() -> MemoryStore {
    let store = lambda_dedup_runtime::testing::memory_store(settings("http://unused").settings());
    store.create_table("orders", "order_id");
    store
}

fn order(message_id: &str, order_id: &str, total: i64, sent_at: &str) -> SqsMessage {
    let body = serde_json::json!({"order_id": order_id, "customer": "c-9", "email": "ada@example.com",
        "total_cents": total, "sent_at": sent_at});
    let mut m = SqsMessage::default();
    m.message_id = Some(message_id.into());
    m.body = Some(body.to_string());
    m
}

async fn deliver(f: SqsService, records: Vec<SqsMessage>) -> Vec<String> {
    let mut event = SqsEvent::default();
    event.records = records;
    let context = lambda_runtime::Context::default();
    let response: SqsBatchResponse = f
        .oneshot(lambda_runtime::LambdaEvent::new(event, context))
        .await
        .expect("answered");
    let failures = response.batch_item_failures.into_iter();
    failures.map(|f| f.item_identifier).collect()
}

fn total(store: &MemoryStore, order_id: &str) -> Option<Value> {
    let item = store.item("orders", &Item::new().with("order_id", order_id))?;
    item.0.get("total_cents").cloned()
}

#[tokio::test]
async fn an_order_is_written_once_and_its_email_sent_once() {
    let (store, (mail, url)) = (store(), mail_api().await);
    let failed = deliver(function(&store, &url), vec![order("m1", "o-1", 1200, "t1")]).await;
    assert!(failed.is_empty(), "{failed:?}");
    // SQS redelivers the message; the producer retries with a new message and a new sent_at.
    let again = vec![
        order("m1", "o-1", 1200, "t1"),
        order("m2", "o-1", 1200, "t2"),
    ];
    assert!(deliver(function(&store, &url), again).await.is_empty());
    assert_eq!(total(&store, "o-1"), Some(Value::N("1200".into())));
    assert_eq!(emails(&mail), ["ada@example.com"]);
    assert_eq!(mail.requests(), 1, "duplicates call nothing");
}

#[tokio::test]
async fn a_failed_email_is_sent_on_redelivery_and_the_order_is_not_written_twice() {
    let (store, (mail, url)) = (store(), mail_api().await);
    mail.inject(Fault::error_5xx(1));
    let failed = deliver(function(&store, &url), vec![order("m1", "o-2", 500, "t1")]).await;
    assert_eq!(failed, ["m1"], "the e-mail did not go: redelivered");
    assert_eq!(
        total(&store, "o-2"),
        Some(Value::N("500".into())),
        "order committed first"
    );
    assert!(mail.applied().is_empty());
    assert!(
        deliver(function(&store, &url), vec![order("m1", "o-2", 500, "t1")])
            .await
            .is_empty()
    );
    assert_eq!(emails(&mail), ["ada@example.com"]);
    assert_eq!(store.items("orders").len(), 1);
}

#[tokio::test]
async fn an_email_whose_answer_was_lost_is_not_sent_again_on_redelivery() {
    let (store, (mail, url)) = (store(), mail_api().await);
    // Sent, but the answer comes after the function's 300 ms provider timeout.
    mail.inject(Fault::apply_then_timeout(1, Duration::from_secs(2)));
    let failed = deliver(function(&store, &url), vec![order("m1", "o-7", 800, "t1")]).await;
    assert_eq!(failed, ["m1"], "no answer: redelivered");
    assert_eq!(mail.total_effects(), 1, "the mail API did send it");
    // The redelivery's call carries the same key: the API answers with the first e-mail.
    assert!(
        deliver(function(&store, &url), vec![order("m1", "o-7", 800, "t1")])
            .await
            .is_empty()
    );
    assert_eq!(mail.requests(), 2);
    assert_eq!(mail.total_effects(), 1, "one e-mail");
}

#[tokio::test]
async fn malformed_conflicting_and_invalid_orders_are_failed_and_nothing_is_sent() {
    let (store, (mail, url)) = (store(), mail_api().await);
    assert!(
        deliver(function(&store, &url), vec![order("m1", "o-3", 700, "t1")])
            .await
            .is_empty()
    );
    let mut not_json = order("m2", "o-4", 1, "t1");
    not_json.body = Some("{not json".into());
    let mut no_email = order("m3", "o-5", 1, "t1");
    no_email.body = Some(r#"{"order_id": "o-5", "customer": "c", "total_cents": 1}"#.into());
    let bad = vec![
        not_json,
        no_email,
        order("m4", "o-3", 9_999, "t2"),
        order("m5", "o-6", 0, "t1"),
    ];
    let failed = deliver(function(&store, &url), bad).await;
    assert_eq!(failed, ["m2", "m3", "m4", "m5"]);
    assert_eq!(
        total(&store, "o-3"),
        Some(Value::N("700".into())),
        "the conflict wrote nothing"
    );
    assert_eq!(store.items("orders").len(), 1);
    assert_eq!(mail.requests(), 1);
}
