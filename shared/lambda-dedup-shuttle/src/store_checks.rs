//! The memory store under concurrent callers, each a shuttle thread; its one lock is
//! shuttle's, so a schedule may switch callers at every call (and, in a store that took two
//! locks for one decision, between them). Each check is one schedule's body: it panics when
//! the schedule breaks the store's promise.

use lambda_dedup::create_once::CreateOnce;
use lambda_dedup::{
    Claim, Commit, CommitRequest, CreateOnceStore, Effect, Item, MarkStatus, MarkStore, Seen,
    StoreError,
};
use shuttle::future::block_on;
use shuttle::thread;

use crate::world::{LEASE, World, account, credit_effect, key};

/// How many callers race for one key.
const RACERS: usize = 3;

/// S4: of N concurrent claims of one key exactly one wins; the others see it in flight.
pub fn claims_of_one_key_have_one_winner() {
    let world = World::new();
    let racers: Vec<_> = (0..RACERS)
        .map(|_| {
            let store = world.store.clone();
            thread::spawn(move || block_on(store.claim(&key("acme", "e-1"), None, None)))
        })
        .collect();
    let claims: Vec<Claim> = racers
        .into_iter()
        .map(|t| t.join().expect("racer").expect("claim"))
        .collect();
    let won = claims
        .iter()
        .filter(|c| matches!(c, Claim::Claimed(_)))
        .count();
    assert_eq!(won, 1, "claims of one key: {claims:?}");
    assert!(
        claims
            .iter()
            .all(|c| matches!(c, Claim::Claimed(_) | Claim::Seen(Seen::InProgress { .. }))),
        "the losers see the claim in flight: {claims:?}"
    );
}

/// What the owner whose lease ran out (A) and the instance taking the event over (B) came to.
#[derive(Debug)]
struct Race {
    a_completed: Result<(), StoreError>,
    b_claimed: bool,
    b_completed: Option<Result<(), StoreError>>,
}

/// S6: A's lease has run out; A completes and releases while B claims (a takeover) and
/// completes. Fencing decides: A's completion and B's claim exclude each other, nothing of
/// A's fences B once B holds the claim, and exactly one of them completes the mark, with its
/// own result.
pub fn complete_release_and_takeover_are_fenced() {
    let world = World::new();
    let key = key("acme", "e-2");
    let Ok(Claim::Claimed(a)) = block_on(world.store.claim(&key, None, None)) else {
        panic!("the first claim wins");
    };
    // Past the lease and the clock-skew allowance: B may take the event over.
    world
        .clock
        .advance(LEASE + lambda_dedup::store::DEFAULT_CLOCK_SKEW * 2);
    let (store, lease) = (world.store.clone(), a.clone());
    let completes = thread::spawn(move || block_on(store.complete(&lease, Some("a"))));
    let (store, lease) = (world.store.clone(), a);
    let releases = thread::spawn(move || block_on(store.release(&lease)));
    let (store, k) = (world.store.clone(), key.clone());
    let takes_over = thread::spawn(move || match block_on(store.claim(&k, None, None)) {
        Ok(Claim::Claimed(b)) => Some(block_on(store.complete(&b, Some("b")))),
        _ => None,
    });
    let a_completed = completes.join().expect("A completes");
    let _ = releases.join().expect("A releases");
    let b_completed = takes_over.join().expect("B takes over");
    let race = Race {
        a_completed,
        b_claimed: b_completed.is_some(),
        b_completed,
    };
    assert!(
        !(race.a_completed.is_ok() && race.b_claimed),
        "A completed a claim B took over: {race:?}"
    );
    if let Some(b) = &race.b_completed {
        assert!(b.is_ok(), "B's own claim was fenced by A: {race:?}");
    }
    let mark = block_on(world.store.get(&key))
        .expect("get")
        .expect("the mark");
    let by = if race.a_completed.is_ok() { "a" } else { "b" };
    assert_eq!(mark.status, MarkStatus::Completed, "{race:?}");
    assert_eq!(
        mark.result.as_deref(),
        Some(by),
        "completed by {by}: {race:?}"
    );
}

/// S4, S5: two concurrent commits of one event (mark + credit) apply once; a reader that
/// looks at the credit and then at the mark never sees the credit without the mark, nor
/// more than one credit.
pub fn commits_are_all_or_nothing() {
    let world = World::new();
    let committers: Vec<_> = (0..2)
        .map(|_| {
            let store = world.store.clone();
            thread::spawn(move || {
                let (key, effects) = (key("acme", "e-3"), [credit_effect(&account("acme"))]);
                let request = CommitRequest {
                    key: &key,
                    fingerprint: None,
                    result: None,
                    effects: &effects,
                };
                block_on(store.commit(request))
            })
        })
        .collect();
    let reader = {
        let world = world.clone();
        thread::spawn(move || {
            let credited = world.balance(&account("acme"));
            let mark = block_on(world.store.get(&key("acme", "e-3"))).expect("get");
            assert!(credited <= 1, "credited {credited} times");
            assert!(
                credited == 0 || mark.is_some(),
                "the credit seen without its mark"
            );
        })
    };
    let commits: Vec<Commit> = committers
        .into_iter()
        .map(|t| t.join().expect("committer").expect("commit"))
        .collect();
    reader.join().expect("reader");
    let applied = commits
        .iter()
        .filter(|c| matches!(c, Commit::Applied))
        .count();
    assert_eq!(applied, 1, "commits of one event: {commits:?}");
    assert_eq!(world.balance(&account("acme")), 1, "the credit lands once");
}

/// Create-once (S5): of N concurrent creations of one item exactly one creates it; the others
/// are duplicates answered with its stored result.
pub fn create_once_creates_once() {
    let world = World::new();
    world.store.create_table("orders", "order");
    let racers: Vec<_> = (0..RACERS)
        .map(|i| {
            let store = world.store.clone();
            thread::spawn(move || {
                let key = key("acme", "o-1");
                let effect = Effect::put(
                    "orders",
                    Item::new()
                        .with("order", "o-1")
                        .with("by", format!("racer-{i}")),
                );
                let write = CreateOnce {
                    key: &key,
                    effect: &effect,
                    fingerprint: None,
                    result: Some("created"),
                };
                block_on(store.create_once(write))
            })
        })
        .collect();
    let created: Vec<Commit> = racers
        .into_iter()
        .map(|t| t.join().expect("racer").expect("create"))
        .collect();
    let applied = created
        .iter()
        .filter(|c| matches!(c, Commit::Applied))
        .count();
    assert_eq!(applied, 1, "creations of one item: {created:?}");
    assert!(
        created.iter().all(|c| match c {
            Commit::Applied => true,
            Commit::Seen(Seen::Duplicate(m)) => m.result.as_deref() == Some("created"),
            _ => false,
        }),
        "the others are duplicates with the stored result: {created:?}"
    );
}
