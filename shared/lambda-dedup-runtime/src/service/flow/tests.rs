//! The flows on the sources beyond SQS's transactional one: a leased call and a write then a
//! call per Kinesis record, in order; a user's own `tower` layers around the call, per message.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::kinesis::KinesisEvent;
use lambda_dedup::{Effect, Lease};
use lambda_runtime::tower::{self, BoxError, ServiceBuilder};

use super::{Call, calls, calls_service, transact};
use crate::{Dedup, Event, HandlerError};
use lambda_dedup_config::Env;

#[derive(Debug, serde::Deserialize)]
struct Pay {
    n: i64,
}

fn env() -> Env {
    Env::from_pairs([
        ("DEDUP_NAMESPACE", "test"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("PROVIDER_TIMEOUT_MS", "2000"),
    ])
}

fn dedup() -> (Dedup, lambda_dedup_memory::MemoryStore) {
    let (dedup, store) = crate::testing::on_memory(Dedup::read(&env(), "payer").expect("env"));
    (
        dedup
            .identity("/id")
            .parking(crate::parking::Parking::unreachable()),
        store,
    )
}

/// A Kinesis event of `(partition key, body)` records, sequence numbers 1, 2, ….
fn kinesis(records: &[(&str, &str)]) -> KinesisEvent {
    let records: Vec<_> = records
        .iter()
        .enumerate()
        .map(|(i, (key, body))| {
            let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, body);
            serde_json::json!({"eventSource": "aws:kinesis", "eventID": format!("shardId-0:{}", i + 1),
                "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": key,
                    "sequenceNumber": (i + 1).to_string(),
                    "approximateArrivalTimestamp": 1_700_000_000.0, "data": data}})
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("event")
}

use crate::testing::ledger::checkpoints as checkpoint;

/// A leased call per Kinesis record: one call per event however often the stream carries it,
/// with the event's key; a call that fails stops its partition key there (the checkpoint names
/// it) and the key's later records are not called, while another key goes on; the retry of
/// the failed record calls again under the same key.
#[tokio::test]
async fn calls_on_kinesis_call_once_per_event_in_order() {
    let (dedup, _) = dedup();
    let called = Arc::new(Mutex::new(Vec::<(i64, String)>::new()));
    let fail = Arc::new(AtomicUsize::new(1));
    let (c, f) = (called.clone(), fail.clone());
    let service = dedup
        .door(
            crate::source::Kinesis,
            calls(move |e: Event<Pay>, lease: Lease| {
                let (c, f) = (c.clone(), f.clone());
                async move {
                    c.lock()
                        .expect("lock")
                        .push((e.payload.n, lease.key.idempotency_key()));
                    if e.payload.n == 2 && f.fetch_sub(1, Ordering::SeqCst) == 1 {
                        return Err(HandlerError::transient("provider down"));
                    }
                    Ok(Some(format!("paid {}", e.payload.n)))
                }
            }),
        )
        .expect("service");
    let records = [
        ("a", r#"{"id": "p1", "n": 1}"#),
        ("a", r#"{"id": "p1", "n": 1}"#),
        ("a", r#"{"id": "p2", "n": 2}"#),
        ("a", r#"{"id": "p3", "n": 3}"#),
        ("b", r#"{"id": "p4", "n": 4}"#),
    ];
    let answer = service.call_with(kinesis(&records)).await.expect("answer");
    assert_eq!(checkpoint(&answer), ["3"], "stopped at the failed call");
    let seen: Vec<i64> = called.lock().expect("lock").iter().map(|c| c.0).collect();
    assert_eq!(seen.iter().filter(|n| **n == 1).count(), 1, "{seen:?}");
    assert!(!seen.contains(&3), "a key's later record waits: {seen:?}");
    assert!(seen.contains(&4), "another key goes on: {seen:?}");
    let answer = service
        .call_with(kinesis(&records[2..4]))
        .await
        .expect("answer");
    assert!(checkpoint(&answer).is_empty(), "{answer:?}");
    let called = called.lock().expect("lock");
    let twos: Vec<&String> = called.iter().filter(|c| c.0 == 2).map(|c| &c.1).collect();
    assert_eq!(twos.len(), 2, "the failed call made again");
    assert_eq!(twos[0], twos[1], "under the same key");
    assert_eq!(called.iter().filter(|c| c.0 == 3).count(), 1);
}

/// A write then a call per Kinesis record: the write commits once, the call is made once per
/// event, and a replay of the shard writes and calls nothing more.
#[tokio::test]
async fn a_write_then_a_call_on_kinesis_happens_once_per_event() {
    let (dedup, store) = dedup();
    store.create_table("payments", "id");
    let called = Arc::new(AtomicUsize::new(0));
    let c = called.clone();
    let write = transact(|e: Event<Pay>| {
        let item = lambda_dedup::Item::from(("id", e.key.idempotency_key()));
        Effect::put("payments", item.with("n", e.payload.n))
    });
    let service = dedup
        .door(
            crate::source::Kinesis,
            write.then_call(move |_: Event<Pay>, _: Lease| {
                c.fetch_add(1, Ordering::SeqCst);
                async { Ok(None) }
            }),
        )
        .expect("service");
    let records = [
        ("a", r#"{"id": "p1", "n": 1}"#),
        ("a", r#"{"id": "p2", "n": 2}"#),
    ];
    for _ in 0..2 {
        let answer = service.call_with(kinesis(&records)).await.expect("answer");
        assert!(checkpoint(&answer).is_empty(), "{answer:?}");
    }
    assert_eq!(store.items("payments").len(), 2);
    assert_eq!(called.load(Ordering::SeqCst), 2);
}

/// The call as a `tower::Service` with the user's own layers: the layer runs once per
/// message called (not for a duplicate), inside the lease; an error of the service or its
/// layers is transient (the message is reported failed and redelivered), and the retry calls
/// again under the same key.
#[tokio::test]
async fn a_users_layers_run_per_message_around_the_call() {
    let (dedup, _) = dedup();
    let layered = Arc::new(AtomicUsize::new(0));
    let keys = Arc::new(Mutex::new(Vec::new()));
    let (l, k) = (layered.clone(), keys.clone());
    let service = ServiceBuilder::new()
        .map_request(move |call: Call<Pay>| {
            l.fetch_add(1, Ordering::SeqCst);
            call
        })
        .service(tower::service_fn(move |call: Call<Pay>| {
            let k = k.clone();
            async move {
                k.lock()
                    .expect("lock")
                    .push(call.lease.key.idempotency_key());
                if call.event.payload.n < 0 {
                    return Err::<Option<String>, BoxError>("over the limit".into());
                }
                Ok(Some("done".to_owned()))
            }
        }));
    let service = dedup.sqs(calls_service(service)).expect("service");
    let bodies = [
        r#"{"id": "p1", "n": 1}"#,
        r#"{"id": "p1", "n": 1}"#,
        r#"{"id": "p2", "n": -1}"#,
    ];
    let (answer, outcomes) = crate::testing::with_outcomes(
        service.call_with(crate::testing::events::sqs_event(&bodies)),
    )
    .await;
    assert_eq!(crate::testing::failed_ids(answer.expect("answer")), ["m2"]);
    assert!(
        matches!(
            &outcomes[2].1,
            lambda_dedup_engine::Outcome::Retry {
                transient: Some(lambda_dedup_engine::Transient::Layer(_)),
                ..
            }
        ),
        "a layer's error, counted as one: {:?}",
        outcomes[2]
    );
    assert_eq!(layered.load(Ordering::SeqCst), 2, "once per event called");
    let answer = service
        .call_with(crate::testing::events::sqs_event(&bodies[2..]))
        .await
        .expect("answer");
    assert_eq!(crate::testing::failed_ids(answer), ["m0"], "still failing");
    let keys = keys.lock().expect("lock");
    assert_eq!(keys.len(), 3);
    assert_eq!(keys[1], keys[2], "the retry under the same key");
}
