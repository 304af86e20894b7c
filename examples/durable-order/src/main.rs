//! `durable-order`: the durable workflow (see the crate's documentation).

use std::sync::Arc;
use std::time::Duration;

use example_durable_order::{Order, Workflow};
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::{Dedup, MainError};

#[tokio::main]
async fn main() -> Result<(), MainError> {
    lambda_dedup_runtime::init_tracing();
    let dedup = Dedup::from_env("durable-order")?;
    let stock = dedup.env().required("STOCK_TABLE")?;
    let url = dedup.env().required("PAYMENTS_API_URL")?;
    let timeout = dedup.settings().provider_timeout;
    let payments = IdempotentClient::new(&url, timeout.max(Duration::from_millis(1)))?;
    let workflow = Arc::new(Workflow::new(dedup.dynamodb().await, stock, payments)?);
    Ok(aws_durable_execution_sdk::run(move |order: Order, ctx| {
        let workflow = workflow.clone();
        async move { workflow.run(order, ctx).await }
    })
    .await?)
}
