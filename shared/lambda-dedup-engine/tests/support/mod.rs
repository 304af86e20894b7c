//! What the engine's flow test files share: the in-memory world, the reading of a refusal, the
//! warm cache's check.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{Derived, ManualClock, Message, Retention};
use lambda_dedup_engine::{Deduplicator, HandlerError, Outcome, Plan, Reason};
use lambda_dedup_memory::MemoryStore;

/// The store's retention.
pub(crate) const RETENTION: Duration = Duration::from_secs(86_400);

/// A time at a whole second (the store keeps milliseconds, an RFC 3339 time seconds: at a whole
/// second neither loses anything).
pub(crate) fn a_whole_second() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// A store with a 30 s lease and a `balances` table keyed by `account`, on a clock at `start`.
pub(crate) fn world_at(start: SystemTime) -> (MemoryStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(start));
    let store = MemoryStore::new(Retention::unchecked(RETENTION).expect("retention"))
        .with_clock(clock.clone())
        .with_lease(Duration::from_secs(30));
    store.create_table("balances", "account");
    (store, clock)
}

/// The reason of a refusal, `None` for any other outcome.
pub(crate) fn code(o: &Outcome) -> Option<Reason> {
    match o {
        Outcome::Rejected { code, .. } => Some(*code),
        _ => None,
    }
}

/// Asserts that `m`, applied through `dedup` (whose cache is warm), comes again as a duplicate
/// answered without a call to `store`.
pub(crate) async fn assert_a_cached_duplicate_skips_the_store(
    store: &MemoryStore,
    dedup: &Deduplicator,
    m: &Message,
    plan: fn(&Derived) -> Result<Plan, HandlerError>,
) {
    assert_eq!(dedup.transactional(m, plan).await, Outcome::Applied);
    let calls = store.calls();
    assert!(matches!(
        dedup.transactional(m, plan).await,
        Outcome::Duplicate { .. }
    ));
    assert_eq!(store.calls(), calls, "no store call for a cached duplicate");
}
