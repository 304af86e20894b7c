//! The HTTP door (`orders-api`): the order written as its own mark (one-item mode), and the
//! transaction path (`.http`).

use std::collections::BTreeMap;

use lambda_dedup::{Claim, DedupKey, Fingerprint, Scope};
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_runtime::{HttpEvent, HttpService};
use lambda_http::Request;
use lambda_http::tower::ServiceExt;

use super::{metered_tables, ops, sent};

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
