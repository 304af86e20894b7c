//! `ledger-projector`: credit and debit events (CloudEvents JSON in the SQS body, tenant in the
//! `tenantid` extension) update a balance projection. The mark and the balance change commit in
//! one transaction (S5): a redelivered, replayed or retried event never moves a balance twice.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_runtime::settings` plus `BALANCES_TABLE`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod handler;

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let ledger = handler::Ledger::new(
        &lambda_dedup_runtime::settings::Env::process(),
        lambda_dedup_dynamodb::connect().await,
    )?;
    let ledger = &ledger;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        handler::handle(ledger, event).await
    }))
    .await
}
