//! Run with `cargo test -p example-kafka-ledger` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-kafka-ledger` and deploy it with the environment below.
//!
//! A Kafka-triggered Lambda (Amazon MSK or self-managed Apache Kafka) whose effect — adding
//! `amount` to the balance of `account`, the record's value being `{"account", "amount"}` —
//! happens once per record, however often Lambda delivers it: the credit and the record's mark
//! commit in one DynamoDB transaction. Partitions keep their order; the partial batch response
//! names each partition's first record not done; a record that can never apply is parked in
//! `DEDUP_PARKING_QUEUE_URL` and passed. The identity is the record's position (cluster, topic,
//! partition, offset): every redelivery of a record is caught; give the builder
//! `.identity(Identity::attribute("<header>"))` when producers send an event id of their own.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE`, `DEDUP_PARKING_QUEUE_URL`, and `DEDUP_KAFKA_CLUSTER_ID`: the name of a
//! self-managed cluster, required by the position identity — an MSK event is named by its own
//! `eventSourceArn`) plus `BALANCES_TABLE` (key `account`).

use lambda_dedup_runtime::events::{KafkaEvent, KafkaEventResponse};
use lambda_dedup_runtime::{Dedup, Effect, Event, Service, source::Kafka};

/// A record's value: a credit.
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The function: each record's credit, committed with its mark.
fn service(dedup: Dedup) -> Result<Service<KafkaEvent, KafkaEventResponse>, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    let kafka = Kafka::on(&dedup)?;
    Ok(dedup.door(kafka, move |e: Event<Credit>| {
        let account = ("account", e.payload.account);
        Effect::add(&balances, account, "balance", e.payload.amount)
    })?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(
        lambda_runtime::run_concurrent(service(Dedup::from_env("kafka-ledger")?.dynamodb().await)?)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::Value;
    use lambda_dedup_runtime::testing::{attribute, env, event, read_json, service_on_memory};

    /// AWS's sample event (`events/example-kafka-event.json`) with a credit as its value: applied
    /// once, the redelivery of the same offset a duplicate, nothing named in the response.
    #[tokio::test]
    async fn kafka_sample_record_is_credited_once_across_a_redelivery() {
        let mut sample: serde_json::Value = read_json(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/example-kafka-event.json"
        ));
        // base64 of {"account":"a-1","amount":7}
        sample["records"]["AWSKafkaTopic-0"][0]["value"] =
            "eyJhY2NvdW50IjoiYS0xIiwiYW1vdW50Ijo3fQ==".into();
        let env = env(&[
            ("BALANCES_TABLE", "balances"),
            ("DEDUP_KAFKA_CLUSTER_ID", "ledger-cluster"),
            (
                "DEDUP_PARKING_QUEUE_URL",
                "http://127.0.0.1:9/000000000000/parking",
            ),
        ]);
        let balances = [("balances", "account")];
        let (service, store) =
            service_on_memory(&env, "kafka-ledger", &balances, service).expect("service");
        for _ in 0..2 {
            let answer = service.call_with(event(&sample)).await.expect("answer");
            assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
        }
        let balance = attribute(&store, "balances", ("account", "a-1"), "balance");
        assert_eq!(balance, Some(Value::N("7".into())), "credited once");
    }
}
