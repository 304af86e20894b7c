//! The DynamoDB this crate's tests run against: the one named in `DEDUP_DYNAMODB_ENDPOINT`
//! (`cargo xtask test` sets it), else a local DynamoDB (Dynoxide, crate `local-dynamodb`)
//! started in the test binary on first use, so plain `cargo test` needs nothing set up.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use lambda_dedup_dynamodb::{Client, provision};

/// The endpoint of the DynamoDB.
pub(crate) fn endpoint() -> String {
    std::env::var("DEDUP_DYNAMODB_ENDPOINT").unwrap_or_else(|_| local_dynamodb::shared().endpoint())
}

/// A client of the DynamoDB.
pub(crate) fn client() -> aws_sdk_dynamodb::Client {
    client_at(&endpoint())
}

/// A client of the DynamoDB at `endpoint` (a metering proxy in front of [`endpoint`]).
pub(crate) fn client_at(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// A fresh mark table on `client`; its name.
pub(crate) async fn mark_table(client: impl Into<Client>) -> String {
    let marks = lambda_dedup_conformance::unique("marks");
    provision::create_mark_table(client, &marks, false)
        .await
        .expect("create the mark table");
    marks
}
