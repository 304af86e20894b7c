//! The conformance suite's effects on the PostgreSQL store, as the store's own effect type: shared by
//! this crate's `tests/conformance.rs` and the integration tests beyond the suite
//! (`tests/integration/conformance_postgres.rs`, which include this file by path).

use lambda_dedup::{Item, Value};
use lambda_dedup_conformance::Effects;
use lambda_dedup_postgres::SqlEffect;

/// The suite's effects as SQL on tables of `(key text PRIMARY KEY, doc jsonb)`.
pub(crate) struct Sql;

pub(crate) fn t(table: &str) -> String {
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

/// A JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An item as its key and the JSON text of its other attributes.
pub(crate) fn split(key_attr: &str, item: &Item) -> (String, String) {
    let mut key = String::new();
    let mut doc = Vec::new();
    for (name, value) in &item.0 {
        if name == key_attr {
            let Value::S(s) = value else {
                panic!("a string key {key_attr}: {value:?}");
            };
            key = s.clone();
            continue;
        }
        let json = match value {
            Value::S(s) => quote(s),
            Value::N(n) => n.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Null => "null".to_owned(),
            other => {
                panic!("the PostgreSQL harness keeps strings, numbers and booleans: {other:?}")
            }
        };
        doc.push(format!("{}:{json}", quote(name)));
    }
    (key, format!("{{{}}}", doc.join(",")))
}
