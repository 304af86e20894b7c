//! Run with `cargo test -p example-eventbridge-ledger` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-eventbridge-ledger` and deploy it with the environment below.
//!
//! An EventBridge-targeted Lambda whose effect — adding `amount` to the balance of `account`,
//! the event's `detail` being `{"credit_id", "account", "amount"}` — happens once per credit:
//! the credit and its mark commit in one DynamoDB transaction. The identity is the detail's
//! `credit_id`, not the EventBridge `id`: every `PutEvents` entry gets a new `id`, so a
//! producer's retried put would pass as new. Lambda invokes the target asynchronously: an event
//! that can never apply (no `credit_id`) or cannot apply yet fails the invocation
//! (`NotAcknowledged`), so Lambda's async retries and then the function's on-failure
//! destination take it; give the function one.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE`) plus `BALANCES_TABLE` (key `account`).

use lambda_dedup_runtime::events::EventBridgeEvent;
use lambda_dedup_runtime::{Dedup, Effect, Event, Service, source::EventBridge};

/// An event's detail: a credit.
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The function: each event's credit, committed with its mark.
fn service(dedup: Dedup) -> Result<Service<EventBridgeEvent, ()>, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    Ok(dedup
        .identity("/credit_id")
        .door(EventBridge, move |e: Event<Credit>| {
            let account = ("account", e.payload.account);
            Effect::add(&balances, account, "balance", e.payload.amount)
        })?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(lambda_runtime::run_concurrent(service(
        Dedup::from_env("eventbridge-ledger")?.dynamodb().await,
    )?)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::Value;
    use lambda_dedup_runtime::testing::{attribute, env, event, read_json, service_on_memory};

    /// AWS's sample (`events/example-eventbridge-event-obj.json`) with a credit as its detail:
    /// credited once, the producer's retried put (a new `id`, the same detail) a duplicate.
    #[tokio::test]
    async fn eventbridge_sample_is_credited_once_across_a_producer_retry_with_a_new_id() {
        let mut sample: serde_json::Value = read_json(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/example-eventbridge-event-obj.json"
        ));
        sample["detail"] = serde_json::json!({"credit_id": "c-1", "account": "a-1", "amount": 7});
        let env = env(&[("BALANCES_TABLE", "balances")]);
        let balances = [("balances", "account")];
        let (service, store) =
            service_on_memory(&env, "eventbridge-ledger", &balances, service).expect("service");
        for id in ["7bf73129-1428-4cd3-a780-95db273d1602", "a-new-put-entry-id"] {
            sample["id"] = id.into();
            service
                .call_with(event(&sample))
                .await
                .expect("acknowledged");
        }
        let balance = attribute(&store, "balances", ("account", "a-1"), "balance");
        assert_eq!(balance, Some(Value::N("7".into())), "credited once");
    }
}
