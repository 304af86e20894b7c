//! `intent-relay` on Lambda: see the library's documentation for what it does.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` (`DEDUP_NAMESPACE`, …; no mark table: each intent is its own
//! mark) plus `INTENTS_TABLE`, `COLLECTIONS_API_URL` and optionally `PROVIDER_TIMEOUT_MS`
//! (default 5000), `RELAY_RECORD_BUDGET_MS` (default 7000: the time one record needs, whole —
//! one provider call and the DynamoDB writes around it; longer than `PROVIDER_TIMEOUT_MS`),
//! `RELAY_REDRIVE_AFTER_SECONDS` (default 3600: how long an intent may stay `PENDING` before the
//! scheduled sweep re-drives it) and `DEDUP_DEADLINE_MARGIN_MS` (default 1500: a record still
//! not done that long before the invocation's deadline is abandoned and retried).
//! Two triggers, one service: the intents table's stream, and a schedule for the sweep.

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let dedup = lambda_dedup_runtime::Dedup::from_env(intent_relay::FUNCTION)?;
    Ok(lambda_runtime::run_concurrent(intent_relay::service(dedup.dynamodb().await)?).await?)
}
