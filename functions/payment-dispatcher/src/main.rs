//! `payment-dispatcher`: payment requests (CloudEvents JSON in the SQS body) are sent to an
//! external payments API. No transaction reaches it, so the event is claimed under a lease, the
//! API is called with `Idempotency-Key` derived from the event (the same on every retry), and the
//! provider's receipt is stored with the mark for duplicates (S6, S8).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_runtime::settings` plus `PAYMENTS_API_URL` and optionally `PROVIDER_TIMEOUT_MS`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod handler;
mod payment;

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let payments = handler::Payments::new(
        &lambda_dedup_runtime::settings::Env::process(),
        lambda_dedup_dynamodb::connect().await,
    )?;
    let payments = &payments;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        handler::handle(payments, event).await
    }))
    .await
}
