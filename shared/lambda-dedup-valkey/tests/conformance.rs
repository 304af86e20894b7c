//! The conformance suite (`lambda-dedup-conformance`) on the Valkey store, in the store's own
//! crate, so that a change to the store (a mutant of `cargo xtask mutants valkey`, say) is
//! judged by rebuilding this crate's tests alone. The server is the one `cargo xtask test`
//! starts and names in `DEDUP_VALKEY_URL`; without it every case is skipped with a message.
//! Each case gets its own mark prefix; an effect table is a key prefix, an item a hash at
//! `<table>:<key>`, seeded and read back with plain commands, not through the store; the
//! effects are the store's own type, [`ValkeyEffect`]: typed Valkey commands.

use std::sync::Arc;

use lambda_dedup::{Item, Value};
use lambda_dedup_conformance::{
    BoxFuture, EffectTables, Harness, Setup, TableNames, World, unique,
};
use lambda_dedup_valkey::{ValkeyEffect, ValkeyStore};
use redis::AsyncCommands;

/// The variable that names the server, and how to have one.
const URL: &str = "DEDUP_VALKEY_URL";
const HOW: &str = "`cargo xtask test -p lambda-dedup-valkey` starts Valkey and sets it";

/// Each case on its own mark prefix of the server.
struct Valkey;

mod effects;
use effects::{Commands, at, connect, split};

struct Keys {
    conn: redis::aio::MultiplexedConnection,
    names: TableNames,
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
