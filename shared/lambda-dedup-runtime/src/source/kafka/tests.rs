//! The Kafka door on the builder and the memory store: AWS's published sample event, once per
//! record, order per partition, each partition's resume point, poison parked, duplicates, and
//! what a hostile producer sends.

use std::sync::atomic::{AtomicBool, Ordering};

use aws_lambda_events::event::kafka::KafkaEvent;
use lambda_dedup::{AttributeValue, Effect, Value};
use lambda_dedup_memory::MemoryStore;
use serde_json::json;

use super::*;
use crate::parking::Parking;
use crate::testing::ledger::{
    Credit, aws_sample, b64, balance, credit, credit_work, ledger, parked_by,
};
use crate::{Dedup, Event};

/// AWS's published sample (`aws_lambda_events`' fixture, copied into `events/`).
fn sample() -> KafkaEvent {
    aws_sample("example-kafka-event.json")
}

/// A record shaped as the sample's, at `partition`/`offset` of `AWSKafkaTopic`, with `value`
/// (already encoded, as Lambda sends it) and `headers` (name, bytes).
fn record(partition: i64, offset: i64, value: &str, headers: &[(&str, &str)]) -> serde_json::Value {
    let mut r = serde_json::to_value(&sample().records["AWSKafkaTopic-0"][0]).expect("record");
    r["partition"] = json!(partition);
    r["offset"] = json!(offset);
    r["value"] = json!(value);
    r["headers"] = headers
        .iter()
        .map(|(n, v)| json!({ *n: v.bytes().map(|b| b as i8).collect::<Vec<i8>>() }))
        .collect();
    r
}

/// The sample event with `records` in place of its own, grouped by partition as Lambda does.
fn event(records: Vec<serde_json::Value>) -> KafkaEvent {
    let mut e = serde_json::to_value(sample()).expect("event");
    let mut map = serde_json::Map::new();
    for r in records {
        let key = format!("AWSKafkaTopic-{}", r["partition"]);
        map.entry(key)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("list")
            .push(r);
    }
    e["records"] = map.into();
    serde_json::from_value(e).expect("event")
}

/// The credit work's dependency, up for every test that does not take it down.
static UP: AtomicBool = AtomicBool::new(false);

fn builder() -> (Dedup, MemoryStore) {
    ledger(&[(CLUSTER_ID_VARIABLE, "cluster-1")])
}

/// The Kafka door with `parking` and the credit work (`down` takes account `b`'s dependency
/// down).
fn service(
    dedup: Dedup,
    parking: Parking,
    down: &'static AtomicBool,
) -> crate::Service<KafkaEvent, KafkaEventResponse> {
    let door = kafka(dedup.parking(parking), credit_work(down));
    door.expect("service")
}

/// The Kafka door on `dedup` as a function builds it (bound to the builder as configured),
/// running `flow`.
fn kafka<M, F>(
    dedup: Dedup,
    flow: F,
) -> Result<crate::Service<KafkaEvent, KafkaEventResponse>, crate::BuildError>
where
    F: crate::flow::Flow<crate::store::Items, M>,
    F::Step: crate::flow::seal::Admits<crate::door::InOrder>,
{
    let door = crate::source::Kafka::on(&dedup)?;
    dedup.door(door, flow)
}

fn named(response: &KafkaEventResponse) -> Vec<(String, i64)> {
    let ids = response.identifiers().into_iter();
    ids.map(|i| (i.partition.clone(), i.offset)).collect()
}

/// AWS's sample parses; its record's identity is its position scoped by the MSK cluster's
/// ARN (the configured cluster id without one), its header a message attribute and
/// its value decoded into the body.
#[test]
fn kafka_sample_event_gives_position_header_and_value() {
    let event = sample();
    let all = records(&event, Some("ignored on MSK"));
    assert_eq!(all.len(), 1);
    let m = all[0].message();
    assert_eq!(m.message_id, "AWSKafkaTopic-0@0");
    assert_eq!(m.group_id.as_deref(), Some("AWSKafkaTopic-0"));
    assert_eq!(m.body, b"8d5596b4-1813-4238-b24b-6dad8e3d1c0c");
    assert_eq!(
        m.attributes.get("headerKey"),
        Some(&AttributeValue::String("headerValue".into()))
    );
    let arn = event.event_source_arn.clone().expect("arn");
    assert_eq!(
        m.attributes.get(POSITION_ATTRIBUTE),
        Some(&AttributeValue::String(format!("{arn}|AWSKafkaTopic|0|0")))
    );
    let mut self_managed = event.clone();
    self_managed.event_source_arn = None;
    let m = records(&self_managed, Some("cluster-1"))[0].message();
    assert_eq!(
        m.attributes.get(POSITION_ATTRIBUTE),
        Some(&AttributeValue::String(
            "cluster-1|AWSKafkaTopic|0|0".into()
        ))
    );
}

/// Two partitions in one batch: each applied once and in order; a transient failure stops its
/// own partition there — named in the response by partition and offset, its later record not
/// applied — while the other partition goes on; Lambda resumes from the named offset and each
/// event is applied once, the records redelivered at the same offsets duplicates.
#[tokio::test]
async fn kafka_keeps_order_per_partition_and_names_each_resume_point() {
    static DOWN: AtomicBool = AtomicBool::new(true);
    let (dedup, store) = builder();
    let service = service(dedup, Parking::unreachable(), &DOWN);
    let batch = vec![
        record(0, 10, &credit("a", 1), &[]),
        record(0, 11, &credit("b", 10), &[]),
        record(0, 12, &credit("b", 20), &[]),
        record(1, 5, &credit("c", 3), &[]),
        record(1, 6, &credit("c", 4), &[]),
    ];
    let first = service
        .call_with(event(batch.clone()))
        .await
        .expect("answer");
    assert_eq!(named(&first), [("AWSKafkaTopic-0".to_owned(), 11)]);
    assert_eq!(balance(&store, "a"), Some(Value::N("1".into())));
    assert_eq!(balance(&store, "b"), None, "12 not before 11");
    assert_eq!(
        balance(&store, "c"),
        Some(Value::N("7".into())),
        "partition 1 went on"
    );
    DOWN.store(false, Ordering::SeqCst);
    // Lambda resumes partition 0 at 11; partition 1 comes again too (a rebalance).
    let again = [&batch[1..3], &batch[3..]].concat();
    let (second, outcomes) = crate::testing::with_outcomes(service.call_with(event(again))).await;
    assert!(named(&second.expect("answer")).is_empty());
    assert_eq!(balance(&store, "b"), Some(Value::N("30".into())));
    assert_eq!(
        balance(&store, "c"),
        Some(Value::N("7".into())),
        "no second effect"
    );
    let duplicates = outcomes.iter().filter(|(_, o)| o.label() == "duplicate");
    assert_eq!(duplicates.count(), 2, "{outcomes:?}");
}

/// Identity from a record header: the same event written at two offsets (a producer's retry)
/// is applied once, the second a duplicate; by default (the position) the two are two events.
#[tokio::test]
async fn kafka_header_identity_catches_a_producer_retry_at_another_offset() {
    let batch = || {
        event(vec![
            record(0, 1, &credit("a", 5), &[("event-id", "e-1")]),
            record(0, 2, &credit("a", 5), &[("event-id", "e-1")]),
        ])
    };
    let (dedup, store) = builder();
    let by_header = service(
        dedup.identity(crate::Identity::attribute("event-id")),
        Parking::unreachable(),
        &UP,
    );
    let answer = by_header.call_with(batch()).await.expect("answer");
    assert!(named(&answer).is_empty());
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())));
    let (dedup, store) = builder();
    let by_position = service(dedup, Parking::unreachable(), &UP);
    let answer = by_position.call_with(batch()).await.expect("answer");
    assert!(named(&answer).is_empty());
    assert_eq!(
        balance(&store, "a"),
        Some(Value::N("10".into())),
        "the position sees two records"
    );
}

/// What a hostile producer sends — a value that is not base64, one that is not JSON, a
/// missing identity header, a value over the body limit (and too large to park whole) — is
/// rejected with its code, parked (never dropped), and its partition goes on: within the
/// deliveries Lambda makes from each resume point, every good record is applied.
#[tokio::test]
async fn kafka_hostile_records_are_parked_and_the_partition_goes_on() {
    let (dedup, store) = builder();
    let (parking, taken) = Parking::refusing_over_sqs_maximum();
    let service = service(
        dedup.identity(crate::Identity::attribute("event-id")),
        parking,
        &UP,
    );
    let id = |n: &'static str| vec![("event-id", n)];
    let big = b64(vec![b'x'; 1_100_000]);
    let batch = [
        record(0, 1, &credit("a", 1), &id("e1")),
        record(0, 2, "not base64!", &id("e2")),
        record(0, 3, &b64("not json"), &id("e3")),
        record(0, 4, &credit("a", 2), &[]),
        record(0, 5, &big, &id("e5")),
        record(0, 6, &credit("a", 4), &id("e6")),
    ];
    let mut from = 0;
    for _ in 0..batch.len() {
        let answer = service
            .call_with(event(batch[from..].to_vec()))
            .await
            .expect("answer");
        let Some((_, offset)) = named(&answer).into_iter().next() else {
            from = batch.len();
            break;
        };
        from = batch
            .iter()
            .position(|r| r["offset"] == offset)
            .expect("a record");
    }
    assert_eq!(from, batch.len(), "the partition got past every record");
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())));
    let code = |o: &str, c: &str| (o.to_owned(), c.to_owned());
    assert_eq!(
        parked_by(&taken, "dedup-kafka-offset"),
        [
            code("2", "body_not_base64"),
            code("3", "body_not_json"),
            code("4", "identity_missing"),
            code("5", "body_too_large"),
        ]
    );
    let taken = taken.lock().expect("taken").clone();
    let whole: serde_json::Value = serde_json::from_str(&taken[0].0).expect("json");
    assert_eq!(
        whole["record"]["value"], "not base64!",
        "the record as delivered"
    );
    assert_eq!(whole["partition"], "AWSKafkaTopic-0");
    let by_ref: serde_json::Value = serde_json::from_str(&taken[3].0).expect("json");
    assert_eq!(by_ref["parkedBy"], "reference");
    assert_eq!(by_ref["value"]["bytes"], 1_100_000);
    assert!(by_ref["record"].get("value").is_none());
}

/// A record that can never apply is passed only once parked: when the parking queue cannot be
/// reached, it is its partition's resume point, and the other partition is not held by it.
#[tokio::test]
async fn kafka_a_record_whose_parking_fails_is_its_partitions_resume_point() {
    let (dedup, store) = builder();
    let service = service(dedup, Parking::unreachable(), &UP);
    let batch = vec![
        record(0, 7, &b64("not json"), &[]),
        record(0, 8, &credit("a", 1), &[]),
        record(1, 3, &credit("c", 2), &[]),
    ];
    let answer = service.call_with(event(batch)).await.expect("answer");
    assert_eq!(named(&answer), [("AWSKafkaTopic-0".to_owned(), 7)]);
    assert_eq!(balance(&store, "a"), None);
    assert_eq!(balance(&store, "c"), Some(Value::N("2".into())));
}

/// `event` as a self-managed cluster sends it: no `eventSourceArn`, the brokers `servers`.
fn self_managed(mut event: KafkaEvent, servers: &str) -> KafkaEvent {
    event.event_source_arn = None;
    event.event_source = Some("SelfManagedKafka".into());
    event.bootstrap_servers = Some(servers.into());
    event
}

/// Issue 42: keyed by position, the Kafka door does not start without the cluster id of a
/// self-managed cluster (`DEDUP_KAFKA_CLUSTER_ID`): it never names one by its bootstrap
/// string. With an identity of the builder's own it needs none.
#[test]
fn kafka_self_managed_cluster_id_is_required_to_start() {
    let (dedup, _) = ledger(&[]);
    let refused = kafka(dedup.parking(Parking::unreachable()), |_: Event<Credit>| {
        Vec::<Effect>::new()
    });
    assert!(
        matches!(&refused, Err(crate::BuildError::Settings(crate::SettingsError::Missing(v)))
            if v == CLUSTER_ID_VARIABLE),
        "{:?}",
        refused.err()
    );
    let (dedup, _) = ledger(&[]);
    let _ = service(
        dedup.identity(crate::Identity::attribute("event-id")),
        Parking::unreachable(),
        &UP,
    );
}

/// `Identity::cloudevents()` is a choice, as every identity is: the Kafka door keeps it rather
/// than its default (the record's position), so it starts without a cluster id, and one event
/// written twice (two offsets, one CloudEvents `source` + `id`) is credited once.
#[tokio::test]
async fn kafka_keeps_a_chosen_cloudevents_identity() {
    let (dedup, store) = ledger(&[]);
    let dedup = dedup.identity(crate::Identity::cloudevents());
    let service = service(dedup, Parking::unreachable(), &UP);
    let data = json!({"account": "a", "amount": 5});
    let ce = json!({"specversion": "1.0", "type": "credit", "source": "/bank", "id": "e-1",
        "data": data});
    let value = b64(ce.to_string());
    let batch = event(vec![record(0, 40, &value, &[]), record(0, 41, &value, &[])]);
    let answer = service.call_with(batch).await.expect("answer");
    assert!(named(&answer).is_empty());
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())), "once");
}

/// Issue 42: a self-managed cluster's records are named by its cluster id, so a redelivery
/// after a broker was added (another bootstrap string) is a duplicate, not a second credit.
#[tokio::test]
async fn kafka_self_managed_records_are_named_by_cluster_id_not_bootstrap_string() {
    let (dedup, store) = builder();
    let service = service(dedup, Parking::unreachable(), &UP);
    let batch = || event(vec![record(0, 40, &credit("a", 5), &[])]);
    let before = self_managed(batch(), "b-1:9092,b-2:9092");
    let after = self_managed(batch(), "b-1:9092,b-2:9092,b-3:9092");
    for e in [before, after] {
        let answer = service.call_with(e).await.expect("answer");
        assert!(named(&answer).is_empty());
    }
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())), "once");
}

/// Issue 42: the envelope id chosen (`Identity::envelope_id`) is the builder's choice: the
/// Kafka and S3 doors do not replace it with their own default, and, their records having no
/// envelope id, refuse to build.
#[test]
fn identity_envelope_id_is_kept_not_replaced_by_kafka_or_s3() {
    let refused = |r: Result<(), crate::BuildError>| {
        matches!(
            r,
            Err(crate::BuildError::IdentityUnavailable {
                door: _,
                identity: "envelope id"
            })
        )
    };
    let (dedup, _) = builder();
    let dedup = dedup
        .identity(crate::Identity::envelope_id())
        .parking(Parking::unreachable());
    let kafka = kafka(dedup, |_: Event<Credit>| Vec::<Effect>::new()).map(drop);
    assert!(refused(kafka), "Kafka");
    let (dedup, _) = builder();
    let s3 = dedup
        .identity(crate::Identity::envelope_id())
        .door(
            crate::source::S3,
            crate::flow::latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()),
        )
        .map(drop);
    assert!(refused(s3), "S3");
}
