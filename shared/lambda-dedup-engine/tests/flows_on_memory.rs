//! Fast tests of the flows, the runner and batch mode on the in-memory store (which passes the
//! DynamoDB store's conformance suite): every answer of the store mapped to its one outcome.

#[path = "flows_on_memory/prefilter_read_in_flight.rs"]
mod prefilter_read_in_flight;
mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{Effect, FaultKind, Item, KeySpec, ManualClock, Message, Scope, Value};
use lambda_dedup_engine::{
    Deduplicator, HandlerError, Invalid, InvalidCause, LeasedDeduplicator, Outcome, Plan, Reason,
    RetryCause, Transient, TransientCause, run_batch, run_batch_transactional,
};
use lambda_dedup_memory::{Injected, MemoryStore};
use support::{a_whole_second, assert_a_cached_duplicate_skips_the_store, code, world_at};

fn world() -> (MemoryStore, Arc<ManualClock>) {
    world_at(SystemTime::now())
}

fn spec() -> KeySpec {
    KeySpec::cloudevents(Scope::new("test", "flows").expect("scope"), "tenantid")
}

fn credit(message_id: &str, id: &str, account: &str, amount: i64) -> Message {
    Message {
        message_id: message_id.into(),
        body: serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": id, "tenantid": "acme", "data": {"account": account, "amount": amount}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    }
}

fn plan(event: &lambda_dedup::Derived) -> Result<Plan, HandlerError> {
    let data = HandlerError::data(event)?;
    let (Some(account), Some(amount)) = (data["account"].as_str(), data["amount"].as_i64()) else {
        return Err(HandlerError::invalid("data must be {account, amount}"));
    };
    Ok(Plan {
        effects: vec![
            Effect::update("balances", Item::new().with("account", account))
                .expression("ADD balance :a")
                .value(":a", amount),
        ],
        result: Some(format!("credited {amount}")),
    })
}

fn balance(store: &MemoryStore, account: &str) -> Option<Value> {
    store
        .item("balances", &Item::new().with("account", account))
        .and_then(|i| i.0.get("balance").cloned())
}

/// `m` through the leased flow with a call that only notes that it ran: the outcome, and
/// whether the call ran.
async fn leased_noting_the_call(dedup: &LeasedDeduplicator, m: &Message) -> (Outcome, bool) {
    let called = std::sync::atomic::AtomicBool::new(false);
    let out = dedup
        .leased(m, None, |_, _| {
            called.store(true, std::sync::atomic::Ordering::Relaxed);
            async { Ok(None) }
        })
        .await;
    (out, called.into_inner())
}

#[tokio::test]
async fn transactional_applies_once_and_tells_duplicates_from_conflicts() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone());
    let first = credit("m1", "e1", "a", 5);
    assert_eq!(dedup.transactional(&first, plan).await, Outcome::Applied);
    let again = credit("m2", "e1", "a", 5);
    assert!(matches!(
        dedup.transactional(&again, plan).await,
        Outcome::Duplicate { .. }
    ));
    let other_payload = credit("m3", "e1", "a", 500);
    assert_eq!(
        dedup.transactional(&other_payload, plan).await,
        Outcome::Conflict
    );
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())));
    let no_id = Message {
        message_id: "m4".into(),
        body: b"{}".to_vec(),
        ..Message::default()
    };
    assert!(code(&dedup.transactional(&no_id, plan).await).is_some());
}

#[tokio::test]
async fn a_store_fault_is_a_retry_and_a_lost_answer_a_duplicate_next_time() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone());
    let m = credit("m1", "e1", "a", 5);
    store.inject(Injected::Fail(FaultKind::Throttled));
    assert!(matches!(
        dedup.transactional(&m, plan).await,
        Outcome::Retry { .. }
    ));
    assert_eq!(balance(&store, "a"), None, "nothing written");
    store.inject(Injected::LoseAnswer(FaultKind::Timeout));
    assert!(matches!(
        dedup.transactional(&m, plan).await,
        Outcome::Retry { .. }
    ));
    assert!(matches!(
        dedup.transactional(&m, plan).await,
        Outcome::Duplicate { .. }
    ));
    assert_eq!(balance(&store, "a"), Some(Value::N("5".into())));
}

/// The work's refusal reaches the outcome typed, in both flows: a rule it breaks is rejected as
/// `invalid_payload` with the rule, a missing `data` with its own cause, and the account counts
/// each by its cause.
#[tokio::test]
async fn the_works_refusal_reaches_the_outcome_and_the_account_typed() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone());
    let no_data = Message {
        message_id: "m2".into(),
        body:
            br#"{"specversion":"1.0","type":"credit","source":"/bank","id":"e2","tenantid":"acme"}"#
                .to_vec(),
        ..Message::default()
    };
    let batch = vec![credit("m1", "e1", "a", 0), no_data];
    let rule = |e: &lambda_dedup::Derived| match HandlerError::data(e)?["amount"].as_i64() {
        Some(n) if n > 0 => plan(e),
        _ => Err(HandlerError::invalid("data.amount must be positive")),
    };
    let report = run_batch_transactional(batch, 10, &dedup, rule).await;
    let outcomes: Vec<_> = report.outcomes().iter().map(|(_, o)| o.clone()).collect();
    assert!(
        matches!(
            &outcomes[0],
            Outcome::Rejected {
                code: Reason::InvalidPayload,
                invalid: Some(Invalid::Rule(rule)),
                key: Some(_),
                ..
            } if rule == "data.amount must be positive"
        ),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            &outcomes[1],
            Outcome::Rejected {
                invalid: Some(Invalid::NoData),
                ..
            }
        ),
        "{outcomes:?}"
    );
    assert_eq!(report.account.invalid_for(InvalidCause::Rule), 1);
    assert_eq!(report.account.invalid_for(InvalidCause::NoData), 1);
    assert_eq!(report.account.rejections_for(Reason::InvalidPayload), 2);
    let leased = dedup.with_provider_key_retention(Duration::from_secs(86_400));
    let timed_out = leased
        .leased(&credit("m3", "e3", "a", 1), None, |_, _| async {
            Err(HandlerError::Transient(Transient::CallTimeout {
                limit: Duration::from_millis(200),
            }))
        })
        .await;
    let mut account = lambda_dedup_engine::Account::default();
    account.record(&timed_out);
    assert_eq!(account.transient_for(TransientCause::CallTimeout), 1);
    assert_eq!(account.retries_for(RetryCause::Transient), 1);
}

#[tokio::test]
async fn batch_mode_isolates_a_poison_and_keeps_the_rest() {
    let (store, _) = world();
    store
        .put_item(
            "balances",
            Item::new()
                .with("account", "poison")
                .with("balance", "text"),
        )
        .expect("seed");
    let dedup = Deduplicator::new(spec(), store.clone());
    let batch = vec![
        credit("m1", "e1", "a", 1),
        credit("m2", "e2", "poison", 1),
        credit("m3", "e3", "b", 2),
        credit("m4", "e1", "a", 1),
    ];
    let report = run_batch_transactional(batch, 10, &dedup, plan).await;
    assert!(report.account.closes());
    let outcomes: Vec<_> = report.outcomes().iter().map(|(_, o)| o.clone()).collect();
    assert_eq!(outcomes[0], Outcome::Applied);
    assert_eq!(code(&outcomes[1]), Some(Reason::EffectRefused));
    assert_eq!(outcomes[2], Outcome::Applied);
    assert!(
        matches!(outcomes[3], Outcome::Duplicate { .. } | Outcome::Applied),
        "{outcomes:?}"
    );
    assert_eq!(report.failures(), vec!["m2".to_owned()]);
    assert_eq!(balance(&store, "a"), Some(Value::N("1".into())));
    assert_eq!(balance(&store, "b"), Some(Value::N("2".into())));
    assert_eq!(balance(&store, "poison"), Some(Value::S("text".into())));
}

#[tokio::test]
async fn an_unreachable_store_retries_every_message_of_the_batch() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.unreachable());
    let batch = vec![credit("m1", "e1", "a", 1), credit("m2", "e2", "b", 1)];
    let report = run_batch_transactional(batch, 10, &dedup, plan).await;
    assert_eq!(report.failures(), vec!["m1".to_owned(), "m2".to_owned()]);
    assert!(
        report
            .outcomes()
            .iter()
            .all(|(_, o)| matches!(o, Outcome::Retry { .. }))
    );
    assert!(store.marks().is_empty());
}

#[tokio::test]
async fn the_warm_cache_answers_a_known_duplicate_without_the_store() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone()).with_cache(100);
    let m = credit("m1", "e1", "a", 1);
    assert_a_cached_duplicate_skips_the_store(&store, &dedup, &m, plan).await;
}

#[tokio::test]
async fn leased_calls_once_releases_on_failure_and_keeps_the_key() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone())
        .with_provider_key_retention(std::time::Duration::from_secs(86_400));
    let m = credit("m1", "e1", "a", 1);
    let keys = std::sync::Mutex::new(Vec::new());
    let failing = dedup
        .leased(&m, None, |_, lease| {
            keys.lock().expect("lock").push(lease.idempotency_key());
            async { Err(HandlerError::transient("provider down")) }
        })
        .await;
    assert!(
        matches!(
            &failing,
            Outcome::Retry {
                cause: RetryCause::Transient,
                transient: Some(Transient::Work(reason)),
                ..
            } if reason == "provider down"
        ),
        "{failing:?}"
    );
    // Released: the redelivery claims at once, under the same idempotency key.
    let ok = dedup
        .leased(&m, None, |_, lease| {
            keys.lock().expect("lock").push(lease.idempotency_key());
            async { Ok(Some("receipt".to_owned())) }
        })
        .await;
    assert_eq!(ok, Outcome::Applied);
    let keys = keys.into_inner().expect("lock");
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1]);
    let (dup, called) = leased_noting_the_call(&dedup, &m).await;
    assert!(matches!(dup, Outcome::Duplicate { .. }));
    assert!(!called, "a duplicate never calls out");
}

/// The leased flow, its provider keeping idempotency keys 60 s, taking an event over `after` its
/// first attempt, whose holder died during its call (its lease runs out, its claim stays): the
/// outcome, and whether the takeover called the provider. On a clock on a whole second, so the
/// store's millisecond times lose nothing: `after` is exactly the time between the attempts.
async fn takeover_after(after: Duration) -> (Outcome, bool) {
    let (store, clock) = world_at(a_whole_second());
    let dedup = Deduplicator::new(spec(), store.clone())
        .with_provider_key_retention(Duration::from_secs(60));
    let m = credit("m1", "e1", "a", 1);
    let key = spec().derive(&m).expect("key").key;
    lambda_dedup::MarkStore::claim(&store, &key, None, None)
        .await
        .expect("claim");
    clock.advance(after);
    leased_noting_the_call(&dedup, &m).await
}

#[tokio::test]
async fn leased_takeover_past_the_provider_key_retention_does_not_call() {
    let (out, called) = takeover_after(Duration::from_secs(120)).await;
    assert_eq!(code(&out), Some(Reason::ProviderKeyExpired));
    assert!(!called);
}

#[tokio::test]
async fn run_batch_keeps_fifo_order_and_stops_a_group_at_its_first_failure() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone());
    let mut batch: Vec<Message> = (1..=3)
        .map(|i| credit(&format!("m{i}"), &format!("e{i}"), "a", i))
        .collect();
    batch[1].body = b"not json".to_vec();
    for m in &mut batch {
        m.group_id = Some("g".into());
    }
    let report = run_batch(batch, 10, |m| {
        let dedup = &dedup;
        async move { dedup.transactional(&m, plan).await }
    })
    .await;
    assert!(report.account.closes());
    assert_eq!(report.outcomes()[0].1, Outcome::Applied);
    // The second is rejected; the third waits behind it in its group.
    assert!(report.failures().contains(&"m2"));
    assert!(report.failures().contains(&"m3"));
    assert_eq!(balance(&store, "a"), Some(Value::N("1".into())));
}

fn stamped(message_id: &str, id: &str, account: &str, seq: u64, amount: i64) -> Message {
    Message {
        message_id: message_id.into(),
        body: serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": id, "tenantid": "acme",
            "data": {"account": account, "amount": amount, "seq": seq}})
        .to_string()
        .into_bytes(),
        group_id: Some(account.into()),
        ..Message::default()
    }
}

fn credit_effect(event: &lambda_dedup::Derived) -> Result<Effect, HandlerError> {
    plan(event).map(|mut p| p.effects.remove(0))
}

#[tokio::test]
async fn sequence_mode_applies_in_order_skips_duplicates_and_stops_at_a_gap() {
    let (store, _) = world();
    let dedup = lambda_dedup_engine::SequencedDeduplicator::new(spec(), store.clone());
    let source = lambda_dedup::SequenceSource::pointer("/data/seq");
    let batch = vec![
        stamped("m1", "e1", "a", 1, 5),
        stamped("m2", "e2", "a", 2, 2),
        stamped("m3", "e2", "a", 2, 2),
        stamped("m4", "e4", "a", 4, 9),
        stamped("m5", "e5", "a", 5, 9),
    ];
    let calls = store.calls();
    let report = run_batch(batch, 10, |m| {
        let (dedup, source) = (&dedup, &source);
        async move { dedup.sequenced(&m, source, credit_effect).await }
    })
    .await;
    assert!(report.account.closes());
    let outcomes: Vec<_> = report.outcomes().iter().map(|(_, o)| o.clone()).collect();
    assert_eq!(outcomes[0], Outcome::Applied);
    assert_eq!(outcomes[1], Outcome::Applied);
    assert!(matches!(outcomes[2], Outcome::Duplicate { .. }));
    assert_eq!(code(&outcomes[3]), Some(Reason::SequenceGap));
    // The group stops at its first failure: 5 is not tried past the gap.
    assert_eq!(report.failures(), vec!["m4".to_owned(), "m5".to_owned()]);
    assert_eq!(balance(&store, "a"), Some(Value::N("7".into())));
    assert_eq!(store.calls() - calls, 4, "one store call per message tried");
    // The producer reusing sequence 2 for another payload is a conflict.
    let reused = stamped("m6", "e2", "a", 2, 50);
    assert_eq!(
        dedup.sequenced(&reused, &source, credit_effect).await,
        Outcome::Conflict
    );
    let unstamped = credit("m7", "e7", "a", 1);
    assert_eq!(
        code(&dedup.sequenced(&unstamped, &source, credit_effect).await),
        Some(Reason::SequenceMissing)
    );
}

#[tokio::test]
async fn leased_takeover_at_exactly_the_provider_key_retention_still_calls() {
    let (out, called) = takeover_after(Duration::from_secs(60)).await;
    assert_eq!(out, Outcome::Applied);
    assert!(
        called,
        "the provider still keeps the key: the takeover calls"
    );
}

#[tokio::test]
async fn the_duplicate_prefilter_answers_known_duplicates_and_commits_the_rest() {
    let (store, _) = world();
    let dedup = Deduplicator::new(spec(), store.clone()).with_duplicate_prefilter(true);
    let first = credit("m1", "e1", "a", 1);
    assert_eq!(dedup.transactional(&first, plan).await, Outcome::Applied);
    let batch = vec![first, credit("m2", "e2", "a", 2)];
    let report = run_batch_transactional(batch, 4, &dedup, plan).await;
    assert!(report.account.closes());
    assert!(
        matches!(report.outcomes()[0].1, Outcome::Duplicate { .. }),
        "{:?}",
        report.outcomes()
    );
    assert_eq!(report.outcomes()[1].1, Outcome::Applied);
    assert_eq!(balance(&store, "a"), Some(Value::N("3".into())));
}

#[test]
fn set_outcome_replaces_one_outcome_and_recounts_the_account() {
    let mut report = lambda_dedup_engine::BatchReport::from_outcomes(vec![
        ("m1".into(), Outcome::Applied),
        ("m2".into(), Outcome::retry(RetryCause::Store, "store")),
    ]);
    assert_eq!(report.failures(), ["m2"]);
    report.set_outcome("m2", Outcome::Applied);
    assert!(report.failures().is_empty());
    assert_eq!(report.outcomes()[1].1, Outcome::Applied);
    assert_eq!(report.account.applied, 2);
    assert!(report.account.closes());
}
