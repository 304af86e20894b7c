//! The flows at their edges, on the in-memory store: an event's time against the clock and the
//! retention (S10), a result over the store's bound (S16), the warm cache with an age, and the
//! report and plan conversions the doors read. Each test is the one that fails on a mutant of
//! the engine the other tests let through (docs/RELIABILITY.md, "The engine against the
//! simulation").

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{Clock, Effect, Item, KeySpec, MAX_CLOCK_SKEW, ManualClock, Message, Scope};
use lambda_dedup_engine::{BatchReport, Deduplicator, HandlerError, Outcome, Plan, Reason};
use lambda_dedup_memory::MemoryStore;
use support::{
    RETENTION, a_whole_second, assert_a_cached_duplicate_skips_the_store, code, world_at,
};

/// A store on a clock at a whole second.
fn world() -> (MemoryStore, Arc<ManualClock>) {
    world_at(a_whole_second())
}

fn spec() -> KeySpec {
    KeySpec::cloudevents(Scope::new("test", "edges").expect("scope"), "tenantid")
}

/// A credit of 1 to `account`, with the CloudEvents `time` `at` when given.
fn credit(id: &str, account: &str, at: Option<SystemTime>) -> Message {
    let mut body = serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
        "id": id, "tenantid": "acme", "data": {"account": account, "amount": 1}});
    if let Some(t) = at {
        body["time"] = chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339().into();
    }
    Message {
        message_id: format!("m-{id}"),
        body: body.to_string().into_bytes(),
        ..Message::default()
    }
}

fn plan(event: &lambda_dedup::Derived) -> Result<Plan, HandlerError> {
    let data = HandlerError::data(event)?;
    let account = data["account"].as_str().unwrap_or("none");
    Ok(Plan {
        effects: vec![
            Effect::update("balances", Item::new().with("account", account))
                .expression("ADD balance :a")
                .value(":a", 1),
        ],
        result: None,
    })
}

#[tokio::test]
async fn an_event_ahead_by_more_than_the_clock_skew_or_beyond_retention_is_for_reconciliation() {
    let (store, clock) = world();
    let dedup = Deduplicator::new(spec(), store.clone());
    let now = clock.now();
    // A little ahead, and exactly the allowed skew ahead: clocks disagree that much; applied.
    let ahead = credit("a1", "a", Some(now + Duration::from_secs(1)));
    assert_eq!(dedup.transactional(&ahead, plan).await, Outcome::Applied);
    let at_skew = credit("a2", "a", Some(now + MAX_CLOCK_SKEW));
    assert_eq!(dedup.transactional(&at_skew, plan).await, Outcome::Applied);
    // A second beyond it: the mark table cannot judge it (S10).
    let beyond = credit(
        "a3",
        "a",
        Some(now + MAX_CLOCK_SKEW + Duration::from_secs(1)),
    );
    let out = dedup.transactional(&beyond, plan).await;
    assert_eq!(code(&out), Some(Reason::ImplausibleTime), "{out:?}");
    // Older than the retention: its mark may be gone, so it is not applied (S10).
    let late = credit("a4", "a", Some(now - RETENTION - Duration::from_secs(1)));
    let out = dedup.transactional(&late, plan).await;
    assert_eq!(code(&out), Some(Reason::LateEvent), "{out:?}");
    assert_eq!(store.marks().len(), 2, "only the two timely events marked");
}

/// The leased flow's stored result, read back by a duplicate.
async fn stored_result(store: &MemoryStore, result: &str, id: &str) -> Option<String> {
    let dedup = Deduplicator::new(spec(), store.clone())
        .with_provider_key_retention(Duration::from_secs(86_400));
    let m = credit(id, "a", None);
    let owned = result.to_owned();
    let first = dedup
        .leased(&m, None, |_, _| async move { Ok(Some(owned)) })
        .await;
    assert_eq!(first, Outcome::Applied);
    match dedup.leased(&m, None, |_, _| async { Ok(None) }).await {
        Outcome::Duplicate { result, .. } => result,
        other => panic!("a duplicate: {other:?}"),
    }
}

#[tokio::test]
async fn a_result_within_the_stores_bound_is_kept_and_one_over_it_as_its_digest() {
    let (store, _) = world();
    // A bound the digest (about 95 bytes) fits in.
    let store = store.with_max_result_bytes(128);
    let fits = "r".repeat(128);
    assert_eq!(
        stored_result(&store, &fits, "r1").await,
        Some(fits),
        "exactly the bound: kept as it is"
    );
    let over = "r".repeat(129);
    let digest = lambda_dedup::Fingerprint::of_bytes(over.as_bytes());
    let kept = stored_result(&store, &over, "r2").await.expect("a result");
    let kept: serde_json::Value = serde_json::from_str(&kept).expect("json");
    assert_eq!(
        kept,
        serde_json::json!({"digest": format!("sha256:{digest}"), "bytes": 129})
    );
}

#[tokio::test]
async fn a_cache_with_an_age_answers_a_known_duplicate_without_the_store() {
    let (store, _) = world();
    let dedup =
        Deduplicator::new(spec(), store.clone()).with_cache_for(100, Duration::from_secs(60));
    let m = credit("c1", "a", None);
    assert_a_cached_duplicate_skips_the_store(&store, &dedup, &m, plan).await;
}

#[test]
fn a_reports_outcomes_are_handed_over_in_batch_order() {
    let outcomes = vec![
        ("m1".to_owned(), Outcome::Applied),
        ("m2".to_owned(), Outcome::Conflict),
    ];
    let report = BatchReport::from_outcomes(outcomes.clone());
    assert_eq!(report.into_outcomes(), outcomes);
}

#[test]
fn a_plan_from_writes_holds_them_and_no_result() {
    let put = Effect::put("balances", Item::new().with("account", "a"));
    let one = Plan::from(put.clone());
    assert_eq!((one.effects.len(), one.result), (1, None));
    let two: Plan = Plan::from(vec![put.clone(), put]);
    assert_eq!((two.effects.len(), two.result), (2, None));
}
