//! `webhook-receiver`: a sender's webhooks, through a Lambda Function URL (or an API Gateway
//! HTTP API). Each request is verified in the sender's scheme (`WEBHOOK_SCHEME`: Standard
//! Webhooks, HMAC-SHA256 over id, timestamp and raw body; or Stripe's `Stripe-Signature`; a
//! tolerance window, several secrets for rotation), deduplicated by the identity the sender
//! declares and signs, and recorded in the inbox table before it is answered 2xx — the inbox
//! item is the event's mark, one conditional `Put` (create-once mode); see
//! `lambda_dedup_runtime::webhook` for every answer. `inbox-forwarder` hands the inbox on.
//!
//! Run locally with `cargo xtask demo` (through `cargo lambda watch`'s Function URL front), or
//! under `cargo lambda watch` with the variables of `lambda_dedup_config`, of
//! `lambda_dedup_runtime::webhook::webhook_config` (`WEBHOOK_SCHEME`, `WEBHOOK_SECRETS_ARN` — the Secrets Manager secret
//! read at init and again, bounded, on a signature that matches none of its secrets — or, for
//! local use, `WEBHOOK_SECRETS`; `WEBHOOK_TENANT`, `INBOX_TABLE`, …); it reads no
//! `DEDUP_MARK_TABLE`: the inbox items are its marks.

use lambda_dedup_runtime::{Dedup, WebhookService, webhook};

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    let dedup = Dedup::from_env("webhook-receiver")?.dynamodb().await;
    let config = webhook::webhook_config(dedup.env()).await?;
    Ok(
        lambda_dedup_runtime::lambda_http::run_concurrent(WebhookService::new(dedup, config)?)
            .await?,
    )
}
