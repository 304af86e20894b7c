//! The conformance suite (`lambda-dedup-conformance`) on the PostgreSQL store, on a real
//! PostgreSQL server: the one `cargo xtask test` starts (PostgreSQL 16 from the `pgserver`
//! wheel) and names in `DEDUP_POSTGRES_URL`. Without it (plain `cargo test`) every case is
//! skipped with a message. Each case gets a fresh marks table; effect tables hold items as
//! `(key text PRIMARY KEY, doc jsonb)`, seeded and read back with plain SQL, not through the
//! store; the effects are the store's own type, [`SqlEffect`]: parameterised statements.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::{Item, ManualClock, MarkStore, Retention, Value};
use lambda_dedup_conformance::{BoxFuture, Effects, Harness, World};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};

/// The variable that names the server.
const URL: &str = "DEDUP_POSTGRES_URL";

fn skip() -> Option<String> {
    std::env::var(URL).is_err().then(|| {
        format!("{URL} is not set; `cargo xtask test -p dedup-tests -- conformance` starts PostgreSQL and sets it")
    })
}

/// Each case on a fresh marks table of the server.
struct Postgres;

/// The suite's effects as SQL on the tables of [`Tables`].
struct Sql;

fn t(table: &str) -> String {
    format!("\"{table}\"")
}

impl Effects for Sql {
    type Effect = SqlEffect;

    fn credit(table: &str, account: &str, amount: i64) -> SqlEffect {
        let t = t(table);
        SqlEffect::new(format!(
            "INSERT INTO {t} (account, doc) VALUES ($1, jsonb_build_object('balance', $2::bigint)) \
             ON CONFLICT (account) DO UPDATE SET doc = {t}.doc || jsonb_build_object('balance', \
             COALESCE(({t}.doc->>'balance')::bigint, 0) + $2::bigint)"
        ))
        .bind(account)
        .bind(amount)
    }
    fn require(table: &str, key_attr: &str, key: &str) -> SqlEffect {
        SqlEffect::new(format!(
            "SELECT 1 FROM {} WHERE \"{key_attr}\" = $1",
            t(table)
        ))
        .bind(key)
        .required()
    }
    fn malformed(table: &str, account: &str) -> SqlEffect {
        SqlEffect::new(format!(
            "UPDATE {} SET SET doc = doc WHERE account = $1",
            t(table)
        ))
        .bind(account)
    }
    fn create(table: &str, key_attr: &str, item: Item) -> SqlEffect {
        let (key, doc) = split(key_attr, &item);
        SqlEffect::new(format!(
            "INSERT INTO {} (\"{key_attr}\", doc) VALUES ($1, $2::text::jsonb) ON CONFLICT DO NOTHING",
            t(table)
        ))
        .bind(key)
        .bind(doc)
        .required()
    }
    fn settle(table: &str, account: &str, fee: i64) -> SqlEffect {
        SqlEffect::new(format!(
            "UPDATE {} SET doc = doc || jsonb_build_object('status', $2::text, 'balance', \
             (doc->>'balance')::bigint - $3::bigint) \
             WHERE account = $1 AND doc->>'status' = $4 AND (doc->>'balance')::bigint >= $3::bigint",
            t(table)
        ))
        .bind(account)
        .bind("DONE")
        .bind(fee)
        .bind("PENDING")
        .required()
    }
    fn delete(table: &str, key_attr: &str, key: &str) -> SqlEffect {
        SqlEffect::new(format!(
            "DELETE FROM {} WHERE \"{key_attr}\" = $1",
            t(table)
        ))
        .bind(key)
    }
}

/// An item as its key and the JSON text of its other attributes.
fn split(key_attr: &str, item: &Item) -> (String, String) {
    let mut key = String::new();
    let mut doc = serde_json::Map::new();
    for (name, value) in &item.0 {
        let json = match value {
            Value::S(s) => serde_json::Value::String(s.clone()),
            Value::N(n) => serde_json::from_str(n).expect("a number"),
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Null => serde_json::Value::Null,
            other => {
                panic!("the PostgreSQL harness keeps strings, numbers and booleans: {other:?}")
            }
        };
        if name == key_attr {
            key = json.as_str().expect("a string key").to_owned();
        } else {
            doc.insert(name.clone(), json);
        }
    }
    (key, serde_json::Value::Object(doc).to_string())
}

struct Tables {
    store: Arc<dyn MarkStore<SqlEffect>>,
    client: tokio_postgres::Client,
    key_attrs: Mutex<HashMap<String, String>>,
}

fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}_{nanos:x}_{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Harness for Postgres {
    type Effects = Sql;

    fn world(
        &self,
        retention: Retention,
        lease: Duration,
        clock: Arc<ManualClock>,
    ) -> BoxFuture<'_, Box<dyn World<SqlEffect>>> {
        Box::pin(async move {
            let url = std::env::var(URL).expect("checked by the suite");
            let store = PgStore::from_url(&url, Tls::Disabled, retention)
                .expect("the URL")
                .with_table(&unique("marks"))
                .expect("a table name")
                .with_lease(lease)
                .with_clock(clock);
            store.create_table().await.expect("the marks table");
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(connection);
            Box::new(Tables {
                store: Arc::new(store),
                client,
                key_attrs: Mutex::new(HashMap::new()),
            }) as Box<dyn World<SqlEffect>>
        })
    }
}

impl World<SqlEffect> for Tables {
    fn store(&self) -> Arc<dyn MarkStore<SqlEffect>> {
        self.store.clone()
    }
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let name = unique("effects");
            self.client
                .batch_execute(&format!(
                    "CREATE TABLE {} (\"{key_attr}\" text PRIMARY KEY, doc jsonb NOT NULL)",
                    t(&name)
                ))
                .await
                .expect("create table");
            self.key_attrs
                .lock()
                .expect("lock")
                .insert(name.clone(), key_attr.to_owned());
            name
        })
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key_attr = self.key_attrs.lock().expect("lock")[table].clone();
            let (key, doc) = split(&key_attr, &item);
            self.client
                .execute(
                    &format!(
                        "INSERT INTO {} (\"{key_attr}\", doc) VALUES ($1, $2::text::jsonb) \
                         ON CONFLICT (\"{key_attr}\") DO UPDATE SET doc = EXCLUDED.doc",
                        t(table)
                    ),
                    &[&key, &doc],
                )
                .await
                .expect("put");
        })
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        Box::pin(async move {
            let key_attr = self.key_attrs.lock().expect("lock")[table].clone();
            let Some(Value::S(k)) = key.0.get(&key_attr) else {
                panic!("a string key {key_attr}");
            };
            let rows = self
                .client
                .query(
                    &format!(
                        "SELECT doc::text FROM {} WHERE \"{key_attr}\" = $1",
                        t(table)
                    ),
                    &[k],
                )
                .await
                .expect("read");
            let doc: String = rows.first()?.get(0);
            let doc: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&doc).expect("a JSON object");
            let mut item = Item::new().with(&key_attr, k.as_str());
            for (name, value) in doc {
                let value = match value {
                    serde_json::Value::String(s) => Value::S(s),
                    serde_json::Value::Number(n) => Value::N(n.to_string()),
                    serde_json::Value::Bool(b) => Value::Bool(b),
                    serde_json::Value::Null => Value::Null,
                    other => panic!("unexpected {other}"),
                };
                item.0.insert(name, value);
            }
            Some(item)
        })
    }
}

mod postgres {
    lambda_dedup_conformance::suite!(super::Postgres, skip_if: super::skip());
}
