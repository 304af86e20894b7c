//! `fine-notices`: traffic-fine notices from a provider (CloudEvents JSON in the SQS body). The
//! fine record and the intent to open a collection task are written in one transaction with the
//! mark (S5, S7); `intent-relay` applies the intent to the collection API later. The licence
//! plate is stored with the fine but never enters a key or a log line (S3); two providers
//! reporting the same fine are two events here, both recorded, and the later one is flagged for
//! review on the fine's correlation item, keyed by an HMAC of its facts (S3).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_runtime::settings` plus `FINES_TABLE`, `INTENTS_TABLE`, `FINE_REVIEWS_TABLE` and
//! `FINES_CORRELATION_KEY`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod handler;
mod notice;

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    // Clients and configuration once per container, outside the handler.
    let notices = handler::Notices::new(
        &lambda_dedup_runtime::settings::Env::process(),
        lambda_dedup_dynamodb::connect().await,
    )?;
    let notices = &notices;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        handler::handle(notices, event).await
    }))
    .await
}
