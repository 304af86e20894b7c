//! Building a client and writing effects without a mark, for callers that must not name the
//! SDK (reads and scans of a function's own tables: [`crate::DynamoItems`]).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::codec;
use crate::error::Error;

/// A DynamoDB connection: the SDK's client behind the library's own type, so that the crates
/// above this one hold and pass a connection without naming the SDK (only this crate depends on
/// it). Build one per process with [`Client::from_conf`]; a caller that has an SDK client of its own (a
/// test, a local tool) converts it with `From`. Cloning is cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct Client(pub(crate) aws_sdk_dynamodb::Client);

impl From<aws_sdk_dynamodb::Client> for Client {
    fn from(client: aws_sdk_dynamodb::Client) -> Self {
        Self(client)
    }
}

impl From<&aws_sdk_dynamodb::Client> for Client {
    fn from(client: &aws_sdk_dynamodb::Client) -> Self {
        Self(client.clone())
    }
}

impl From<&Client> for Client {
    fn from(client: &Client) -> Self {
        client.clone()
    }
}

impl Client {
    /// A client configured by `conf`: the AWS SDK configuration of the environment, as every
    /// AWS SDK reads it (region and credentials from the Lambda environment, or `AWS_REGION`,
    /// `AWS_ACCESS_KEY_ID`, …; an endpoint override from `AWS_ENDPOINT_URL_DYNAMODB` /
    /// `AWS_ENDPOINT_URL`), with the operation and attempt timeouts its caller chose (the
    /// functions': `lambda_dedup_runtime`'s `SdkTimeouts`, `DEDUP_SDK_*_TIMEOUT_MS`). Build it
    /// once per process, outside the handler.
    pub fn from_conf(conf: &aws_config::SdkConfig) -> Self {
        Self(aws_sdk_dynamodb::Client::new(conf))
    }

    /// The SDK client, for this crate's own calls.
    pub(crate) fn sdk(&self) -> &aws_sdk_dynamodb::Client {
        &self.0
    }
}

/// Writes `effects` in one transaction with no mark: for follow-up bookkeeping that is itself
/// idempotent by its conditions (e.g. marking an intent confirmed only while it is pending).
/// Returns `Ok(false)` when a condition failed and nothing was written.
pub async fn write_effects(
    client: impl Into<Client>,
    effects: &[lambda_dedup::Effect],
) -> Result<bool, Error> {
    let client: &Client = &client.into();
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
        .sdk()
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

/// The items of `table` that `filter` (over the name `#n` and the value `:v`) keeps, read
/// strongly consistently, every page.
pub(crate) async fn scan_raw(
    client: &Client,
    table: &str,
    filter: &str,
    name: &str,
    value: Option<AttributeValue>,
) -> Result<Vec<std::collections::HashMap<String, AttributeValue>>, Error> {
    let mut found = Vec::new();
    let mut start = None;
    loop {
        let mut req = client
            .sdk()
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
        found.extend(out.items().iter().cloned());
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(found);
        }
    }
}
