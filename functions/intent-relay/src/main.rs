//! `intent-relay` on Lambda: see the library's documentation for what it does.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with `INTENTS_TABLE`,
//! `COLLECTIONS_API_URL` and optionally `PROVIDER_TIMEOUT_MS` (default 5000) and
//! `RELAY_DEADLINE_MARGIN_MS` (default 2000: the time kept, on top of one provider call, for the
//! DynamoDB writes around it and the answer to Lambda) and `RELAY_REDRIVE_AFTER_SECONDS` (default
//! 3600: how long an intent may stay `PENDING` before the scheduled sweep re-drives it) and
//! `DEDUP_DEADLINE_MARGIN_MS` (default 1500: a record still not done that long before the
//! invocation's deadline is abandoned and retried).
//! Two triggers, one service: the intents table's stream, and a schedule for the sweep.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_dedup_runtime::init_tracing();
    let relay = intent_relay::relay(&lambda_dedup_runtime::Env::process())?;
    let intents = lambda_dedup_dynamodb::DynamoItems::connect().await;
    lambda_runtime::run_concurrent(relay.service(intents)).await
}
