//! The Amazon MQ doors on the builder and the memory store: AWS's published sample events,
//! once per message, a poison message parked and the rest applied, a transient failure failing
//! the invocation for a whole redelivery, and what a hostile producer sends.

use std::sync::atomic::{AtomicBool, Ordering};

use aws_lambda_events::event::activemq::ActiveMqEvent;
use aws_lambda_events::event::rabbitmq::RabbitMqEvent;
use lambda_dedup::{AttributeValue, Value};
use lambda_dedup_memory::MemoryStore;
use serde_json::json;

use super::*;
use crate::Dedup;
use crate::parking::Parking;
use crate::queue::Taken;
use crate::testing::ledger::{aws_sample, b64, balance, credit, credit_work, ledger, parked_by};

/// AWS's ActiveMQ sample with one message per `(message id, data)`, shaped as its own.
fn activemq(messages: &[(&str, &str)]) -> ActiveMqEvent {
    let mut e: serde_json::Value = aws_sample("example-activemq-event.json");
    let template = e["messages"][0].clone();
    e["messages"] = messages
        .iter()
        .map(|(id, data)| {
            let mut m = template.clone();
            m["messageID"] = json!(id);
            m["data"] = json!(data);
            m
        })
        .collect();
    serde_json::from_value(e).expect("event")
}

/// AWS's RabbitMQ sample with one message per `(message id, header event-id, data)`.
fn rabbitmq(messages: &[(Option<&str>, &str, &str)]) -> RabbitMqEvent {
    let mut e: serde_json::Value = aws_sample("example-rabbitmq-event.json");
    let template = e["rmqMessagesByQueue"]["test::/"][0].clone();
    let list: Vec<serde_json::Value> = messages
        .iter()
        .map(|(id, event_id, data)| {
            let mut m = template.clone();
            m["basicProperties"]["messageId"] = json!(id);
            m["basicProperties"]["headers"]["event-id"] = json!({"bytes": event_id.as_bytes()});
            m["data"] = json!(data);
            m
        })
        .collect();
    e["rmqMessagesByQueue"]["test::/"] = list.into();
    serde_json::from_value(e).expect("event")
}

/// The credit work's dependency, up for every test that does not take it down.
static UP: AtomicBool = AtomicBool::new(false);

/// The builder on the memory store with the identity `identity` and parking whose letters the
/// test reads.
fn parking_kept(identity: &str) -> (Dedup, MemoryStore, Taken) {
    let (dedup, store) = ledger(&[]);
    let (parking, taken) = Parking::refusing_over_sqs_maximum();
    (
        dedup
            .identity(crate::Identity::attribute(identity))
            .parking(parking),
        store,
        taken,
    )
}

/// The builder on the memory store with the identity `identity` and parking out of reach.
fn parking_unreachable(identity: &str) -> (Dedup, MemoryStore) {
    let (dedup, store) = ledger(&[]);
    let dedup = dedup.identity(crate::Identity::attribute(identity));
    (dedup.parking(Parking::unreachable()), store)
}

/// The `dedup-reason` of each parked letter, in order.
fn reasons(taken: &Taken) -> Vec<String> {
    let taken = taken.lock().expect("taken");
    let reason = |a: &[(String, String)]| a.iter().find(|(k, _)| k == "dedup-reason").cloned();
    taken
        .iter()
        .filter_map(|(_, a)| reason(a))
        .map(|(_, v)| v)
        .collect()
}

fn mq_error(e: &lambda_runtime::Error) -> Option<&MqError> {
    e.downcast_ref::<MqError>()
}

/// AWS's ActiveMQ sample parses: the broker's `messageID` is carried for an identity chosen
/// openly (the message is reported by its position), the properties are attributes, the data
/// is decoded.
#[test]
fn activemq_sample_event_gives_message_id_properties_and_data() {
    let event: ActiveMqEvent = aws_sample("example-activemq-event.json");
    let all = activemq_messages(&event);
    let m = all[0].message();
    let id = event.messages[0].message_id.clone().expect("id");
    assert_eq!(
        m.message_id, "#0",
        "reported by its position, never the broker's id"
    );
    assert_eq!(
        m.attributes.get(MESSAGE_ID_ATTRIBUTE),
        Some(&AttributeValue::String(id))
    );
    assert_eq!(
        m.attributes.get("testKey"),
        Some(&AttributeValue::String("testValue".into()))
    );
    assert_eq!(m.body, b"Enter some text here for the message body...");
    assert_eq!(all[0].queue, "testQueue");
}

/// AWS's RabbitMQ sample parses: its headers are attributes (byte arrays as their text, a
/// number as its text), and its null `messageId` gives no identity attribute.
#[test]
fn rabbitmq_sample_event_gives_headers_and_no_message_id() {
    let event: RabbitMqEvent = aws_sample("example-rabbitmq-event.json");
    let all = rabbitmq_messages(&event);
    let m = all[0].message();
    assert_eq!(
        m.attributes.get("header1"),
        Some(&AttributeValue::String("value1".into()))
    );
    assert_eq!(
        m.attributes.get("numberInHeader"),
        Some(&AttributeValue::String("10".into()))
    );
    assert!(!m.attributes.contains_key(MESSAGE_ID_ATTRIBUTE));
    assert_eq!(all[0].queue, "test::/");
    assert_eq!(m.body, br#"{"timeout":0,"data":"CZrmf0Gw8Ov4bqLQxD4E"}"#);
}

/// Poison messages — data that is not base64, data that is not JSON — are parked, whole, with
/// their codes, and the rest of the batch is applied and acknowledged: no partial batch
/// response is needed for one message not to cost the others.
#[tokio::test]
async fn activemq_poison_is_parked_and_the_rest_applied() {
    let (dedup, store, taken) = parking_kept(MESSAGE_ID_ATTRIBUTE);
    let service = dedup
        .door(crate::source::ActiveMq, credit_work(&UP))
        .expect("service");
    let not_json = b64("not json");
    let batch = activemq(&[
        ("ID:1", &credit("a", 1)),
        ("ID:2", "not base64!"),
        ("ID:3", &not_json),
        ("ID:4", &credit("a", 2)),
    ]);
    service.call_with(batch).await.expect("acknowledged");
    assert_eq!(balance(&store, "a"), Some(Value::N("3".into())));
    assert_eq!(
        parked_by(&taken, "dedup-mq-message-id"),
        [
            ("ID:2".to_owned(), "body_not_base64".to_owned()),
            ("ID:3".to_owned(), "body_not_json".to_owned()),
        ]
    );
    let taken = taken.lock().expect("taken").clone();
    let whole: serde_json::Value = serde_json::from_str(&taken[0].0).expect("json");
    assert_eq!(whole["message"]["data"], "not base64!", "as delivered");
    assert_eq!(whole["queue"], "testQueue");
}

/// A transient failure fails the invocation (the broker redelivers the whole batch); the
/// redelivery applies the rest, and what applied the first time is a duplicate, caught by its
/// mark.
#[tokio::test]
async fn activemq_transient_failure_redelivers_the_batch_and_marks_catch_the_rest() {
    static DOWN: AtomicBool = AtomicBool::new(true);
    let (dedup, store) = parking_unreachable(MESSAGE_ID_ATTRIBUTE);
    let service = dedup
        .door(crate::source::ActiveMq, credit_work(&DOWN))
        .expect("service");
    let batch = || activemq(&[("ID:1", &credit("a", 1)), ("ID:2", &credit("b", 5))]);
    let err = service.call_with(batch()).await.expect_err("redelivered");
    assert_eq!(mq_error(&err), Some(&MqError::Redeliver { retries: 1 }));
    assert_eq!(balance(&store, "a"), Some(Value::N("1".into())));
    DOWN.store(false, Ordering::SeqCst);
    let (answer, outcomes) = crate::testing::with_outcomes(service.call_with(batch())).await;
    answer.expect("acknowledged");
    assert_eq!(
        balance(&store, "a"),
        Some(Value::N("1".into())),
        "not twice"
    );
    assert_eq!(balance(&store, "b"), Some(Value::N("5".into())));
    let labels: Vec<&str> = outcomes.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(labels, ["duplicate", "applied"]);
}

/// A message that can never apply whose parking fails fails the invocation: nothing is lost,
/// the batch comes again.
#[tokio::test]
async fn activemq_parking_failure_fails_the_invocation() {
    let (dedup, _) = parking_unreachable(MESSAGE_ID_ATTRIBUTE);
    let service = dedup
        .door(crate::source::ActiveMq, credit_work(&UP))
        .expect("service");
    let err = service
        .call_with(activemq(&[("ID:9", "not base64!")]))
        .await
        .expect_err("redelivered");
    assert_eq!(mq_error(&err), Some(&MqError::ParkingFailed { failed: 1 }));
}

/// RabbitMQ: with the broker's id chosen as identity, a message without `messageId` is parked
/// (`identity_missing`), never guessed; with the producer's header as identity, the same event
/// sent twice is applied once.
#[tokio::test]
async fn rabbitmq_missing_identity_is_parked_and_a_header_identity_dedups() {
    let (dedup, store, taken) = parking_kept(MESSAGE_ID_ATTRIBUTE);
    let service = dedup
        .door(crate::source::RabbitMq, credit_work(&UP))
        .expect("service");
    let batch = rabbitmq(&[
        (None, "e-1", &credit("a", 1)),
        (Some("m-2"), "e-2", &credit("a", 2)),
    ]);
    service.call_with(batch).await.expect("acknowledged");
    assert_eq!(balance(&store, "a"), Some(Value::N("2".into())));
    assert_eq!(reasons(&taken), ["identity_missing"]);
    let (dedup, store) = parking_unreachable("event-id");
    let service = dedup
        .door(crate::source::RabbitMq, credit_work(&UP))
        .expect("service");
    let twice = rabbitmq(&[
        (Some("m-1"), "e-1", &credit("a", 4)),
        (Some("m-2"), "e-1", &credit("a", 4)),
    ]);
    service.call_with(twice).await.expect("acknowledged");
    assert_eq!(balance(&store, "a"), Some(Value::N("4".into())));
}

/// AWS's ActiveMQ sample with one message per `(messageID, property event-id, data)`.
fn activemq_with_events(messages: &[(&str, &str, &str)]) -> ActiveMqEvent {
    let mut e: serde_json::Value = aws_sample("example-activemq-event.json");
    let template = e["messages"][0].clone();
    e["messages"] = messages
        .iter()
        .map(|(id, event_id, data)| {
            let mut m = template.clone();
            m["messageID"] = json!(id);
            m["properties"]["event-id"] = json!(event_id);
            m["data"] = json!(data);
            m
        })
        .collect();
    serde_json::from_value(e).expect("event")
}

/// The parked letters' `(data as delivered, dedup-reason)`.
fn parked(taken: &[(String, Vec<(String, String)>)]) -> Vec<(String, String)> {
    taken
        .iter()
        .map(|(body, a)| {
            let v: serde_json::Value = serde_json::from_str(body).expect("json");
            let code = a.iter().find(|(k, _)| k == "dedup-reason").expect("code");
            (
                v["message"]["data"].as_str().unwrap_or("").to_owned(),
                code.1.clone(),
            )
        })
        .collect()
}

/// Issue 42: RabbitMQ's `messageId` is the producer's. Two distinct events (their own
/// `event-id` headers) sent with one `messageId` in one batch are both applied: the batch is
/// not de-duplicated by the broker's id, so neither is acknowledged unprocessed.
#[tokio::test]
async fn mq_rabbitmq_messages_sharing_a_producer_message_id_are_each_applied() {
    let (dedup, store) = parking_unreachable("event-id");
    let service = dedup
        .door(crate::source::RabbitMq, credit_work(&UP))
        .expect("service");
    let batch = rabbitmq(&[
        (Some("m-1"), "e-1", &credit("a", 1)),
        (Some("m-1"), "e-2", &credit("a", 2)),
    ]);
    let (answer, outcomes) = crate::testing::with_outcomes(service.call_with(batch)).await;
    answer.expect("acknowledged");
    assert_eq!(balance(&store, "a"), Some(Value::N("3".into())), "both");
    let labels: Vec<&str> = outcomes.iter().map(|(_, o)| o.label()).collect();
    assert_eq!(labels, ["applied", "applied"]);
}

/// Issue 42: ActiveMQ's `messageID` can be the same on two messages of a batch (a JMS client
/// sets it). A poison message and a good one sharing it: the good one is applied, and the one
/// parked is the poison message itself, not its namesake.
#[tokio::test]
async fn mq_activemq_messages_sharing_a_message_id_park_the_right_one() {
    let (dedup, store, taken) = parking_kept("event-id");
    let service = dedup
        .door(crate::source::ActiveMq, credit_work(&UP))
        .expect("service");
    let good = credit("a", 5);
    let batch =
        activemq_with_events(&[("ID:same", "e-1", "not base64!"), ("ID:same", "e-2", &good)]);
    service.call_with(batch).await.expect("acknowledged");
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())), "applied");
    let taken = taken.lock().expect("taken").clone();
    assert_eq!(
        parked(&taken),
        [("not base64!".to_owned(), "body_not_base64".to_owned())],
        "the poison message, parked once"
    );
    assert!(
        taken[0]
            .1
            .contains(&("dedup-mq-message-id".into(), "ID:same".into())),
        "the broker's id stays an attribute"
    );
}

/// Issue 42: two messages that can never apply, sharing one producer `messageId`, are each
/// parked on their own: two letters, each with its own data.
#[tokio::test]
async fn mq_messages_sharing_a_message_id_are_each_parked() {
    let (dedup, _, taken) = parking_kept("event-id");
    let service = dedup
        .door(crate::source::RabbitMq, credit_work(&UP))
        .expect("service");
    let first = b64("first, not json");
    let second = b64("second, not json");
    let batch = rabbitmq(&[(Some("m-1"), "e-1", &first), (Some("m-1"), "e-2", &second)]);
    service.call_with(batch).await.expect("acknowledged");
    let taken = taken.lock().expect("taken").clone();
    assert_eq!(
        parked(&taken),
        [
            (first.clone(), "body_not_json".to_owned()),
            (second.clone(), "body_not_json".to_owned()),
        ]
    );
}

/// Issue 42: a RabbitMQ header's byte array is Java's signed bytes (or unsigned ones): a
/// number outside -128..=255 is no byte, and the header is left out — never wrapped into one
/// (`305` is not `'1'`), which would let a header forge another message's identity.
#[tokio::test]
async fn rabbitmq_header_bytes_out_of_byte_range_are_no_header() {
    let signed = |bytes: Vec<i64>| {
        let mut e =
            serde_json::to_value(rabbitmq(&[(Some("m-1"), "x", &credit("a", 1))])).expect("json");
        e["rmqMessagesByQueue"]["test::/"][0]["basicProperties"]["headers"]["event-id"] =
            json!({ "bytes": bytes });
        e["rmqMessagesByQueue"]["test::/"][0].clone()
    };
    // "é" as Java writes it: the signed bytes of its UTF-8.
    let mut e = serde_json::to_value(rabbitmq(&[])).expect("json");
    e["rmqMessagesByQueue"]["test::/"] = json!([signed(vec![-61, -87])]);
    let event: RabbitMqEvent = serde_json::from_value(e).expect("event");
    assert_eq!(
        rabbitmq_messages(&event)[0]
            .message()
            .attributes
            .get("event-id"),
        Some(&AttributeValue::String("é".into()))
    );

    let (dedup, store, taken) = parking_kept("event-id");
    let service = dedup
        .door(crate::source::RabbitMq, credit_work(&UP))
        .expect("service");
    let mut e = serde_json::to_value(rabbitmq(&[])).expect("json");
    e["rmqMessagesByQueue"]["test::/"] = json!([signed(vec![49, 50]), signed(vec![305, 306])]);
    let event: RabbitMqEvent = serde_json::from_value(e).expect("event");
    service.call_with(event).await.expect("acknowledged");
    assert_eq!(balance(&store, "a"), Some(Value::N("1".into())));
    let forged = ["identity_missing"];
    assert_eq!(
        reasons(&taken),
        forged,
        "the forged header's message parked"
    );
}
