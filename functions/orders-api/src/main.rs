//! `orders-api`: `POST /orders` behind an API Gateway HTTP API or a Function URL, with
//! `Idempotency-Key` as the IETF draft writes it. The order, keyed by the id derived from the
//! key, is the key's own mark: one conditional `PutItem` (`Dedup::http_create_once`, S5); a
//! retry gets the first 201 again with `Idempotent-Replayed: true`, the key reused with another
//! body 422 (see `lambda_dedup_runtime::http` for every answer). Keys are scoped by the caller
//! (`HTTP_CALLER_FROM`) and kept as long as their order (`HTTP_MARKS_UNTIL` for an upgrade
//! from the transaction path).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` (`DEDUP_*`, `HTTP_*`) plus `ORDERS_TABLE`.

use lambda_dedup_runtime::http::HttpConfig;

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    let dedup = lambda_dedup_runtime::Dedup::from_env(orders_api::FUNCTION)?;
    let config = HttpConfig::read(dedup.env())?;
    // The raw event, so a REST API's repeated headers and authorizer are read.
    Ok(
        lambda_dedup_runtime::lambda_runtime::run_concurrent(orders_api::service(
            dedup.dynamodb().await,
            config,
        )?)
        .await?,
    )
}
