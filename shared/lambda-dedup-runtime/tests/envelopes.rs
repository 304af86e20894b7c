//! SNS and EventBridge envelopes, through the builder's services on the memory store, with
//! AWS's own published sample events (`events/example-*.json`): SNS → SQS without raw delivery
//! (the producer's JSON in the notification's `Message` string), EventBridge → SQS (the
//! `detail`), and both as direct asynchronous sources (S1, S2, S8, S11, S12, S14).

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sns::SnsEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_dedup::{Effect, Item};
use lambda_dedup_engine::{Outcome, Reason};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::events::NotAcknowledged;
use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::source::{EventBridge, Sns};
use lambda_dedup_runtime::testing::{env, failed_ids, on_memory, with_outcomes};
use lambda_dedup_runtime::{Dedup, Envelope, Event, Identity, SqsService};
use serde_json::{Value, json};

const SNS_SAMPLE: &str = include_str!("../../../events/example-sns-event.json");
const SQS_SAMPLE: &str = include_str!("../../../events/example-sqs-event-obj.json");
const EVENTBRIDGE_SAMPLE: &str = include_str!("../../../events/example-eventbridge-event-obj.json");

#[derive(Debug, serde::Deserialize)]
struct Order {
    order_id: String,
    total: i64,
}

fn dedup() -> (Dedup, MemoryStore) {
    let (dedup, store) = on_memory(Dedup::read(&env(&[]), "orders").expect("settings"));
    store.create_table("orders", "order_id");
    (dedup, store)
}

/// The SNS → SQS service of `/order_id`, its orders written a transaction per message or
/// (`per_batch`) one per batch.
fn sns_via_sqs(per_batch: bool) -> (SqsService, MemoryStore) {
    let (dedup, store) = dedup();
    let dedup = dedup.envelope(Envelope::Sns).identity("/order_id");
    let service = if per_batch {
        dedup.sqs(transact(write).one_transaction_per_batch())
    } else {
        dedup.sqs(write)
    };
    (service.expect("service"), store)
}

/// The order written with the event's mark.
fn write(e: Event<Order>) -> Effect {
    Effect::put(
        "orders",
        Item::from(("order_id", e.payload.order_id.as_str())).with("total", e.payload.total),
    )
}

fn total(store: &MemoryStore, order_id: &str) -> Option<lambda_dedup::Value> {
    let item = store.item("orders", &Item::new().with("order_id", order_id))?;
    item.0.get("total").cloned()
}

/// AWS's SNS sample notification (its `Sns` object), as SNS publishes `message` under
/// `message_id`.
fn notification(message_id: &str, message: &str) -> Value {
    let sample: Value = serde_json::from_str(SNS_SAMPLE).expect("AWS sample");
    let mut sns = sample["Records"][0]["Sns"].clone();
    sns["MessageId"] = json!(message_id);
    sns["Message"] = json!(message);
    sns
}

/// AWS's SQS sample event with one record per body, ids `q0`, `q1`, …
fn sqs(bodies: &[String]) -> SqsEvent {
    let sample: Value = serde_json::from_str(SQS_SAMPLE).expect("AWS sample");
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            let mut r = sample["Records"][0].clone();
            r["messageId"] = json!(format!("q{i}"));
            r["body"] = json!(body);
            r["messageAttributes"] = json!({});
            r
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("SQS event")
}

fn order(order_id: &str, total: i64) -> String {
    json!({"order_id": order_id, "total": total}).to_string()
}

fn codes(outcomes: &[(String, Outcome)]) -> Vec<(String, &'static str)> {
    outcomes
        .iter()
        .map(|(id, o)| {
            let code = match o {
                Outcome::Rejected { code, .. } => code.code(),
                other => other.label(),
            };
            (id.clone(), code)
        })
        .collect()
}

/// S1, S8: SNS → SQS without raw delivery: the work gets its own `Order` from inside the
/// `Message` string, the pointer `/order_id` is the inner message's, and the same order
/// published again (a new SNS `MessageId`, a new envelope) is a duplicate; another total under
/// the same id a conflict (S11). In both commit modes.
#[tokio::test]
async fn sns_via_sqs_the_work_reads_the_message_inside_and_a_republish_is_a_duplicate() {
    for per_batch in [false, true] {
        let (service, store) = sns_via_sqs(per_batch);
        let first = notification("sns-1", &order("o-1", 5)).to_string();
        let again = notification("sns-2", &order("o-1", 5)).to_string();
        let other = notification("sns-3", &order("o-1", 6)).to_string();
        let (answer, outcomes) = with_outcomes(service.call_with(sqs(&[first]))).await;
        assert!(
            failed_ids(answer.expect("answer")).is_empty(),
            "{outcomes:?}"
        );
        assert_eq!(
            total(&store, "o-1"),
            Some(lambda_dedup::Value::N("5".into()))
        );
        let (answer, outcomes) = with_outcomes(service.call_with(sqs(&[again, other]))).await;
        assert_eq!(
            failed_ids(answer.expect("answer")),
            ["q1"],
            "per_batch={per_batch}"
        );
        assert!(
            matches!(outcomes[0].1, Outcome::Duplicate { .. }),
            "{outcomes:?}"
        );
        assert_eq!(outcomes[1].1, Outcome::Conflict);
        assert_eq!(
            total(&store, "o-1"),
            Some(lambda_dedup::Value::N("5".into()))
        );
    }
}

/// S2, S12: hostile SNS bodies, each its own typed rejection, reported failed (for the DLQ)
/// alone while the good message beside them applies, in both commit modes: not JSON, JSON that
/// is no notification, a confirmation, AWS's own sample whose `Message` is not JSON, the
/// identity missing inside, a JSON string nested past the bound, an identity too large.
#[tokio::test]
async fn sns_via_sqs_hostile_envelopes_are_rejected_one_by_one() {
    for per_batch in [false, true] {
        let (service, store) = sns_via_sqs(per_batch);
        let sample: Value = serde_json::from_str(SNS_SAMPLE).expect("AWS sample");
        let mut confirmation = notification("sns-c", &order("o-9", 1));
        confirmation["Type"] = json!("SubscriptionConfirmation");
        let mut no_message = notification("sns-n", "");
        no_message
            .as_object_mut()
            .expect("object")
            .remove("Message");
        let bodies = [
            "{not json".to_owned(),
            no_message.to_string(),
            confirmation.to_string(),
            sample["Records"][0]["Sns"].to_string(),
            notification("sns-m", r#"{"id": "o-1", "total": 1}"#).to_string(),
            notification("sns-d", r#"{"order_id": "o-5", "total": "five"}"#).to_string(),
            notification("sns-l", &order(&"x".repeat(2000), 1)).to_string(),
            notification("sns-ok", &order("o-2", 7)).to_string(),
        ];
        let (answer, outcomes) = with_outcomes(service.call_with(sqs(&bodies))).await;
        let failed = failed_ids(answer.expect("answer"));
        assert_eq!(failed, ["q0", "q1", "q2", "q3", "q4", "q5", "q6"]);
        let mut got = codes(&outcomes);
        got.sort();
        assert_eq!(
            got,
            [
                ("q0".to_owned(), "envelope_malformed"),
                ("q1".to_owned(), "envelope_malformed"),
                ("q2".to_owned(), "envelope_malformed"),
                ("q3".to_owned(), "body_not_json"),
                ("q4".to_owned(), "identity_missing"),
                ("q5".to_owned(), "invalid_payload"),
                ("q6".to_owned(), "identity_too_long"),
                ("q7".to_owned(), "applied"),
            ],
            "per_batch={per_batch}"
        );
        for (_, o) in &outcomes {
            if let Outcome::Rejected { reason, .. } = o {
                assert!(
                    !reason.contains("Hello") && !reason.contains("xxxx"),
                    "{reason}"
                );
            }
        }
        assert_eq!(
            total(&store, "o-2"),
            Some(lambda_dedup::Value::N("7".into()))
        );
    }
    // JSON strings inside the message: two levels are read, a third is refused by pointer.
    let (dedup, _) = dedup();
    let service = dedup
        .envelope(Envelope::Sns)
        .identity("/meta/order_id")
        .sqs(|_: Event<Value>| Vec::<Effect>::new())
        .expect("service");
    let wrapped = |levels: usize| {
        let mut v = json!({"order_id": "o-6"});
        for _ in 0..levels {
            v = json!(v.to_string());
        }
        notification("sns-w", &json!({ "meta": v }).to_string()).to_string()
    };
    let (_, outcomes) = with_outcomes(service.call_with(sqs(&[wrapped(2), wrapped(3)]))).await;
    assert_eq!(
        codes(&outcomes),
        [
            ("q0".to_owned(), "applied"),
            ("q1".to_owned(), "embedded_too_deep")
        ]
    );
}

/// S12: on a FIFO queue a refused envelope stops its group, like any refusal: the message
/// behind it in the group is not attempted, while another group goes on.
#[tokio::test]
async fn sns_via_sqs_fifo_a_refused_envelope_stops_its_group() {
    let (dedup, store) = dedup();
    let service = dedup
        .envelope(Envelope::Sns)
        .identity("/order_id")
        .sqs(transact(write).one_transaction_per_batch())
        .expect("service");
    let mut event = sqs(&[
        "not an envelope".to_owned(),
        notification("sns-1", &order("o-1", 1)).to_string(),
        notification("sns-2", &order("o-2", 2)).to_string(),
    ]);
    for (r, group) in event.records.iter_mut().zip(["a", "a", "b"]) {
        r.attributes.insert("MessageGroupId".into(), group.into());
    }
    let answer = service.call_with(event).await.expect("answer");
    assert_eq!(failed_ids(answer), ["q0", "q1"]);
    assert_eq!(total(&store, "o-1"), None, "blocked behind the refusal");
    assert_eq!(
        total(&store, "o-2"),
        Some(lambda_dedup::Value::N("2".into()))
    );
}

/// S1: the SNS `MessageId` is an identity only when chosen: it catches SNS's own redelivery
/// (the same `MessageId`), not a producer that publishes the same order again (a new one).
#[tokio::test]
async fn sns_envelope_id_is_an_opt_in_fallback_with_its_limit() {
    let (dedup, store) = dedup();
    let service = dedup
        .envelope(Envelope::Sns)
        .identity(Identity::envelope_id())
        .sqs(write)
        .expect("service");
    let body = |id: &str| notification(id, &order("o-1", 5)).to_string();
    let (_, outcomes) = with_outcomes(service.call_with(sqs(&[body("sns-1")]))).await;
    assert_eq!(outcomes[0].1, Outcome::Applied);
    let (_, outcomes) = with_outcomes(service.call_with(sqs(&[body("sns-1")]))).await;
    assert!(
        matches!(outcomes[0].1, Outcome::Duplicate { .. }),
        "{outcomes:?}"
    );
    let (_, outcomes) = with_outcomes(service.call_with(sqs(&[body("sns-2")]))).await;
    assert_eq!(outcomes[0].1, Outcome::Applied, "a republish is new to it");
    assert!(total(&store, "o-1").is_some());
}

/// AWS's direct SNS sample event, one record per message.
fn sns_event(messages: &[(&str, &str)]) -> SnsEvent {
    let sample: Value = serde_json::from_str(SNS_SAMPLE).expect("AWS sample");
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, message)| {
            let mut r = sample["Records"][0].clone();
            r["Sns"] = notification(id, message);
            r
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("SNS event")
}

fn not_acknowledged(e: &lambda_runtime::Error) -> &NotAcknowledged {
    e.downcast_ref::<NotAcknowledged>()
        .expect("a NotAcknowledged")
}

/// A direct SNS subscription (async invoke, no partial batch response): Ok once every record
/// is acknowledged — applied, or a duplicate of a republish (S8) — and an error naming the
/// records otherwise, for Lambda's async retries and the on-failure destination: a poison
/// message (AWS's sample `Message`, not JSON), a store that cannot be reached (S13).
#[tokio::test]
async fn sns_direct_ok_when_all_acknowledged_else_an_error_for_the_destination() {
    let (dedup, store) = dedup();
    let service = dedup
        .identity("/order_id")
        .door(Sns, write)
        .expect("service");
    let first = order("o-1", 5);
    assert!(
        service
            .call_with(sns_event(&[("sns-1", &first)]))
            .await
            .is_ok()
    );
    let (answer, outcomes) =
        with_outcomes(service.call_with(sns_event(&[("sns-2", &first)]))).await;
    assert!(answer.is_ok(), "{outcomes:?}");
    assert!(matches!(outcomes[0].1, Outcome::Duplicate { .. }));
    let sample: SnsEvent = serde_json::from_str(SNS_SAMPLE).expect("AWS sample");
    let (answer, outcomes) = with_outcomes(service.call_with(sample)).await;
    let error = answer.expect_err("poison");
    assert_eq!(
        not_acknowledged(&error).failed,
        [(
            "82833b5c-8d5d-56d0-b0e1-7511f8253eb8".to_owned(),
            "rejected"
        )]
    );
    assert!(matches!(
        outcomes[0].1,
        Outcome::Rejected {
            code: Reason::BodyNotJson,
            ..
        }
    ));
    assert!(!error.to_string().contains("Hello"), "{error}");

    let down = Dedup::read(&env(&[]), "orders")
        .expect("settings")
        .on(lambda_dedup_runtime::store::Items::new(store.unreachable()))
        .identity("/order_id")
        .door(Sns, write)
        .expect("service");
    let error = down
        .call_with(sns_event(&[("sns-3", &order("o-3", 1))]))
        .await
        .expect_err("not acknowledged");
    assert_eq!(not_acknowledged(&error).failed[0].1, "retry");
    assert_eq!(total(&store, "o-3"), None);
}

/// An EventBridge target, from AWS's sample event: the work gets the `detail`; the same
/// detail put again (EventBridge gives the entry a new `id`) is a duplicate by the detail's
/// own identity, while the `id`, chosen as the fallback, would take it as new.
#[tokio::test]
async fn eventbridge_direct_the_identity_is_in_the_detail_not_the_id() {
    #[derive(Debug, serde::Deserialize)]
    struct State {
        #[serde(rename = "instance-id")]
        instance: String,
    }
    let put = |id: &str| {
        let mut e: Value = serde_json::from_str(EVENTBRIDGE_SAMPLE).expect("AWS sample");
        e["id"] = json!(id);
        serde_json::from_value::<EventBridgeEvent>(e).expect("event")
    };
    for (by_id, second) in [(false, "duplicate"), (true, "applied")] {
        let (dedup, _) = dedup();
        let dedup = if by_id {
            dedup.identity(Identity::envelope_id())
        } else {
            dedup.identity("/instance-id")
        };
        let service = dedup
            .door(EventBridge, |e: Event<State>| {
                assert_eq!(e.payload.instance, "i-abcd1111");
                Vec::<Effect>::new()
            })
            .expect("service");
        let (answer, outcomes) = with_outcomes(service.call_with(put("e-1"))).await;
        assert!(answer.is_ok());
        assert_eq!(outcomes[0], ("e-1".to_owned(), Outcome::Applied));
        let (answer, outcomes) = with_outcomes(service.call_with(put("e-2"))).await;
        assert!(answer.is_ok());
        assert_eq!(outcomes[0].1.label(), second, "by_id={by_id}");
    }
}

/// EventBridge → SQS: the body is the event, the work gets the `detail`; a body that is not
/// an EventBridge event (no `detail-type`) is `envelope_malformed`, dead-lettered alone.
#[tokio::test]
async fn eventbridge_via_sqs_the_work_reads_the_detail() {
    let (dedup, store) = dedup();
    let service = dedup
        .envelope(Envelope::EventBridge)
        .identity("/order_id")
        .sqs(write)
        .expect("service");
    let mut event: Value = serde_json::from_str(EVENTBRIDGE_SAMPLE).expect("AWS sample");
    event["detail"] = json!({"order_id": "o-4", "total": 4});
    let mut broken = event.clone();
    broken
        .as_object_mut()
        .expect("object")
        .remove("detail-type");
    let (answer, outcomes) =
        with_outcomes(service.call_with(sqs(&[event.to_string(), broken.to_string()]))).await;
    assert_eq!(failed_ids(answer.expect("answer")), ["q1"]);
    assert_eq!(
        codes(&outcomes),
        [
            ("q0".to_owned(), "applied"),
            ("q1".to_owned(), "envelope_malformed")
        ]
    );
    assert_eq!(
        total(&store, "o-4"),
        Some(lambda_dedup::Value::N("4".into()))
    );
}
