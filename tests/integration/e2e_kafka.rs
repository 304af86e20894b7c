//! The Kafka door end to end: the built `example-kafka-ledger` binary, unmodified, polls a
//! runtime API of this test's own ([`local_lambda::concurrent`]) and is handed AWS's published
//! sample event (`events/example-kafka-event.json`) grown to two partitions, with its marks and
//! balances in the shared local DynamoDB and its parking queue in the local SQS. Each record is
//! credited once; the poison record is parked and passed; the partial batch response names the
//! resume point in the shape AWS documents for Kafka (`{"partition", "offset"}`), and the
//! redelivery from it applies the rest and nothing twice.
//!
//! It needs the built functions (`DEDUP_FUNCTIONS_DIR`) and the local SQS (`cargo xtask test`
//! sets both); without them it says so and is skipped.

use std::time::Duration;

use local_lambda::concurrent::Answer;
use serde_json::json;

use crate::built::{self, credit};
use dedup_tests as support;

/// AWS's sample with `records` (partition, offset, value) in place of its own.
fn event(records: &[(i64, i64, &str)]) -> serde_json::Value {
    let mut sample = built::sample("example-kafka-event.json");
    let template = sample["records"]["AWSKafkaTopic-0"][0].clone();
    let mut partitions = serde_json::Map::new();
    for (partition, offset, value) in records {
        let mut r = template.clone();
        r["partition"] = json!(partition);
        r["offset"] = json!(offset);
        r["value"] = built::base64(value);
        let list = partitions
            .entry(format!("AWSKafkaTopic-{partition}"))
            .or_insert_with(|| json!([]));
        list.as_array_mut().expect("list").push(r);
    }
    sample["records"] = partitions.into();
    sample
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_binary_applies_each_record_once_and_answers_the_documented_partial_batch_response() {
    let Some(dir) = built::functions_on_stack("the Kafka end-to-end test") else {
        return;
    };
    let cluster = ("DEDUP_KAFKA_CLUSTER_ID", "ledger-cluster".to_owned());
    let (api, function, ledger, parking) =
        built::ledger_example_parking(&dir, "kafka", None, [cluster]).await;

    let (a, b) = (support::unique("a"), support::unique("b"));
    let batch = [
        (0, 40, credit(&a, 1)),
        (0, 41, "not json".to_owned()),
        (0, 42, credit(&a, 2)),
        (1, 7, credit(&b, 5)),
    ];
    let records: Vec<(i64, i64, &str)> =
        batch.iter().map(|(p, o, v)| (*p, *o, v.as_str())).collect();
    let first = api.invoke(event(&records), Duration::from_secs(20)).await;
    let Answer::Response(response) = &first.answer else {
        panic!("no response: {first:?}");
    };
    // The poison record at 41 is parked and passed; 42 waited behind it on its partition, so
    // partition 0 resumes at 42; partition 1 is done.
    assert_eq!(
        response,
        &json!({"batchItemFailures": [
            {"itemIdentifier": {"partition": "AWSKafkaTopic-0", "offset": 42}}
        ]})
    );
    assert_eq!(ledger.balance(&a).await, Some(1));
    assert_eq!(ledger.balance(&b).await, Some(5));
    // Lambda resumes partition 0 at 42; partition 1 comes again as well (a rebalance).
    let second = api
        .invoke(event(&[records[2], records[3]]), Duration::from_secs(20))
        .await;
    let Answer::Response(response) = &second.answer else {
        panic!("no response: {second:?}");
    };
    assert_eq!(response, &json!({"batchItemFailures": []}));
    assert_eq!(ledger.balance(&a).await, Some(3));
    assert_eq!(
        ledger.balance(&b).await,
        Some(5),
        "the redelivered record is a duplicate"
    );
    assert_eq!(ledger.marks().await, 3);
    let parked = built::parked(&parking).await;
    assert_eq!(parked.len(), 1, "the poison record parked once");
    let attribute = |n: &str| parked[0].get(n).cloned();
    assert_eq!(attribute("dedup-reason").as_deref(), Some("body_not_json"));
    assert_eq!(attribute("dedup-kafka-offset").as_deref(), Some("41"));
    function.stop().await;
}
