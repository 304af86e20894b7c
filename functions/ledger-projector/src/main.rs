//! `ledger-projector`: credit and debit events (CloudEvents JSON in the SQS body, tenant in the
//! `tenantid` extension) update a balance projection. The mark and the balance change commit in
//! one transaction (S5): a redelivered, replayed or retried event never moves a balance twice.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_edge::settings` plus `BALANCES_TABLE`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod ledger;

use aws_lambda_events::event::sqs::SqsEvent;
use dedup_batch::run_batch_transactional;
use lambda_runtime::{Error, LambdaEvent, service_fn};

const FUNCTION: &str = "ledger-projector";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_edge::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let settings = lambda_edge::Settings::from_env(FUNCTION)?;
    let balances = lambda_edge::required("BALANCES_TABLE")?;
    let spec = ledger::key_spec(settings.scope.clone());
    let dedup = settings.deduplicator(spec.clone(), dedup_dynamodb::connect().await);
    let (dedup, balances, spec) = (&dedup, balances.as_str(), &spec);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // Batch-transaction mode: the whole batch's marks and effects in as few
        // TransactWriteItems as possible (S5 per event).
        lambda_edge::run_sqs_batch(FUNCTION, spec, event, |batch| {
            run_batch_transactional(batch, settings.max_concurrency, dedup, |e| {
                ledger::plan(balances, e)
            })
        })
        .await
    }))
    .await
}
