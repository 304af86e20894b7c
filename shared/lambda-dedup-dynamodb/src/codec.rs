//! Marks and effects to and from DynamoDB items.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use lambda_dedup::clock::{epoch_millis, epoch_secs, from_epoch_millis, from_epoch_secs};
use lambda_dedup::effect::EffectKind;
use lambda_dedup::{DedupKey, Effect, Fingerprint, Item, Mark, MarkStatus, OwnerToken, Value};

use crate::attr;
use crate::error::Error;

pub(crate) type Av = HashMap<String, AttributeValue>;

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn ms(t: SystemTime) -> AttributeValue {
    AttributeValue::N(epoch_millis(t).to_string())
}

pub(crate) fn secs(t: SystemTime) -> AttributeValue {
    AttributeValue::N(epoch_secs(t).to_string())
}

pub(crate) fn value(v: &Value) -> AttributeValue {
    match v {
        Value::S(x) => AttributeValue::S(x.clone()),
        Value::N(x) => AttributeValue::N(x.clone()),
        Value::B(x) => AttributeValue::B(Blob::new(x.clone())),
        Value::Bool(x) => AttributeValue::Bool(*x),
        Value::Null => AttributeValue::Null(true),
        Value::L(xs) => AttributeValue::L(xs.iter().map(value).collect()),
        Value::M(m) => AttributeValue::M(m.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
    }
}

/// An attribute value in the library's terms (sets, which the library never writes, as `Null`).
pub(crate) fn from_value(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(x) => Value::S(x.clone()),
        AttributeValue::N(x) => Value::N(x.clone()),
        AttributeValue::B(x) => Value::B(x.as_ref().to_vec()),
        AttributeValue::Bool(x) => Value::Bool(*x),
        AttributeValue::L(xs) => Value::L(xs.iter().map(from_value).collect()),
        AttributeValue::M(m) => {
            Value::M(m.iter().map(|(k, v)| (k.clone(), from_value(v))).collect())
        }
        _ => Value::Null,
    }
}

/// An item in the library's terms.
pub(crate) fn from_item(i: &Av) -> Item {
    Item(i.iter().map(|(k, v)| (k.clone(), from_value(v))).collect())
}

fn item(i: &Item) -> Av {
    i.0.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

/// One effect as a transaction item. Its condition failure returns the old item so a caller can
/// see why it was rejected.
pub(crate) fn effect(e: &Effect) -> Result<TransactWriteItem, Error> {
    let names = (!e.names().is_empty()).then(|| {
        e.names()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    });
    let values = (!e.values().is_empty()).then(|| {
        e.values()
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect::<HashMap<_, _>>()
    });
    let cond = e.condition_expression().map(str::to_owned);
    let bad = |what: &str, err: aws_sdk_dynamodb::error::BuildError| {
        Error::Invalid(format!("{what} effect on {}: {err}", e.table()))
    };
    let old = Some(ReturnValuesOnConditionCheckFailure::AllOld);
    // The four builders are distinct types with the same conditional setters.
    macro_rules! conditional {
        ($builder:expr, $what:literal) => {
            $builder
                .table_name(e.table())
                .set_condition_expression(cond)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values_on_condition_check_failure(old)
                .build()
                .map_err(|err| bad($what, err))?
        };
    }
    let tx = TransactWriteItem::builder();
    let key = Some(item(e.item()));
    Ok(match e.kind() {
        EffectKind::Put => tx.put(conditional!(Put::builder().set_item(key), "put")),
        EffectKind::Update => tx.update(conditional!(
            Update::builder()
                .set_key(key)
                .set_update_expression(e.update_expression().map(str::to_owned)),
            "update"
        )),
        EffectKind::Delete => tx.delete(conditional!(Delete::builder().set_key(key), "delete")),
        EffectKind::ConditionCheck => tx.condition_check(conditional!(
            ConditionCheck::builder().set_key(key),
            "condition check"
        )),
    }
    .build())
}

/// Expression attribute names from (placeholder, name) pairs.
pub(crate) fn names<const N: usize>(pairs: [(&str, &str); N]) -> HashMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Expression attribute values from (placeholder, value) pairs.
pub(crate) fn values<const N: usize>(pairs: [(&str, AttributeValue); N]) -> Av {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

pub(crate) fn get_s<'a>(item: &'a Av, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn get_n(item: &Av, name: &str) -> Result<Option<u64>, String> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::N(n)) => n
            .parse()
            .map(Some)
            .map_err(|_| format!("`{name}` is not a whole number")),
        Some(_) => Err(format!("`{name}` is not a number")),
    }
}

/// Decodes a stored mark.
pub(crate) fn mark(item: &Av) -> Result<Mark, Error> {
    let pk = get_s(item, attr::PK).unwrap_or_default().to_owned();
    let corrupt = |reason: String| Error::Corrupt {
        key: pk.clone(),
        reason,
    };
    if pk.is_empty() {
        return Err(corrupt("no `pk`".into()));
    }
    let status = get_s(item, attr::STATUS)
        .and_then(MarkStatus::parse)
        .ok_or_else(|| corrupt("`status` missing or unknown".into()))?;
    let expires_at = get_n(item, attr::EXPIRES_AT)
        .map_err(corrupt)?
        .ok_or_else(|| corrupt("no `expires_at`".into()))?;
    Ok(Mark {
        key: DedupKey::from_stored(pk.clone()),
        status,
        owner: get_s(item, attr::OWNER).map(|o| OwnerToken::from_stored(o.to_owned())),
        lease_expires_at: get_n(item, attr::LEASE)
            .map_err(corrupt)?
            .map(from_epoch_millis),
        expires_at: from_epoch_secs(expires_at),
        fingerprint: get_s(item, attr::FINGERPRINT).map(|f| Fingerprint::from_stored(f.to_owned())),
        result: get_s(item, attr::RESULT).map(str::to_owned),
        first_seen_at: from_epoch_millis(
            get_n(item, attr::FIRST_SEEN).map_err(corrupt)?.unwrap_or(0),
        ),
        completed_at: get_n(item, attr::COMPLETED_AT)
            .map_err(corrupt)?
            .map(from_epoch_millis),
    })
}
