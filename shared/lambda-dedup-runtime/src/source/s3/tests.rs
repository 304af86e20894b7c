//! The S3 door on the builder and the memory store: AWS's published sample event, once per
//! record, redeliveries, stale sequencers superseded, sequencers of different lengths, a delete
//! after a put, and what a hostile or broken sender sends.

use aws_lambda_events::event::s3::{S3Event, S3EventRecord};
use lambda_dedup::{Effect, Item, Reason, Value};
use lambda_dedup_engine::{Account, Outcome};
use lambda_dedup_memory::MemoryStore;
use serde_json::json;

use super::*;
use crate::flow::latest_wins;
use crate::{Dedup, Event, Service};

/// AWS's published sample (`aws_lambda_events`' fixture, copied into `events/`).
fn sample() -> S3Event {
    crate::testing::ledger::aws_sample("example-s3-event.json")
}

/// The sample's record with `key`, `sequencer`, the event name and version id set.
fn record(name: &str, key: &str, sequencer: &str, version: Option<&str>) -> serde_json::Value {
    let mut r = serde_json::to_value(&sample().records[0]).expect("record");
    r["eventName"] = json!(name);
    r["s3"]["object"]["key"] = json!(key);
    r["s3"]["object"]["sequencer"] = json!(sequencer);
    r["s3"]["object"]["versionId"] = json!(version);
    r
}

fn put(key: &str, sequencer: &str) -> serde_json::Value {
    record("ObjectCreated:Put", key, sequencer, None)
}

fn event(records: Vec<serde_json::Value>) -> S3Event {
    serde_json::from_value(json!({ "Records": records })).expect("event")
}

/// The door on memory: each applied event writes the object's state (`objects`, by decoded key)
/// and bumps a count of writes, so a second application shows.
fn door() -> (Service<S3Event, ()>, MemoryStore) {
    let env = crate::testing::env(&[]);
    let (dedup, store) = crate::testing::on_memory(Dedup::read(&env, "objects").expect("env"));
    store.create_table("objects", "key");
    let service = dedup
        .door(
            crate::source::S3,
            latest_wins(|e: Event<S3EventRecord>| {
                let object = &e.payload.s3.object;
                let key = object.url_decoded_key.clone().unwrap_or_default();
                let sequencer = object.sequencer.clone().unwrap_or_default();
                let state = e.payload.event_name.clone().unwrap_or_default();
                Effect::update("objects", Item::new().with("key", key.as_str()))
                    .expression("SET #s = :s, #q = :q ADD #w :one")
                    .name("#s", "state")
                    .name("#q", "sequencer")
                    .name("#w", "writes")
                    .value(":s", state.as_str())
                    .value(":q", sequencer.as_str())
                    .value(":one", 1)
            }),
        )
        .expect("service");
    (service, store)
}

async fn outcomes(service: &Service<S3Event, ()>, e: S3Event) -> Vec<Outcome> {
    let (_, outcomes) = crate::testing::with_outcomes(service.call_with(e)).await;
    outcomes.into_iter().map(|(_, o)| o).collect()
}

/// Each put notification `(key, sequencer)` in turn gets its outcome.
async fn assert_puts(service: &Service<S3Event, ()>, puts: &[(&str, &str, Outcome)]) {
    for (key, sequencer, expected) in puts {
        let got = outcomes(service, event(vec![put(key, sequencer)])).await;
        assert_eq!(got, std::slice::from_ref(expected), "{key} at {sequencer}");
    }
}

fn object(store: &MemoryStore, key: &str) -> Option<(String, String, String)> {
    let item = store.item("objects", &Item::new().with("key", key))?;
    let s = |a: &str| match item.0.get(a) {
        Some(Value::S(s)) => s.clone(),
        Some(Value::N(n)) => n.clone(),
        _ => String::new(),
    };
    Some((s("state"), s("sequencer"), s("writes")))
}

/// Each record is one event, applied once; its redelivery (the same record again, in a later
/// invocation or beside itself) is a duplicate and writes nothing (S8).
#[tokio::test]
async fn s3_each_record_applies_once_and_a_redelivery_is_a_duplicate() {
    let (service, store) = door();
    let first = event(vec![put("a.txt", "0A1B"), put("b.txt", "0A1C")]);
    assert_eq!(
        outcomes(&service, first.clone()).await,
        [Outcome::Applied, Outcome::Applied]
    );
    let again = outcomes(&service, first).await;
    assert!(
        again.iter().all(|o| matches!(o, Outcome::Duplicate { .. })),
        "{again:?}"
    );
    assert_eq!(object(&store, "a.txt").expect("a").2, "1", "written once");
    assert_eq!(object(&store, "b.txt").expect("b").2, "1");
}

/// An event older than one already applied for the same object is superseded: acknowledged
/// (the invocation is Ok), not applied over the newer one, counted among the duplicates and on
/// its own in the account (S14).
#[tokio::test]
async fn s3_a_stale_sequencer_is_superseded_counted_and_not_applied() {
    let (service, store) = door();
    let newer = record("ObjectRemoved:Delete", "a.txt", "0A20", None);
    assert_eq!(
        outcomes(&service, event(vec![newer])).await,
        [Outcome::Applied]
    );
    let older = event(vec![put("a.txt", "0A10")]);
    assert!(
        service.call_with(older.clone()).await.is_ok(),
        "acknowledged"
    );
    assert_eq!(outcomes(&service, older).await, [Outcome::Superseded]);
    let (state, sequencer, writes) = object(&store, "a.txt").expect("object");
    assert_eq!(
        (state.as_str(), writes.as_str()),
        ("ObjectRemoved:Delete", "1")
    );
    assert_eq!(sequencer, "0A20");
    let mut account = Account::default();
    account.record(&Outcome::Superseded);
    assert!(account.closes());
    assert_eq!((account.duplicate, account.superseded), (1, 1));
    assert!(account.emf_line("ns", "f").contains("\"Superseded\":1"));
}

/// A delete after a put of one key applies (its sequencer is greater), and a put of another key
/// with a lower sequencer is not superseded: sequencers order one key's events only.
#[tokio::test]
async fn s3_a_delete_after_a_put_applies_and_keys_are_ordered_apart() {
    let (service, store) = door();
    let put_then_delete = event(vec![
        put("a.txt", "005B"),
        record("ObjectRemoved:Delete", "a.txt", "005C", None),
    ]);
    let got = outcomes(&service, put_then_delete).await;
    assert_eq!(got, [Outcome::Applied, Outcome::Applied]);
    assert_eq!(
        object(&store, "a.txt").expect("a").0,
        "ObjectRemoved:Delete"
    );
    assert_puts(&service, &[("b.txt", "0001", Outcome::Applied)]).await;
}

/// Sequencers of different lengths compare as the S3 guide says: the shorter right-padded with
/// zeros. `"1"` (10…0) is newer than `"0FFFF"` (0FFFF0…); left-padded it would be older.
#[tokio::test]
async fn s3_sequencers_of_different_lengths_are_compared_right_padded() {
    let (service, store) = door();
    let puts = [
        ("a.txt", "1", Outcome::Applied),
        ("a.txt", "0FFFF", Outcome::Superseded),
        // Longer, and greater once padded.
        ("a.txt", "10000001", Outcome::Applied),
    ];
    assert_puts(&service, &puts).await;
    assert_eq!(object(&store, "a.txt").expect("a").1, "10000001");
}

/// Keys are URL-encoded in notifications; the object is its decoded key, so `a+b.txt`,
/// `a%20b.txt` and the same name from another sequencer all touch one object, `a b.txt`.
#[tokio::test]
async fn s3_url_encoded_keys_name_the_decoded_object() {
    let (service, store) = door();
    let puts = [
        ("a+b.txt", "0B", Outcome::Applied),
        // The same object, older.
        ("a%20b.txt", "0A", Outcome::Superseded),
    ];
    assert_puts(&service, &puts).await;
    assert!(object(&store, "a b.txt").is_some());
    assert!(object(&store, "a+b.txt").is_none());
    assert_eq!(decoded_key("a%2Bb").expect("decodes"), "a+b");
}

fn rejected(o: &Outcome) -> Option<Reason> {
    match o {
        Outcome::Rejected { code, .. } => Some(*code),
        _ => None,
    }
}

/// What a broken or hostile sender sends gets a clear, counted rejection, never a panic, and
/// nothing is written: no key, a sequencer that is not hex, an oversized key, a key that does
/// not decode to UTF-8, no sequencer. The invocation fails, for Lambda's retries and the
/// on-failure destination; the good record beside them is applied.
#[tokio::test]
async fn s3_hostile_records_are_rejected_counted_and_nothing_written() {
    let (service, store) = door();
    let mut no_key = put("x", "0A");
    no_key["s3"]["object"]
        .as_object_mut()
        .expect("object")
        .remove("key");
    let mut no_sequencer = put("y", "0A");
    no_sequencer["s3"]["object"]["sequencer"] = serde_json::Value::Null;
    let records = vec![
        no_key,
        put("z", "not-hex"),
        put(&"k".repeat(MAX_KEY_BYTES + 1), "0A"),
        put("%FF%FE", "0A"),
        no_sequencer,
        put(&"%41".repeat(MAX_KEY_BYTES), "0A"),
    ];
    let e = event(records);
    let (answer, got) = crate::testing::with_outcomes(service.call_with(e)).await;
    assert!(
        answer.is_err(),
        "not acknowledged: Lambda retries, then the destination"
    );
    let codes: Vec<Option<Reason>> = got.iter().map(|(_, o)| rejected(o)).collect();
    let malformed = Some(Reason::EnvelopeMalformed);
    assert_eq!(codes[..5], [malformed; 5]);
    assert_eq!(
        got[5].1,
        Outcome::Applied,
        "1024 bytes once decoded is S3's limit"
    );
    assert_eq!(store.items("objects").len(), 1);
    for (_, o) in &got[..5] {
        let Outcome::Rejected { reason, .. } = o else {
            unreachable!()
        };
        assert!(
            !reason.contains("not-hex") && !reason.contains("%FF"),
            "{reason}"
        );
    }
}

/// AWS's published sample event: it parses, its key is decoded (`Happy Face.jpg`), and its
/// placeholder sequencer (`"Happy Sequencer"`, not hex) is refused by name; with a hex
/// sequencer as real notifications carry, the same record applies once.
#[tokio::test]
async fn s3_aws_sample_event_is_read_and_its_placeholder_sequencer_refused() {
    let e = sample();
    let read = records(&e);
    let Err(rejection) = &read[0].message else {
        panic!("the placeholder sequencer is not hex");
    };
    assert_eq!(rejection.code(), "envelope_malformed");
    assert!(rejection.to_string().contains("s3.object.sequencer"));
    let (service, store) = door();
    let mut fixed = serde_json::to_value(&e).expect("event");
    fixed["Records"][0]["s3"]["object"]["sequencer"] = json!("0055AED6DCD90281E5");
    let fixed: S3Event = serde_json::from_value(fixed).expect("event");
    assert_eq!(outcomes(&service, fixed.clone()).await, [Outcome::Applied]);
    assert!(matches!(
        outcomes(&service, fixed).await[..],
        [Outcome::Duplicate { .. }]
    ));
    assert_eq!(object(&store, "Happy Face.jpg").expect("object").2, "1");
}

/// S3 → SQS: each SQS body is one S3 notification, opened by `Envelope::S3` and run through the
/// same latest-wins flow: applied once, a redelivery (another SQS message, the same record) a
/// duplicate, an older event superseded and acknowledged; S3's test event and a body of two
/// records are refused `envelope_malformed` and reported failed, for the queue's redrive policy.
#[tokio::test]
async fn s3_notifications_in_an_sqs_queue_apply_once_and_newest_wins() {
    let env = crate::testing::env(&[]);
    let (dedup, store) = crate::testing::on_memory(Dedup::read(&env, "objects").expect("env"));
    store.create_table("objects", "key");
    let service = dedup
        .envelope(crate::Envelope::S3)
        .identity(crate::Identity::attribute(IDENTITY_ATTRIBUTE))
        .sqs(latest_wins(|e: Event<S3EventRecord>| {
            let key = e
                .payload
                .s3
                .object
                .url_decoded_key
                .clone()
                .unwrap_or_default();
            let state = e.payload.event_name.clone().unwrap_or_default();
            Effect::update("objects", Item::new().with("key", key.as_str()))
                .expression("SET #s = :s ADD #w :one")
                .name("#s", "state")
                .name("#w", "writes")
                .value(":s", state.as_str())
                .value(":one", 1)
        }))
        .expect("service");
    let body = |records: Vec<serde_json::Value>| json!({ "Records": records }).to_string();
    let newer = body(vec![record("ObjectRemoved:Delete", "a.txt", "0B", None)]);
    let older = body(vec![put("a.txt", "0A")]);
    let two = body(vec![put("b.txt", "0A"), put("c.txt", "0A")]);
    let test_event = json!({"Service": "Amazon S3", "Event": "s3:TestEvent",
        "Time": "2024-01-01T00:00:00.000Z", "Bucket": "sourcebucket",
        "RequestId": "R", "HostId": "H"})
    .to_string();
    let first = crate::testing::events::sqs_event(&[&newer]);
    assert!(
        service
            .call_with(first)
            .await
            .expect("answer")
            .batch_item_failures
            .is_empty()
    );
    // The older event after the newer one (a standard queue keeps no order within a batch).
    let sqs = crate::testing::events::sqs_event(&[&newer, &newer, &older, &two, &test_event]);
    let (answer, got) = crate::testing::with_outcomes(service.call_with(sqs)).await;
    let answer = answer.expect("answer");
    let failed: Vec<&str> = answer
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    let labels: Vec<&str> = got.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(labels[..3], ["duplicate", "duplicate", "superseded"]);
    assert_eq!(
        failed,
        ["m3", "m4"],
        "the two bodies that are not one notification"
    );
    assert!(
        got[3..]
            .iter()
            .all(|(_, o)| rejected(o) == Some(Reason::EnvelopeMalformed))
    );
    assert_eq!(
        object(&store, "a.txt").expect("a").0,
        "ObjectRemoved:Delete"
    );
    assert_eq!(object(&store, "a.txt").expect("a").2, "1");
}

/// Issue 42: a forged sequencer wider than any S3 sends (64 hex digits, which sorts above
/// every real one) is refused as a malformed record and never becomes the object's
/// high-water: the real notification that follows is applied, not superseded.
#[tokio::test]
async fn s3_a_sequencer_wider_than_s3s_is_refused_and_pins_nothing() {
    let (service, store) = door();
    let forged = put("a.txt", &"F".repeat(64));
    let refused = outcomes(&service, event(vec![forged])).await;
    assert!(
        matches!(
            refused.as_slice(),
            [Outcome::Rejected {
                code: Reason::EnvelopeMalformed,
                ..
            }]
        ),
        "{refused:?}"
    );
    let widest = "F".repeat(lambda_dedup::latest::MAX_SEQUENCER_DIGITS + 1);
    assert!(
        Sequencer::parse(&widest).is_err(),
        "one digit over the bound"
    );
    let real = put("a.txt", "0064D3901D00059242");
    assert_eq!(
        outcomes(&service, event(vec![real])).await,
        [Outcome::Applied]
    );
    assert_eq!(object(&store, "a.txt").expect("a").1, "0064D3901D00059242");
}
