//! The function as `main` wires it, on the in-memory store, with a mail API that counts.

use super::*;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup::{Item, Value};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::Env;
use lambda_runtime::tower::ServiceExt;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The mail API: each idempotency key sends one e-mail, as an API honouring the key does; it
/// counts the requests and the e-mails, and can be told to fail.
#[derive(Clone, Default)]
struct Mail {
    sent: Arc<Mutex<BTreeMap<String, String>>>,
    requests: Arc<Mutex<u32>>,
    down: Arc<Mutex<bool>>,
}

impl Mail {
    fn send(&self, order: OrderPlaced, key: String) -> Result<Option<String>, Refusal> {
        *self.requests.lock().expect("lock") += 1;
        if *self.down.lock().expect("lock") {
            return Err(Refusal::Transient("mail API unavailable".into()));
        }
        self.sent
            .lock()
            .expect("lock")
            .entry(key)
            .or_insert(order.email);
        Ok(Some("queued".into()))
    }
    fn emails(&self) -> Vec<String> {
        self.sent.lock().expect("lock").values().cloned().collect()
    }
}

fn settings() -> Dedup {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("ORDERS_TABLE", "orders"),
    ]);
    Dedup::read(&env, "order-placed").expect("settings")
}

fn function(store: &MemoryStore, mail: &Mail) -> SqsService {
    let dedup = settings();
    let mail = mail.clone();
    let send = move |order, key| {
        let result = mail.send(order, key);
        async move { result }
    };
    service(dedup.store(store.clone()), send).expect("service")
}

fn store() -> MemoryStore {
    let settings = settings();
    let store =
        MemoryStore::new(settings.settings().retention).with_lease(settings.settings().lease);
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
    let (store, mail) = (store(), Mail::default());
    let failed = deliver(
        function(&store, &mail),
        vec![order("m1", "o-1", 1200, "t1")],
    )
    .await;
    assert!(failed.is_empty(), "{failed:?}");
    // SQS redelivers the message; the producer retries with a new message and a new sent_at.
    let again = vec![
        order("m1", "o-1", 1200, "t1"),
        order("m2", "o-1", 1200, "t2"),
    ];
    assert!(deliver(function(&store, &mail), again).await.is_empty());
    assert_eq!(total(&store, "o-1"), Some(Value::N("1200".into())));
    assert_eq!(mail.emails(), ["ada@example.com"]);
    assert_eq!(
        *mail.requests.lock().expect("lock"),
        1,
        "duplicates call nothing"
    );
}

#[tokio::test]
async fn a_failed_email_is_sent_on_redelivery_and_the_order_is_not_written_twice() {
    let (store, mail) = (store(), Mail::default());
    *mail.down.lock().expect("lock") = true;
    let failed = deliver(function(&store, &mail), vec![order("m1", "o-2", 500, "t1")]).await;
    assert_eq!(failed, ["m1"], "the e-mail did not go: redelivered");
    assert_eq!(
        total(&store, "o-2"),
        Some(Value::N("500".into())),
        "order committed first"
    );
    *mail.down.lock().expect("lock") = false;
    assert!(
        deliver(function(&store, &mail), vec![order("m1", "o-2", 500, "t1")])
            .await
            .is_empty()
    );
    assert_eq!(mail.emails(), ["ada@example.com"]);
    assert_eq!(store.items("orders").len(), 1);
}

#[tokio::test]
async fn malformed_conflicting_and_invalid_orders_are_failed_and_nothing_is_sent() {
    let (store, mail) = (store(), Mail::default());
    assert!(
        deliver(function(&store, &mail), vec![order("m1", "o-3", 700, "t1")])
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
    let failed = deliver(function(&store, &mail), bad).await;
    assert_eq!(failed, ["m2", "m3", "m4", "m5"]);
    assert_eq!(
        total(&store, "o-3"),
        Some(Value::N("700".into())),
        "the conflict wrote nothing"
    );
    assert_eq!(store.items("orders").len(), 1);
    assert_eq!(*mail.requests.lock().expect("lock"), 1);
}
