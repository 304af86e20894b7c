//! `inbox-forwarder`: the webhook inbox's DynamoDB stream → the SQS queue the rest of the system
//! reads. See `lambda_dedup_runtime::inbox` for its rules (order, parking, deadline).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with `INBOX_TABLE`,
//! `FORWARD_QUEUE_URL` and optionally `FORWARDER_DEADLINE_MARGIN_MS` (default 3000: the time one
//! record needs, at least, before the invocation's deadline).

use std::time::Duration;

use aws_lambda_events::event::dynamodb::Event;
use lambda_dedup_runtime::inbox::Forwarder;
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The function's name: the `Function` of its metrics.
const FUNCTION: &str = "inbox-forwarder";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let forwarder = Forwarder::new(
        FUNCTION,
        aws_sdk_sqs::Client::new(&config),
        lambda_dedup_runtime::required("FORWARD_QUEUE_URL")?,
        lambda_dedup_dynamodb::connect().await,
        lambda_dedup_runtime::required("INBOX_TABLE")?,
        Duration::from_millis(lambda_dedup_runtime::optional(
            "FORWARDER_DEADLINE_MARGIN_MS",
            3_000u64,
        )?),
    );
    let forwarder = &forwarder;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let deadline = lambda_dedup_runtime::deadline(&event.context);
        let (response, _) = forwarder.handle(&event.payload, deadline).await;
        Ok::<_, Error>(response)
    }))
    .await
}
