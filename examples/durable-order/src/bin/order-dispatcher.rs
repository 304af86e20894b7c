//! `order-dispatcher`: SQS orders to one durable execution each (see the crate's
//! documentation).

use aws_durable_execution_sdk::LambdaClient;
use example_durable_order::dispatcher;
use lambda_dedup_runtime::durable::LambdaStarter;
use lambda_dedup_runtime::{Dedup, MainError, sdk_config};

#[tokio::main]
async fn main() -> Result<(), MainError> {
    lambda_dedup_runtime::init_tracing();
    let dedup = Dedup::from_env("order-dispatcher")?;
    let function = dedup.env().required("DURABLE_FUNCTION")?;
    let conf = sdk_config(&dedup.settings().sdk_timeouts).await;
    let starter = LambdaStarter::new(LambdaClient::new(&conf), function);
    Ok(lambda_runtime::run_concurrent(dispatcher(dedup.dynamodb().await, starter)?).await?)
}
