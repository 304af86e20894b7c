//! `inbox-forwarder`: the webhook inbox's DynamoDB stream → the SQS queue the rest of the system
//! reads. See `lambda_dedup_runtime::inbox` for its rules (order, parking, deadline).
//!
//! Two triggers, one service: the inbox's stream, and a schedule for the sweep that re-drives
//! items left unforwarded (any event without `Records`, e.g. `events/relay-sweep.json`).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with `INBOX_TABLE`,
//! `FORWARD_QUEUE_URL` and optionally `FORWARDER_DEADLINE_MARGIN_MS` (default 3000: the time one
//! record needs, at least, before the invocation's deadline) and
//! `FORWARDER_REDRIVE_AFTER_SECONDS` (default 3600: how long an item may stay unforwarded before
//! the sweep re-drives it) and `DEDUP_DEADLINE_MARGIN_MS` (default 1500: a record still not done
//! that long before the deadline is abandoned and retried).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_dedup_runtime::init_tracing();
    // The functions' SDK configuration, with its operation and attempt timeouts.
    let sqs = aws_sdk_sqs::Client::new(&lambda_dedup_dynamodb::sdk_config().await);
    let env = lambda_dedup_runtime::Env::process();
    let forwarder = lambda_dedup_runtime::inbox::forwarder("inbox-forwarder", &env, sqs)?;
    let inbox = lambda_dedup_dynamodb::DynamoItems::connect().await;
    lambda_runtime::run_concurrent(forwarder.service(inbox)).await
}
