//! `payment-dispatcher`: payment requests (CloudEvents JSON in the SQS body) are sent to an
//! external payments API. No transaction reaches it, so the event is claimed under a lease, the
//! API is called with `Idempotency-Key` derived from the event (the same on every retry), and the
//! provider's receipt is stored with the mark for duplicates (S6, S8).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` plus `PAYMENTS_API_URL` and optionally `PROVIDER_TIMEOUT_MS`.

mod handler;
mod payment;

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let dedup = lambda_dedup_runtime::Dedup::from_env(handler::FUNCTION)?;
    Ok(lambda_runtime::run_concurrent(handler::service(dedup.dynamodb().await)?).await?)
}
