//! `inbox-forwarder`: the webhook inbox's DynamoDB stream → the SQS queue the rest of the system
//! reads. See `lambda_dedup_runtime::relay::forward` for its rules (order, parking, deadline).
//!
//! Two triggers, one service: the inbox's stream, and a schedule for the sweep that re-drives
//! items left unforwarded (any event without `Records`, e.g. `events/relay-sweep.json`).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` (`DEDUP_NAMESPACE`, …; no mark table: each inbox item is its
//! own mark) plus `INBOX_TABLE`, `FORWARD_QUEUE_URL` and optionally `FORWARDER_RECORD_BUDGET_MS`
//! (default 3000: the time one record needs, whole, before the invocation's deadline),
//! `FORWARDER_REDRIVE_AFTER_SECONDS` (default 3600: how long an item may stay unforwarded before
//! the sweep re-drives it) and `DEDUP_DEADLINE_MARGIN_MS` (default 1500: a record still not done
//! that long before the deadline is abandoned and retried).

/// The function's name: the `Function` dimension of its metrics.
const FUNCTION: &str = "inbox-forwarder";

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let dedup = lambda_dedup_runtime::Dedup::from_env(FUNCTION)?
        .dynamodb()
        .await;
    Ok(
        lambda_runtime::run_concurrent(lambda_dedup_runtime::relay::forward::forwarder(dedup)?)
            .await?,
    )
}
