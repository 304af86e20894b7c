//! [`DynamoItems`]: the core's [`ItemStore`](lambda_dedup::ItemStore) on DynamoDB, for a function's own tables.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_dedup::items::{Filter, ItemStoreImpl};
use lambda_dedup::{Effect, Item, StoreError};

use crate::{Client, codec};

/// A function's own DynamoDB tables through one client: effects written with no mark in one
/// `TransactWriteItems` (a failed condition is `Ok(false)`), items read with `GetItem` and
/// `Scan`, both strongly consistent.
#[derive(Debug, Clone)]
pub struct DynamoItems {
    client: Client,
}

impl DynamoItems {
    /// The tables `client` reaches.
    pub fn new(client: impl Into<Client>) -> Self {
        Self {
            client: client.into(),
        }
    }
}

impl ItemStoreImpl for DynamoItems {
    async fn write(&self, effects: &[Effect]) -> Result<bool, StoreError> {
        crate::client::write_effects(&self.client, effects).await
    }

    async fn read(&self, table: &str, key: &Item) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .sdk()
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
        Ok(out.item.as_ref().map(codec::from_item))
    }

    async fn scan(&self, table: &str, filter: &Filter) -> Result<Vec<Item>, StoreError> {
        let (expression, name, value) = match filter {
            Filter::Equals(name, value) => {
                ("#n = :v", name, Some(AttributeValue::S(value.clone())))
            }
            Filter::Missing(name) => ("attribute_not_exists(#n)", name, None),
        };
        let items = crate::client::scan_raw(&self.client, table, expression, name, value).await?;
        Ok(items.iter().map(codec::from_item).collect())
    }
}
