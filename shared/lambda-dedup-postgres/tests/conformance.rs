//! The conformance suite (`lambda-dedup-conformance`) on the PostgreSQL store, in the store's
//! own crate, so that a change to the store (a mutant of `cargo xtask mutants postgres`, say)
//! is judged by rebuilding this crate's tests alone. The server is the one `cargo xtask test`
//! starts and names in `DEDUP_POSTGRES_URL`; without it every case is skipped with a message.
//! Each case gets a fresh marks table; an effect table holds items as `(key text PRIMARY KEY,
//! doc jsonb)`, seeded and read back with plain SQL, not through the store; the effects are
//! the store's own type, [`SqlEffect`]: parameterised statements.

use std::sync::Arc;

use lambda_dedup::{Item, Value};
use lambda_dedup_conformance::{
    BoxFuture, EffectTables, Harness, Setup, TableNames, World, unique,
};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};

/// The variable that names the server, and how to have one.
const URL: &str = "DEDUP_POSTGRES_URL";
const HOW: &str = "`cargo xtask test -p lambda-dedup-postgres` starts PostgreSQL and sets it";

/// Each case on a fresh marks table of the server.
struct Postgres;

mod effects;
use effects::{Sql, split, t};

struct Tables {
    client: tokio_postgres::Client,
    names: TableNames,
}

impl Harness for Postgres {
    type Effects = Sql;
    type Store = PgStore;

    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<SqlEffect, PgStore>>> {
        Box::pin(async move {
            let url = std::env::var(URL).expect("checked by the suite");
            let store = PgStore::from_url(&url, Tls::Disabled, setup.retention)
                .expect("the URL")
                .with_table(&unique("marks"))
                .expect("a table name")
                .with_lease(setup.lease)
                .with_clock(setup.clock);
            store.create_table().await.expect("the marks table");
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(connection);
            let tables = Tables {
                client,
                names: TableNames::default(),
            };
            lambda_dedup_conformance::world(Arc::new(store), tables)
        })
    }
}

impl EffectTables for Tables {
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let name = self.names.add(key_attr);
            self.client
                .batch_execute(&format!(
                    "CREATE TABLE {} (\"{key_attr}\" text PRIMARY KEY, doc jsonb NOT NULL)",
                    t(&name)
                ))
                .await
                .expect("create table");
            name
        })
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key_attr = self.names.key_attr(table);
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
            let key_attr = self.names.key_attr(table);
            let Some(Value::S(k)) = key.0.get(&key_attr) else {
                panic!("a string key {key_attr}");
            };
            // One row per attribute (one row of NULLs for an item without any), none without
            // the item.
            let rows = self
                .client
                .query(
                    &format!(
                        "SELECT e.key, e.value #>> '{{}}', jsonb_typeof(e.value) FROM {} AS i \
                         LEFT JOIN LATERAL jsonb_each(i.doc) AS e ON true WHERE i.\"{key_attr}\" = $1",
                        t(table)
                    ),
                    &[k],
                )
                .await
                .expect("read");
            if rows.is_empty() {
                return None;
            }
            let mut item = Item::new().with(&key_attr, k.as_str());
            for row in rows {
                let Some(name) = row.get::<_, Option<String>>(0) else {
                    continue;
                };
                let text: Option<String> = row.get(1);
                let kind: String = row.get(2);
                let value = match (kind.as_str(), text) {
                    ("string", Some(s)) => Value::S(s),
                    ("number", Some(n)) => Value::N(n),
                    ("boolean", Some(b)) => Value::Bool(b == "true"),
                    ("null", _) => Value::Null,
                    other => panic!("unexpected {other:?}"),
                };
                item.0.insert(name, value);
            }
            Some(item)
        })
    }
}

mod postgres {
    use lambda_dedup_conformance::unset;
    lambda_dedup_conformance::suite!(super::Postgres, skip_if: unset(super::URL, super::HOW));
}
