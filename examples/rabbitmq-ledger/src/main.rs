//! Run with `cargo test -p example-rabbitmq-ledger` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-rabbitmq-ledger` and deploy it with the environment below.
//!
//! An Amazon MQ for RabbitMQ-triggered Lambda whose effect — adding `amount` to the balance of
//! `account`, the message's data being `{"account", "amount"}` — happens once per message: the
//! credit and the message's mark commit in one DynamoDB transaction. The identity is the
//! producer's `event-id` header (RabbitMQ leaves `messageId` null unless the producer sets it).
//! The trigger has no partial batch response: a message that can never apply (no `event-id`,
//! data not a credit) is parked in `DEDUP_PARKING_QUEUE_URL` and the batch acknowledged; while
//! any message may yet apply the invocation fails and the broker redelivers the whole batch.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE`, `DEDUP_PARKING_QUEUE_URL`) plus `BALANCES_TABLE` (key `account`).

use lambda_dedup_runtime::events::RabbitMqEvent;
use lambda_dedup_runtime::{Dedup, Effect, Event, Identity, Service, source::RabbitMq};

/// The header naming the producer's event.
const EVENT_ID_HEADER: &str = "event-id";

/// A message's data: a credit.
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The function: each message's credit, committed with its mark.
fn service(dedup: Dedup) -> Result<Service<RabbitMqEvent, ()>, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    let dedup = dedup.identity(Identity::attribute(EVENT_ID_HEADER));
    Ok(dedup.door(RabbitMq, move |e: Event<Credit>| {
        let account = ("account", e.payload.account);
        Effect::add(&balances, account, "balance", e.payload.amount)
    })?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(lambda_runtime::run_concurrent(service(
        Dedup::from_env("rabbitmq-ledger")?.dynamodb().await,
    )?)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::Value;
    use lambda_dedup_runtime::testing::{attribute, env, event, read_json, service_on_memory};

    /// AWS's RabbitMQ sample (`events/example-rabbitmq-event.json`) with a credit as its data and
    /// an `event-id` header in the sample's byte-array shape: credited once, the batch's
    /// redelivery a duplicate, each invocation acknowledged.
    #[tokio::test]
    async fn rabbitmq_sample_message_is_credited_once_across_a_redelivery() {
        let mut sample: serde_json::Value = read_json(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/example-rabbitmq-event.json"
        ));
        let message = &mut sample["rmqMessagesByQueue"]["test::/"][0];
        // base64 of {"account":"a-1","amount":7}
        message["data"] = "eyJhY2NvdW50IjoiYS0xIiwiYW1vdW50Ijo3fQ==".into();
        // "e-1" as the sample's headers carry bytes.
        message["basicProperties"]["headers"][EVENT_ID_HEADER] =
            serde_json::json!({"bytes": [101, 45, 49]});
        let env = env(&[
            ("BALANCES_TABLE", "balances"),
            (
                "DEDUP_PARKING_QUEUE_URL",
                "http://127.0.0.1:9/000000000000/parking",
            ),
        ]);
        let balances = [("balances", "account")];
        let (service, store) =
            service_on_memory(&env, "rabbitmq-ledger", &balances, service).expect("service");
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
