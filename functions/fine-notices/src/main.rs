//! `fine-notices`: traffic-fine notices from a provider (CloudEvents JSON in the SQS body). The
//! fine record and the intent to open a collection task are written in one transaction with the
//! mark (S5, S7); `intent-relay` applies the intent to the collection API later. The licence
//! plate is stored with the fine but never enters a key or a log line (S3); two providers
//! reporting the same fine are two events here, a business correlation question (S3).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_edge::settings` plus `FINES_TABLE` and `INTENTS_TABLE`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod notice;

use aws_lambda_events::event::sqs::SqsEvent;
use dedup_batch::run_batch_transactional;
use lambda_runtime::{Error, LambdaEvent, service_fn};

const FUNCTION: &str = "fine-notices";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_edge::init_tracing();
    let settings = lambda_edge::Settings::from_env(FUNCTION)?;
    let tables = notice::Tables {
        fines: lambda_edge::required("FINES_TABLE")?,
        intents: lambda_edge::required("INTENTS_TABLE")?,
    };
    let spec = notice::key_spec(settings.scope.clone());
    let dedup = settings.deduplicator(spec.clone(), dedup_dynamodb::connect().await);
    let (dedup, tables, spec) = (&dedup, &tables, &spec);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // Batch-transaction mode: the whole batch's marks and effects in as few
        // TransactWriteItems as possible (S5 per event).
        lambda_edge::run_sqs_batch(FUNCTION, spec, event, |batch| {
            run_batch_transactional(batch, settings.max_concurrency, dedup, |e| {
                notice::plan(tables, e)
            })
        })
        .await
    }))
    .await
}
