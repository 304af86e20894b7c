//! `ledger-fanout`: the ledger's credit and debit events published to an SNS topic, delivered
//! to this function's queue by the topic's SQS subscription without raw message delivery. The
//! work is `ledger-projector`'s (one transaction per batch: mark and balance together, S5);
//! only the door differs: each SQS body is SNS's envelope, opened before the key is derived.
//!
//! Run locally with `cargo xtask demo` (it publishes to the topic).

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    let dedup = lambda_dedup_runtime::Dedup::from_env(ledger_fanout::FUNCTION)?;
    Ok(lambda_runtime::run_concurrent(ledger_fanout::service(dedup.dynamodb().await)?).await?)
}
