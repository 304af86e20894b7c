//! `webhook-receiver`: a sender's webhooks, through a Lambda Function URL (or an API Gateway
//! HTTP API). Each request is verified in the sender's scheme (`WEBHOOK_SCHEME`: Standard
//! Webhooks, HMAC-SHA256 over id, timestamp and raw body; or Stripe's `Stripe-Signature`; a
//! tolerance window, several secrets for rotation), deduplicated by the identity the sender
//! declares and signs, and
//! recorded in the inbox table with its mark in one transaction before it is answered 2xx; see
//! `lambda_dedup_runtime::webhook` for every answer. `inbox-forwarder` hands the inbox on.
//!
//! Run locally with `cargo xtask demo` (through `cargo lambda watch`'s Function URL front), or
//! under `cargo lambda watch` with the variables of `lambda_dedup_runtime::settings`, of
//! `WebhookConfig::from_env` (`WEBHOOK_SCHEME`, `WEBHOOK_SECRETS`, `WEBHOOK_TENANT`,
//! `INBOX_TABLE`, …).

// The handler's nested async blocks (runtime, store calls) are deep types.
#![recursion_limit = "256"]

use lambda_dedup_runtime::webhook::{Receiver, WebhookConfig};
use lambda_http::{Error, Request, service_fn};

/// The function's name: the default consumer of its keys and the `Function` of its metrics.
const FUNCTION: &str = "webhook-receiver";

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_dedup_runtime::init_tracing();
    let settings = lambda_dedup_runtime::Settings::from_env(FUNCTION)?;
    let config = WebhookConfig::from_env()?;
    let spec = config.key_spec(settings.scope.clone());
    let dedup = settings.deduplicator(spec, lambda_dedup_dynamodb::connect().await);
    let receiver = Receiver::new(FUNCTION, config, dedup);
    let receiver = &receiver;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Error>(receiver.handle(request).await)
    }))
    .await
}
