//! Round trips per door and flow: the requests each case sends to DynamoDB, counted by operation
//! at the metering proxy (`local_dynamodb::meter`) in front of the local DynamoDB, and pinned,
//! so a change that adds a round trip fails here. docs/BENCHMARKS.md ("Round trips per door and
//! flow") shows these counts beside the minimum each case allows. Measurement only: the doors
//! run as their functions wire them.
//!
//! One module per door (or family of doors); the kit they share is here.

mod http;
mod invoke;
mod s3;
mod sqs;
mod streams;
mod webhook;

use std::collections::BTreeMap;
use std::time::Duration;

use lambda_dedup_runtime::events::{SqsBatchResponse, SqsEvent};
use lambda_dedup_runtime::testing::events::sqs_event;
use lambda_dedup_runtime::{Dedup, Effect, Env, Event, Service, SqsService, Tenant, store::Items};
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

/// A metering proxy, its client, a fresh mark table and a fresh effect table keyed by `key`.
async fn metered_tables(key: &str) -> (Meter, aws_sdk_dynamodb::Client, String, String) {
    let (meter, client) = metered();
    let marks = dedup_tests::mark_table(&client).await;
    let effects = dedup_tests::effect_table(&client, key).await;
    (meter, client, marks, effects)
}

/// A function's settings on the mark table `marks`, with `more`.
fn on_marks(marks: &str, more: &[(&str, &str)]) -> Env {
    let base = [("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", marks)];
    Env::from_pairs(base.iter().chain(more).copied())
}

// ---- Credits (the SQS door's and the streams'), as `sqs-credit` and `ledger-stream` read them.

fn credit(id: &str) -> String {
    credit_in_sequence(id, &format!("a-{id}"), 1)
}

/// A credit of `account` whose producer stamped it `seq` (`/data/seq`, read in sequence mode
/// only).
fn credit_in_sequence(id: &str, account: &str, seq: u64) -> String {
    serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank", "id": id,
        "tenantid": "acme", "data": {"account": account, "amount": 1, "seq": seq}})
    .to_string()
}

/// Ten new credits, each of its own account, in one SQS batch.
fn ten_credits() -> SqsEvent {
    let bodies: Vec<String> = (0..10).map(|_| credit(&dedup_tests::unique("e"))).collect();
    sqs_event(&bodies.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `function`'s `Dedup`, read from `env`, on the DynamoDB store behind `client`.
fn on_dynamodb(client: &aws_sdk_dynamodb::Client, env: &Env, function: &str) -> Dedup {
    let dedup = Dedup::read(env, function).expect("settings");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    dedup.on(store)
}

/// The SQS door as `sqs-credit` configures it (the tenant in `tenantid`, its producers trusted)
/// on the mark table `marks`, the duplicate pre-filter on or off.
fn credits_door(client: &aws_sdk_dynamodb::Client, marks: &str, prefilter: bool) -> Dedup {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("DEDUP_MARK_TABLE", marks),
        (
            "DEDUP_PREFILTER_DUPLICATES",
            if prefilter { "true" } else { "false" },
        ),
    ]);
    on_dynamodb(client, &env, "sqs-credit")
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers()
}

/// A credit's one write: its account's balance, plus 1.
fn credited(balances: &str) -> impl Fn(Event<serde_json::Value>) -> Effect + use<> {
    let balances = balances.to_owned();
    move |e: Event<serde_json::Value>| {
        let account = e.payload["account"].as_str().unwrap_or_default().to_owned();
        Effect::add(&balances, ("account", account), "balance", 1)
    }
}

/// `event` delivered to each of `containers` in turn: each answer, with the requests it sent.
async fn delivered<E: Clone + 'static, R: 'static>(
    meter: &Meter,
    containers: &[&Service<E, R>],
    event: &E,
) -> Vec<(R, BTreeMap<String, u64>)> {
    let mut rounds = Vec::new();
    for service in containers {
        meter.reset();
        let answer = service.call_with(event.clone()).await.expect("answered");
        rounds.push((answer, sent(meter)));
    }
    rounds
}

/// The requests of `event` delivered to each of `containers` in turn, every message of it
/// acknowledged.
async fn acknowledged(
    meter: &Meter,
    containers: &[&SqsService],
    event: &SqsEvent,
) -> Vec<BTreeMap<String, u64>> {
    let rounds = delivered(meter, containers, event).await;
    let all_done = |answer: &SqsBatchResponse| answer.batch_item_failures.is_empty();
    assert!(rounds.iter().all(|(a, _)| all_done(a)), "{rounds:?}");
    rounds.into_iter().map(|(_, requests)| requests).collect()
}
