//! Building a client, writing effects without a mark, and reading items back, for callers that
//! must not name the SDK.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::codec;
use crate::error::Error;

/// A DynamoDB client configured from the environment the way every AWS SDK is: region and
/// credentials from the Lambda environment (or `AWS_REGION`, `AWS_ACCESS_KEY_ID`, …), and an
/// endpoint override from `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL` (a local DynamoDB).
/// Build it once per process, outside the handler.
pub async fn connect() -> Client {
    let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    Client::new(&conf)
}

/// Writes `effects` in one transaction with no mark: for follow-up bookkeeping that is itself
/// idempotent by its conditions (e.g. marking an intent confirmed only while it is pending).
/// Returns `Ok(false)` when a condition failed and nothing was written.
pub async fn write_effects(
    client: &Client,
    effects: &[lambda_dedup::Effect],
) -> Result<bool, Error> {
    if effects.is_empty() || effects.len() > 100 {
        return Err(Error::Invalid(format!(
            "{} effects; a transaction holds 1 to 100",
            effects.len()
        )));
    }
    let items = effects
        .iter()
        .map(codec::effect)
        .collect::<Result<Vec<_>, _>>()?;
    match client
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(err) => {
            use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
            if let Some(E::TransactionCanceledException(tc)) = err.as_service_error()
                && tc
                    .cancellation_reasons()
                    .iter()
                    .any(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Ok(false);
            }
            Err(crate::error::from_sdk(err))
        }
    }
}

/// An item's string and number attributes, by name (numbers in their decimal text).
pub type Attributes = BTreeMap<String, String>;

fn attributes(item: &std::collections::HashMap<String, AttributeValue>) -> Attributes {
    item.iter()
        .filter_map(|(k, v)| match v {
            AttributeValue::S(s) | AttributeValue::N(s) => Some((k.clone(), s.clone())),
            _ => None,
        })
        .collect()
}

/// The item at `key` in `table`, read strongly consistently (its string and number attributes),
/// or `None` when there is none.
pub async fn read_item(
    client: &Client,
    table: &str,
    key: &lambda_dedup::Item,
) -> Result<Option<Attributes>, Error> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(
            key.0
                .iter()
                .map(|(k, v)| (k.clone(), codec::value(v)))
                .collect(),
        ))
        .consistent_read(true)
        .send()
        .await
        .map_err(crate::error::from_sdk)?;
    Ok(out.item.as_ref().map(attributes))
}

/// Every item of `table` whose string attribute `name` equals `value` (a paginated scan with a
/// filter; for maintenance sweeps over small tables, not for the hot path).
pub async fn scan_where(
    client: &Client,
    table: &str,
    name: &str,
    value: &str,
) -> Result<Vec<Attributes>, Error> {
    scan_filtered(
        client,
        table,
        "#n = :v",
        name,
        Some(AttributeValue::S(value.to_owned())),
    )
    .await
}

/// The items of `table` without the attribute `name`, read strongly consistently, page by
/// page, with the same flattening as [`scan_where`] (e.g. inbox items not yet forwarded).
pub async fn scan_without(
    client: &Client,
    table: &str,
    name: &str,
) -> Result<Vec<Attributes>, Error> {
    scan_filtered(client, table, "attribute_not_exists(#n)", name, None).await
}

async fn scan_filtered(
    client: &Client,
    table: &str,
    filter: &str,
    name: &str,
    value: Option<AttributeValue>,
) -> Result<Vec<Attributes>, Error> {
    let mut found = Vec::new();
    let mut start = None;
    loop {
        let mut req = client
            .scan()
            .table_name(table)
            .filter_expression(filter)
            .expression_attribute_names("#n", name)
            .consistent_read(true)
            .set_exclusive_start_key(start);
        if let Some(v) = &value {
            req = req.expression_attribute_values(":v", v.clone());
        }
        let out = req.send().await.map_err(crate::error::from_sdk)?;
        found.extend(out.items().iter().map(attributes));
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(found);
        }
    }
}
