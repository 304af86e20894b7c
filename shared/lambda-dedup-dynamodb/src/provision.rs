//! Creating tables: for tests, the demo, the benchmark and local development. Production tables
//! come from `infra/`.

use crate::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification,
};

use crate::attr;
use crate::error::Error;

fn invalid(e: aws_sdk_dynamodb::error::BuildError) -> Error {
    Error::Invalid(e.to_string())
}

/// Creates an on-demand table keyed by the string attribute `key`; with `stream`, it gets a
/// stream of old and new images, whose ARN is returned.
pub async fn create_table(
    client: impl Into<Client>,
    table: &str,
    key: &str,
    stream: bool,
) -> Result<Option<String>, Error> {
    let client: &Client = &client.into();
    let mut req = client
        .sdk()
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(key)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(invalid)?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(key)
                .key_type(KeyType::Hash)
                .build()
                .map_err(invalid)?,
        );
    if stream {
        req = req.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .map_err(invalid)?,
        );
    }
    let out = req.send().await.map_err(crate::error::from_sdk)?;
    Ok(out
        .table_description()
        .and_then(|d| d.latest_stream_arn())
        .map(str::to_owned))
}

/// Creates a mark table named `table` (key [`attr::PK`], on-demand billing) and turns TTL on for
/// [`attr::EXPIRES_AT`]. With `stream`, the table gets a stream of old and new images, so TTL
/// deletions can be counted (S14); its ARN is returned.
pub async fn create_mark_table(
    client: impl Into<Client>,
    table: &str,
    stream: bool,
) -> Result<Option<String>, Error> {
    let client: &Client = &client.into();
    let stream_arn = create_table(client, table, attr::PK, stream).await?;
    client
        .sdk()
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(attr::EXPIRES_AT)
                .build()
                .map_err(invalid)?,
        )
        .send()
        .await
        .map_err(crate::error::from_sdk)?;
    Ok(stream_arn)
}
