//! The conformance suite's effects on the Valkey store, as the store's own effect type, and a
//! plain connection to the server that seeds and reads them: shared by
//! this crate's `tests/conformance.rs` and the integration tests beyond the suite
//! (`tests/integration/conformance_valkey.rs`, which include this file by path).

use lambda_dedup::{Item, Value};
use lambda_dedup_conformance::Effects;
use lambda_dedup_valkey::{Guard, ValkeyEffect};
use std::time::Duration;

/// The suite's effects as Valkey commands on hashes at `<table>:<key>`.
pub(crate) struct Commands;

/// A plain connection to the server at `url`, beside the store's.
pub(crate) async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// The key of the item `key` of `table`.
pub(crate) fn at(table: &str, key: &str) -> String {
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
pub(crate) fn split(key_attr: &str, item: &Item) -> (String, Vec<(String, String)>) {
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
