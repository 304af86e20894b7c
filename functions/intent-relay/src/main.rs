//! `intent-relay` on Lambda: see the library's documentation for what it does.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with `INTENTS_TABLE`,
//! `COLLECTIONS_API_URL` and optionally `PROVIDER_TIMEOUT_MS` (default 5000) and
//! `RELAY_DEADLINE_MARGIN_MS` (default 2000: the time kept, on top of one provider call, for the
//! DynamoDB writes around it and the answer to Lambda) and `RELAY_REDRIVE_AFTER_SECONDS` (default
//! 3600: how long an intent may stay `PENDING` before the scheduled sweep re-drives it).

use std::time::SystemTime;

use aws_lambda_events::event::dynamodb::Event;
use intent_relay::Relay;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    let env = lambda_dedup_runtime::settings::Env::process();
    let relay = Relay::read(&env, lambda_dedup_dynamodb::connect().await)?;
    let redrive_after = Relay::redrive_after(&env)?;
    let relay = &relay;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            // Two triggers: the intents table's stream, and a schedule for the sweep.
            if event.payload.get("Records").is_some() {
                let deadline = lambda_dedup_runtime::deadline(&event.context);
                let stream: Event = serde_json::from_value(event.payload)?;
                // Boxed: the relay's nested futures are deep types.
                let handled = Box::pin(relay.handle(&stream, deadline)).await;
                Ok::<serde_json::Value, Error>(serde_json::to_value(handled.response)?)
            } else {
                let swept = Box::pin(relay.sweep(SystemTime::now(), redrive_after)).await?;
                Ok(swept.answer())
            }
        },
    ))
    .await
}
