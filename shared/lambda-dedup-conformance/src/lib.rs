//! The conformance suite of `lambda_dedup::MarkStore`: the promises every store keeps (S4–S6,
//! S8, S9, S11, S13, S15, S16), each a case that speaks only through the trait and reads effect
//! items back through the store's own access path. The DynamoDB and memory stores pass it; a
//! third-party store passes it by implementing [`Harness`] and [`World`] (or [`EffectTables`],
//! made a world with [`world`]) and invoking [`suite!`]:
//!
//! ```ignore
//! struct Mine;
//! impl lambda_dedup_conformance::Harness for Mine {
//!     type Effects = MyEffects; // or ItemEffects, for a store of DynamoDB-style effects
//!     type Store = MyStore;     // the store's own type: the cases see its capabilities
//!     /* a fresh store and its tables per case */
//! }
//! lambda_dedup_conformance::suite!(Mine);
//! ```
//!
//! Each case gets a fresh [`World`] on a [`ManualClock`] it advances to expire leases and marks,
//! so a store under test must read its time from the clock it is given.
//!
//! A store holds what it is configured with in a [`lambda_dedup::StoreOptions`] and answers
//! [`MarkStore::options`] with it (the trait reads "now", retention and the result bound from
//! it); `lambda_dedup::store_options_builders!(field)` in the store's `impl` gives it the same
//! `with_lease`, `with_clock` and `with_max_result_bytes` as the stores of this repository, so
//! a harness builds it on the case's clock with `.with_clock(clock)`.
//!
//! # Effects of the store's own type
//! A store commits effects of its own type (`MarkStore<E>`). The cases that commit effects say
//! what each effect must do; the harness's [`Effects`] builds it in the store's terms
//! ([`ItemEffects`] for [`Effect`], DynamoDB writes). Effect tables hold items (attribute →
//! value), seeded and read back through [`World`], the store's own access path.
//!
//! # Capabilities
//! The cases of a mode a store may lack — sequence ([`SEQUENCE_CASES`]) and create-once
//! ([`CREATE_ONCE_CASES`]) — need the harness's [`Harness::Store`] to implement the mode's trait
//! ([`SequenceStore`], [`CreateOnceStore`]) and its effects to be [`ItemEffects`]; the harness
//! names the capabilities its store has in [`suite!`] (`capabilities: [sequence, create_once]`).
//! A store without a capability has no such cases: naming one it lacks does not compile.
//!
//! ```compile_fail,E0277
//! use lambda_dedup_conformance::{Harness, ItemEffects};
//! // A harness whose store may lack create-once mode cannot run its cases:
//! async fn run<H: Harness<Effects = ItemEffects>>(h: &H) {
//!     lambda_dedup_conformance::create_once_is_exclusive(h).await
//! }
//! ```
//!
//! ```
//! use lambda_dedup::CreateOnceStore;
//! use lambda_dedup_conformance::{Harness, ItemEffects};
//! // One whose store has it can:
//! async fn run<H: Harness<Effects = ItemEffects, Store: CreateOnceStore>>(h: &H) {
//!     lambda_dedup_conformance::create_once_is_exclusive(h).await
//! }
//! ```

//!
//! # Beyond the suite
//! A store's own tests (its server's features, many instances at once) share what [`kit`]
//! holds: [`server`] and [`unset`] for a server named by an environment variable, [`unique`]
//! names, [`TableNames`] for a world's effect tables, [`request`] for a commit's request, and
//! [`claims_at_once`] and [`commits_at_once`] for separate instances of the store racing on one
//! key.

#![warn(missing_docs)]

pub mod gate;
pub mod kit;
pub use kit::{
    TableNames, Tally, claims_at_once, commits_at_once, request, server, unique, unique_key, unset,
};

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{
    Claim, Clock, Commit, CommitRequest, CreateOnce, CreateOnceStore, DedupKey, Effect,
    Fingerprint, Item, Latest, LatestStore, LatestWrite, ManualClock, MarkStatus, MarkStore,
    Retention, Scope, Seen, SequenceStore, Sequencer, StoreError, Value,
};

/// A future a harness returns (object-safe traits cannot have `async fn`s).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How to make a fresh world for one case.
pub trait Harness: Send + Sync {
    /// How the store's effects are built.
    type Effects: Effects;

    /// The store under test as the cases hold it: its own type, so that the cases of the
    /// capabilities it implements can run on it (or `dyn MarkStore<…>`, for the core cases
    /// alone).
    type Store: MarkStore<<Self::Effects as Effects>::Effect> + ?Sized + 'static;

    /// A fresh store configured as `setup` says, with no marks and no effect tables yet.
    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<EffectOf<Self>, Self::Store>>>;
}

/// How a case wants its store configured.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Setup {
    /// How long the store keeps marks.
    pub retention: Retention,
    /// The longest lease it grants.
    pub lease: Duration,
    /// The clock it reads its time from; the case moves it to expire leases and marks.
    pub clock: Arc<ManualClock>,
}

/// The effect type of a harness's store.
pub type EffectOf<H> = <<H as Harness>::Effects as Effects>::Effect;

/// The effects the cases commit, in the store's own terms. Tables are those of
/// [`World::table`]: items keyed by one string attribute.
pub trait Effects: Send + Sync + 'static {
    /// The store's effect type.
    type Effect: Send + Sync + fmt::Debug + 'static;

    /// Adds `amount` to the number attribute `balance` of the item `account = account`,
    /// creating the item (at 0) if absent. Refused as it is (S15) when `balance` is not a
    /// number.
    fn credit(table: &str, account: &str, amount: i64) -> Self::Effect;
    /// Writes nothing; fails its condition ([`Commit::EffectRejected`]) unless an item
    /// `key_attr = key` exists.
    fn require(table: &str, key_attr: &str, key: &str) -> Self::Effect;
    /// An effect refused as it is, whatever the data (malformed: a syntax error).
    fn malformed(table: &str, account: &str) -> Self::Effect;
    /// Writes `item` (it holds `key_attr`), on the condition that no item with its key exists.
    fn create(table: &str, key_attr: &str, item: Item) -> Self::Effect;
    /// On the condition that the item `account = account` has `status` `"PENDING"` and a
    /// `balance` of at least `fee`: sets `status` to `"DONE"` and takes `fee` off `balance`.
    fn settle(table: &str, account: &str, fee: i64) -> Self::Effect;
    /// Deletes the item `key_attr = key`.
    fn delete(table: &str, key_attr: &str, key: &str) -> Self::Effect;
}

/// [`Effects`] for stores of [`Effect`] (DynamoDB writes): the DynamoDB and memory stores.
#[derive(Debug, Clone, Copy, Default)]
pub struct ItemEffects;

impl Effects for ItemEffects {
    type Effect = Effect;

    fn credit(table: &str, account: &str, amount: i64) -> Effect {
        item_credit(table, account, amount)
    }
    fn require(table: &str, key_attr: &str, key: &str) -> Effect {
        Effect::condition_check(
            table,
            Item::new().with(key_attr, key),
            &format!("attribute_exists({key_attr})"),
        )
    }
    fn malformed(table: &str, account: &str) -> Effect {
        Effect::update(table, Item::new().with("account", account))
            .expression("ADD ADD #b :a ,,")
            .name("#b", "balance")
            .value(":a", 1)
    }
    fn create(table: &str, key_attr: &str, item: Item) -> Effect {
        Effect::put(table, item).condition(&format!("attribute_not_exists({key_attr})"))
    }
    fn settle(table: &str, account: &str, fee: i64) -> Effect {
        Effect::update(table, Item::new().with("account", account))
            .expression("SET #s = :done, #b = #b - :fee")
            .condition("#s = :pending AND #b >= :fee")
            .name("#s", "status")
            .name("#b", "balance")
            .value(":done", "DONE")
            .value(":pending", "PENDING")
            .value(":fee", fee)
    }
    fn delete(table: &str, key_attr: &str, key: &str) -> Effect {
        Effect::delete(table, Item::new().with(key_attr, key))
    }
}

/// One case's store and its effect tables, read and written through the store's own access
/// path (not through the trait under test). Implement it, or implement [`EffectTables`] and
/// make the world of the store and its tables with [`world`].
pub trait World<E = Effect, S: MarkStore<E> + ?Sized = dyn MarkStore<E>>: Send + Sync {
    /// The store under test.
    fn store(&self) -> Arc<S>;
    /// A fresh effect table keyed by the string attribute `key_attr`; its name.
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String>;
    /// Writes `item` to `table` unconditionally (seeding).
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()>;
    /// The item at `key` in `table`, read strongly consistently.
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>>;
}

/// A case's effect tables, read and written through the store's own access path: a
/// [`World`] but for its store. [`world`] puts the two together.
pub trait EffectTables: Send + Sync {
    /// A fresh effect table keyed by the string attribute `key_attr`; its name.
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String>;
    /// Writes `item` to `table` unconditionally (seeding).
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()>;
    /// The item at `key` in `table`, read strongly consistently.
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>>;
}

/// The [`World`] of `store` (the store under test) and `tables` (its effect tables).
pub fn world<E, S, T>(store: Arc<S>, tables: T) -> Box<dyn World<E, S>>
where
    E: 'static,
    S: MarkStore<E> + ?Sized + 'static,
    T: EffectTables + 'static,
{
    Box::new(StoreAndTables {
        store,
        tables,
        effect: std::marker::PhantomData,
    })
}

struct StoreAndTables<E, S: ?Sized, T> {
    store: Arc<S>,
    tables: T,
    effect: std::marker::PhantomData<fn() -> E>,
}

impl<E, S: MarkStore<E> + ?Sized, T: EffectTables> World<E, S> for StoreAndTables<E, S, T> {
    fn store(&self) -> Arc<S> {
        self.store.clone()
    }
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        self.tables.table(key_attr)
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        self.tables.put(table, item)
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        self.tables.read(table, key)
    }
}

/// Every case of the suite that every store runs, by name.
pub const CASES: [&str; 16] = [
    "claims_are_exclusive",
    "commit_then_duplicate",
    "a_failed_condition_writes_nothing",
    "refused_writes_are_permanent_and_write_nothing",
    "another_fingerprint_is_a_conflict",
    "a_conflict_carries_the_mark_that_stands",
    "leases_expire_and_fence",
    "a_stale_owner_stays_fenced_after_the_new_owner_completed",
    "leases_are_held_past_their_end_by_the_clock_skew_allowance",
    "release_hands_over_at_once",
    "marks_expire_with_their_ttl",
    "leases_end_by_the_deadline",
    "results_are_bounded",
    "batch_commits_judge_each_request_alone",
    "effects_put_update_and_delete",
    "an_effect_that_changes_nothing_is_applied",
];

/// The cases of sequence mode, run on a store that implements [`SequenceStore`].
pub const SEQUENCE_CASES: [&str; 1] = ["sequence_mode_applies_in_order_and_names_the_rest"];

/// The cases of latest-wins mode, run on a store that implements [`LatestStore`].
pub const LATEST_CASES: [&str; 1] = ["latest_wins_supersedes_an_older_sequencer"];

/// The cases of create-once mode, run on a store that implements [`CreateOnceStore`].
pub const CREATE_ONCE_CASES: [&str; 2] =
    ["create_once_item_is_the_mark", "create_once_is_exclusive"];

/// One `#[tokio::test]` per case of the suite, on the harness `$harness` (an expression).
///
/// `suite!(harness, skip_if: reason)` skips every case when `reason` (an expression of type
/// `Option<String>`, evaluated in each test) is `Some`: for a store whose server is not there
/// (`cargo test` without it). A skip is written to stderr past the test harness's capture, so
/// it shows in every run.
///
/// `capabilities: [sequence, create_once, latest]` (after the harness, or after `skip_if`) adds
/// the cases of those modes ([`SEQUENCE_CASES`], [`CREATE_ONCE_CASES`], [`LATEST_CASES`]); each needs the harness's
/// store to implement the mode's trait, so naming a mode the store lacks does not compile.
#[macro_export]
macro_rules! suite {
    ($harness:expr) => {
        $crate::suite!($harness, capabilities: []);
    };
    ($harness:expr, capabilities: [$($capability:ident),* $(,)?]) => {
        $crate::suite!(
            $harness,
            skip_if: ::core::option::Option::<::std::string::String>::None,
            capabilities: [$($capability),*]
        );
    };
    ($harness:expr, skip_if: $skip:expr) => {
        $crate::suite!($harness, skip_if: $skip, capabilities: []);
    };
    ($harness:expr, skip_if: $skip:expr, capabilities: [$($capability:ident),* $(,)?]) => {
        $crate::suite!(@cases $harness; $skip;
            claims_are_exclusive,
            commit_then_duplicate,
            a_failed_condition_writes_nothing,
            refused_writes_are_permanent_and_write_nothing,
            another_fingerprint_is_a_conflict,
            a_conflict_carries_the_mark_that_stands,
            leases_expire_and_fence,
            a_stale_owner_stays_fenced_after_the_new_owner_completed,
            leases_are_held_past_their_end_by_the_clock_skew_allowance,
            release_hands_over_at_once,
            marks_expire_with_their_ttl,
            leases_end_by_the_deadline,
            results_are_bounded,
            batch_commits_judge_each_request_alone,
            effects_put_update_and_delete,
            an_effect_that_changes_nothing_is_applied,
        );
        $( $crate::suite!(@capability $capability; $harness; $skip); )*
    };
    (@capability sequence; $harness:expr; $skip:expr) => {
        $crate::suite!(@cases $harness; $skip;
            sequence_mode_applies_in_order_and_names_the_rest,
        );
    };
    (@capability latest; $harness:expr; $skip:expr) => {
        $crate::suite!(@cases $harness; $skip;
            latest_wins_supersedes_an_older_sequencer,
        );
    };
    (@capability create_once; $harness:expr; $skip:expr) => {
        $crate::suite!(@cases $harness; $skip;
            create_once_item_is_the_mark,
            create_once_is_exclusive,
        );
    };
    (@cases $harness:expr; $skip:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let skip: ::core::option::Option<::std::string::String> = $skip;
                if let ::core::option::Option::Some(why) = skip {
                    $crate::report(&format!("conformance: {} skipped: {why}", stringify!($case)));
                    return;
                }
                $crate::$case(&$harness).await;
            }
        )*
    };
}

/// Writes `line` to stderr, past the test harness's capture (which takes only `print!` and
/// `eprint!`), so a skip shows in a passing run too.
pub fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

const LEASE: Duration = Duration::from_secs(30);
const RETENTION: Duration = Duration::from_secs(3600);

fn scope() -> Scope {
    Scope::new("conformance", "suite").expect("a valid scope")
}

struct Case<E, S: MarkStore<E> + ?Sized> {
    world: Box<dyn World<E, S>>,
    store: Arc<S>,
    clock: Arc<ManualClock>,
    balances: String,
}

async fn case<H: Harness>(h: &H) -> Case<EffectOf<H>, H::Store> {
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let retention = Retention::unchecked(RETENTION).expect("retention");
    let setup = Setup {
        retention,
        lease: LEASE,
        clock: clock.clone(),
    };
    let world = h.world(setup).await;
    let store = world.store();
    let balances = world.table("account").await;
    Case {
        world,
        store,
        clock,
        balances,
    }
}

impl<E, S: MarkStore<E> + ?Sized> Case<E, S> {
    /// A number attribute of the item at `key_attr = key` in `table`.
    async fn number(&self, table: &str, key_attr: &str, key: &str, attr: &str) -> Option<i64> {
        let item = self
            .world
            .read(table, &Item::new().with(key_attr, key))
            .await?;
        match item.0.get(attr)? {
            Value::N(n) => n.parse().ok(),
            _ => None,
        }
    }
}

fn key() -> DedupKey {
    unique_key(&scope())
}

fn fp(s: &str) -> Fingerprint {
    Fingerprint::of_bytes(s.as_bytes())
}

fn item_credit(balances: &str, account: &str, amount: i64) -> Effect {
    Effect::update(balances, Item::new().with("account", account))
        .expression("ADD #b :a")
        .name("#b", "balance")
        .value(":a", amount)
}

impl<E, S: MarkStore<E> + ?Sized> Case<E, S> {
    /// An account whose balance is text: an `ADD` to it is refused for good (a poison).
    async fn poisoned_account(&self) -> String {
        let poisoned = unique("poison");
        self.world
            .put(
                &self.balances,
                Item::new()
                    .with("account", poisoned.as_str())
                    .with("balance", "text"),
            )
            .await;
        poisoned
    }

    async fn balance(&self, account: &str) -> Option<i64> {
        self.number(&self.balances, "account", account, "balance")
            .await
    }
}

/// S4: of many concurrent claims of one key, exactly one wins; the rest see it in progress.
pub async fn claims_are_exclusive<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let f = fp("a");
    let claims =
        futures::future::join_all((0..16).map(|_| c.store.claim(&k, Some(&f), None))).await;
    let won = claims
        .iter()
        .filter(|r| matches!(r, Ok(Claim::Claimed(_))))
        .count();
    assert_eq!(won, 1, "{claims:?}");
    for r in &claims {
        match r {
            Ok(Claim::Claimed(_)) | Ok(Claim::Seen(Seen::InProgress { .. })) => {}
            // DynamoDB may see the write change under a failed condition; never a second win.
            Err(StoreError::Contended(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// S5, S8: a commit writes the mark and its effect; a second is a duplicate with the stored
/// result and writes nothing more.
pub async fn commit_then_duplicate<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let f = fp("a");
    let account = unique("acct");
    let effects = [H::Effects::credit(&c.balances, &account, 5)];
    let first = c
        .store
        .commit(request(&k, Some(&f), Some("r1"), &effects))
        .await;
    assert_eq!(first.expect("commit"), Commit::Applied);
    let again = c
        .store
        .commit(request(&k, Some(&f), Some("r2"), &effects))
        .await
        .expect("commit");
    let Commit::Seen(Seen::Duplicate(mark)) = again else {
        panic!("expected a duplicate, got {again:?}");
    };
    assert_eq!(mark.result.as_deref(), Some("r1"));
    assert_eq!(c.balance(&account).await, Some(5), "applied once");
    let claim = c.store.claim(&k, Some(&f), None).await.expect("claim");
    assert!(
        matches!(claim, Claim::Seen(Seen::Duplicate(_))),
        "{claim:?}"
    );
    let got = c.store.get(&k).await.expect("get").expect("mark");
    assert_eq!(got.status, MarkStatus::Completed);
    assert_eq!(got.fingerprint.as_ref(), Some(&f));
}

/// S5: an effect whose condition fails leaves nothing: no mark, no other effect.
pub async fn a_failed_condition_writes_nothing<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let account = unique("acct");
    let effects = [
        H::Effects::credit(&c.balances, &account, 5),
        H::Effects::require(&c.balances, "account", "nobody"),
    ];
    let out = c
        .store
        .commit(request(&k, None, None, &effects))
        .await
        .expect("commit");
    assert_eq!(out, Commit::EffectRejected { index: 1 });
    assert_eq!(c.balance(&account).await, None, "no effect written");
    assert!(c.store.get(&k).await.expect("get").is_none(), "no mark");
}

/// S15: writes refused as they are (an ADD to a string; a malformed expression) are the
/// event's own permanent refusal, and nothing is written.
pub async fn refused_writes_are_permanent_and_write_nothing<H: Harness>(h: &H) {
    let c = case(h).await;
    let poisoned = c.poisoned_account().await;
    let k = key();
    let good = unique("acct");
    let effects = [
        H::Effects::credit(&c.balances, &good, 1),
        H::Effects::credit(&c.balances, &poisoned, 1),
    ];
    let err = c
        .store
        .commit(request(&k, None, None, &effects))
        .await
        .expect_err("refused");
    match &err {
        StoreError::Refused { position, .. } => assert_eq!(*position, Some(2), "{err}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!err.is_retryable());
    assert_eq!(c.balance(&good).await, None);
    assert!(c.store.get(&k).await.expect("get").is_none());

    let malformed = [H::Effects::malformed(&c.balances, &good)];
    let err = c
        .store
        .commit(request(&k, None, None, &malformed))
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::Refused { .. }), "{err:?}");
    assert!(!err.is_retryable());
}

/// S11: one key with another fingerprint is a conflict, for commit and claim alike.
pub async fn another_fingerprint_is_a_conflict<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let (a, b) = (fp("a"), fp("b"));
    c.store
        .commit(request(&k, Some(&a), None, &[]))
        .await
        .expect("commit");
    let commit = c.store.commit(request(&k, Some(&b), None, &[])).await;
    assert!(
        matches!(commit, Ok(Commit::Seen(Seen::Conflict { .. }))),
        "{commit:?}"
    );
    let claim = c.store.claim(&k, Some(&b), None).await;
    assert!(
        matches!(claim, Ok(Claim::Seen(Seen::Conflict { .. }))),
        "{claim:?}"
    );
}

/// The conflict `seen` must be: its fingerprints and the mark that stands.
fn conflicting<T: fmt::Debug>(
    seen: Option<&Seen>,
    got: &T,
) -> (Fingerprint, Fingerprint, lambda_dedup::Mark) {
    match seen {
        Some(Seen::Conflict {
            stored,
            offered,
            mark,
        }) => (stored.clone(), offered.clone(), (**mark).clone()),
        _ => panic!("expected a conflict, got {got:?}"),
    }
}

/// Each way a write of `k` under `offered` meets the mark `k` holds under `stored` — a
/// commit, a batch's commit, a claim — each one's conflict's mark, named by the way.
async fn conflicts_met<E, S: MarkStore<E> + ?Sized>(
    store: &S,
    k: &DedupKey,
    stored: &Fingerprint,
    offered: &Fingerprint,
) -> Vec<(lambda_dedup::Mark, &'static str)> {
    let seen = |got: &Result<Commit, StoreError>| match got {
        Ok(Commit::Seen(seen)) => Some(seen.clone()),
        _ => None,
    };
    let mut met = Vec::new();
    let got = store
        .commit(request(k, Some(offered), Some("r2"), &[]))
        .await;
    met.push((conflicting(seen(&got).as_ref(), &got), "commit"));
    let batch = [request(k, Some(offered), Some("r2"), &[])];
    let got = store.commit_batch(&batch).await;
    let one = got.first().and_then(seen);
    met.push((conflicting(one.as_ref(), &got), "batch commit"));
    let got = store.claim(k, Some(offered), None).await;
    let claimed = match &got {
        Ok(Claim::Seen(seen)) => Some(seen),
        _ => None,
    };
    met.push((conflicting(claimed, &got), "claim"));
    met.into_iter()
        .map(|((s, o, mark), how)| {
            assert_eq!((&s, &o), (stored, offered), "{how}: both fingerprints");
            (mark, how)
        })
        .collect()
}

/// S11 from the failed write alone (S4): a conflict carries the mark that stands as the
/// failed condition found it — completed with its answer, in flight under a live lease, or
/// released (its lease ended: nothing of it committed) — for a commit, a batch's commit and a
/// claim alike, so a caller that takes a released key over (the HTTP door) tells it from a
/// kept one with no second request.
pub async fn a_conflict_carries_the_mark_that_stands<H: Harness>(h: &H) {
    let c = case(h).await;
    let (a, b) = (fp("a"), fp("b"));
    let done = key();
    c.store
        .commit(request(&done, Some(&a), Some("r1"), &[]))
        .await
        .expect("commit");
    for (mark, how) in conflicts_met(&*c.store, &done, &a, &b).await {
        assert_eq!(mark.key, done, "{how}");
        assert_eq!(mark.status, MarkStatus::Completed, "{how}");
        assert_eq!(mark.result.as_deref(), Some("r1"), "{how}: its answer");
        assert_eq!(mark.fingerprint.as_ref(), Some(&a), "{how}");
        assert!(!mark.is_released(c.clock.now()), "{how}: kept");
    }

    let held = key();
    let Claim::Claimed(lease) = c.store.claim(&held, Some(&a), None).await.expect("claim") else {
        panic!("the first claim wins");
    };
    for (mark, how) in conflicts_met(&*c.store, &held, &a, &b).await {
        assert_eq!(mark.status, MarkStatus::InProgress, "{how}");
        assert_eq!(mark.owner.as_ref(), Some(&lease.owner), "{how}: its holder");
        assert!(mark.lease_is_live(c.clock.now()), "{how}: in flight");
        assert!(!mark.is_released(c.clock.now()), "{how}: kept");
    }

    let released = key();
    let Claim::Claimed(lease) = c
        .store
        .claim(&released, Some(&a), None)
        .await
        .expect("claim")
    else {
        panic!("the first claim wins");
    };
    c.store.release(&lease).await.expect("release");
    for (mark, how) in conflicts_met(&*c.store, &released, &a, &b).await {
        assert_eq!(mark.status, MarkStatus::InProgress, "{how}");
        assert_eq!(mark.fingerprint.as_ref(), Some(&a), "{how}");
        assert!(mark.is_released(c.clock.now()), "{how}: released");
    }
    assert!(
        c.store
            .get(&released)
            .await
            .expect("get")
            .is_some_and(|m| m.status == MarkStatus::InProgress && m.fingerprint == Some(a)),
        "nothing of the conflicting writes was written"
    );
}

/// S6: a live lease blocks; an ended one is taken over, keeping the first attempt's time; the
/// dead owner is fenced off, the new one completes (twice, harmlessly).
pub async fn leases_expire_and_fence<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let f = fp("a");
    let Claim::Claimed(first) = c.store.claim(&k, Some(&f), None).await.expect("claim") else {
        panic!("first claim must win");
    };
    let blocked = c.store.commit(request(&k, Some(&f), None, &[])).await;
    assert!(
        matches!(blocked, Ok(Commit::Seen(Seen::InProgress { .. }))),
        "{blocked:?}"
    );
    c.clock
        .advance(LEASE + lambda_dedup::store::DEFAULT_CLOCK_SKEW + Duration::from_secs(1));
    let Claim::Claimed(second) = c.store.claim(&k, Some(&f), None).await.expect("claim") else {
        panic!("takeover must win");
    };
    assert_eq!(second.first_attempt_at, first.first_attempt_at, "S16");
    assert_ne!(second.owner, first.owner);
    let fenced = c.store.complete(&first, Some("late")).await;
    assert!(
        matches!(fenced, Err(StoreError::Fenced { .. })),
        "{fenced:?}"
    );
    let fenced = c.store.release(&first).await;
    assert!(
        matches!(fenced, Err(StoreError::Fenced { .. })),
        "{fenced:?}"
    );
    c.store
        .complete(&second, Some("ok"))
        .await
        .expect("complete");
    c.store
        .complete(&second, Some("ok"))
        .await
        .expect("complete twice");
    let mark = c.store.get(&k).await.expect("get").expect("mark");
    assert_eq!(mark.status, MarkStatus::Completed);
    assert_eq!(mark.result.as_deref(), Some("ok"));
}

/// S6 after the takeover's completion: a stale owner's late completion or release finds the
/// mark completed, but not by it, and is fenced — not taken for a retry of its own completion
/// — and the new owner's result stands.
pub async fn a_stale_owner_stays_fenced_after_the_new_owner_completed<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let Claim::Claimed(first) = c.store.claim(&k, None, None).await.expect("claim") else {
        panic!("first claim must win");
    };
    c.clock
        .advance(LEASE + lambda_dedup::store::DEFAULT_CLOCK_SKEW + Duration::from_secs(1));
    let Claim::Claimed(second) = c.store.claim(&k, None, None).await.expect("claim") else {
        panic!("takeover must win");
    };
    c.store
        .complete(&second, Some("new"))
        .await
        .expect("complete");
    let late = c.store.complete(&first, Some("late")).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    let late = c.store.release(&first).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    let mark = c.store.get(&k).await.expect("get").expect("mark");
    assert_eq!(mark.status, MarkStatus::Completed);
    assert_eq!(mark.result.as_deref(), Some("new"));
}

/// S6 across clocks: the owner is given the lease's end, and the store records it held the
/// clock-skew allowance longer, so another instance whose clock runs ahead by less than the
/// allowance — here, this store's clock moved past the owner's end but not past the allowance —
/// finds it in progress; once the allowance has passed too, it takes the claim over.
pub async fn leases_are_held_past_their_end_by_the_clock_skew_allowance<H: Harness>(h: &H) {
    let c = case(h).await;
    let skew = lambda_dedup::store::DEFAULT_CLOCK_SKEW;
    let k = key();
    let f = fp("a");
    let claimed_at = c.clock.now();
    let Claim::Claimed(first) = c.store.claim(&k, Some(&f), None).await.expect("claim") else {
        panic!("first claim must win");
    };
    let given = first
        .expires_at
        .duration_since(claimed_at)
        .unwrap_or_default();
    assert!(
        given <= LEASE && given + Duration::from_millis(1) >= LEASE,
        "the owner is given the lease itself: {given:?}"
    );
    let mark = c.store.get(&k).await.expect("get").expect("mark");
    let held = mark.lease_expires_at.expect("a lease");
    let recorded = held.duration_since(first.expires_at).unwrap_or_default();
    assert!(
        recorded + Duration::from_millis(1) >= skew && recorded <= skew,
        "recorded held the allowance past the owner's end: {recorded:?}"
    );
    // Past the owner's end, within the allowance: a clock that far ahead does not take over.
    c.clock.advance(LEASE + skew / 2);
    let early = c.store.claim(&k, Some(&f), None).await.expect("claim");
    assert!(
        matches!(early, Claim::Seen(Seen::InProgress { .. })),
        "taken over within the skew allowance: {early:?}"
    );
    c.clock.advance(skew / 2 + Duration::from_millis(10));
    let Claim::Claimed(second) = c.store.claim(&k, Some(&f), None).await.expect("claim") else {
        panic!("past the allowance the claim is taken over");
    };
    assert_ne!(second.owner, first.owner);
}

/// S6: a release ends the lease at once and keeps the mark's first attempt; a redelivery takes
/// it over; the released lease can neither complete nor release the new claim.
pub async fn release_hands_over_at_once<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let Claim::Claimed(first) = c.store.claim(&k, None, None).await.expect("claim") else {
        panic!("claim must win");
    };
    c.store.release(&first).await.expect("release");
    c.store.release(&first).await.expect("release twice");
    let Claim::Claimed(second) = c.store.claim(&k, None, None).await.expect("claim") else {
        panic!("a released claim is taken over at once");
    };
    assert_eq!(second.first_attempt_at, first.first_attempt_at, "S16");
    assert!(matches!(
        c.store.complete(&first, None).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(matches!(
        c.store.release(&first).await,
        Err(StoreError::Fenced { .. })
    ));
    // Releasing a key never claimed is harmless.
    let Claim::Claimed(other) = c.store.claim(&key(), None, None).await.expect("claim") else {
        panic!("claim must win");
    };
    let never = lambda_dedup::Lease {
        key: key(),
        ..other
    };
    c.store.release(&never).await.expect("nothing to release");
}

/// S9: past its TTL a mark counts as absent, though it may still be stored: a new claim starts a
/// new chain of attempts.
pub async fn marks_expire_with_their_ttl<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let f = fp("a");
    c.store
        .commit(request(&k, Some(&f), None, &[]))
        .await
        .expect("commit");
    c.clock.advance(RETENTION + Duration::from_secs(2));
    assert!(c.store.get(&k).await.expect("get").is_none());
    let Claim::Claimed(lease) = c
        .store
        .claim(&k, Some(&fp("b")), None)
        .await
        .expect("claim")
    else {
        panic!("an expired mark is absent, conflict or not");
    };
    let now = c.clock.now();
    let age = now
        .duration_since(lease.first_attempt_at)
        .unwrap_or_default();
    assert!(age < Duration::from_secs(1), "a new chain starts now");
}

/// S6: a claim's lease is cut to the caller's deadline, and a deadline already passed is refused.
pub async fn leases_end_by_the_deadline<H: Harness>(h: &H) {
    let c = case(h).await;
    let now = c.clock.now();
    let passed = c.store.claim(&key(), None, Some(now)).await;
    assert!(matches!(passed, Err(StoreError::Invalid(_))), "{passed:?}");
    let deadline = now + Duration::from_secs(5);
    let Claim::Claimed(lease) = c
        .store
        .claim(&key(), None, Some(deadline))
        .await
        .expect("claim")
    else {
        panic!("claim must win");
    };
    assert!(lease.expires_at <= deadline);
}

/// S8: a result over the store's bound is refused before anything is written.
pub async fn results_are_bounded<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let big = "x".repeat(c.store.max_result_bytes() + 1);
    let out = c.store.commit(request(&k, None, Some(&big), &[])).await;
    assert!(matches!(out, Err(StoreError::Invalid(_))), "{out:?}");
    assert!(c.store.get(&k).await.expect("get").is_none());
}

/// S5, S12: a batch commit gives each request what a commit alone would: goods applied, a
/// refused one refused, a failed condition rejected, a duplicate seen.
pub async fn batch_commits_judge_each_request_alone<H: Harness>(h: &H) {
    let c = case(h).await;
    let poisoned = c.poisoned_account().await;
    let done = key();
    c.store
        .commit(request(&done, None, None, &[]))
        .await
        .expect("commit");
    let keys: Vec<DedupKey> = (0..5).map(|_| key()).collect();
    let accounts: Vec<String> = (0..5).map(|_| unique("acct")).collect();
    let credit = H::Effects::credit;
    let effects = vec![
        vec![credit(&c.balances, &accounts[0], 1)],
        vec![credit(&c.balances, &poisoned, 1)],
        vec![
            credit(&c.balances, &accounts[2], 1),
            H::Effects::require(&c.balances, "account", "nobody"),
        ],
        vec![credit(&c.balances, &accounts[3], 1)],
        vec![credit(&c.balances, &accounts[4], 1)],
    ];
    let mut requests: Vec<CommitRequest<'_, EffectOf<H>>> = keys
        .iter()
        .zip(&effects)
        .map(|(k, e)| request(k, None, None, e))
        .collect();
    requests.push(request(&done, None, None, &[]));
    let results = c.store.commit_batch(&requests).await;
    assert!(matches!(results[0], Ok(Commit::Applied)), "{results:?}");
    assert!(
        matches!(results[1], Err(StoreError::Refused { .. })),
        "{results:?}"
    );
    assert!(
        matches!(results[2], Ok(Commit::EffectRejected { index: 1 })),
        "{results:?}"
    );
    assert!(matches!(results[3], Ok(Commit::Applied)), "{results:?}");
    assert!(matches!(results[4], Ok(Commit::Applied)), "{results:?}");
    assert!(
        matches!(results[5], Ok(Commit::Seen(Seen::Duplicate(_)))),
        "{results:?}"
    );
    for (i, want) in [Some(1), None, None, Some(1), Some(1)]
        .into_iter()
        .enumerate()
    {
        assert_eq!(c.balance(&accounts[i]).await, want, "account {i}");
    }
    assert!(c.store.get(&keys[1]).await.expect("get").is_none());
    assert!(c.store.get(&keys[2]).await.expect("get").is_none());
}

/// Effects create (on a condition), update with conditions, and delete items.
pub async fn effects_put_update_and_delete<H: Harness>(h: &H) {
    let c = case(h).await;
    let account = unique("acct");
    let put = [H::Effects::create(
        &c.balances,
        "account",
        Item::new()
            .with("account", account.as_str())
            .with("balance", 10)
            .with("status", "PENDING"),
    )];
    let out = c.store.commit(request(&key(), None, None, &put)).await;
    assert_eq!(out.expect("commit"), Commit::Applied);
    let again = c.store.commit(request(&key(), None, None, &put)).await;
    assert_eq!(again.expect("commit"), Commit::EffectRejected { index: 0 });
    let confirm = [H::Effects::settle(&c.balances, &account, 3)];
    let out = c.store.commit(request(&key(), None, None, &confirm)).await;
    assert_eq!(out.expect("commit"), Commit::Applied);
    let item = c
        .world
        .read(&c.balances, &Item::new().with("account", account.as_str()))
        .await
        .expect("item");
    assert_eq!(item.0.get("status"), Some(&Value::S("DONE".into())));
    assert_eq!(item.0.get("balance"), Some(&Value::N("7".into())));
    let again = c.store.commit(request(&key(), None, None, &confirm)).await;
    assert_eq!(again.expect("commit"), Commit::EffectRejected { index: 0 });
    let delete = [H::Effects::delete(&c.balances, "account", &account)];
    let out = c.store.commit(request(&key(), None, None, &delete)).await;
    assert_eq!(out.expect("commit"), Commit::Applied);
    assert!(c.balance(&account).await.is_none());
}

/// S5: only an effect with a condition fails it; one that changes nothing (the delete of an
/// item that is not there) is applied with its event's mark, and the redelivery is a
/// duplicate.
pub async fn an_effect_that_changes_nothing_is_applied<H: Harness>(h: &H) {
    let c = case(h).await;
    let k = key();
    let absent = unique("absent");
    let delete = [H::Effects::delete(&c.balances, "account", &absent)];
    let out = c
        .store
        .commit(request(&k, None, Some("done"), &delete))
        .await;
    assert_eq!(out.expect("commit"), Commit::Applied);
    let again = c.store.commit(request(&k, None, None, &delete)).await;
    assert!(
        matches!(again, Ok(Commit::Seen(Seen::Duplicate(_)))),
        "{again:?}"
    );
}

/// Latest-wins mode: an event commits its mark, its effects and its object's high-water
/// sequencer together; another event of the object with a sequencer at or below the stored one
/// is superseded and writes nothing (not even its mark); a redelivery of the applied event is
/// answered by its mark first; the high-water item is in the store's own high-water table.
pub async fn latest_wins_supersedes_an_older_sequencer<H>(h: &H)
where
    H: Harness<Effects = ItemEffects>,
    H::Store: LatestStore,
{
    let c = case(h).await;
    let account = unique("acct");
    let object = unique_key(&scope());
    let (plus5, plus2) = (
        [item_credit(&c.balances, &account, 5)],
        [item_credit(&c.balances, &account, 2)],
    );
    let (k1, k2, k3, k4) = (key(), key(), key(), key());
    let latest = |k: &'static str| Sequencer::parse(k).expect("sequencer");
    let (s0a, s0b, s0c) = (latest("0A"), latest("0B"), latest("0C"));
    let (store, on) = (&*c.store, &object);
    let commit = move |k, effects, sequencer| async move {
        let write = LatestWrite {
            object: on,
            sequencer,
        };
        store
            .commit_latest(request(k, None, None, effects), write)
            .await
            .expect("commit")
    };
    assert_eq!(
        commit(&k1, &plus5, &s0b).await,
        Latest::Committed(Commit::Applied)
    );
    assert_eq!(commit(&k2, &plus2, &s0a).await, Latest::Superseded);
    assert_eq!(
        c.balance(&account).await,
        Some(5),
        "an older event writes nothing"
    );
    assert!(store.get(&k2).await.expect("get").is_none(), "nor its mark");
    assert!(matches!(
        commit(&k1, &plus5, &s0b).await,
        Latest::Committed(Commit::Seen(Seen::Duplicate(_)))
    ));
    assert_eq!(commit(&k4, &plus2, &s0b).await, Latest::Superseded, "equal");
    assert_eq!(
        commit(&k3, &plus2, &s0c).await,
        Latest::Committed(Commit::Applied)
    );
    assert_eq!(c.balance(&account).await, Some(7));
    let hw = c
        .world
        .read(
            store.high_water_table(),
            &Item::new().with(lambda_dedup::latest::HIGH_WATER_KEY, object.as_str()),
        )
        .await
        .expect("the high-water item");
    assert_eq!(
        hw.0.get(lambda_dedup::latest::HIGH_WATER_SEQUENCER),
        Some(&Value::S(s0c.as_str().to_owned()))
    );
}

async fn seq<S: SequenceStore + ?Sized>(
    store: &S,
    key: &DedupKey,
    effect: &Effect,
    sequence: u64,
    fingerprint: Option<&Fingerprint>,
) -> Result<lambda_dedup::SequenceOutcome, StoreError> {
    store
        .apply_in_sequence(lambda_dedup::SequencedWrite {
            key,
            effect,
            sequence,
            first: 1,
            fingerprint,
        })
        .await
}

/// Sequence mode: the next sequence applies with its high-water in one write; at or below the
/// high-water is a duplicate, the high-water's own with another payload a conflict, anything
/// else a gap; the effect's own condition and DynamoDB's refusals still hold.
pub async fn sequence_mode_applies_in_order_and_names_the_rest<H>(h: &H)
where
    H: Harness<Effects = ItemEffects>,
    H::Store: SequenceStore,
{
    use lambda_dedup::SequenceOutcome as S;
    let c = case(h).await;
    let k = key();
    let (a, b) = (fp("a"), fp("b"));
    let account = unique("acct");
    let effect = |amount: i64| item_credit(&c.balances, &account, amount);
    let (plus5, plus2) = (effect(5), effect(2));
    // (effect, sequence, fingerprint, what the store says, the balance after)
    let steps = [
        (&plus5, 1, &a, S::Applied, 5),
        (&plus5, 1, &a, S::Duplicate { high_water: 1 }, 5),
        (&plus5, 1, &b, S::Conflict { high_water: 1 }, 5),
        (
            &plus2,
            3,
            &b,
            S::Gap {
                expected: 2,
                got: 3,
            },
            5,
        ),
        (&plus2, 2, &b, S::Applied, 7),
        (&plus5, 1, &a, S::Duplicate { high_water: 2 }, 7),
    ];
    for (i, (effect, sequence, fingerprint, want, balance)) in steps.into_iter().enumerate() {
        let got = seq(&*c.store, &k, effect, sequence, Some(fingerprint)).await;
        assert_eq!(got.expect("apply"), want, "step {i}");
        assert_eq!(c.balance(&account).await, Some(balance), "step {i}");
    }
    let stored = c
        .world
        .read(&c.balances, &Item::new().with("account", account.as_str()))
        .await
        .expect("item");
    assert_eq!(
        stored.0.get(lambda_dedup::sequence::HIGH_WATER),
        Some(&Value::N("2".into()))
    );

    let fresh = unique("acct");
    let first_missing = item_credit(&c.balances, &fresh, 1);
    assert_eq!(
        seq(&*c.store, &k, &first_missing, 2, None)
            .await
            .expect("apply"),
        S::Gap {
            expected: 1,
            got: 2
        }
    );
    let guarded = item_credit(&c.balances, &fresh, 1).condition("attribute_exists(account)");
    assert_eq!(
        seq(&*c.store, &k, &guarded, 1, None).await.expect("apply"),
        S::EffectRejected
    );
    assert_eq!(c.balance(&fresh).await, None);

    let poisoned = c.poisoned_account().await;
    let poison = item_credit(&c.balances, &poisoned, 1);
    let err = seq(&*c.store, &k, &poison, 1, None)
        .await
        .expect_err("refused");
    assert!(!err.is_retryable(), "{err:?}");
}

fn create<'a>(
    key: &'a DedupKey,
    effect: &'a Effect,
    fingerprint: Option<&'a Fingerprint>,
    result: Option<&'a str>,
) -> CreateOnce<'a> {
    CreateOnce {
        key,
        effect,
        fingerprint,
        result,
    }
}

/// Create-once mode (S5, S8, S11): the item carries the event's key, fingerprint and result and
/// is the only write — no mark; a second delivery is a duplicate answered with the first result
/// and changes nothing, another payload a conflict, another event's item or one written by other
/// means is never overwritten; the guarantee has no retention window (it lasts while the item
/// does), and deleting the item forgets the event.
pub async fn create_once_item_is_the_mark<H>(h: &H)
where
    H: Harness<Effects = ItemEffects>,
    H::Store: CreateOnceStore,
{
    use lambda_dedup::create_once::{CREATED_FINGERPRINT, CREATED_KEY, CREATED_RESULT};
    let c = case(h).await;
    let orders = c.world.table("order_id").await;
    let (k, (a, b)) = (key(), (fp("a"), fp("b")));
    let id = unique("order");
    let order_key = Item::new().with("order_id", id.as_str());
    let order = |total: i64| Effect::put(&orders, order_key.clone().with("total", total));
    let (first, changed) = (order(5), order(6));
    let out = c
        .store
        .create_once(create(&k, &first, Some(&a), Some("r1")))
        .await;
    assert_eq!(out.expect("create"), Commit::Applied);
    let stored = c.world.read(&orders, &order_key).await.expect("the item");
    assert_eq!(stored.0.get("total"), Some(&Value::N("5".into())));
    let carried = [(CREATED_KEY, k.as_str()), (CREATED_FINGERPRINT, a.as_str())];
    for (attr, want) in carried.into_iter().chain([(CREATED_RESULT, "r1")]) {
        assert_eq!(stored.0.get(attr), Some(&Value::S(want.into())), "{attr}");
    }
    assert!(
        c.store.get(&k).await.expect("get").is_none(),
        "no mark item"
    );

    // Long past the mark table's retention, the item still decides.
    c.clock.advance(RETENTION * 10);
    let again = c
        .store
        .create_once(create(&k, &first, Some(&a), Some("r2")))
        .await;
    let Ok(Commit::Seen(Seen::Duplicate(mark))) = again else {
        panic!("expected a duplicate, got {again:?}");
    };
    assert_eq!(mark.result.as_deref(), Some("r1"));
    assert_eq!(mark.fingerprint.as_ref(), Some(&a));
    let conflict = c
        .store
        .create_once(create(&k, &changed, Some(&b), None))
        .await;
    assert!(
        matches!(conflict, Ok(Commit::Seen(Seen::Conflict { .. }))),
        "{conflict:?}"
    );
    let other_event = c
        .store
        .create_once(create(&key(), &changed, Some(&a), None))
        .await;
    assert_eq!(
        other_event.expect("create"),
        Commit::EffectRejected { index: 0 }
    );
    assert_eq!(
        c.world.read(&orders, &order_key).await,
        Some(stored),
        "unchanged"
    );

    create_once_keeps_what_it_did_not_create(&c, &orders).await;

    // Deleting the item forgets the event: the next delivery creates it again.
    let delete = [H::Effects::delete(&orders, "order_id", &id)];
    let out = c.store.commit(request(&key(), None, None, &delete)).await;
    assert_eq!(out.expect("delete"), Commit::Applied);
    let out = c
        .store
        .create_once(create(&k, &first, Some(&a), None))
        .await;
    assert_eq!(out.expect("create"), Commit::Applied);

    create_once_refuses_what_it_cannot_be(&c, &orders).await;
}

/// Create-once: an item written by other means is not overwritten; the effect's own
/// condition holds too.
async fn create_once_keeps_what_it_did_not_create<S: CreateOnceStore + ?Sized>(
    c: &Case<Effect, S>,
    orders: &str,
) {
    let seeded = unique("order");
    let seeded_key = Item::new().with("order_id", seeded.as_str());
    c.world
        .put(orders, seeded_key.clone().with("total", 1))
        .await;
    let over = Effect::put(orders, seeded_key.clone().with("total", 9));
    let out = c.store.create_once(create(&key(), &over, None, None)).await;
    assert_eq!(out.expect("create"), Commit::EffectRejected { index: 0 });
    assert_eq!(
        c.number(orders, "order_id", &seeded, "total").await,
        Some(1)
    );
    let guarded = Effect::put(
        orders,
        Item::new().with("order_id", unique("order").as_str()),
    )
    .condition("attribute_exists(order_id)");
    let out = c
        .store
        .create_once(create(&key(), &guarded, None, None))
        .await;
    assert_eq!(out.expect("create"), Commit::EffectRejected { index: 0 });
}

/// Create-once takes only a put of an item without the library's attributes; its refusals
/// are permanent.
async fn create_once_refuses_what_it_cannot_be<S: CreateOnceStore + ?Sized>(
    c: &Case<Effect, S>,
    orders: &str,
) {
    let update = item_credit(&c.balances, &unique("acct"), 1);
    let err = c
        .store
        .create_once(create(&key(), &update, None, None))
        .await;
    assert!(matches!(err, Err(StoreError::Invalid(_))), "{err:?}");
    let big = "x".repeat(c.store.max_result_bytes() + 1);
    let fresh = Effect::put(
        orders,
        Item::new().with("order_id", unique("order").as_str()),
    );
    let err = c
        .store
        .create_once(create(&key(), &fresh, None, Some(&big)))
        .await;
    assert!(matches!(err, Err(StoreError::Invalid(_))), "{err:?}");
    let huge = Effect::put(
        orders,
        Item::new()
            .with("order_id", unique("order").as_str())
            .with("blob", "x".repeat(401 * 1024)),
    );
    let err = c
        .store
        .create_once(create(&key(), &huge, None, None))
        .await
        .expect_err("refused");
    assert!(!err.is_retryable(), "{err:?}");
}

/// S4 for create-once: of many concurrent deliveries of one event, exactly one creates the
/// item; every other is a duplicate.
pub async fn create_once_is_exclusive<H>(h: &H)
where
    H: Harness<Effects = ItemEffects>,
    H::Store: CreateOnceStore,
{
    let c = case(h).await;
    let orders = c.world.table("order_id").await;
    let (k, f) = (key(), fp("a"));
    let order = Effect::put(
        &orders,
        Item::new()
            .with("order_id", unique("order").as_str())
            .with("total", 5),
    );
    let outs = futures::future::join_all(
        (0..16).map(|_| c.store.create_once(create(&k, &order, Some(&f), Some("r")))),
    )
    .await;
    let created = outs
        .iter()
        .filter(|o| matches!(o, Ok(Commit::Applied)))
        .count();
    assert_eq!(created, 1, "{outs:?}");
    for o in &outs {
        assert!(
            matches!(
                o,
                Ok(Commit::Applied) | Ok(Commit::Seen(Seen::Duplicate(_)))
            ),
            "{o:?}"
        );
    }
}
