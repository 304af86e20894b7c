//! The state every simulated component shares: the seeded generator, the trace, the ledger,
//! the provider, the run's start and its fault rates. One lock, never held across an await.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use crate::clock::SimClock;
use crate::invariants::{Invariant, Ledger};
use crate::provider::Provider;
use crate::rng::Rng;
use crate::trace::Trace;

/// The shared state of one run.
#[derive(Debug)]
pub struct World {
    /// The seed's generator: every choice of the run.
    pub rng: Rng,
    /// Every step.
    pub trace: Trace,
    /// Every event's outcomes and effects.
    pub ledger: Ledger,
    /// The simulated external provider.
    pub provider: Provider,
    /// When the run started (tokio's paused clock).
    pub start: Instant,
    /// Store faults per thousand calls (each of fail, answer lost).
    pub store_faults: u64,
    /// The largest clock skew of any instance, in milliseconds.
    pub max_skew_ms: u64,
    /// Handler panics per thousand pieces of work ([`crate::panics`]).
    pub handler_panics: u64,
    /// A sequenced event whose work panics on every delivery until a fix is deployed (the
    /// true time in ms): dead-lettered, its group's later events gaps, redriven days later.
    pub poison: Option<(String, u64)>,
}

/// The world, shared by the run's tasks.
pub type Shared = Arc<Mutex<World>>;

/// Locks the world (a poisoned lock is still the world: a panic is a finding, not a reason to stop).
pub fn lock(w: &Shared) -> MutexGuard<'_, World> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

/// A store call's seeded latency, before or after it (the simulated store's and the relay's
/// items alike): 1–20 ms, or now and then (1 in 10) 0.5–3 s.
pub async fn store_pause(w: &Shared) {
    let ms = {
        let mut w = lock(w);
        if w.rng.chance(10) {
            w.rng.between(500, 3_000)
        } else {
            w.rng.between(1, 20)
        }
    };
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}

impl World {
    /// Milliseconds of true simulated time.
    pub fn now_ms(&self) -> u64 {
        SimClock::true_ms(self.start)
    }

    /// Appends `line` to the trace, at the true time.
    pub fn log(&mut self, line: String) {
        let t = self.now_ms();
        self.trace.push(t, line);
    }

    /// Records a violation, in the trace too.
    pub fn violate(&mut self, invariant: Invariant, detail: String) {
        self.log(format!("VIOLATION {invariant}: {detail}"));
        self.ledger.violate(invariant, detail);
    }
}
