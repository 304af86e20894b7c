//! The durable step guard (issue 44): executions replaying their steps, each step's effect
//! committed with its mark on the memory store (the runtime's `durable::Steps::transact` does
//! the same through AWS's preview SDK, which the simulation does not build: this lane models
//! the SDK's replay itself). An invocation replays the checkpointed steps, runs the first
//! unchecked one and may crash between the step's effect and its checkpoint; the next
//! invocation replays it. Invariant [`Invariant::StepOnce`]: each step's effect applied once
//! per execution, and a replay returns the output stored with the first commit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::{Commit, CommitRequest, DedupKey, MarkStore, Retention, Scope, Seen};
use lambda_dedup_memory::MemoryStore;

use crate::clock::SimClock;
use crate::invariants::Invariant;
use crate::rng::Rng;
use crate::world::{Shared, lock};

/// Invocations one execution gets before the run gives up on it (it ends unfinished).
const MAX_INVOCATIONS: u32 = 30;

/// What the lane saw of one step: effects applied and the output stored with the first.
#[derive(Debug, Default)]
struct StepSeen {
    applied: u32,
    stored: Option<String>,
}

/// The durable executions and the step guard's mark table.
#[derive(Debug)]
pub struct StepsLane {
    store: MemoryStore,
    scope: Scope,
    world: Shared,
    /// The lane's own generator (from the seed), so the other lanes draw as they did before it.
    rng: Mutex<Rng>,
    /// (execution, step) → what happened to it.
    seen: Mutex<BTreeMap<(String, String), StepSeen>>,
}

impl StepsLane {
    /// A lane on its own mark table, on the true clock.
    pub fn new(
        seed: u64,
        retention: Retention,
        start: tokio::time::Instant,
        world: &Shared,
    ) -> Self {
        let store = MemoryStore::new(retention).with_clock(Arc::new(SimClock::new(start, 0)));
        let scope = Scope::new("sim", "durable-steps").unwrap_or_else(|e| panic!("scope: {e}"));
        Self {
            store,
            scope,
            world: world.clone(),
            rng: Mutex::new(Rng::new(seed ^ 0xD0_57E9)),
            seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// The step's mark key: the execution and the step's name, the same on every replay (with
    /// the planted bug, the attempt too).
    fn key(&self, execution: &str, step: &str, attempt: u32) -> DedupKey {
        #[cfg(feature = "simulation-planted")]
        if lambda_dedup::planted::Planted::DurableStepKeyedPerAttempt.is_on() {
            let attempt = attempt.to_string();
            return DedupKey::new(
                &self.scope,
                "",
                &["durable-step", execution, step, &attempt],
            );
        }
        let _ = attempt;
        DedupKey::new(&self.scope, "", &["durable-step", execution, step])
    }

    /// Runs execution `e` of `steps` steps to its end: invocations replaying the checkpoints.
    pub async fn execute(self: std::rc::Rc<Self>, e: u64, steps: u64) {
        let execution = format!("exec-{e}");
        let mut checkpoints: Vec<String> = Vec::new();
        let mut attempt = 0u32;
        while u64::try_from(checkpoints.len()).unwrap_or(u64::MAX) < steps {
            if attempt >= MAX_INVOCATIONS {
                lock(&self.world).log(format!("durable {execution} left unfinished"));
                return;
            }
            let step = format!("step-{}", checkpoints.len());
            // The step's output differs per attempt: a replay that returns a fresh output
            // instead of the stored one shows.
            let output = format!("{execution}/{step}/a{attempt}");
            let key = self.key(&execution, &step, attempt);
            let committed = self
                .store
                .commit(CommitRequest {
                    key: &key,
                    fingerprint: None,
                    result: Some(&output),
                    effects: &[],
                })
                .await;
            let returned = match committed {
                Ok(Commit::Applied) => {
                    let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                    let s = seen.entry((execution.clone(), step.clone())).or_default();
                    s.applied += 1;
                    s.stored.get_or_insert_with(|| output.clone());
                    output
                }
                Ok(Commit::Seen(Seen::Duplicate(mark))) => mark.result.unwrap_or_default(),
                other => {
                    lock(&self.world).log(format!(
                        "durable {execution} {step} a{attempt}: {other:?}, retried"
                    ));
                    attempt += 1;
                    continue;
                }
            };
            self.check(&execution, &step, &returned);
            let (crash, pause) = (self.chance(300), self.between(1, 2_000));
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if crash {
                lock(&self.world).log(format!(
                    "durable {execution} {step} a{attempt}: crashed between effect and checkpoint"
                ));
                attempt += 1;
                continue;
            }
            lock(&self.world).log(format!(
                "durable {execution} {step} a{attempt}: checkpointed {returned}"
            ));
            checkpoints.push(returned);
        }
    }

    /// A number in `lo..=hi` from the lane's generator.
    pub fn between(&self, lo: u64, hi: u64) -> u64 {
        self.rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .between(lo, hi)
    }

    fn chance(&self, per_mille: u64) -> bool {
        self.rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .chance(per_mille)
    }

    /// A step's effect once, and the output returned the one stored with it.
    fn check(&self, execution: &str, step: &str, returned: &str) {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = seen.get(&(execution.to_owned(), step.to_owned())) else {
            return;
        };
        let mut w = lock(&self.world);
        if s.applied > 1 {
            w.violate(
                Invariant::StepOnce,
                format!("{execution} {step}: effect applied {} times", s.applied),
            );
        }
        if s.stored.as_deref() != Some(returned) {
            w.violate(
                Invariant::StepOnce,
                format!(
                    "{execution} {step}: replay returned {returned}, stored {:?}",
                    s.stored
                ),
            );
        }
    }
}
