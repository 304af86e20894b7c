//! The conformance suite (`lambda-dedup-conformance`) on the Valkey store, in the store's own
//! crate, so that a change to the store (a mutant of `cargo xtask mutants valkey`, say) is
//! judged by rebuilding this crate's tests alone. The server is the one `cargo xtask test`
//! starts and names in `DEDUP_VALKEY_URL`; without it every case is skipped with a message.
//! Each case gets its own mark prefix; an effect table is a key prefix, an item a hash at
//! `<table>:<key>`, seeded and read back with plain commands, not through the store; the
//! effects are the store's own type, [`ValkeyEffect`]: typed Valkey commands.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{Item, Value};
use lambda_dedup_conformance::{
    BoxFuture, EffectTables, Effects, Harness, Setup, TableNames, World, unique,
};
use lambda_dedup_valkey::{Guard, ValkeyEffect, ValkeyStore};
use redis::AsyncCommands;

/// The variable that names the server, and how to have one.
const URL: &str = "DEDUP_VALKEY_URL";
const HOW: &str = "`cargo xtask test -p lambda-dedup-valkey` starts Valkey and sets it";

/// Each case on its own mark prefix of the server.
struct Valkey;

/// The suite's effects as Valkey commands on the hashes of [`Keys`].
struct Commands;

/// The key of the item `key` of `table`.
fn at(table: &str, key: &str) -> String {
    format!("{table}:{key}")
}

impl Effects for Commands {
    type Effect = ValkeyEffect;

    fn credit(table: &str, account: &str, amount: i64) -> ValkeyEffect {
        ValkeyEffect::hincr_by(at(table, account), "balance", amount)
    }
    fn require(table: &str, _key_attr: &str, key: &str) -> ValkeyEffect {
        ValkeyEffect::require(Guard::exists(at(table, key)))
    }
    fn malformed(table: &str, account: &str) -> ValkeyEffect {
        // An expiry of zero: Valkey refuses `SET … PX 0` whatever the data.
        ValkeyEffect::set_px(at(table, account), "x", Duration::ZERO)
    }
    fn create(table: &str, key_attr: &str, item: Item) -> ValkeyEffect {
        let (key, fields) = split(key_attr, &item);
        let key = at(table, &key);
        ValkeyEffect::hset(key.clone(), fields).when(Guard::absent(key))
    }
    fn settle(table: &str, account: &str, fee: i64) -> ValkeyEffect {
        let key = at(table, account);
        ValkeyEffect::hset(key.clone(), [("status", "DONE")])
            .and(ValkeyEffect::hincr_by(key.clone(), "balance", -fee))
            .when(Guard::field_equals(key.clone(), "status", "PENDING"))
            .when(Guard::field_at_least(key, "balance", fee))
    }
    fn delete(table: &str, _key_attr: &str, key: &str) -> ValkeyEffect {
        ValkeyEffect::del(at(table, key))
    }
}

/// An item as its key and its other attributes as hash fields (strings and numbers).
fn split(key_attr: &str, item: &Item) -> (String, Vec<(String, String)>) {
    let mut key = String::new();
    let mut fields = Vec::new();
    for (name, value) in &item.0 {
        let text = match value {
            Value::S(s) => s.clone(),
            Value::N(n) => n.clone(),
            Value::Bool(b) => b.to_string(),
            other => panic!("the Valkey harness keeps strings, numbers and booleans: {other:?}"),
        };
        if name == key_attr {
            key = text;
        } else {
            fields.push((name.clone(), text));
        }
    }
    (key, fields)
}

struct Keys {
    conn: redis::aio::MultiplexedConnection,
    names: TableNames,
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

impl Harness for Valkey {
    type Effects = Commands;
    type Store = ValkeyStore;

    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<ValkeyEffect, ValkeyStore>>> {
        Box::pin(async move {
            let url = std::env::var(URL).expect("checked by the suite");
            let store = ValkeyStore::from_url(&url, setup.retention)
                .expect("the URL")
                .with_prefix(&format!("{}:", unique("marks")))
                .expect("a prefix")
                .with_lease(setup.lease)
                .with_clock(setup.clock);
            let keys = Keys {
                conn: connect(&url).await,
                names: TableNames::default(),
            };
            lambda_dedup_conformance::world(Arc::new(store), keys)
        })
    }
}

impl EffectTables for Keys {
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        Box::pin(async move { self.names.add(key_attr) })
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key_attr = self.names.key_attr(table);
            let (key, fields) = split(&key_attr, &item);
            let mut conn = self.conn.clone();
            let key = at(table, &key);
            let _: () = conn.del(&key).await.expect("del");
            let _: () = conn.hset_multiple(&key, &fields).await.expect("put");
        })
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        Box::pin(async move {
            let (key_attr, value) = key.0.iter().next().expect("a key");
            let Value::S(k) = value else {
                panic!("a string key {key_attr}");
            };
            let mut conn = self.conn.clone();
            let fields: Vec<(String, String)> = conn.hgetall(at(table, k)).await.expect("read");
            if fields.is_empty() {
                return None;
            }
            let mut item = Item::new().with(key_attr, k.as_str());
            for (name, text) in fields {
                let value = match text.parse::<i64>() {
                    Ok(_) => Value::N(text),
                    Err(_) => Value::S(text),
                };
                item.0.insert(name, value);
            }
            Some(item)
        })
    }
}

mod valkey {
    use lambda_dedup_conformance::unset;
    lambda_dedup_conformance::suite!(super::Valkey, skip_if: unset(super::URL, super::HOW));
}
