//! What the two durable lanes share (issue 44): a mark table of the lane's own on the true
//! clock, a generator of the lane's own drawn from the seed (so the other lanes draw as they
//! did before the durable ones), and the one crash-and-replay loop ([`replay`]): attempts of one
//! piece of work (an execution's invocations, a message's deliveries), each of which may crash
//! and be replayed, until one ends the work or the attempts run out.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::{Retention, Scope};
use lambda_dedup_memory::MemoryStore;

use crate::clock::SimClock;
use crate::invariants::Invariant;
use crate::rng::Rng;
use crate::world::{Shared, lock};

/// A durable lane's store, scope, world and generator.
#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) store: MemoryStore,
    pub(crate) scope: Scope,
    world: Shared,
    rng: Mutex<Rng>,
}

impl Lane {
    /// The lane of consumer `consumer` on a mark table of its own (leases of `lease`, if given),
    /// on the true clock; its generator is the seed's, salted with `salt`.
    pub(crate) fn new(
        seed: u64,
        salt: u64,
        consumer: &str,
        retention: Retention,
        lease: Option<Duration>,
        start: tokio::time::Instant,
        world: &Shared,
    ) -> Self {
        let store = MemoryStore::new(retention).with_clock(Arc::new(SimClock::new(start, 0)));
        let store = match lease {
            Some(lease) => store.with_lease(lease),
            None => store,
        };
        let scope = Scope::new("sim", consumer).unwrap_or_else(|e| panic!("scope: {e}"));
        Self {
            store,
            scope,
            world: world.clone(),
            rng: Mutex::new(Rng::new(seed ^ salt)),
        }
    }

    /// A number in `lo..=hi` from the lane's generator.
    pub(crate) fn between(&self, lo: u64, hi: u64) -> u64 {
        self.rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .between(lo, hi)
    }

    /// Whether a `per_mille` chance comes up, from the lane's generator.
    pub(crate) fn chance(&self, per_mille: u64) -> bool {
        self.rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .chance(per_mille)
    }

    /// A line of the trace.
    pub(crate) fn log(&self, line: String) {
        lock(&self.world).log(line);
    }

    /// A violation of `invariant`.
    pub(crate) fn violate(&self, invariant: Invariant, detail: String) {
        lock(&self.world).violate(invariant, detail);
    }
}

/// What one attempt of a piece of work came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The work is over.
    Done,
    /// Some of it is checkpointed; the same attempt goes on (an invocation's next step).
    Checkpointed,
    /// It crashed, or was refused: the next attempt replays it, after `pause` (a redelivery's
    /// visibility timeout; none for an invocation that replays at once).
    Replayed(Duration),
}

/// The one crash-and-replay loop: `attempt(n)` for attempts `n` = 0, 1, … until it answers
/// [`Attempt::Done`], at most `max` attempts. Whether the work ended (else the attempts ran out:
/// an execution left unfinished, a message dead-lettered).
pub(crate) async fn replay<F, Fut>(max: u32, mut attempt: F) -> bool
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Attempt>,
{
    let mut n = 0;
    while n < max {
        match attempt(n).await {
            Attempt::Done => return true,
            Attempt::Checkpointed => {}
            Attempt::Replayed(pause) => {
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                n += 1;
            }
        }
    }
    false
}
