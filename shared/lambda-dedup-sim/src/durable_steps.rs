//! The durable step guard (issue 44): executions replaying their steps, each step's effect
//! committed with its mark on the memory store (the runtime's `durable::Steps::transact` does
//! the same through AWS's preview SDK, which the simulation does not build: this lane models
//! the SDK's replay itself). An invocation replays the checkpointed steps, runs the first
//! unchecked one and may crash between the step's effect and its checkpoint; the next
//! invocation replays it. Invariant [`Invariant::StepOnce`]: each step's effect applied once
//! per execution, and a replay returns the output stored with the first commit.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use lambda_dedup::{Commit, CommitRequest, DedupKey, MarkStore, Retention, Seen};

use crate::durable_lane::{Attempt, Lane, replay};
use crate::invariants::Invariant;
use crate::world::Shared;

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
    lane: Lane,
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
        Self {
            lane: Lane::new(
                seed,
                0xD0_57E9,
                "durable-steps",
                retention,
                None,
                start,
                world,
            ),
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
                &self.lane.scope,
                "",
                &["durable-step", execution, step, &attempt],
            );
        }
        let _ = attempt;
        DedupKey::new(&self.lane.scope, "", &["durable-step", execution, step])
    }

    /// Runs execution `e` of `steps` steps to its end: invocations replaying the checkpoints.
    pub async fn execute(self: std::rc::Rc<Self>, e: u64, steps: u64) {
        let execution = format!("exec-{e}");
        let checkpointed = Cell::new(0u64);
        let (this, execution_ref, checkpointed_ref) = (&self, &execution, &checkpointed);
        let ended = replay(MAX_INVOCATIONS, |attempt| async move {
            let n = checkpointed_ref.get();
            if n >= steps {
                return Attempt::Done;
            }
            let went = this.invocation(execution_ref, n, attempt).await;
            if went == Attempt::Checkpointed {
                checkpointed_ref.set(n + 1);
            }
            went
        })
        .await;
        if !ended {
            self.lane
                .log(format!("durable {execution} left unfinished"));
        }
    }

    /// Step `n` of `execution` in invocation `attempt`: checkpointed, or replayed at once when
    /// the invocation crashed between the step's effect and its checkpoint, or the store
    /// refused the commit.
    async fn invocation(&self, execution: &str, n: u64, attempt: u32) -> Attempt {
        let step = format!("step-{n}");
        // The step's output differs per attempt: a replay that returns a fresh output
        // instead of the stored one shows.
        let output = format!("{execution}/{step}/a{attempt}");
        let key = self.key(execution, &step, attempt);
        let committed = self
            .lane
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
                let s = seen
                    .entry((execution.to_owned(), step.clone()))
                    .or_default();
                s.applied += 1;
                s.stored.get_or_insert_with(|| output.clone());
                output
            }
            Ok(Commit::Seen(Seen::Duplicate(mark))) => mark.result.unwrap_or_default(),
            other => {
                self.lane.log(format!(
                    "durable {execution} {step} a{attempt}: {other:?}, retried"
                ));
                return Attempt::Replayed(Duration::ZERO);
            }
        };
        self.check(execution, &step, &returned);
        let (crash, pause) = (self.lane.chance(300), self.lane.between(1, 2_000));
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if crash {
            self.lane.log(format!(
                "durable {execution} {step} a{attempt}: crashed between effect and checkpoint"
            ));
            return Attempt::Replayed(Duration::ZERO);
        }
        self.lane.log(format!(
            "durable {execution} {step} a{attempt}: checkpointed {returned}"
        ));
        Attempt::Checkpointed
    }

    /// A number in `lo..=hi` from the lane's generator.
    pub fn between(&self, lo: u64, hi: u64) -> u64 {
        self.lane.between(lo, hi)
    }

    /// A step's effect once, and the output returned the one stored with it.
    fn check(&self, execution: &str, step: &str, returned: &str) {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = seen.get(&(execution.to_owned(), step.to_owned())) else {
            return;
        };
        if s.applied > 1 {
            self.lane.violate(
                Invariant::StepOnce,
                format!("{execution} {step}: effect applied {} times", s.applied),
            );
        }
        if s.stored.as_deref() != Some(returned) {
            self.lane.violate(
                Invariant::StepOnce,
                format!(
                    "{execution} {step}: replay returned {returned}, stored {:?}",
                    s.stored
                ),
            );
        }
    }
}
