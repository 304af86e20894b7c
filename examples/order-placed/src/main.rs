//! Run with `cargo test -p example-order-placed` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-order-placed` and deploy it with the environment below.
//!
//! The example for your own JSON: `OrderPlaced` events (not CloudEvents) whose identity is their
//! `order_id`. Each order is written once and its confirmation e-mail sent once, and the e-mail
//! only after the order is committed: the order commits with the event's mark in one DynamoDB
//! transaction, then the e-mail goes out under a lease of its own step, with the event's
//! idempotency key, so a retry after a crash sends it again under the same key and the mail API
//! sends it once.
//!
//! A producer that retries sends the same order again, perhaps with another `sent_at`: the
//! fingerprint is the fields the effects depend on (`customer`, `email`, `total_cents`), so it is a
//! duplicate; the same `order_id` with another total is a conflict, dead-lettered.
//!
//! Environment: the settings of `lambda_dedup_config` plus `ORDERS_TABLE` (key
//! `order_id`) and `MAIL_API_URL` (an API that honours `Idempotency-Key`).

use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::{Dedup, Effect, Event, HandlerError, Item, SqsService};

/// An `OrderPlaced` event, as the producer writes it.
#[derive(serde::Deserialize)]
struct OrderPlaced {
    order_id: String,
    customer: String,
    email: String,
    total_cents: i64,
}

/// The order, written with the event's mark.
fn write_order(orders: &str, e: Event<OrderPlaced>) -> Result<Effect, HandlerError> {
    if e.payload.total_cents <= 0 {
        return Err(HandlerError::invalid("total_cents must be positive"));
    }
    let order = Item::from(("order_id", e.scoped(&e.payload.order_id)))
        .with("customer", e.payload.customer)
        .with("total_cents", e.payload.total_cents);
    Ok(Effect::put(orders, order))
}

/// The function: own JSON keyed by `order_id`; the order written, then the e-mail sent through
/// the mail API at `MAIL_API_URL` under the event's idempotency key.
fn service(dedup: Dedup) -> Result<SqsService, lambda_runtime::Error> {
    let orders = dedup.env().required("ORDERS_TABLE")?;
    let timeout = dedup.settings().provider_timeout;
    let mail = IdempotentClient::new(&dedup.env().required("MAIL_API_URL")?, timeout)?;
    let dedup = dedup
        .identity("/order_id")
        .fingerprint(&["/customer", "/email", "/total_cents"]);
    let write = transact(move |e| write_order(&orders, e));
    Ok(
        dedup.sqs(write.then_call(move |e: Event<OrderPlaced>, lease| {
            let message = serde_json::json!({"to": e.payload.email, "order": e.payload.order_id});
            let (mail, key) = (mail.clone(), lease.key.idempotency_key());
            async move { Ok(Some(mail.call("/messages", &key, &message).await?.body)) }
        }))?,
    )
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    let dedup = Dedup::from_env("order-placed")?.dynamodb().await;
    Ok(lambda_runtime::run_concurrent(service(dedup)?).await?)
}

#[cfg(test)]
mod tests;
