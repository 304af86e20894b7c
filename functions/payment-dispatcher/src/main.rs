//! `payment-dispatcher`: payment requests (CloudEvents JSON in the SQS body) are sent to an
//! external payments API. No transaction reaches it, so the event is claimed under a lease, the
//! API is called with `Idempotency-Key` derived from the event (the same on every retry), and the
//! provider's receipt is stored with the mark for duplicates (S6, S8).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_edge::settings` plus `PAYMENTS_API_URL` and optionally `PROVIDER_TIMEOUT_MS`.

// The handler's nested async blocks (runtime, batch runner, store calls) are deep types.
#![recursion_limit = "256"]

mod payment;

use aws_lambda_events::event::sqs::SqsEvent;
use dedup_http::IdempotentClient;
use lambda_runtime::{Error, LambdaEvent, service_fn};

const FUNCTION: &str = "payment-dispatcher";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_edge::init_tracing();
    let settings = lambda_edge::Settings::from_env(FUNCTION)?;
    let api = IdempotentClient::new(
        &lambda_edge::required("PAYMENTS_API_URL")?,
        settings.provider_timeout,
    )?;
    let spec = payment::key_spec(settings.scope.clone());
    let dedup = settings.deduplicator(spec.clone(), dedup_dynamodb::connect().await);
    let (dedup, api, spec) = (&dedup, &api, &spec);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = lambda_edge::deadline(&event.context);
        lambda_edge::run_sqs(
            FUNCTION,
            spec,
            event,
            settings.max_concurrency,
            |m| async move {
                dedup
                    .leased(&m, deadline, |e, lease| async move {
                        let request = payment::request(&e)?;
                        let receipt = api
                            .post("/v1/payments", &lease.idempotency_key(), &request)
                            .await?;
                        Ok(Some(receipt.body))
                    })
                    .await
            },
        )
        .await
    }))
    .await
}
