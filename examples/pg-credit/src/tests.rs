//! The service as `main` wires it: on the memory store (its statements recorded, not run), and
//! on a PostgreSQL server of the test binary's own, started by the test kit from the wheel in
//! the venv `LAMBDA_DEDUP_TESTKIT_VENV` names (`cargo xtask test` sets it to the project's),
//! each test on fresh tables; without the variable the server tests are skipped with a message.
//! Balances are read back with plain SQL, not through the store.

use super::*;
use lambda_dedup_postgres::SqlValue;
use lambda_dedup_runtime::events::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup_runtime::testing::on_memory_recording;
use lambda_dedup_runtime::{Env, Service};
use lambda_dedup_testkit::VENV_VAR;
use lambda_dedup_testkit::postgres::{Postgres, tokio_postgres};

/// The test binary's PostgreSQL (started on first use, stopped when the binary exits), or
/// `None`, said, without a venv named.
fn server(test: &str) -> Option<&'static Postgres> {
    if std::env::var_os(VENV_VAR).is_none() {
        eprintln!("{test} skipped: {VENV_VAR} is not set; `cargo xtask test` sets it");
        return None;
    }
    static SERVER: std::sync::OnceLock<Postgres> = std::sync::OnceLock::new();
    let server = SERVER.get_or_init(|| Postgres::start().expect("PostgreSQL"));
    Some(server)
}

fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{n}_{nanos}", std::process::id())
}

fn env(url: &str, marks: &str, balances: &str) -> Env {
    Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", marks),
        ("BALANCES_TABLE", balances),
        ("DATABASE_URL", url),
        ("PG_TLS", "disabled"),
    ])
}

fn record(message_id: &str, event_id: &str, account: &str, amount: i64) -> SqsMessage {
    let body = serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
        "id": event_id, "tenantid": "acme", "data": {"account": account, "amount": amount}});
    let mut m = SqsMessage::default();
    m.message_id = Some(message_id.into());
    m.body = Some(body.to_string());
    m
}

fn batch(records: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records;
    event
}

/// Spoils two records (of amount 1): the first's body is not JSON, the second's amount not an
/// integer.
fn malformed(records: &mut [SqsMessage]) {
    records[0].body = Some("not json".into());
    records[1].body = records[1]
        .body
        .as_ref()
        .map(|b| b.replace("\"amount\":1", "\"amount\":\"one\""));
}

fn failed(response: &SqsBatchResponse) -> Vec<&str> {
    let ids = response.batch_item_failures.iter();
    ids.map(|f| f.item_identifier.as_str()).collect()
}

/// The function as `main` builds it from `env`, on PostgreSQL.
fn function(env: &Env) -> Result<SqsService, Error> {
    service(Dedup::read(env, "pg-credit")?.postgres()?)
}

/// The function on fresh tables of the server, and a connection of the test's own.
async fn on_server(pg: &Postgres) -> (SqsService, tokio_postgres::Client, String) {
    let (marks, balances) = (unique("marks"), unique("balances"));
    let env = env(pg.url(), &marks, &balances);
    pg.create_mark_table(&marks).await.expect("the marks table");
    let client = pg.connect().await.expect("connect");
    client
        .batch_execute(&format!(
            "CREATE TABLE \"{balances}\" (account text PRIMARY KEY, balance bigint NOT NULL)"
        ))
        .await
        .expect("the balances table");
    (function(&env).expect("function"), client, balances)
}

trait Handle {
    async fn handle(&self, event: SqsEvent) -> SqsBatchResponse;
}

impl Handle for Service<SqsEvent, SqsBatchResponse> {
    async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        self.call_with(event).await.expect("answered")
    }
}

async fn balance(client: &tokio_postgres::Client, balances: &str, account: &str) -> Option<i64> {
    let sql = format!("SELECT balance FROM \"{balances}\" WHERE account = $1");
    let rows = client.query(&sql, &[&account]).await.expect("read");
    rows.first().map(|r| r.get(0))
}

#[tokio::test]
async fn each_event_is_credited_once_however_often_it_is_delivered() {
    let Some(pg) = server("each_event_is_credited_once_however_often_it_is_delivered") else {
        return;
    };
    let (function, client, balances) = on_server(pg).await;
    // Two events; the first delivered twice in one batch.
    let first = vec![
        record("m1", "e1", "a-1", 10),
        record("m2", "e1", "a-1", 10),
        record("m3", "e2", "a-1", 5),
    ];
    let response = function.handle(batch(first)).await;
    assert!(failed(&response).is_empty(), "{response:?}");
    // SQS redelivers m1 (same message id); the producer retries e1 under a new id; one message
    // is not JSON, one carries no integer amount.
    let mut again = vec![
        record("m1", "e1", "a-1", 10),
        record("m4", "e1", "a-1", 10),
        record("m5", "e3", "a-1", 1),
        record("m6", "e4", "a-1", 1),
        record("m7", "e5", "a-1", 2),
    ];
    malformed(&mut again[2..4]);
    let response = function.handle(batch(again)).await;
    // The redelivery and the retry are duplicates; the malformed messages are failed, for the
    // queue's redrive policy to dead-letter; e5 is applied in the same transaction regardless.
    assert_eq!(failed(&response), ["m5", "m6"]);
    assert_eq!(balance(&client, &balances, "acme/a-1").await, Some(17));
}

#[tokio::test]
async fn a_credit_postgres_refuses_fails_alone_and_changes_nothing() {
    let Some(pg) = server("a_credit_postgres_refuses_fails_alone_and_changes_nothing") else {
        return;
    };
    let (function, client, balances) = on_server(pg).await;
    let full = vec![record("m1", "e1", "a-2", i64::MAX)];
    assert!(failed(&function.handle(batch(full)).await).is_empty());
    // The next credit to a-2 overflows `bigint` (SQLSTATE 22003): refused for good, so failed
    // for the dead-letter queue; the other event of the transaction is committed.
    let next = vec![record("m2", "e2", "a-2", 1), record("m3", "e3", "a-3", 4)];
    let response = function.handle(batch(next)).await;
    assert_eq!(failed(&response), ["m2"]);
    assert_eq!(
        balance(&client, &balances, "acme/a-2").await,
        Some(i64::MAX)
    );
    assert_eq!(balance(&client, &balances, "acme/a-3").await, Some(4));
    // Its redelivery is refused again, not applied: no mark was written for it.
    let again = vec![record("m2", "e2", "a-2", 1)];
    assert_eq!(failed(&function.handle(batch(again)).await), ["m2"]);
    assert_eq!(
        balance(&client, &balances, "acme/a-2").await,
        Some(i64::MAX)
    );
}

#[test]
fn a_start_without_tls_settings_or_with_a_bad_table_name_is_refused() {
    let base = env("postgresql://u@127.0.0.1:5432/db", "marks", "balances");
    let refused = |env: &Env| {
        function(env)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let no_tls = Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("BALANCES_TABLE", "balances"),
        ("DATABASE_URL", "postgresql://u@127.0.0.1:5432/db"),
    ]);
    assert!(
        refused(&no_tls).contains("PG_TLS=disabled"),
        "{}",
        refused(&no_tls)
    );
    let injected = base
        .clone()
        .with("BALANCES_TABLE", "balances; DROP TABLE x");
    assert!(
        refused(&injected).contains("table name"),
        "{}",
        refused(&injected)
    );
    let bad_marks = base.clone().with("DEDUP_MARK_TABLE", "marks\"");
    assert!(
        refused(&bad_marks).contains("table name"),
        "{}",
        refused(&bad_marks)
    );
    let no_url = Env::from_pairs([("DEDUP_NAMESPACE", "example"), ("PG_TLS", "disabled")]);
    assert!(
        refused(&no_url).contains("DATABASE_URL"),
        "{}",
        refused(&no_url)
    );
    assert!(function(&base).is_ok(), "connects lazily: no server needed");
}

/// On the memory store, as the tests of a DynamoDB function run: one upsert of the tenant's
/// account per event however often it is delivered (a redelivery and a producer retry are
/// duplicates, recorded nothing), the malformed messages failed and nothing recorded for them.
#[tokio::test]
async fn on_memory_each_event_records_one_upsert_of_its_tenants_account() {
    let env = env("postgresql://u@127.0.0.1:5432/db", "marks", "balances");
    let (dedup, store) =
        on_memory_recording::<SqlEffect>(Dedup::read(&env, "pg-credit").expect("settings"));
    let service = service(dedup).expect("service");
    let first = vec![
        record("m1", "e1", "a-1", 10),
        record("m2", "e1", "a-1", 10),
        record("m3", "e2", "a-1", 5),
    ];
    assert!(failed(&service.handle(batch(first)).await).is_empty());
    let mut again = vec![
        record("m4", "e1", "a-1", 10),
        record("m5", "e3", "a-1", 1),
        record("m6", "e4", "a-1", 1),
    ];
    malformed(&mut again[1..3]);
    assert_eq!(failed(&service.handle(batch(again)).await), ["m5", "m6"]);
    let effects = store.effects();
    assert_eq!(effects.len(), 2, "{effects:?}");
    assert!(
        effects[0].sql().starts_with("INSERT INTO \"balances\""),
        "{}",
        effects[0].sql()
    );
    let amounts: Vec<&[SqlValue]> = effects.iter().map(|e| e.params()).collect();
    assert_eq!(
        amounts,
        [
            [SqlValue::Text("acme/a-1".into()), SqlValue::BigInt(10)],
            [SqlValue::Text("acme/a-1".into()), SqlValue::BigInt(5)],
        ]
    );
}
