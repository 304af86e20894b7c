//! What each mode costs, in write request units and requests, measured at a metering proxy in
//! front of the local DynamoDB (`local_dynamodb::meter`, the one `cargo xtask bench` uses). The
//! prices are DynamoDB's: a write of a small item is 1 unit; in a transaction, 2 per item.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use lambda_dedup::{
    CommitRequest, DedupKey, Effect, Item, MarkStore, SequenceOutcome, SequencedWrite,
};
use lambda_dedup_dynamodb::DynamoStore;
use local_dynamodb::meter::Meter;

use dedup_tests::{effect_table, endpoint, mark_table, retention, scope, unique};

/// Behind a fresh metering proxy (no added latency): a client, a store on a fresh mark table
/// (and that table's name), and a fresh effect table keyed by `key_attr`.
async fn metered(key_attr: &str) -> (Meter, Client, DynamoStore, String, String) {
    let meter = Meter::start(&endpoint(), Duration::ZERO).expect("meter");
    let c = dedup_tests::client_at(&meter.endpoint());
    let marks = mark_table(&c).await;
    let table = effect_table(&c, key_attr).await;
    let store = DynamoStore::new(c.clone(), marks.clone(), retention());
    (meter, c, store, marks, table)
}

fn credit(table: &str, account: &str) -> Effect {
    Effect::update(table, Item::new().with("account", account))
        .expression("ADD #b :a")
        .name("#b", "balance")
        .value(":a", 1)
}

#[tokio::test]
async fn each_mode_costs_what_dynamodb_charges() {
    let (meter, _, store, _, balances) = metered("account").await;
    let keys: Vec<DedupKey> = (0..10)
        .map(|_| DedupKey::new(&scope(), "t", &[&unique("evt")]))
        .collect();
    let effects: Vec<Vec<Effect>> = (0..10)
        .map(|i| vec![credit(&balances, &format!("acct-{i}"))])
        .collect();

    // Per message: one transaction of the mark and the effect: 2 items x 2 units.
    meter.reset();
    let one = CommitRequest {
        key: &keys[0],
        fingerprint: None,
        result: None,
        effects: &effects[0],
    };
    MarkStore::commit(&store, one).await.expect("commit");
    let u = meter.usage();
    assert_eq!((u.requests, u.write_units), (1, 4.0), "{u:?}");

    // Batch transaction: 9 events, 18 items, one request, 2 units per item.
    meter.reset();
    let requests: Vec<CommitRequest<'_>> = keys[1..]
        .iter()
        .zip(&effects[1..])
        .map(|(key, effects)| CommitRequest {
            key,
            fingerprint: None,
            result: None,
            effects,
        })
        .collect();
    let results = store.commit_batch(&requests).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let u = meter.usage();
    assert_eq!((u.requests, u.write_units), (1, 36.0), "{u:?}");

    // Sequence mode: one conditional update of the effect item, 1 unit.
    meter.reset();
    let effect = credit(&balances, "ordered");
    for sequence in 1..=3 {
        let out = store
            .apply_in_sequence(SequencedWrite {
                key: &keys[0],
                effect: &effect,
                sequence,
                first: 1,
                fingerprint: None,
            })
            .await
            .expect("apply");
        assert_eq!(out, SequenceOutcome::Applied);
    }
    let u = meter.usage();
    assert_eq!((u.requests, u.write_units), (3, 3.0), "{u:?}");
    assert_eq!(u.by_operation.get("UpdateItem"), Some(&3));
}

/// Failed writes cost what DynamoDB bills for them, though the emulator's error answers report
/// no capacity: a duplicate's failed conditional update 1 unit; a duplicate's cancelled
/// transaction counted apart, 2 units per item as attempted, and a duplicate's failed
/// conditional put (Powertools' claim) 1 unit.
#[tokio::test]
async fn failed_writes_are_billed_from_the_request() {
    let (meter, c, store, marks, balances) = metered("account").await;
    let key = DedupKey::new(&scope(), "t", &[&unique("evt")]);
    let effects = vec![credit(&balances, "acct-dup")];
    let request = || CommitRequest {
        key: &key,
        fingerprint: None,
        result: None,
        effects: &effects,
    };
    MarkStore::commit(&store, request()).await.expect("commit");

    // The duplicate's transaction: cancelled, nothing written, 2 items x 2 units if billed.
    meter.reset();
    MarkStore::commit(&store, request())
        .await
        .expect("duplicate");
    let u = meter.usage();
    assert_eq!(u.write_units, 0.0, "{u:?}");
    assert_eq!(
        (u.cancelled_transactions, u.cancelled_write_units),
        (1, 4.0),
        "{u:?}"
    );
    assert_eq!(u.failed_write_units, 0.0, "{u:?}");

    // A duplicate in sequence mode: one failed conditional update, 1 unit.
    let effect = credit(&balances, "ordered-dup");
    let write = |sequence| SequencedWrite {
        key: &key,
        effect: &effect,
        sequence,
        first: 1,
        fingerprint: None,
    };
    store.apply_in_sequence(write(1)).await.expect("apply");
    meter.reset();
    let out = store.apply_in_sequence(write(1)).await.expect("duplicate");
    assert!(matches!(out, SequenceOutcome::Duplicate { .. }), "{out:?}");
    let u = meter.usage();
    assert_eq!((u.failed_writes, u.failed_write_units), (1, 1.0), "{u:?}");

    // A conditional put of an existing key, as Powertools claims: 1 unit.
    let put = || {
        c.put_item()
            .table_name(&marks)
            .item(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S("claimed".into()),
            )
            .condition_expression("attribute_not_exists(pk)")
            .send()
    };
    put().await.expect("first put");
    meter.reset();
    assert!(put().await.is_err(), "the second put's condition fails");
    let u = meter.usage();
    assert_eq!((u.failed_writes, u.failed_write_units), (1, 1.0), "{u:?}");
}

/// Create-once mode: the item is the mark, so a new event costs one conditional `PutItem` of
/// 1 unit (against 4 for a mark and a put in a transaction), and a duplicate one failed
/// conditional put, 1 unit; no mark-table write, no transaction.
#[tokio::test]
async fn create_once_costs_one_put_of_one_unit() {
    let (meter, _, store, _, orders) = metered("order_id").await;
    let key = DedupKey::new(&scope(), "t", &[&unique("evt")]);
    let fp = lambda_dedup::Fingerprint::of_bytes(b"order");
    let order = Effect::put(
        &orders,
        Item::new()
            .with("order_id", unique("order").as_str())
            .with("total", 5),
    );
    let write = lambda_dedup::CreateOnce {
        key: &key,
        effect: &order,
        fingerprint: Some(&fp),
        result: Some(r#"{"status":"accepted"}"#),
    };
    meter.reset();
    let out = store.create_once(write).await.expect("create");
    assert_eq!(out, lambda_dedup::Commit::Applied);
    let u = meter.usage();
    assert_eq!((u.requests, u.write_units), (1, 1.0), "{u:?}");
    assert_eq!(u.by_operation.get("PutItem"), Some(&1));
    assert_eq!(u.cancelled_transactions, 0, "{u:?}");

    meter.reset();
    let out = store.create_once(write).await.expect("duplicate");
    assert!(
        matches!(
            out,
            lambda_dedup::Commit::Seen(lambda_dedup::Seen::Duplicate(_))
        ),
        "{out:?}"
    );
    let u = meter.usage();
    assert_eq!((u.requests, u.write_units), (1, 0.0), "{u:?}");
    assert_eq!((u.failed_writes, u.failed_write_units), (1, 1.0), "{u:?}");
}
