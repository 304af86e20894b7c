//! The dispatcher on the SQS door and the memory store, with a starter that records what it
//! started and answers as Lambda does for a name it already has.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup_engine::Outcome;
use lambda_dedup_memory::MemoryStore;

use super::{StartError, StartFuture, Started, Starter, starts};
use crate::testing::events::sqs_record;
use crate::testing::with_outcomes;
use crate::{Dedup, Env, SqsService};

/// Lambda's executions by name: a name it has with the same payload is the existing
/// execution; with another payload, taken.
#[derive(Debug, Default, Clone)]
struct Executions(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

impl Executions {
    fn names(&self) -> Vec<String> {
        self.0.lock().expect("lock").keys().cloned().collect()
    }
}

#[derive(Debug)]
struct Fake {
    executions: Executions,
    starts: Arc<Mutex<usize>>,
}

impl Starter for Fake {
    fn start<'a>(&'a self, name: &'a str, payload: &'a [u8]) -> StartFuture<'a> {
        Box::pin(async move {
            *self.starts.lock().expect("lock") += 1;
            let mut executions = self.executions.0.lock().expect("lock");
            match executions.get(name) {
                Some(p) if p.as_slice() == payload => Ok(Started::New {
                    execution_arn: None,
                }),
                Some(_) => Ok(Started::NameTaken),
                None if name.is_empty() => Err(StartError::Refused {
                    code: "InvalidParameterValueException".into(),
                }),
                None => {
                    executions.insert(name.to_owned(), payload.to_vec());
                    Ok(Started::New {
                        execution_arn: Some(format!("arn:…/durable-execution/{name}/1")),
                    })
                }
            }
        })
    }
}

fn settings() -> Dedup<crate::store::NoStore> {
    let env = Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")]);
    Dedup::read(&env, "order-dispatcher").expect("settings")
}

fn store() -> MemoryStore {
    crate::testing::memory_store(settings().settings())
}

/// The dispatcher keyed by the order's id (the payload's key, not the message id).
fn dispatcher(store: &MemoryStore, executions: &Executions) -> (SqsService, Arc<Mutex<usize>>) {
    let dedup = settings()
        .on(crate::store::Items::new(store.clone()))
        .identity("/order_id");
    let count = Arc::new(Mutex::new(0));
    let fake = Fake {
        executions: executions.clone(),
        starts: count.clone(),
    };
    (dedup.sqs(starts(fake)).expect("service"), count)
}

fn event(records: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records;
    event
}

fn failed(r: &SqsBatchResponse) -> Vec<&str> {
    let ids = r.batch_item_failures.iter();
    ids.map(|f| f.item_identifier.as_str()).collect()
}

fn labels(outcomes: &[(String, Outcome)]) -> Vec<&'static str> {
    outcomes.iter().map(|(_, o)| o.label()).collect()
}

const ORDER: &str = r#"{"order_id": "o-1", "total": 30}"#;

#[tokio::test]
async fn the_same_message_delivered_three_times_starts_one_execution() {
    let store = store();
    let executions = Executions::default();
    let (mut all, mut started) = (Vec::new(), 0);
    for _ in 0..3 {
        let (service, count) = dispatcher(&store, &executions);
        let (answer, outcomes) =
            with_outcomes(service.call_with(event(vec![sqs_record("m1", ORDER)]))).await;
        assert!(failed(&answer.expect("answer")).is_empty(), "{outcomes:?}");
        all.extend(labels(&outcomes));
        started += *count.lock().expect("lock");
    }
    assert_eq!(all, ["applied", "duplicate", "duplicate"]);
    assert_eq!(started, 1, "one start");
    assert_eq!(executions.names().len(), 1);
}

#[tokio::test]
async fn a_producer_retry_under_a_new_message_id_starts_none() {
    let store = store();
    let executions = Executions::default();
    let (service, starts) = dispatcher(&store, &executions);
    let (answer, outcomes) =
        with_outcomes(service.call_with(event(vec![sqs_record("m1", ORDER)]))).await;
    assert!(failed(&answer.expect("answer")).is_empty(), "{outcomes:?}");
    // The producer sends the same order again: a new message id, the same key.
    let (answer, outcomes) =
        with_outcomes(service.call_with(event(vec![sqs_record("m9", ORDER)]))).await;
    assert!(failed(&answer.expect("answer")).is_empty(), "{outcomes:?}");
    assert_eq!(labels(&outcomes), ["duplicate"]);
    assert_eq!(*starts.lock().expect("lock"), 1, "no second start");
    let name = &executions.names()[0];
    assert!(name.starts_with("order-dispatcher-"), "{name}");
}

#[tokio::test]
async fn a_start_that_finds_the_name_taken_is_a_duplicate() {
    let first = store();
    let executions = Executions::default();
    // An execution of this order's name, started with another payload (its mark gone).
    let (service, _) = dispatcher(&first, &executions);
    let (_, outcomes) = with_outcomes(service.call_with(event(vec![sqs_record(
        "m1",
        r#"{"order_id": "o-1", "total": 29}"#,
    )])))
    .await;
    assert_eq!(labels(&outcomes), ["applied"]);
    let fresh = store();
    let (service, starts) = dispatcher(&fresh, &executions);
    let (answer, outcomes) =
        with_outcomes(service.call_with(event(vec![sqs_record("m2", ORDER)]))).await;
    assert!(failed(&answer.expect("answer")).is_empty(), "{outcomes:?}");
    assert_eq!(labels(&outcomes), ["duplicate"]);
    assert_eq!(*starts.lock().expect("lock"), 1);
    assert_eq!(executions.names().len(), 1);
}

/// S16 at start: the dispatcher's starts are idempotent at Lambda only while it keeps the
/// execution's name.
#[test]
fn a_key_retention_past_the_names_life_is_refused_at_start() {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "test"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("DURABLE_RETENTION_DAYS", "1"),
        ("DURABLE_EXECUTION_TIMEOUT_SECONDS", "3600"),
        ("PROVIDER_KEY_RETENTION_SECONDS", "604800"),
    ]);
    let dedup = Dedup::read(&env, "order-dispatcher").expect("settings");
    let (dedup, _) = crate::testing::on_memory(dedup);
    let fake = Fake {
        executions: Executions::default(),
        starts: Arc::default(),
    };
    let err = dedup.sqs(starts(fake)).expect_err("refused");
    assert!(
        err.to_string().contains("PROVIDER_KEY_RETENTION_SECONDS"),
        "{err}"
    );
}
