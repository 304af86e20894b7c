//! The ledger's business rule, shared by its two doors: `ledger-projector` (SQS) and
//! `ledger-stream` (Kinesis). Both commit each event's mark with its balance change (S5).
//! [`service`] is `ledger-projector` as its `main` runs it (and the integration tests, on the
//! local DynamoDB).

pub mod ledger;

use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::{Dedup, SqsService};

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub const FUNCTION: &str = "ledger-projector";

/// `ledger-projector` as `main` runs it: ledger events ([`ledger::configure`]) into
/// `BALANCES_TABLE`, one transaction per batch (batch-transaction mode; FIFO batches message by
/// message).
pub fn service(dedup: Dedup) -> Result<SqsService, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    let work = transact(move |e| ledger::plan(&balances, e)).one_transaction_per_batch();
    Ok(ledger::configure(dedup).sqs(work)?)
}
