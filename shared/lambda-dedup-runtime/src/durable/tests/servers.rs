//! The step guard's scenarios on every real store that commits effects with its marks:
//! DynamoDB (writes), PostgreSQL (SQL statements) and Valkey (commands), on the servers `cargo
//! xtask test` starts and names in `DEDUP_DYNAMODB_ENDPOINT`, `DEDUP_POSTGRES_URL` and
//! `DEDUP_VALKEY_URL` (`cargo xtask test -p lambda-dedup-runtime -- durable::tests`); without
//! them each case is skipped with a message. Each case has marks and an account of its own; the balance is read back with the
//! server's own client, not through the store.

use std::sync::Arc;
use std::time::SystemTime;

use lambda_dedup::{Effect, Item, ItemStore, ManualClock, MarkStore, Value};
use lambda_dedup_conformance::{server, unique};
use lambda_dedup_dynamodb::{Client, DynamoItems, DynamoStore, provision};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};
use lambda_dedup_valkey::{ValkeyEffect, ValkeyStore};

use super::{
    World, a_crash_after_the_call, a_crash_after_the_commit,
    a_long_wait_between_the_claim_and_the_call, dedup,
};
use crate::durable::Steps;

const DYNAMODB: &str = "`cargo xtask test -p lambda-dedup-runtime -- durable` starts DynamoDB";
const PG: &str = "`cargo xtask test -p lambda-dedup-runtime -- durable` starts PostgreSQL";
const VALKEY: &str = "`cargo xtask test -p lambda-dedup-runtime -- durable` starts Valkey";

/// The guard on a DynamoDB store of a fresh mark table, its clock the test's, and a fresh
/// accounts table; the items to read it back (through the store's own crate: only it knows
/// DynamoDB's SDK).
async fn on_dynamodb(endpoint: &str) -> (World<Effect>, DynamoItems, String) {
    use aws_config::{BehaviorVersion, Region};
    let settings = dedup().settings().clone();
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let conf = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .test_credentials()
        .load()
        .await;
    let client = Client::from_conf(&conf);
    let (marks, accounts) = (unique("step_marks"), unique("accounts"));
    provision::create_mark_table(client.clone(), &marks, false)
        .await
        .expect("the mark table");
    provision::create_table(client.clone(), &accounts, "id", false)
        .await
        .expect("the accounts table");
    let store = DynamoStore::new(client.clone(), marks, settings.retention)
        .with_lease(settings.lease)
        .with_clock(clock.clone());
    let table = accounts.clone();
    let store: Arc<dyn MarkStore<Effect>> = Arc::new(store);
    let world = World {
        steps: Steps::new(store.clone(), settings.scope),
        store,
        clock,
        add: Arc::new(move |n: i64| {
            Effect::add(&table, Item::new().with("id", "a-1"), "balance", n)
        }),
    };
    (world, DynamoItems::new(client), accounts)
}

#[tokio::test]
async fn a_crash_after_the_commit_on_dynamodb_applies_the_effect_once() {
    let Some(endpoint) = server("DEDUP_DYNAMODB_ENDPOINT", "dynamodb", DYNAMODB) else {
        return;
    };
    let (world, items, accounts) = on_dynamodb(&endpoint).await;
    a_crash_after_the_commit(&world).await;
    let item = (items.read(&accounts, &Item::new().with("id", "a-1")).await)
        .expect("read")
        .expect("the account");
    assert_eq!(item.0.get("balance"), Some(&Value::N("5".into())));
}

#[tokio::test]
async fn a_crash_after_the_call_on_dynamodb_calls_once() {
    let Some(endpoint) = server("DEDUP_DYNAMODB_ENDPOINT", "dynamodb", DYNAMODB) else {
        return;
    };
    a_crash_after_the_call(&on_dynamodb(&endpoint).await.0).await;
}

#[tokio::test]
async fn a_long_wait_on_dynamodb_loses_no_lease() {
    let Some(endpoint) = server("DEDUP_DYNAMODB_ENDPOINT", "dynamodb", DYNAMODB) else {
        return;
    };
    a_long_wait_between_the_claim_and_the_call(&on_dynamodb(&endpoint).await.0).await;
}

/// The guard on a PostgreSQL store of fresh marks, its clock the test's, and the account's
/// table with a balance of 0; a client to read it back.
async fn on_postgres(url: &str) -> (World<SqlEffect>, tokio_postgres::Client, String) {
    let settings = dedup().settings().clone();
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let store = PgStore::from_url(url, Tls::Disabled, settings.retention)
        .and_then(|s| s.with_table(&unique("step_marks")))
        .expect("store")
        .with_lease(settings.lease)
        .with_clock(clock.clone());
    store.create_table().await.expect("the marks table");
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let accounts = unique("accounts");
    client
        .batch_execute(&format!(
            "CREATE TABLE {accounts} (id text PRIMARY KEY, balance bigint NOT NULL); \
             INSERT INTO {accounts} VALUES ('a-1', 0)"
        ))
        .await
        .expect("the accounts table");
    let sql = format!("UPDATE {accounts} SET balance = balance + $1 WHERE id = 'a-1'");
    let store: Arc<dyn MarkStore<SqlEffect>> = Arc::new(store);
    let world = World {
        steps: Steps::new(store.clone(), settings.scope),
        store,
        clock,
        add: Arc::new(move |n: i64| SqlEffect::new(sql.clone()).bind(n).required()),
    };
    (world, client, accounts)
}

async fn pg_balance(client: &tokio_postgres::Client, accounts: &str) -> i64 {
    let row = client
        .query_one(
            &format!("SELECT balance FROM {accounts} WHERE id = 'a-1'"),
            &[],
        )
        .await
        .expect("read");
    row.get(0)
}

#[tokio::test]
async fn a_crash_after_the_commit_on_postgres_applies_the_effect_once() {
    let Some(url) = server("DEDUP_POSTGRES_URL", "postgres", PG) else {
        return;
    };
    let (world, client, accounts) = on_postgres(&url).await;
    a_crash_after_the_commit(&world).await;
    assert_eq!(pg_balance(&client, &accounts).await, 5);
}

#[tokio::test]
async fn a_crash_after_the_call_on_postgres_calls_once() {
    let Some(url) = server("DEDUP_POSTGRES_URL", "postgres", PG) else {
        return;
    };
    a_crash_after_the_call(&on_postgres(&url).await.0).await;
}

#[tokio::test]
async fn a_long_wait_on_postgres_loses_no_lease() {
    let Some(url) = server("DEDUP_POSTGRES_URL", "postgres", PG) else {
        return;
    };
    a_long_wait_between_the_claim_and_the_call(&on_postgres(&url).await.0).await;
}

/// The guard on a Valkey store of marks under a fresh prefix, its clock the test's; the
/// account's balance is a counter outside the marks' prefix, read back with a connection.
async fn on_valkey(
    url: &str,
) -> (
    World<ValkeyEffect>,
    redis::aio::MultiplexedConnection,
    String,
) {
    let settings = dedup().settings().clone();
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let case = unique("steps");
    let store = ValkeyStore::from_url(url, settings.retention)
        .and_then(|s| s.with_prefix(&format!("{case}:marks:")))
        .expect("store")
        .with_lease(settings.lease)
        .with_clock(clock.clone());
    let conn = redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let balance = format!("{case}:balance");
    let key = balance.clone();
    let store: Arc<dyn MarkStore<ValkeyEffect>> = Arc::new(store);
    let world = World {
        steps: Steps::new(store.clone(), settings.scope),
        store,
        clock,
        add: Arc::new(move |n: i64| ValkeyEffect::incr_by(key.clone(), n)),
    };
    (world, conn, balance)
}

#[tokio::test]
async fn a_crash_after_the_commit_on_valkey_applies_the_effect_once() {
    use redis::AsyncCommands;
    let Some(url) = server("DEDUP_VALKEY_URL", "valkey", VALKEY) else {
        return;
    };
    let (world, mut conn, balance) = on_valkey(&url).await;
    a_crash_after_the_commit(&world).await;
    let read: Option<i64> = conn.get(&balance).await.expect("read");
    assert_eq!(read, Some(5));
}

#[tokio::test]
async fn a_crash_after_the_call_on_valkey_calls_once() {
    let Some(url) = server("DEDUP_VALKEY_URL", "valkey", VALKEY) else {
        return;
    };
    a_crash_after_the_call(&on_valkey(&url).await.0).await;
}

#[tokio::test]
async fn a_long_wait_on_valkey_loses_no_lease() {
    let Some(url) = server("DEDUP_VALKEY_URL", "valkey", VALKEY) else {
        return;
    };
    a_long_wait_between_the_claim_and_the_call(&on_valkey(&url).await.0).await;
}
