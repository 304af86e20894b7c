//! The stream doors: Kinesis (`ledger-stream`), each record's mark committed with its balance
//! change, in order per account.

use lambda_dedup_runtime::source::Kinesis;
use lambda_dedup_runtime::testing::events::kinesis_event;
use ledger_projector::ledger;

use super::{credit, delivered, metered_tables, on_dynamodb, on_marks, ops};

/// Ten records, each of its own account; the ten redelivered to the same container, then to
/// another.
#[tokio::test]
async fn round_trips_of_the_kinesis_door() {
    let (meter, client, marks, balances) = metered_tables("account").await;
    // Never sent to here: every record applies.
    let parking = "https://sqs.eu-west-1.amazonaws.com/000000000000/parking";
    let env = on_marks(&marks, &[("DEDUP_PARKING_QUEUE_URL", parking)]);
    let container = || {
        let balances = balances.clone();
        ledger::configure(on_dynamodb(&client, &env, "ledger-stream"))
            .door(Kinesis, move |e| ledger::plan(&balances, e))
            .expect("service")
    };
    let (first, other) = (container(), container());
    let records: Vec<(String, String)> = (0..10)
        .map(|_| dedup_tests::unique("e"))
        .map(|id| (format!("a-{id}"), credit(&id)))
        .collect();
    let records: Vec<(&str, &str)> = records
        .iter()
        .map(|(k, d)| (k.as_str(), d.as_str()))
        .collect();
    let event = kinesis_event("ledger", &records);
    let mut rounds = Vec::new();
    for (answer, requests) in delivered(&meter, &[&first, &first, &other], &event).await {
        assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
        rounds.push(requests);
    }
    let ten_commits = ops(&[("TransactWriteItems", 10)]);
    // A transaction per record; the redelivery answered by the warm cache.
    assert_eq!(rounds, [ten_commits.clone(), ops(&[]), ten_commits]);
}
