//! `ledger-projector`: credit and debit events (CloudEvents JSON in the SQS body, tenant in the
//! `tenantid` extension) update a balance projection. The mark and the balance change commit in
//! one transaction (S5): a redelivered, replayed or retried event never moves a balance twice.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` plus `BALANCES_TABLE`.

mod handler;

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let dedup = lambda_dedup_runtime::Dedup::from_env(handler::FUNCTION)?;
    Ok(lambda_runtime::run_concurrent(handler::service(dedup.dynamodb().await)?).await?)
}
