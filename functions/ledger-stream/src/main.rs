//! `ledger-stream`: the ledger's events from a Kinesis stream (CloudEvents JSON in each record's
//! data). The identity is the event's own (`source` + `id` within the `tenantid` tenant, S1),
//! never the record's sequence number; records of one account keep their order, an account stops
//! at its first record not done, and the response names the first record not done, so Lambda
//! retries from there (S12). Mark and balance change commit in one transaction (S5). A record
//! that can never apply is parked, whole, in `DEDUP_PARKING_QUEUE_URL` before the checkpoint
//! passes it; without that queue the function refuses to start (S15,
//! `lambda_dedup_runtime::kinesis::Parking`).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_runtime::settings` plus `BALANCES_TABLE` and `DEDUP_PARKING_QUEUE_URL`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

use aws_lambda_events::event::kinesis::KinesisEvent;
use lambda_dedup_batch::run_batch;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use ledger_projector::ledger;

/// The function's name: the default consumer of its keys and the `Function` of its metrics.
const FUNCTION: &str = "ledger-stream";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    let settings = lambda_dedup_runtime::Settings::from_env(FUNCTION)?;
    let dedup = settings.deduplicator(
        ledger::key_spec(settings.scope.clone()),
        lambda_dedup_dynamodb::connect().await,
    );
    let balances = lambda_dedup_runtime::required("BALANCES_TABLE")?;
    let parking = lambda_dedup_runtime::kinesis::Parking::from_env()?;
    let (dedup, balances, max) = (&dedup, balances.as_str(), settings.max_concurrency);
    let parking = &parking;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<KinesisEvent>| async move {
            lambda_dedup_runtime::kinesis::run_kinesis(FUNCTION, event, parking, |batch| {
                run_batch(batch, max, |m| async move {
                    dedup.transactional(&m, |e| ledger::plan(balances, e)).await
                })
            })
            .await
        },
    ))
    .await
}
