//! `inbox-forwarder`: the webhook inbox's DynamoDB stream → the SQS queue the rest of the system
//! reads. See `lambda_dedup_runtime::inbox` for its rules (order, parking, deadline).
//!
//! Two triggers: the inbox's stream, and a schedule for the sweep that re-drives items left
//! unforwarded (any event without `Records`, e.g. `events/relay-sweep.json`).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with `INBOX_TABLE`,
//! `FORWARD_QUEUE_URL` and optionally `FORWARDER_DEADLINE_MARGIN_MS` (default 3000: the time one
//! record needs, at least, before the invocation's deadline) and
//! `FORWARDER_REDRIVE_AFTER_SECONDS` (default 3600: how long an item may stay unforwarded before
//! the sweep re-drives it).

use std::time::SystemTime;

use aws_lambda_events::event::dynamodb::Event;
use lambda_dedup_runtime::inbox::Forwarder;
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The function's name: the `Function` of its metrics.
const FUNCTION: &str = "inbox-forwarder";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    // The functions' SDK configuration, with its operation and attempt timeouts.
    let config = lambda_dedup_dynamodb::sdk_config().await;
    let env = lambda_dedup_runtime::settings::Env::process();
    let forwarder = Forwarder::read(
        FUNCTION,
        &env,
        aws_sdk_sqs::Client::new(&config),
        lambda_dedup_dynamodb::connect().await,
    )?;
    let redrive_after = Forwarder::redrive_after(&env)?;
    let forwarder = &forwarder;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            if event.payload.get("Records").is_some() {
                let deadline = lambda_dedup_runtime::deadline(&event.context);
                let stream: Event = serde_json::from_value(event.payload)?;
                // Boxed: the forwarder's nested futures are deep types.
                let (response, _) = Box::pin(forwarder.handle(&stream, deadline)).await;
                Ok::<serde_json::Value, Error>(serde_json::to_value(response)?)
            } else {
                let swept = Box::pin(forwarder.sweep(SystemTime::now(), redrive_after)).await?;
                Ok(swept.answer())
            }
        },
    ))
    .await
}
