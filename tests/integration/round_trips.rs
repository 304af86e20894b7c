//! Round trips per door and flow: the requests each case sends to DynamoDB, counted by operation
//! at the metering proxy (`local_dynamodb::meter`) in front of the local DynamoDB, and pinned,
//! so a change that adds a round trip fails here. docs/BENCHMARKS.md ("Round trips per door and
//! flow") shows these counts beside the minimum each case allows. Measurement only: the doors
//! run as their functions wire them.

use std::collections::BTreeMap;
use std::time::Duration;

use lambda_dedup::{Claim, DedupKey, Fingerprint, Scope};
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_runtime::aws_lambda_events::event::s3::S3EventRecord;
use lambda_dedup_runtime::events::{SqsBatchResponse, SqsEvent};
use lambda_dedup_runtime::flow::{create_once, latest_wins, sequence, transact};
use lambda_dedup_runtime::source::{Kinesis, S3};
use lambda_dedup_runtime::testing::events::{kinesis_event, s3_event, sqs_event};
use lambda_dedup_runtime::webhook::WebhookConfig;
use lambda_dedup_runtime::{
    Dedup, Effect, Env, Event, HandlerError, HttpEvent, HttpService, InvokeScope, Item, Service,
    SqsService, Tenant, WebhookService, store::Items,
};
use lambda_http::Request;
use lambda_http::tower::ServiceExt;
use ledger_projector::ledger;
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

// ---- The HTTP door (`orders-api`): the order written as its own mark (one-item mode).

fn post(key: &str, body: &str) -> Request {
    dedup_tests::order_post("shop", key, body)
}

/// `response`'s status and whether it is a replay.
fn answered(response: lambda_http::Response<lambda_http::Body>) -> (u16, bool) {
    let replayed = response.headers().contains_key("idempotent-replayed");
    (response.status().as_u16(), replayed)
}

/// The requests of a first request, its replay and the key with another body (422), in the
/// container that answered first and in others (each its own warm cache), on the door
/// `built(client, marks, orders)` builds.
async fn http_rounds(
    built: impl Fn(&aws_sdk_dynamodb::Client, &str, &str) -> HttpService,
) -> Vec<BTreeMap<String, u64>> {
    let (meter, client, marks, orders) = metered_tables("order_id").await;
    let container = || built(&client, &marks, &orders);
    let (first_container, second, third) = (container(), container(), container());
    let key = dedup_tests::unique("rt");
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let other = r#"{"sku":"book-2","quantity":1}"#;
    let send = |service: &HttpService, body: &str| {
        let (service, request) = (service.clone(), post(&key, body));
        async move { answered(service.oneshot(request).await.expect("answer")) }
    };
    let mut rounds = Vec::new();
    for (service, body, expected) in [
        (&first_container, body, (201, false)),
        (&first_container, body, (201, true)),
        (&first_container, other, (422, false)),
        (&second, body, (201, true)),
        (&third, other, (422, false)),
    ] {
        meter.reset();
        assert_eq!(send(service, body).await, expected);
        rounds.push(sent(&meter));
    }
    rounds
}

/// The HTTP door as `orders-api` wires it (one-item mode: the order its own mark).
#[tokio::test]
async fn round_trips_of_the_http_door() {
    let rounds = http_rounds(|client, marks, orders| {
        let (dedup, config) = dedup_tests::orders_door_on(client, marks, orders);
        orders_api::service(dedup, config).expect("service")
    })
    .await;
    let one_put = ops(&[("PutItem", 1)]);
    assert_eq!(
        rounds,
        [
            // The order, its own mark holding the answer: one conditional put.
            one_put.clone(),
            // The warm cache: the replay and the 422 ask no store.
            ops(&[]),
            ops(&[]),
            // Another container: the put, whose failed condition returns the order and the
            // stored answer; or, with another body, its fingerprint (422).
            one_put.clone(),
            one_put,
        ]
    );
}

/// `orders-api`'s work on the transaction path (`Dedup::http`: the mark in the mark table,
/// committed with the order).
fn transaction_path(client: &aws_sdk_dynamodb::Client, marks: &str, orders: &str) -> HttpService {
    let (dedup, config) = dedup_tests::orders_door_on(client, marks, orders);
    let table = orders.to_owned();
    dedup
        .http(config, move |e: HttpEvent<orders_api::order::NewOrder>| {
            orders_api::order::create(&table, e)
        })
        .expect("service")
}

/// The HTTP door on the transaction path, as a work of several effects uses it.
#[tokio::test]
async fn round_trips_of_the_http_door_on_the_transaction_path() {
    let rounds = http_rounds(transaction_path).await;
    let one_commit = ops(&[("TransactWriteItems", 1)]);
    assert_eq!(
        rounds,
        [
            // The answer and the order committed with the mark: no claim, no release.
            one_commit.clone(),
            // The warm cache.
            ops(&[]),
            ops(&[]),
            // Another container: the commit, whose failed condition returns the mark: its
            // stored answer (a replay), or its fingerprint and its status (422: a kept key,
            // not a released one to take over), so no read follows.
            one_commit.clone(),
            one_commit,
        ]
    );
}

/// The HTTP door on the transaction path (`Dedup::http`: the mark in the mark table, committed
/// with the order) with the key held in flight (a live lease, as a door that claims first
/// holds it): the request is 409, and its commit, whose failed condition shows the lease, is
/// its one request.
#[tokio::test]
async fn round_trips_of_the_http_door_in_flight() {
    let (meter, client, marks, orders) = metered_tables("order_id").await;
    let service = transaction_path(&client, &marks, &orders);
    let key = dedup_tests::unique("rt");
    let scope = Scope::new("t", orders_api::FUNCTION).expect("scope");
    // The key the door derives for the caller `shop` (its header, as the door names it).
    let held = DedupKey::new(&scope, "header:4:shop", &["idempotency-key", &key]);
    let store = DynamoStore::new(client.clone(), marks.clone(), dedup_tests::retention());
    let Ok(Claim::Claimed(_lease)) = store.claim(&held, None, None).await else {
        panic!("the key is held");
    };
    meter.reset();
    let answer = service
        .oneshot(post(&key, r#"{"sku":"book-1","quantity":1}"#))
        .await
        .expect("answer");
    assert_eq!(answered(answer), (409, false));
    assert_eq!(sent(&meter), ops(&[("TransactWriteItems", 1)]));
}

/// The HTTP door on the transaction path with the key held by another request (its claim
/// under another fingerprint, as a door that claims first writes it): while its lease is live
/// the request is 422 from its commit alone; once released (nothing of it committed), the
/// request takes the key over — the commit's failed condition shows the release, no read — and
/// its order is the key's answer.
#[tokio::test]
async fn round_trips_of_the_http_door_over_another_requests_claim() {
    let (meter, client, marks, orders) = metered_tables("order_id").await;
    let service = transaction_path(&client, &marks, &orders);
    let scope = Scope::new("t", orders_api::FUNCTION).expect("scope");
    let store = DynamoStore::new(client.clone(), marks.clone(), dedup_tests::retention());
    let another = Fingerprint::of_bytes(b"another request");
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let mut rounds = Vec::new();
    for release in [false, true] {
        let key = dedup_tests::unique("rt");
        // The key the door derives for the caller `shop` (its header, as the door names it).
        let held = DedupKey::new(&scope, "header:4:shop", &["idempotency-key", &key]);
        let Ok(Claim::Claimed(lease)) = store.claim(&held, Some(&another), None).await else {
            panic!("the key is held");
        };
        if release {
            store.release(&lease).await.expect("released");
        }
        meter.reset();
        let answer = service.clone().oneshot(post(&key, body)).await;
        rounds.push((answered(answer.expect("answer")), sent(&meter)));
    }
    assert_eq!(
        rounds,
        [
            // In flight under another fingerprint: 422 (S11 before the wait), one commit.
            ((422, false), ops(&[("TransactWriteItems", 1)])),
            // Released: the commit, then the key taken over (a claim without a fingerprint:
            // two `UpdateItem`s, as every DynamoDB takeover; released at once) and the commit
            // again.
            (
                (201, false),
                ops(&[("TransactWriteItems", 2), ("UpdateItem", 3)])
            ),
        ]
    );
}

// ---- The direct invoke door (`invoke-charge`'s shape): the work calls out, under a claim.

/// A first invocation, its duplicate in the same container and in another.
#[tokio::test]
async fn round_trips_of_the_invoke_door() {
    let (meter, client) = metered();
    let marks = dedup_tests::mark_table(&client).await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("DEDUP_MARK_TABLE", marks.as_str()),
    ]);
    let container = || {
        let dedup = Dedup::read(&env, "invoke-charge").expect("settings");
        let store = Items::dynamodb(client.clone(), dedup.settings());
        dedup
            .on(store)
            .identity("/order_id")
            .invoke(
                InvokeScope::tenant("acme"),
                |e: Event<serde_json::Value>| async move {
                    Ok::<_, HandlerError>(serde_json::json!({"receipt": e.payload["order_id"]}))
                },
            )
            .expect("service")
    };
    let (first, other) = (container(), container());
    let charge = serde_json::json!({"order_id": dedup_tests::unique("o"), "cents": 500});
    let mut rounds = Vec::new();
    for (receipt, requests) in delivered(&meter, &[&first, &first, &other], &charge).await {
        assert_eq!(receipt["receipt"], charge["order_id"]);
        rounds.push(requests);
    }
    assert_eq!(
        rounds,
        [
            // The claim, then the completion conditioned on its owner.
            ops(&[("UpdateItem", 2)]),
            // The warm cache.
            ops(&[]),
            // The claim, whose failed condition returns the stored response.
            ops(&[("UpdateItem", 1)]),
        ]
    );
}

// ---- The webhook receiver: the inbox item is the mark (create-once).

/// A delivery and its retry in the same container.
#[tokio::test]
async fn round_trips_of_the_webhook_receiver() {
    const SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";
    let (meter, client) = metered();
    let inbox = dedup_tests::effect_table(&client, "event_key").await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("WEBHOOK_SECRETS", SECRET),
        ("WEBHOOK_TENANT", "acme"),
        ("INBOX_TABLE", inbox.as_str()),
    ]);
    let dedup = Dedup::read(&env, "webhook-receiver").expect("settings");
    let config = WebhookConfig::read(&env).expect("config");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    let service = WebhookService::new(dedup.on(store), config).expect("service");
    let id = dedup_tests::unique("evt");
    let body = serde_json::json!({"id": id, "amount": 10}).to_string();
    let mut rounds = Vec::new();
    for _ in 0..2 {
        meter.reset();
        let request = lambda_dedup_runtime::testing::events::signed_webhook(SECRET, &id, &body);
        let answer = service.clone().oneshot(request).await.expect("answer");
        assert_eq!(answer.status().as_u16(), 200);
        rounds.push(sent(&meter));
    }
    // The inbox item written once, as its own mark; the retry is answered by the warm cache
    // (`round_trips_of_the_webhook_receivers_warm_cache`).
    assert_eq!(rounds, [ops(&[("PutItem", 1)]), ops(&[])]);
}

// ---- The SQS door: credits, committed with the event's mark.

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

/// The SQS door on fresh tables behind `meter`'s client, in one transaction per message or per
/// batch, the duplicate pre-filter on or off.
async fn sqs_rounds(per_batch: bool, prefilter: bool) -> Vec<BTreeMap<String, u64>> {
    let (meter, client) = metered();
    let marks = dedup_tests::mark_table(&client).await;
    let balances = dedup_tests::effect_table(&client, "account").await;
    let dedup = credits_door(&client, &marks, prefilter);
    let work = credited(&balances);
    let service = match per_batch {
        true => dedup.sqs(transact(work).one_transaction_per_batch()),
        false => dedup.sqs(transact(work)),
    }
    .expect("service");
    acknowledged(&meter, &[&service, &service], &ten_credits()).await
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

// ---- The webhook receiver's warm cache (issue 45).

/// A receiver as `webhook-receiver` wires it, for `sender` (`WEBHOOK_TENANT`), on `inbox`.
fn webhook_receiver(
    client: &aws_sdk_dynamodb::Client,
    inbox: &str,
    sender: &str,
) -> WebhookService {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("WEBHOOK_SECRETS", WEBHOOK_SECRET),
        ("WEBHOOK_TENANT", sender),
        ("INBOX_TABLE", inbox),
    ]);
    let dedup = Dedup::read(&env, "webhook-receiver").expect("settings");
    let config = WebhookConfig::read(&env).expect("config");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    WebhookService::new(dedup.on(store), config).expect("service")
}

const WEBHOOK_SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";

/// `body` delivered as `id` to `service`: its status, whether it is a replay, its body, and the
/// requests it sent.
async fn deliver(
    meter: &Meter,
    service: &WebhookService,
    id: &str,
    body: &str,
) -> (u16, bool, String, BTreeMap<String, u64>) {
    meter.reset();
    let request = lambda_dedup_runtime::testing::events::signed_webhook(WEBHOOK_SECRET, id, body);
    let response = service.clone().oneshot(request).await.expect("answer");
    let replayed = response.headers().contains_key("idempotent-replayed");
    let text = match response.body() {
        lambda_http::Body::Text(t) => t.clone(),
        other => format!("{other:?}"),
    };
    (response.status().as_u16(), replayed, text, sent(meter))
}

/// A sender's retry to the container that recorded the delivery is answered from its warm cache
/// (no request), with the first answer as a replay; another body under the same id there is the
/// 409 it always was, also without a request. Another container asks the inbox (its failed
/// `PutItem`), and another sender's delivery of the same id is its own event, never answered
/// from the first sender's cached item.
#[tokio::test]
async fn round_trips_of_the_webhook_receivers_warm_cache() {
    let (meter, client) = metered();
    let inbox = dedup_tests::effect_table(&client, "event_key").await;
    let first = webhook_receiver(&client, &inbox, "acme");
    let id = dedup_tests::unique("evt");
    let body = serde_json::json!({"id": id, "amount": 10}).to_string();
    let other_body = serde_json::json!({"id": id, "amount": 99}).to_string();

    let recorded = deliver(&meter, &first, &id, &body).await;
    assert_eq!((recorded.0, recorded.1), (200, false), "{recorded:?}");
    assert_eq!(recorded.3, ops(&[("PutItem", 1)]));

    let retry = deliver(&meter, &first, &id, &body).await;
    assert_eq!((retry.0, retry.1), (200, true), "{retry:?}");
    assert_eq!(retry.2, recorded.2, "the first answer");
    assert_eq!(retry.3, ops(&[]), "the retry in the same container");

    let conflict = deliver(&meter, &first, &id, &other_body).await;
    assert_eq!(conflict.0, 409, "{conflict:?}");
    assert_eq!(conflict.3, ops(&[]), "another body in the same container");

    let elsewhere = deliver(
        &meter,
        &webhook_receiver(&client, &inbox, "acme"),
        &id,
        &body,
    )
    .await;
    assert_eq!((elsewhere.0, elsewhere.1), (200, true), "{elsewhere:?}");
    assert_eq!(
        elsewhere.2, recorded.2,
        "the first answer, stored in the item"
    );
    assert_eq!(
        elsewhere.3,
        ops(&[("PutItem", 1)]),
        "a retry in another container"
    );

    let other_sender = webhook_receiver(&client, &inbox, "globex");
    let theirs = deliver(&meter, &other_sender, &id, &body).await;
    assert_eq!((theirs.0, theirs.1), (200, false), "{theirs:?}");
    assert_eq!(theirs.3, ops(&[("PutItem", 1)]), "another sender's event");
}

// ---- The single-write modes on SQS: the effect item is its own mark (issue 45).

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

/// Create-once (`flow::create_once`) on the SQS door, each credit's entry its own mark: 10 new
/// credits, the 10 redelivered to the same container, then to another container.
#[tokio::test]
async fn round_trips_of_create_once() {
    let (meter, client, marks, entries) = metered_tables("account").await;
    let container = || {
        let entries = entries.clone();
        credits_door(&client, &marks, false)
            .sqs(create_once(move |e: Event<serde_json::Value>| {
                let account = e.payload["account"].as_str().unwrap_or_default();
                Effect::put(&entries, Item::new().with("account", account))
            }))
            .expect("service")
    };
    let (first, other) = (container(), container());
    let rounds = acknowledged(&meter, &[&first, &first, &other], &ten_credits()).await;
    let ten_puts = ops(&[("PutItem", 10)]);
    // The same container answers from its warm cache.
    assert_eq!(rounds, [ten_puts.clone(), ops(&[]), ten_puts]);
}

/// Sequence mode (`flow::sequence`, the producer's sequence at `/data/seq`) on the SQS door,
/// each credit one update of its account carrying the account's high-water: 10 new credits (the
/// first of 10 accounts), the 10 redelivered to the same container and to another; then an
/// older event of one account (another id, its sequence under the high-water), and one past a
/// gap.
#[tokio::test]
async fn round_trips_of_sequence_mode() {
    let (meter, client, marks, balances) = metered_tables("account").await;
    let container = || {
        credits_door(&client, &marks, false)
            .sqs(sequence("/data/seq", credited(&balances)))
            .expect("service")
    };
    let (first, other) = (container(), container());
    let rounds = acknowledged(&meter, &[&first, &first, &other], &ten_credits()).await;
    let ten_updates = ops(&[("UpdateItem", 10)]);
    assert_eq!(
        rounds,
        [ten_updates.clone(), ten_updates.clone(), ten_updates]
    );

    let account = dedup_tests::unique("a");
    let at = |seq: u64| credit_in_sequence(&dedup_tests::unique("e"), &account, seq);
    let [one, two, older, past_a_gap] = [1, 2, 1, 4].map(at);
    // Its first two, one after the other (the high-water 2), then the older event.
    for applied in [one, two] {
        acknowledged(&meter, &[&first], &sqs_event(&[&applied])).await;
    }
    let stale = acknowledged(&meter, &[&first], &sqs_event(&[&older])).await;
    assert_eq!(stale, [ops(&[("UpdateItem", 1)])]);
    let gap = delivered(&meter, &[&first], &sqs_event(&[&past_a_gap])).await;
    assert_eq!(
        gap[0].0.batch_item_failures.len(),
        1,
        "a gap is not applied"
    );
    assert_eq!(gap[0].1, ops(&[("UpdateItem", 1)]));
}

// ---- Latest-wins (`s3-catalog`): the S3 door, each notification committed with its mark and
// its object's high-water sequencer.

/// A notification, its redelivery to the same container and to another, then an older
/// notification of the same object (superseded), and its redelivery to the same container.
#[tokio::test]
async fn round_trips_of_latest_wins() {
    let (meter, client, marks, catalog) = metered_tables("object").await;
    let env = on_marks(&marks, &[]);
    let container = || {
        let catalog = catalog.clone();
        on_dynamodb(&client, &env, "s3-catalog")
            .door(
                S3,
                latest_wins(move |e: Event<S3EventRecord>| {
                    let object = e.payload.s3.object.url_decoded_key.unwrap_or_default();
                    let sequencer = e.payload.s3.object.sequencer.unwrap_or_default();
                    Effect::update(&catalog, Item::new().with("object", object.as_str()))
                        .expression("SET #seq = :seq")
                        .name("#seq", "sequencer")
                        .value(":seq", sequencer.as_str())
                }),
            )
            .expect("service")
    };
    let (first, other) = (container(), container());
    let newer = s3_event("photos", &[("cat.jpg", "0055AED6DCD90281E6")]);
    let mut rounds: Vec<_> = delivered(&meter, &[&first, &first, &other], &newer)
        .await
        .into_iter()
        .map(|((), requests)| requests)
        .collect();
    let older = s3_event("photos", &[("cat.jpg", "0055AED6DCD90281E5")]);
    rounds.extend(
        delivered(&meter, &[&first, &first], &older)
            .await
            .into_iter()
            .map(|r| r.1),
    );
    // The notification's mark, its item and the object's high-water in one transaction; the
    // same container answers its redelivery from the warm cache; in another, a duplicate is the
    // transaction's failed condition. An older notification (a key of its own) is superseded
    // by the failed high-water condition, and writes no mark, so its redelivery asks again.
    let one_commit = ops(&[("TransactWriteItems", 1)]);
    assert_eq!(
        rounds,
        [
            one_commit.clone(),
            ops(&[]),
            one_commit.clone(),
            one_commit.clone(),
            one_commit
        ]
    );
}

// ---- A stream door (`ledger-stream`, Kinesis): each record's mark committed with its balance
// change, in order per account.

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
