//! Run with `cargo test -p example-invoke-charge` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-invoke-charge` and deploy it with the environment below.
//!
//! The direct invoke door: a Lambda invoked with its own JSON — by a caller's `Invoke`
//! (`RequestResponse`), or asynchronously (`Event`), where Lambda retries a failed invocation
//! with the same request id and then sends it to the function's on-failure destination.
//!
//! A charge request is `{"order_id": "o-1", "cents": 500}`; its identity is its `order_id`
//! (never the request id: a caller that invokes again gets a new one), its fingerprint the
//! `cents`. The charge is made once, through the payments API with the event's idempotency
//! key, under a lease; the receipt is stored with the mark and every duplicate gets it back. A
//! duplicate that arrives while the first is still charging waits up to
//! `DEDUP_IN_PROGRESS_WAIT_MS` for its receipt, then is answered `InvokeError::InProgress`.
//!
//! Lambda does not say who invoked the function, so its key space is chosen openly: one fixed
//! tenant, `CHARGE_TENANT` (`InvokeScope::tenant`) — the function charges for that tenant, and
//! its resource policy names who may invoke it. The receipt stored, and returned to every
//! invoker naming the same `order_id`, is minimal: the order, the amount and the payment's id,
//! never the payments API's whole answer. The `order_id` is a JSON string: `{"order_id": 42}`
//! is refused `identity_wrong_type`, never taken for the order `"42"`.
//!
//! Environment: the settings of `lambda_dedup_config` plus `PAYMENTS_API_URL` (an API
//! that honours `Idempotency-Key`) and `CHARGE_TENANT` (the tenant it charges for).

use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::{Dedup, Event, HandlerError, InvokeScope, Service};
use serde_json::Value;

/// A charge request, as the caller sends it.
#[derive(serde::Deserialize)]
struct ChargeRequest {
    order_id: String,
    cents: i64,
}

/// What the caller gets back, the first time and every time after.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    /// The order charged.
    pub order_id: String,
    /// The amount.
    pub cents: i64,
    /// The payments API's id of the charge (its answer's `id`), when it names one: the
    /// receipt keeps nothing else of that answer.
    pub payment_id: Option<String>,
}

/// Longest payment id kept on a receipt.
const MAX_PAYMENT_ID_BYTES: usize = 255;

/// The payment's id in the payments API's answer `body`: its `id`, a short printable string,
/// or none.
fn payment_id(body: &str) -> Option<String> {
    let answer: Value = serde_json::from_str(body).ok()?;
    let id = answer.get("id")?.as_str()?;
    let printable = !id.is_empty() && !id.chars().any(char::is_control);
    (printable && id.len() <= MAX_PAYMENT_ID_BYTES).then(|| id.to_owned())
}

/// The function: each charge request of the tenant `CHARGE_TENANT` charged once through the
/// payments API at `PAYMENTS_API_URL`, the receipt returned to every duplicate.
fn service(dedup: Dedup) -> Result<Service<Value, Receipt>, lambda_runtime::Error> {
    let timeout = dedup.settings().provider_timeout;
    let payments = IdempotentClient::new(&dedup.env().required("PAYMENTS_API_URL")?, timeout)?;
    let scope = InvokeScope::tenant(&dedup.env().required("CHARGE_TENANT")?);
    let dedup = dedup.identity("/order_id").fingerprint(&["/cents"]);
    Ok(dedup.invoke(scope, move |e: Event<ChargeRequest>| {
        let (payments, key) = (payments.clone(), e.key.idempotency_key());
        async move {
            let ChargeRequest { order_id, cents } = e.payload;
            if cents <= 0 {
                return Err(HandlerError::invalid("cents must be positive"));
            }
            let body = serde_json::json!({"order": order_id, "amount": cents});
            let answer = payments.call("/payments", &key, &body).await?;
            Ok(Receipt {
                order_id,
                cents,
                payment_id: payment_id(&answer.body),
            })
        }
    })?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    let dedup = Dedup::from_env("invoke-charge")?.dynamodb().await;
    Ok(lambda_runtime::run_concurrent(service(dedup)?).await?)
}

#[cfg(test)]
mod tests;
