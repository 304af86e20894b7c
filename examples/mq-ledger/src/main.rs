//! Run with `cargo test -p example-mq-ledger` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-mq-ledger` and deploy it with the environment below.
//!
//! An Amazon MQ for ActiveMQ-triggered Lambda whose effect — adding `amount` to the balance of
//! `account`, the message's data being `{"account", "amount"}` — happens once per message: the
//! credit and the message's mark commit in one DynamoDB transaction. The trigger has no partial
//! batch response: a message that can never apply is parked in `DEDUP_PARKING_QUEUE_URL` and
//! the batch acknowledged; while any message may yet apply the invocation fails, the broker
//! redelivers the whole batch, and the messages already credited are duplicates then. The
//! identity is the broker's `messageID`, chosen openly; use
//! `.identity(Identity::attribute("<property>"))` when producers send an event id of their own.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE`, `DEDUP_PARKING_QUEUE_URL`) plus `BALANCES_TABLE` (key `account`).

use lambda_dedup_runtime::events::{ActiveMqEvent, MQ_MESSAGE_ID_ATTRIBUTE};
use lambda_dedup_runtime::{Dedup, Effect, Event, Identity, Service, source::ActiveMq};

/// A message's data: a credit.
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The function: each message's credit, committed with its mark.
fn service(dedup: Dedup) -> Result<Service<ActiveMqEvent, ()>, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    // The broker's id, chosen openly (S1): it catches the trigger's redeliveries, not a
    // producer that sends one event twice.
    let dedup = dedup.identity(Identity::attribute(MQ_MESSAGE_ID_ATTRIBUTE));
    Ok(dedup.door(ActiveMq, move |e: Event<Credit>| {
        let account = ("account", e.payload.account);
        Effect::add(&balances, account, "balance", e.payload.amount)
    })?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(
        lambda_runtime::run_concurrent(service(Dedup::from_env("mq-ledger")?.dynamodb().await)?)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::Value;
    use lambda_dedup_runtime::testing::{attribute, env, event, read_json, service_on_memory};

    /// AWS's ActiveMQ sample (`events/example-activemq-event.json`) with a credit as its data:
    /// credited once, the batch's redelivery a duplicate, each invocation acknowledged.
    #[tokio::test]
    async fn activemq_sample_message_is_credited_once_across_a_redelivery() {
        let mut sample: serde_json::Value = read_json(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/example-activemq-event.json"
        ));
        // base64 of {"account":"a-1","amount":7}
        sample["messages"][0]["data"] = "eyJhY2NvdW50IjoiYS0xIiwiYW1vdW50Ijo3fQ==".into();
        let env = env(&[
            ("BALANCES_TABLE", "balances"),
            (
                "DEDUP_PARKING_QUEUE_URL",
                "http://127.0.0.1:9/000000000000/parking",
            ),
        ]);
        let balances = [("balances", "account")];
        let (service, store) =
            service_on_memory(&env, "mq-ledger", &balances, service).expect("service");
        for _ in 0..2 {
            service
                .call_with(event(&sample))
                .await
                .expect("acknowledged");
        }
        let balance = attribute(&store, "balances", ("account", "a-1"), "balance");
        assert_eq!(balance, Some(Value::N("7".into())), "credited once");
    }
}
