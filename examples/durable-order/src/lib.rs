//! Run with `cargo test -p example-durable-order` (its tests: the SDK's local runner on the
//! local DynamoDB); in Lambda, `cargo lambda build --release -p example-durable-order`, then
//! deploy `order-dispatcher` (SQS-triggered) and `durable-order` (with a `DurableConfig`) with
//! the environment below.
//!
//! Lambda durable functions, exactly once. An SQS queue of orders triggers `order-dispatcher`,
//! which starts one execution of the durable function `durable-order` per order however often
//! the order is delivered or sent again: each order's mark, then a start named from its key
//! (`durable::starts`). The workflow reserves the order's stock in DynamoDB and charges it
//! through a payments API; each is a step guarded by `Dedup::durable_steps`, so a crash between
//! a step's effect and its checkpoint (the SDK runs steps at least once) reserves and charges
//! once: the reservation commits with the step's mark, the charge carries an idempotency key
//! derived from the execution and the step.
//!
//! Environment, both functions: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE`, the queue's redelivery horizon; `DURABLE_EXECUTION_TIMEOUT_SECONDS` and
//! `DURABLE_RETENTION_DAYS` as the workflow's `DurableConfig` sets them). The dispatcher:
//! `DURABLE_FUNCTION` (the workflow's qualified name or ARN). The workflow: `STOCK_TABLE` (key
//! `sku`) and `PAYMENTS_API_URL` (an API that honours `Idempotency-Key`).

use std::sync::Arc;

use aws_durable_execution_sdk::DurableContext;
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::durable::{BoxError, Starter, Steps, Writes, starts};
use lambda_dedup_runtime::{BuildError, Dedup, Effect, HandlerError, SqsService};

/// An order, as the producer sends it to the queue and the dispatcher to the workflow.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Order {
    /// The order's id: its identity, whoever sends it and however often.
    pub order_id: String,
    /// What it reserves.
    pub sku: String,
    /// How many.
    pub quantity: i64,
    /// What it charges.
    pub cents: i64,
}

/// What the workflow returns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placed {
    /// The order.
    pub order_id: String,
    /// The stock reserved.
    pub reserved: i64,
    /// The payments API's id of the charge, when it names one.
    pub payment_id: Option<String>,
}

/// The dispatcher: orders keyed by their `order_id` (never the message id: a producer's retry
/// of the same order is a duplicate), one execution started per order.
pub fn dispatcher(dedup: Dedup, starter: impl Starter) -> Result<SqsService, BuildError> {
    dedup.identity("/order_id").sqs(starts(starter))
}

/// The durable workflow's parts: the step guard, the stock table, the payments API.
#[derive(Debug, Clone)]
pub struct Workflow {
    steps: Steps,
    stock: String,
    payments: Arc<IdempotentClient>,
}

impl Workflow {
    /// The workflow on `dedup`'s store, reserving in `stock` and charging through `payments`.
    pub fn new(
        dedup: Dedup,
        stock: String,
        payments: IdempotentClient,
    ) -> Result<Self, BuildError> {
        Ok(Self {
            steps: dedup.durable_steps()?,
            stock,
            payments: Arc::new(payments),
        })
    }

    /// One order's execution: the stock reserved with the step's mark, then the charge under
    /// the step's idempotency key.
    pub async fn run(&self, order: Order, ctx: DurableContext) -> Result<Placed, BoxError> {
        let (table, sku, quantity) = (self.stock.clone(), order.sku.clone(), order.quantity);
        let reserved: i64 = self
            .steps
            .transact(&ctx, "reserve-stock", move || {
                let item = Effect::add(&table, ("sku", sku.as_str()), "reserved", quantity);
                Ok(Writes {
                    effects: vec![item],
                    output: quantity,
                })
            })
            .await?;
        let payments = self.payments.clone();
        let body = serde_json::json!({"order_id": order.order_id, "cents": order.cents});
        let payment_id: Option<String> = self
            .steps
            .call(&ctx, "charge", move |key| async move {
                // A permanent refusal or a transient failure, typed (`HandlerError`); the
                // SDK's retry strategy for the step decides what follows.
                let receipt = payments
                    .call("/charges", &key, &body)
                    .await
                    .map_err(HandlerError::from)?;
                Ok(payment_id(&receipt.body))
            })
            .await?;
        Ok(Placed {
            order_id: order.order_id,
            reserved,
            payment_id,
        })
    }
}

/// The payment's id in the payments API's answer: its `id`, if a string.
fn payment_id(body: &str) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_str(body).ok()?;
    answer.get("id")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests;
