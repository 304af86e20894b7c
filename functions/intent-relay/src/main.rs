//! `intent-relay`: triggered by the stream of the intents table that `fine-notices` writes in the
//! same transaction as its marks. Each new intent is applied to the external collection API with
//! the intent's id as `Idempotency-Key` — the same on every retry — and marked `CONFIRMED` once the
//! API answers 2xx (S7). A record that fails is reported as the batch item failure, so Lambda
//! retries from it, in order, until the API confirms.
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with `INTENTS_TABLE`,
//! `COLLECTIONS_API_URL` and optionally `PROVIDER_TIMEOUT_MS`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod relay;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use dedup_http::IdempotentClient;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_edge::init_tracing();
    let timeout = lambda_edge::settings::provider_timeout()?;
    let relay = relay::Relay {
        api: IdempotentClient::new(&lambda_edge::required("COLLECTIONS_API_URL")?, timeout)?,
        intents: lambda_edge::required("INTENTS_TABLE")?,
        client: dedup_dynamodb::connect().await,
    };
    let relay = &relay;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<DynamoDbEventResponse, Error>(relay.handle(&event.payload).await)
    }))
    .await
}
