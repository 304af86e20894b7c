//! The memory store's ownership paths beyond the conformance suite: the cases mutation testing
//! (`cargo xtask mutants memory`, docs/RELIABILITY.md) found no test failing on — the commit's
//! bound on effects, and the audit helpers (`marks`, `purge_expired`) the simulation and the
//! tests read the store through. (The fence after the new owner completed is a case of the
//! suite now: `a_stale_owner_stays_fenced_after_the_new_owner_completed`.)

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::store::{DEFAULT_CLOCK_SKEW, MAX_EFFECTS};
use lambda_dedup::{
    Claim, Commit, DedupKey, Effect, Item, ManualClock, MarkStore, Retention, StoreError,
};
use lambda_dedup_conformance::request;
use lambda_dedup_memory::MemoryStore;

const LEASE: Duration = Duration::from_secs(30);
const RETENTION: Duration = Duration::from_secs(3_600);

fn store() -> (MemoryStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let retention = Retention::unchecked(RETENTION).expect("retention");
    let store = MemoryStore::new(retention)
        .with_clock(clock.clone())
        .with_lease(LEASE);
    (store, clock)
}

fn key(name: &str) -> DedupKey {
    DedupKey::from_stored(format!("ownership#{name}"))
}

#[tokio::test]
async fn a_commit_holds_the_mark_and_exactly_max_effects_not_one_more() {
    let (s, _) = store();
    s.create_table("t", "id");
    let effects: Vec<Effect> = (0..=MAX_EFFECTS)
        .map(|i| Effect::put("t", Item::new().with("id", format!("i{i}").as_str())))
        .collect();
    let k = key("bound");
    let full = s
        .commit(request(&k, None, None, &effects[..MAX_EFFECTS]))
        .await
        .expect("a commit of MAX_EFFECTS effects");
    assert_eq!(full, Commit::Applied);
    let over = key("over");
    let refused = s.commit(request(&over, None, None, &effects)).await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );
    assert!(s.get(&over).await.expect("get").is_none());
}

#[tokio::test]
async fn marks_lists_every_mark_and_purge_expired_deletes_only_those_past_their_ttl() {
    let (s, clock) = store();
    let (old, young) = (key("old"), key("young"));
    s.commit(request(&old, None, None, &[]))
        .await
        .expect("commit");
    clock.advance(RETENTION / 2);
    s.commit(request(&young, None, None, &[]))
        .await
        .expect("commit");
    let mut listed: Vec<String> = s
        .marks()
        .iter()
        .map(|m| m.key.as_str().to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, [old.as_str(), young.as_str()]);
    assert_eq!(s.purge_expired(), 0, "nothing past its TTL yet");
    clock.advance(RETENTION / 2 + Duration::from_secs(2));
    assert_eq!(s.purge_expired(), 1, "the old mark only");
    let left: Vec<String> = s
        .marks()
        .iter()
        .map(|m| m.key.as_str().to_owned())
        .collect();
    assert_eq!(left, [young.as_str()]);
    assert_eq!(s.purge_expired(), 0);
}

#[tokio::test]
async fn an_expired_lease_is_not_taken_over_with_another_payload() {
    let (s, clock) = store();
    let k = key("payload");
    let (a, b) = (
        lambda_dedup::Fingerprint::of_bytes(b"a"),
        lambda_dedup::Fingerprint::of_bytes(b"b"),
    );
    let Claim::Claimed(_) = s.claim(&k, Some(&a), None).await.expect("claim") else {
        panic!("the first claim wins");
    };
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW + Duration::from_secs(1));
    // The lease is over, but the payload is another: a conflict (S11), not a takeover.
    let other = s.claim(&k, Some(&b), None).await.expect("claim");
    assert!(!matches!(other, Claim::Claimed(_)), "{other:?}");
    let same = s.claim(&k, Some(&a), None).await.expect("claim");
    assert!(matches!(same, Claim::Claimed(_)), "{same:?}");
}
