//! Fault injection: the faults a call meets (queued with [`MemoryStore::inject`], or decided
//! per call by a [`FaultHook`]), a store that cannot be reached
//! ([`MemoryStore::unreachable`]), and [`MemoryStore::call`], through which every store call
//! goes: counted, then failed, applied with its answer lost, or applied.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use lambda_dedup::{DedupKey, FaultKind, StoreError};

use crate::{MemoryStore, State};

/// A fault the next store call meets (see [`MemoryStore::inject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    /// The call fails with this fault and changes nothing (an outage, throttling).
    Fail(FaultKind),
    /// The call is applied, then its answer is lost: the caller gets this fault (a timeout after
    /// the write reached the table).
    LoseAnswer(FaultKind),
}

/// A store operation, as a fault hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// [`MarkStore::claim`](lambda_dedup::MarkStore::claim).
    Claim,
    /// [`MarkStore::commit`](lambda_dedup::MarkStore::commit).
    Commit,
    /// [`MarkStore::commit_batch`](lambda_dedup::MarkStore::commit_batch).
    CommitBatch,
    /// [`MarkStore::complete`](lambda_dedup::MarkStore::complete).
    Complete,
    /// [`MarkStore::release`](lambda_dedup::MarkStore::release).
    Release,
    /// [`MarkStore::get`](lambda_dedup::MarkStore::get).
    Get,
    /// [`SequenceStore::apply_in_sequence`](lambda_dedup::SequenceStore::apply_in_sequence).
    Sequence,
    /// [`CreateOnceStore::create_once`](lambda_dedup::CreateOnceStore::create_once).
    CreateOnce,
    /// [`ItemStore::write`](lambda_dedup::ItemStore::write), [`ItemStore::read`](lambda_dedup::ItemStore::read) or [`ItemStore::scan`](lambda_dedup::ItemStore::scan).
    Items,
}

/// Decides, per call, whether it meets a fault: the operation and the key it is about (none for
/// a batch commit). See [`MemoryStore::with_fault_hook`].
pub type FaultHook = Arc<dyn Fn(Op, Option<&DedupKey>) -> Option<Injected> + Send + Sync>;

/// A [`FaultHook`] in a store handle.
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) FaultHook);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultHook")
    }
}

impl MemoryStore {
    /// A handle on the same data whose calls ask `hook` first: for faults aimed at one
    /// operation (a complete whose answer is lost, say) while other calls go through.
    pub fn with_fault_hook(&self, hook: FaultHook) -> Self {
        Self {
            hook: Some(Hook(hook)),
            ..self.clone()
        }
    }

    /// The calls applied whose answer was then lost (an [`Injected::LoseAnswer`] that met a call
    /// that succeeded), since the last time this was asked.
    pub fn take_lost_answers(&self) -> Vec<(Op, Option<DedupKey>)> {
        std::mem::take(&mut self.lock().lost)
    }

    /// A handle on the same data whose every call fails with [`FaultKind::Network`]: a store
    /// that cannot be reached.
    pub fn unreachable(&self) -> Self {
        Self {
            unreachable: true,
            ..self.clone()
        }
    }

    /// Queues a fault for the next call on this store's data (any handle), in order.
    pub fn inject(&self, fault: Injected) {
        self.lock().faults.push_back(fault);
    }

    /// Store calls made through this store and its clones (one per operation; a batch commit
    /// counts one).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Runs one call: counts it, meets an injected fault, or applies `f` under the lock.
    pub(crate) fn call<T>(
        &self,
        op: Op,
        key: Option<&DedupKey>,
        f: impl FnOnce(&mut State, SystemTime) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.unreachable {
            return Err(StoreError::store(
                FaultKind::Network,
                "memory store: unreachable",
            ));
        }
        let hooked = self.hook.as_ref().and_then(|h| (h.0)(op, key));
        let mut state = self.lock();
        let now = self.options.now();
        match hooked.or_else(|| state.faults.pop_front()) {
            Some(Injected::Fail(kind)) => {
                Err(StoreError::store(kind, "memory store: injected fault"))
            }
            Some(Injected::LoseAnswer(kind)) => {
                if f(&mut state, now).is_ok() {
                    state.lost.push((op, key.cloned()));
                }
                Err(StoreError::store(kind, "memory store: answer lost"))
            }
            None => f(&mut state, now),
        }
    }
}

/// The same fault for every request of a batch call that failed as a whole.
pub(crate) fn copy_fault(e: &StoreError) -> StoreError {
    match e {
        StoreError::Store { kind, message } => StoreError::store(*kind, message.clone()),
        other => StoreError::Invalid(other.to_string()),
    }
}
