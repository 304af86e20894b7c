//! What the library relies on DynamoDB to do, pinned against the local DynamoDB (Dynoxide) with
//! the SDK directly, not through the library. If the emulator (or a new version of it) behaved
//! otherwise, the library's own tests would prove less than they say; these tests say so first.
//! Differences from DynamoDB as AWS documents it, and how the tests work around them, are in
//! `docs/EMULATORS.md`.

use std::time::{Duration, Instant, SystemTime};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use dedup_tests::{client, effect_table, endpoint, get_item, unique};

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A put of `{k: key, v: value}` into `table` unless `k` exists, returning the old item when it
/// does: the claim (S4).
fn put_new(table: &str, key: &str, value: &str) -> Put {
    Put::builder()
        .table_name(table)
        .item("k", s(key))
        .item("v", s(value))
        .condition_expression("attribute_not_exists(k)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .expect("put")
}

/// `ADD c :one` on the item `key` of `table`: the effect.
fn add_one(table: &str, key: &str) -> Update {
    Update::builder()
        .table_name(table)
        .key("k", s(key))
        .update_expression("ADD c :one")
        .expression_attribute_values(":one", n(1))
        .build()
        .expect("update")
}

fn tx_update(update: Update) -> TransactWriteItem {
    TransactWriteItem::builder().update(update).build()
}

fn tx_put(put: Put) -> TransactWriteItem {
    TransactWriteItem::builder().put(put).build()
}

/// Puts the item of `attributes` into `table`, unconditionally; `what` names it if that fails.
async fn put<const N: usize>(
    client: &Client,
    table: &str,
    attributes: [(&str, AttributeValue); N],
    what: &str,
) {
    let item = attributes.into_iter().map(|(k, v)| (k.to_owned(), v));
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item.collect()))
        .send()
        .await
        .expect(what);
}

/// The cancellation of the transaction of `items`, which must be cancelled (`why`).
async fn cancelled(
    client: &Client,
    items: Vec<TransactWriteItem>,
    why: &str,
) -> aws_sdk_dynamodb::types::error::TransactionCanceledException {
    let err = client
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .await
        .expect_err(why)
        .into_service_error();
    let TransactWriteItemsError::TransactionCanceledException(e) = err else {
        panic!("expected TransactionCanceledException, got {err:?}");
    };
    e
}

async fn counter(client: &Client, table: &str, key: &str) -> Option<i64> {
    let item = get_item(client, table, "k", key).await?;
    item.get("c")?.as_n().ok()?.parse().ok()
}

/// S4: a conditional put that fails returns the item that made it fail, in the same answer,
/// so the claim is explained without a second read.
#[tokio::test]
async fn conditional_put_returns_the_old_item_on_failure() {
    let client = client();
    let table = effect_table(&client, "k").await;
    put(
        &client,
        &table,
        [("k", s("a")), ("v", s("first"))],
        "the first put succeeds",
    )
    .await;
    let err = client
        .put_item()
        .table_name(&table)
        .item("k", s("a"))
        .item("v", s("second"))
        .condition_expression("attribute_not_exists(k)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await
        .expect_err("the second put must fail its condition")
        .into_service_error();
    let PutItemError::ConditionalCheckFailedException(e) = err else {
        panic!("expected ConditionalCheckFailedException, got {err:?}");
    };
    assert_eq!(e.item().and_then(|i| i.get("v")), Some(&s("first")));
}

/// S4, S16: a conditional update (a claim) returns the old item when its condition fails, and
/// the new item when it succeeds; `if_not_exists` keeps an attribute an earlier write set (the
/// first attempt's time across takeovers).
#[tokio::test]
async fn conditional_update_returns_old_or_new_and_if_not_exists_keeps_a_value() {
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
    use aws_sdk_dynamodb::types::ReturnValue;
    let client = client();
    let table = effect_table(&client, "k").await;
    let claim = |first: i64, owner: &str| {
        client
            .update_item()
            .table_name(&table)
            .key("k", s("a"))
            .update_expression("SET #o = :o, #f = if_not_exists(#f, :f)")
            .condition_expression("attribute_not_exists(#o) OR #o = :free")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_names("#f", "first")
            .expression_attribute_values(":o", s(owner))
            .expression_attribute_values(":f", n(first))
            .expression_attribute_values(":free", s("free"))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
    };
    let won = claim(100, "a").await.expect("the first claim");
    assert_eq!(won.attributes().and_then(|a| a.get("first")), Some(&n(100)));
    let err = claim(200, "b")
        .await
        .expect_err("held by a")
        .into_service_error();
    let UpdateItemError::ConditionalCheckFailedException(e) = err else {
        panic!("expected ConditionalCheckFailedException, got {err:?}");
    };
    assert_eq!(e.item().and_then(|i| i.get("owner")), Some(&s("a")));
    client
        .update_item()
        .table_name(&table)
        .key("k", s("a"))
        .update_expression("SET #o = :free")
        .expression_attribute_names("#o", "owner")
        .expression_attribute_values(":free", s("free"))
        .send()
        .await
        .expect("release");
    let taken = claim(300, "c").await.expect("a takeover");
    assert_eq!(
        taken.attributes().and_then(|a| a.get("first")),
        Some(&n(100)),
        "if_not_exists kept the first value"
    );
}

/// S5: a cancelled transaction says, position by position, which request failed and why, with
/// the old item of a failed condition; nothing of it is written.
#[tokio::test]
async fn transaction_cancellation_reasons_come_by_position_with_old_items() {
    let client = client();
    let table = effect_table(&client, "k").await;
    put(
        &client,
        &table,
        [
            ("k", s("taken")),
            ("v", s("old")),
            ("text", s("not a number")),
        ],
        "seed",
    )
    .await;
    let e = cancelled(
        &client,
        vec![
            tx_update(add_one(&table, "free-1")),
            tx_put(put_new(&table, "taken", "new")),
            tx_update(add_one(&table, "free-2")),
        ],
        "one condition fails",
    )
    .await;
    let codes: Vec<Option<&str>> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
    assert_eq!(
        codes,
        [Some("None"), Some("ConditionalCheckFailed"), Some("None")],
        "one reason per request, in request order"
    );
    assert_eq!(
        e.cancellation_reasons()[1].item().and_then(|i| i.get("v")),
        Some(&s("old")),
        "the failed condition's old item comes with its reason"
    );
    assert_eq!(
        counter(&client, &table, "free-1").await,
        None,
        "all or nothing"
    );
    assert_eq!(
        counter(&client, &table, "free-2").await,
        None,
        "all or nothing"
    );

    // A request DynamoDB refuses on its own (ADD to a string) is named at its position too.
    let bad = Update::builder()
        .table_name(&table)
        .key("k", s("taken"))
        .update_expression("ADD #t :one")
        .expression_attribute_names("#t", "text")
        .expression_attribute_values(":one", n(1))
        .build()
        .expect("update");
    let e = cancelled(
        &client,
        vec![tx_update(add_one(&table, "free-1")), tx_update(bad)],
        "a type mismatch cancels the transaction",
    )
    .await;
    let codes: Vec<Option<&str>> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
    assert_eq!(codes, [Some("None"), Some("ValidationError")]);
    assert_eq!(counter(&client, &table, "free-1").await, None);
}

/// The same `ClientRequestToken` with the same request succeeds again without a second effect;
/// with another request it is refused with `IdempotentParameterMismatchException`.
#[tokio::test]
async fn client_request_token_replays_once_and_refuses_another_request() {
    let client = client();
    let table = effect_table(&client, "k").await;
    let token = unique("token");
    for attempt in 0..2 {
        client
            .transact_write_items()
            .client_request_token(&token)
            .transact_items(tx_update(add_one(&table, "x")))
            .send()
            .await
            .unwrap_or_else(|e| panic!("attempt {attempt}: {e:?}"));
    }
    assert_eq!(counter(&client, &table, "x").await, Some(1), "one effect");
    let err = client
        .transact_write_items()
        .client_request_token(&token)
        .transact_items(tx_update(add_one(&table, "y")))
        .send()
        .await
        .expect_err("another request under the same token")
        .into_service_error();
    assert!(
        matches!(
            err,
            TransactWriteItemsError::IdempotentParameterMismatchException(_)
        ),
        "got {err:?}"
    );
    assert_eq!(counter(&client, &table, "y").await, None);
}

/// A transaction holds at most 100 requests, and touches each item at most once.
#[tokio::test]
async fn transactions_take_100_requests_and_each_item_once() {
    let client = client();
    let table = effect_table(&client, "k").await;
    let items = |count: usize, prefix: &str| -> Vec<TransactWriteItem> {
        (0..count)
            .map(|i| tx_update(add_one(&table, &format!("{prefix}-{i}"))))
            .collect()
    };
    client
        .transact_write_items()
        .set_transact_items(Some(items(100, "hundred")))
        .send()
        .await
        .expect("100 requests are accepted");
    assert_eq!(counter(&client, &table, "hundred-99").await, Some(1));

    let err = client
        .transact_write_items()
        .set_transact_items(Some(items(101, "over")))
        .send()
        .await
        .expect_err("101 requests are refused");
    assert_eq!(err.code(), Some("ValidationException"), "{err:?}");
    assert_eq!(counter(&client, &table, "over-0").await, None);

    let twice = vec![
        tx_update(add_one(&table, "same")),
        tx_update(add_one(&table, "same")),
    ];
    let err = client
        .transact_write_items()
        .set_transact_items(Some(twice))
        .send()
        .await
        .expect_err("one item twice is refused");
    assert_eq!(err.code(), Some("ValidationException"), "{err:?}");
    assert_eq!(counter(&client, &table, "same").await, None);
}

/// Transactions cost two write units per item (a small item): what the benchmark reports.
#[tokio::test]
async fn a_transaction_consumes_two_write_units_per_small_item() {
    let client = client();
    let table = effect_table(&client, "k").await;
    let out = client
        .transact_write_items()
        .transact_items(tx_update(add_one(&table, "a")))
        .transact_items(tx_put(put_new(&table, "b", "v")))
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .expect("transaction");
    let units: f64 = out
        .consumed_capacity()
        .iter()
        .filter(|c| c.table_name() == Some(table.as_str()))
        .filter_map(|c| c.capacity_units().or(c.write_capacity_units()))
        .sum();
    assert_eq!(units, 4.0, "{:?}", out.consumed_capacity());
}

/// S9, S14: an item whose TTL has passed is deleted (by the local DynamoDB's sweep, within
/// seconds; DynamoDB itself takes up to days), and the deletion appears on the table's stream
/// as a `REMOVE` by the DynamoDB service, with the old image: what `mark-auditor` counts.
#[tokio::test]
async fn ttl_deletions_appear_on_the_stream_as_the_service() {
    let client = client();
    let table = unique("ttl");
    let stream_arn = lambda_dedup_dynamodb::provision::create_mark_table(&client, &table, true)
        .await
        .expect("mark table")
        .expect("a stream");
    let expired = "expired-mark";
    put(
        &client,
        &table,
        [
            ("pk", s(expired)),
            ("status", s("COMPLETED")),
            ("expires_at", n(now_secs() - 60)),
        ],
        "put an expired item",
    )
    .await;
    put(
        &client,
        &table,
        [("pk", s("live-mark")), ("expires_at", n(now_secs() + 3600))],
        "put a live item",
    )
    .await;

    let start = Instant::now();
    while get_item(&client, &table, "pk", expired).await.is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the expired item was not deleted within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(get_item(&client, &table, "pk", "live-mark").await.is_some());

    let records = stream_records(&stream_arn).await;
    let removes: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["eventName"] == "REMOVE")
        .collect();
    assert_eq!(removes.len(), 1, "one REMOVE: {removes:#?}");
    assert_eq!(
        removes[0]["userIdentity"],
        serde_json::json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"}),
        "a TTL deletion is made by the DynamoDB service"
    );
    assert_eq!(
        removes[0]["dynamodb"]["OldImage"]["status"],
        serde_json::json!({"S": "COMPLETED"}),
        "the old image comes with it"
    );

    // Known difference (docs/EMULATORS.md): through the SDK, whose parser follows the
    // DynamoDB Streams API (`Type`, `PrincipalId`), Dynoxide's identity (`type`, `principalId`)
    // reads as empty. When this fails, the emulator has been fixed: drop the JSON reader.
    let through_sdk = sdk_identity_of_first_remove(&stream_arn).await;
    assert_eq!(
        through_sdk,
        Some((None, None)),
        "the SDK now reads the TTL identity; drop local_dynamodb::get_records"
    );
}

fn streams_client() -> aws_sdk_dynamodbstreams::Client {
    lambda_dedup_testkit::local_client!(aws_sdk_dynamodbstreams, endpoint())
}

/// The shard iterators of every shard of a stream, from the start.
async fn iterators(streams: &aws_sdk_dynamodbstreams::Client, arn: &str) -> Vec<String> {
    use aws_sdk_dynamodbstreams::types::ShardIteratorType;
    let description = streams
        .describe_stream()
        .stream_arn(arn)
        .send()
        .await
        .expect("describe stream");
    let shards = description
        .stream_description()
        .map(|d| d.shards().to_vec())
        .unwrap_or_default();
    let mut out = Vec::new();
    for shard in shards {
        let Some(id) = shard.shard_id() else { continue };
        let it = streams
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(id)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("iterator")
            .shard_iterator;
        out.extend(it);
    }
    out
}

/// Every record of every shard of a stream, read from the start as JSON.
async fn stream_records(arn: &str) -> Vec<serde_json::Value> {
    let http = reqwest::Client::new();
    let mut records = Vec::new();
    for first in iterators(&streams_client(), arn).await {
        let mut iterator = Some(first);
        while let Some(it) = iterator {
            let (page, next) = local_dynamodb::get_records(&http, &endpoint(), &it, 100)
                .await
                .expect("records");
            if page.is_empty() {
                break;
            }
            records.extend(page);
            iterator = next;
        }
    }
    records
}

/// The user identity of the first `REMOVE` record, as the SDK parses it: (type, principal id).
async fn sdk_identity_of_first_remove(arn: &str) -> Option<(Option<String>, Option<String>)> {
    let streams = streams_client();
    for it in iterators(&streams, arn).await {
        let out = streams
            .get_records()
            .shard_iterator(it)
            .send()
            .await
            .expect("records");
        for r in out.records() {
            if r.event_name().map(|e| e.as_str()) == Some("REMOVE") {
                let u = r.user_identity();
                return Some((
                    u.and_then(|u| u.r#type()).map(str::to_owned),
                    u.and_then(|u| u.principal_id()).map(str::to_owned),
                ));
            }
        }
    }
    None
}
