//! `fine-notices`: traffic-fine notices from a provider (CloudEvents JSON in the SQS body). The
//! fine record and the intent to open a collection task are written in one transaction with the
//! mark (S5, S7); `intent-relay` applies the intent to the collection API later. The licence
//! plate is stored with the fine but never enters a key or a log line (S3); two providers
//! reporting the same fine are two events here, both recorded, and the later one is flagged for
//! review on the fine's correlation item, keyed by an HMAC of its facts (S3).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` plus `FINES_TABLE`, `INTENTS_TABLE`, `FINE_REVIEWS_TABLE` and
//! `FINES_CORRELATION_KEY_ARN` (the Secrets Manager secret holding the correlation key, read at
//! init; `FINES_CORRELATION_KEY`, the key itself, for local use only and never beside it).

mod handler;
mod notice;

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let dedup = lambda_dedup_runtime::Dedup::from_env(handler::FUNCTION)?;
    // One client, with the settings' SDK timeouts, for the marks and the correlation items.
    let conf = lambda_dedup_runtime::sdk_config(&dedup.settings().sdk_timeouts).await;
    let client = lambda_dedup_dynamodb::Client::from_conf(&conf);
    let key =
        handler::correlation_key(&dedup, || aws_sdk_secretsmanager::Client::new(&conf)).await?;
    let store = lambda_dedup_runtime::store::Items::dynamodb(client.clone(), dedup.settings());
    let dedup = dedup.on(store);
    let items = lambda_dedup_dynamodb::DynamoItems::new(client);
    Ok(lambda_runtime::run_concurrent(handler::service(dedup, items, key)?).await?)
}
