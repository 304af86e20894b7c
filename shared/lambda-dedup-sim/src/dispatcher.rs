//! The durable dispatcher (issue 44): deliveries of the same event — the queue's redeliveries
//! and a producer's retry under a new message id — each claim the event's mark on the memory
//! store, start an execution named from the event's key, and may crash between the start and
//! the mark's completion (the lease then runs out and a later delivery takes over). Lambda is
//! modelled as its names: a start under a name it has is the existing execution, counted as
//! a duplicate. The runtime's `durable::starts` does the same through the leased flow and
//! Lambda's `Invoke`, which the simulation does not build. Invariant
//! [`Invariant::OneExecution`]: one execution per event identity.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

use lambda_dedup::{Claim, DedupKey, MarkStore, Retention, Seen};
use sha2::{Digest, Sha256};

use crate::durable_lane::{Attempt, Lane, replay};
use crate::invariants::Invariant;
use crate::world::Shared;

/// The mark's lease: a crashed start's claim is taken over after it.
const LEASE_MS: u64 = 10_000;
/// When a delivery that was not acknowledged comes back (the queue's visibility timeout).
const VISIBILITY_MS: u64 = 15_000;
/// Deliveries of one message before it is dead-lettered.
const MAX_RECEIVES: u32 = 20;

/// The dispatcher's mark table, Lambda's execution names and the executions per event.
#[derive(Debug)]
pub struct DispatchLane {
    lane: Lane,
    /// Execution name → the event it was started for.
    names: Mutex<BTreeMap<String, String>>,
    /// Event → executions started for it.
    executions: Mutex<BTreeMap<String, u32>>,
}

impl DispatchLane {
    /// A lane on its own mark table, on the true clock.
    pub fn new(
        seed: u64,
        retention: Retention,
        start: tokio::time::Instant,
        world: &Shared,
    ) -> Self {
        let lease = Some(Duration::from_millis(LEASE_MS));
        Self {
            lane: Lane::new(
                seed,
                0xD15_9A7C,
                "dispatcher",
                retention,
                lease,
                start,
                world,
            ),
            names: Mutex::new(BTreeMap::new()),
            executions: Mutex::new(BTreeMap::new()),
        }
    }

    /// Event `k`'s deliveries: its message, redelivered 0–2 times, and half the time a
    /// producer's retry of it under a new message id; each at a seeded time.
    pub fn produce(self: &Rc<Self>, k: u64) -> Vec<tokio::task::JoinHandle<()>> {
        let event = format!("dev-{k}");
        let mut messages = vec![format!("m-{k}")];
        for _ in 0..self.between(0, 2) {
            messages.push(format!("m-{k}"));
        }
        if self.chance(500) {
            messages.push(format!("m-{k}-retry"));
        }
        self.executions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(event.clone(), 0);
        messages
            .into_iter()
            .map(|m| {
                let at = self.between(0, 30_000);
                tokio::task::spawn_local(self.clone().deliver(event.clone(), m, at))
            })
            .collect()
    }

    /// The execution's name: from the event's key (with the planted bug, the message id).
    fn name(&self, key: &DedupKey, message: &str) -> String {
        #[cfg(feature = "simulation-planted")]
        if lambda_dedup::planted::Planted::DispatcherNamesByMessageId.is_on() {
            return format!("dispatch-{message}");
        }
        let _ = message;
        let hex = hex::encode(Sha256::digest(key.as_str()));
        format!("dispatch-{}", hex.get(..40).unwrap_or(&hex))
    }

    /// One message of `event`, delivered at `at_ms` and again until acknowledged.
    async fn deliver(self: Rc<Self>, event: String, message: String, at_ms: u64) {
        tokio::time::sleep(Duration::from_millis(at_ms)).await;
        let key = DedupKey::new(&self.lane.scope, "acme", &["order", &event]);
        let (this, event_ref, message_ref, key_ref) = (&self, &event, &message, &key);
        let ended = replay(MAX_RECEIVES, |n| async move {
            this.receive(event_ref, message_ref, key_ref, n + 1).await
        })
        .await;
        if !ended {
            self.log(format!("dispatch {message} of {event}: dead-lettered"));
        }
    }

    /// The `receive`th delivery of `message`: its claim, the start, the mark completed; a
    /// crash between the start and the mark, or a refusal, comes back after the visibility
    /// timeout.
    async fn receive(&self, event: &str, message: &str, key: &DedupKey, receive: u32) -> Attempt {
        let back_later = Attempt::Replayed(Duration::from_millis(VISIBILITY_MS));
        let claimed = self.lane.store.claim(key, None, None).await;
        let lease = match claimed {
            Ok(Claim::Claimed(lease)) => lease,
            Ok(Claim::Seen(Seen::Duplicate(_))) => {
                self.log(format!("dispatch {message} of {event}: duplicate"));
                return Attempt::Done;
            }
            other => {
                self.log(format!(
                    "dispatch {message} of {event}: {other:?}, back later"
                ));
                return back_later;
            }
        };
        let name = self.name(key, message);
        self.start(event, message, &name);
        let crash = self.lane.chance(300);
        if crash {
            self.log(format!(
                "dispatch {message} of {event} r{receive}: crashed between start and mark"
            ));
            return back_later;
        }
        match self.lane.store.complete(&lease, Some(&name)).await {
            Ok(()) => {
                self.log(format!("dispatch {message} of {event}: applied"));
                Attempt::Done
            }
            Err(e) => {
                self.log(format!("dispatch {message} of {event}: {e}, back later"));
                back_later
            }
        }
    }

    /// Lambda's start: a name it has is the existing execution (a duplicate start).
    fn start(&self, event: &str, message: &str, name: &str) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.contains_key(name) {
            drop(names);
            self.log(format!(
                "dispatch {message} of {event}: name taken, duplicate start"
            ));
            return;
        }
        names.insert(name.to_owned(), event.to_owned());
        drop(names);
        let mut executions = self.executions.lock().unwrap_or_else(|p| p.into_inner());
        let n = executions.entry(event.to_owned()).or_default();
        *n += 1;
        let n = *n;
        drop(executions);
        self.log(format!(
            "dispatch {message} of {event}: started execution {n}"
        ));
        if n > 1 {
            self.lane.violate(
                Invariant::OneExecution,
                format!("{event}: {n} executions, the last by {message}"),
            );
        }
    }

    /// At the end: every event has had its execution.
    pub fn finish(&self) {
        let executions = self.executions.lock().unwrap_or_else(|p| p.into_inner());
        let missing: Vec<String> = executions
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(e, _)| e.clone())
            .collect();
        drop(executions);
        for e in &missing {
            self.lane.violate(
                Invariant::OneExecution,
                format!("{e}: no execution started"),
            );
        }
    }

    /// A number in `lo..=hi` from the lane's generator.
    pub fn between(&self, lo: u64, hi: u64) -> u64 {
        self.lane.between(lo, hi)
    }

    fn chance(&self, per_mille: u64) -> bool {
        self.lane.chance(per_mille)
    }

    fn log(&self, line: String) {
        self.lane.log(line);
    }
}
