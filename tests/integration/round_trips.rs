//! Round trips per door and flow: the requests each case sends to DynamoDB, counted by operation
//! at the metering proxy (`local_dynamodb::meter`) in front of the local DynamoDB, and pinned,
//! so a change that adds a round trip fails here. docs/BENCHMARKS.md ("Round trips per door and
//! flow") shows these counts beside the minimum each case allows. Measurement only: the doors
//! run as their functions wire them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::http::Reply;
use lambda_dedup_runtime::testing::events::sqs_event;
use lambda_dedup_runtime::{Dedup, Effect, Env, Event, HttpEvent, Tenant, store::Items};
use lambda_http::Request;
use lambda_http::tower::ServiceExt;
use local_dynamodb::meter::Meter;

/// The requests the meter counted since its last reset, by operation.
fn sent(meter: &Meter) -> BTreeMap<String, u64> {
    meter.usage().by_operation
}

/// `ops` as the meter counts them.
fn ops(ops: &[(&str, u64)]) -> BTreeMap<String, u64> {
    ops.iter().map(|(op, n)| ((*op).to_owned(), *n)).collect()
}

/// A metering proxy, and a client behind it.
fn metered() -> (Meter, aws_sdk_dynamodb::Client) {
    let meter = Meter::start(&dedup_tests::endpoint(), Duration::ZERO).expect("meter");
    let client = dedup_tests::client_at(&meter.endpoint());
    (meter, client)
}

// ---- The HTTP door (`orders-api`): the order created as its effect, committed with the mark.

fn post(key: &str, body: &str) -> Request {
    dedup_tests::order_post("shop", key, body)
}

/// The HTTP door as `orders-api` wires it: a first request, its replay in the same container,
/// the key with another body (422).
#[tokio::test]
async fn round_trips_of_the_http_door() {
    let (meter, client) = metered();
    let (dedup, config, _) = dedup_tests::orders_door(&client).await;
    let service = orders_api::service(dedup, config).expect("service");
    let key = dedup_tests::unique("rt");
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let send = |request: Request| {
        let service = service.clone();
        async move { service.oneshot(request).await.expect("answer").status() }
    };

    meter.reset();
    assert_eq!(send(post(&key, body)).await, 201);
    let first = sent(&meter);
    meter.reset();
    assert_eq!(send(post(&key, body)).await, 201);
    let replay = sent(&meter);
    meter.reset();
    let other = r#"{"sku":"book-2","quantity":1}"#;
    assert_eq!(send(post(&key, other)).await, 422);
    let conflict = sent(&meter);
    // The claim, the lease released, then the answer and the order committed with the mark.
    let claim_release_commit = ops(&[("TransactWriteItems", 1), ("UpdateItem", 2)]);
    assert_eq!(first, claim_release_commit);
    // The claim, whose failed condition returns the stored answer (no warm cache here).
    assert_eq!(replay, ops(&[("UpdateItem", 1)]));
    // The claim, then the mark read to tell a released key (taken over) from a kept one.
    assert_eq!(conflict, ops(&[("GetItem", 1), ("UpdateItem", 1)]));
}

/// The HTTP door with the key in flight: a second request while the first's work runs is 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_of_the_http_door_in_flight() {
    let (meter, client) = metered();
    let (dedup, config, _) = dedup_tests::orders_door(&client).await;
    // The first request's work holds until the second is answered.
    let (entered, inside) = mpsc::channel::<()>();
    let (go, wait) = mpsc::channel::<()>();
    let (entered, wait) = (Mutex::new(entered), Arc::new(Mutex::new(wait)));
    // It waits with `block_in_place`, so the runtime hands this worker's other tasks (the
    // second request's connection among them) to another thread instead of starving them: a
    // starved request times out and the SDK sends it again, which the meter would count.
    let work = move |e: HttpEvent<serde_json::Value>| {
        let _ = entered.lock().map(|s| s.send(()));
        tokio::task::block_in_place(|| {
            let _ = wait.lock().map(|w| w.recv_timeout(Duration::from_secs(30)));
        });
        Ok(Reply::<Effect>::created(e.payload))
    };
    let service = dedup.http(config, work).expect("service");
    let key = dedup_tests::unique("rt");
    let body = r#"{"sku":"book-1"}"#;
    let first = tokio::spawn(service.clone().oneshot(post(&key, body)));
    tokio::task::spawn_blocking(move || inside.recv_timeout(Duration::from_secs(30)))
        .await
        .expect("join")
        .expect("the first request's work runs");
    meter.reset();
    let second = service.clone().oneshot(post(&key, body)).await;
    let in_flight = sent(&meter);
    assert_eq!(second.expect("answer").status(), 409);
    go.send(()).expect("the first request waits");
    let first = first.await.expect("join").expect("answer");
    assert_eq!(first.status(), 201);
    // The claim, whose failed condition shows the live lease.
    assert_eq!(in_flight, ops(&[("UpdateItem", 1)]));
}

// ---- The SQS door: credits, committed with the event's mark.

fn credit(id: &str) -> String {
    serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank", "id": id,
        "tenantid": "acme", "data": {"account": format!("a-{id}"), "amount": 1}})
    .to_string()
}

/// The SQS door on fresh tables behind `meter`'s client, in one transaction per message or per
/// batch, the duplicate pre-filter on or off.
async fn sqs_rounds(per_batch: bool, prefilter: bool) -> Vec<BTreeMap<String, u64>> {
    let (meter, client) = metered();
    let marks = dedup_tests::mark_table(&client).await;
    let balances = dedup_tests::effect_table(&client, "account").await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("DEDUP_MARK_TABLE", marks.as_str()),
        (
            "DEDUP_PREFILTER_DUPLICATES",
            if prefilter { "true" } else { "false" },
        ),
    ]);
    let dedup = Dedup::read(&env, "sqs-credit").expect("settings");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    let dedup = dedup
        .on(store)
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers();
    let work = move |e: Event<serde_json::Value>| {
        let account = e.payload["account"].as_str().unwrap_or_default().to_owned();
        Effect::add(&balances, ("account", account), "balance", 1)
    };
    let service = match per_batch {
        true => dedup.sqs(transact(work).one_transaction_per_batch()),
        false => dedup.sqs(transact(work)),
    }
    .expect("service");
    let bodies: Vec<String> = (0..10).map(|_| credit(&dedup_tests::unique("e"))).collect();
    let bodies: Vec<&str> = bodies.iter().map(String::as_str).collect();
    let mut rounds = Vec::new();
    for _ in 0..2 {
        meter.reset();
        let answer = service
            .call_with(sqs_event(&bodies))
            .await
            .expect("answered");
        assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
        rounds.push(sent(&meter));
    }
    rounds
}

/// SQS, 10 new messages, then the same 10 redelivered to the same container.
#[tokio::test]
async fn round_trips_of_the_sqs_door() {
    // A transaction per message; the redelivery answered by the warm cache.
    let per_message = sqs_rounds(false, false).await;
    assert_eq!(per_message, [ops(&[("TransactWriteItems", 10)]), ops(&[])]);
    // Batch-transaction mode: one transaction for the batch.
    let per_batch = sqs_rounds(true, false).await;
    assert_eq!(per_batch, [ops(&[("TransactWriteItems", 1)]), ops(&[])]);
    // With the duplicate pre-filter: the batch's marks read first.
    let prefiltered = sqs_rounds(true, true).await;
    let read_then_write = ops(&[("BatchGetItem", 1), ("TransactWriteItems", 1)]);
    assert_eq!(prefiltered, [read_then_write, ops(&[])]);
}
