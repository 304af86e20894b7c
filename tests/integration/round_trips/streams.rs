//! The stream doors: Kinesis (`ledger-stream`), each record's mark committed with its balance
//! change, in order per account; and DynamoDB Streams, each item's records in order.

use std::collections::BTreeMap;

use lambda_dedup_runtime::events::{Change, DynamoDbEventResponse, KinesisEventResponse};
use lambda_dedup_runtime::source::{DynamoDbStream, Kinesis};
use lambda_dedup_runtime::testing::events::{dynamodb_stream_event, insert_record, kinesis_event};
use lambda_dedup_runtime::{Effect, Event, HandlerError, Service};
use ledger_projector::ledger;
use local_dynamodb::meter::Meter;
use serde_json::json;

use super::{credit, delivered, metered_tables, on_dynamodb, on_marks, ops};

/// Never sent to here: every record applies.
const PARKING: &str = "https://sqs.eu-west-1.amazonaws.com/000000000000/parking";

/// The requests of `event` delivered to each of `containers` in turn, every answer one that
/// `passes` (its partial batch response lists no failure).
async fn checkpointed<E: Clone + 'static, R: std::fmt::Debug + 'static>(
    meter: &Meter,
    containers: &[&Service<E, R>],
    event: &E,
    passes: impl Fn(&R) -> bool,
) -> Vec<BTreeMap<String, u64>> {
    let rounds = delivered(meter, containers, event).await;
    for (answer, _) in &rounds {
        assert!(passes(answer), "{answer:?}");
    }
    rounds.into_iter().map(|(_, requests)| requests).collect()
}

/// Ten records, each of its own account; the ten redelivered to the same container, then to
/// another.
#[tokio::test]
async fn round_trips_of_the_kinesis_door() {
    let (meter, client, marks, balances) = metered_tables("account").await;
    let env = on_marks(&marks, &[("DEDUP_PARKING_QUEUE_URL", PARKING)]);
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
    let passes = |a: &KinesisEventResponse| a.batch_item_failures.is_empty();
    let rounds = checkpointed(&meter, &[&first, &first, &other], &event, passes).await;
    let ten_commits = ops(&[("TransactWriteItems", 10)]);
    // A transaction per record; the redelivery answered by the warm cache.
    assert_eq!(rounds, [ten_commits.clone(), ops(&[]), ten_commits]);
}

/// An order as a DynamoDB stream record's new image carries it.
#[derive(Debug, serde::Deserialize)]
struct Order {
    customer: String,
    total: i64,
}

/// An order's one write, committed with its record's mark: its customer's total, plus the
/// order's.
fn totalled(totals: &str) -> impl Fn(Event<Change<Order>>) -> Result<Effect, HandlerError> + use<> {
    let totals = totals.to_owned();
    move |e: Event<Change<Order>>| {
        let order = e
            .payload
            .new_image
            .ok_or_else(|| HandlerError::invalid("no new image"))?;
        Ok(Effect::add(
            &totals,
            ("customer", order.customer),
            "total",
            order.total,
        ))
    }
}

/// The DynamoDB Streams door (`.door(DynamoDbStream, flow)`, keyed by the item's own id at
/// `/newImage/order_id` as its chapter of the book shows it; no function of the repository runs
/// it: `intent-relay` and `inbox-forwarder` read their streams as relays, each item its own
/// mark) with a transaction per record: ten orders inserted, each of its own customer; the ten
/// records redelivered to the same container, then to another.
#[tokio::test]
async fn round_trips_of_the_dynamodb_streams_door() {
    let (meter, client, marks, totals) = metered_tables("customer").await;
    let env = on_marks(&marks, &[("DEDUP_PARKING_QUEUE_URL", PARKING)]);
    let container = || {
        on_dynamodb(&client, &env, "orders-stream")
            .identity("/newImage/order_id")
            .door(DynamoDbStream, totalled(&totals))
            .expect("service")
    };
    let (first, other) = (container(), container());
    let records = (1..=10)
        .map(|seq| {
            let order = dedup_tests::unique("o");
            let image = json!({"order_id": {"S": order}, "customer": {"S": format!("c-{order}")},
                "total": {"N": "5"}});
            insert_record(seq, json!({"order_id": {"S": order}}), image)
        })
        .collect();
    let event = dynamodb_stream_event(records);
    let passes = |a: &DynamoDbEventResponse| a.batch_item_failures.is_empty();
    let rounds = checkpointed(&meter, &[&first, &first, &other], &event, passes).await;
    let ten_commits = ops(&[("TransactWriteItems", 10)]);
    // A transaction per record, as on Kinesis; the redelivery answered by the warm cache; in
    // another container each record's commit, whose failed condition returns the mark.
    assert_eq!(rounds, [ten_commits.clone(), ops(&[]), ten_commits]);
}
