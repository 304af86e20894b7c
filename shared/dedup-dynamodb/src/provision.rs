//! Creating a mark table: for tests, the demo and local development. Production tables come from
//! `infra/`.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification,
};

use crate::attr;
use crate::error::Error;

/// Creates a mark table named `table` (on-demand billing) and turns TTL on for
/// [`attr::EXPIRES_AT`]. With `stream`, the table gets a stream of old and new images, so TTL
/// deletions can be counted (S14).
pub async fn create_mark_table(client: &Client, table: &str, stream: bool) -> Result<(), Error> {
    let mut req = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(attr::PK)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(|e| Error::Invalid(e.to_string()))?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(attr::PK)
                .key_type(KeyType::Hash)
                .build()
                .map_err(|e| Error::Invalid(e.to_string()))?,
        );
    if stream {
        req = req.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .map_err(|e| Error::Invalid(e.to_string()))?,
        );
    }
    req.send().await.map_err(Error::from_sdk)?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(attr::EXPIRES_AT)
                .build()
                .map_err(|e| Error::Invalid(e.to_string()))?,
        )
        .send()
        .await
        .map_err(Error::from_sdk)?;
    Ok(())
}
