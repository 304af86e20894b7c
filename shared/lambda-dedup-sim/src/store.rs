//! The fault-injecting simulated store: the memory store (the DynamoDB store's semantics) seen
//! by one instance through its own clock, with a seeded latency before and after each call (a
//! crash there is a call never made, or a call applied whose answer is lost), seeded faults
//! (throttling, an answer lost after the write), and the ownership checks on every claim,
//! complete and release.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::clock::epoch_millis;
use lambda_dedup::create_once::CreateOnce;
use lambda_dedup::store::{CreateOnceStoreImpl, MarkStoreImpl, SequenceStoreImpl, StoreOptions};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, FaultKind, Fingerprint, Lease, Mark, MarkStatus,
    SequenceOutcome, SequencedWrite, StoreError,
};
use lambda_dedup_memory::{FaultHook, Injected, MemoryStore};

use crate::clock::{EPOCH_SECS, SimClock};
use crate::invariants::Invariant;
use crate::world::{Shared, lock, store_pause};

/// The world's store faults, as the memory store injects them: at the world's rate, a call
/// throttled, or (at the same rate again) applied with its answer lost to a timeout. Every
/// simulated store and table meets the same faults.
pub(crate) fn world_faults(world: &Shared) -> FaultHook {
    let w = world.clone();
    Arc::new(move |_op, _key: Option<&DedupKey>| {
        let mut w = lock(&w);
        let rate = w.store_faults;
        if w.rng.chance(rate) {
            Some(Injected::Fail(FaultKind::Throttled))
        } else if w.rng.chance(rate) {
            Some(Injected::LoseAnswer(FaultKind::Timeout))
        } else {
            None
        }
    })
}

/// One instance's handle on the simulated store.
#[derive(Debug, Clone)]
pub struct SimStore {
    inner: MemoryStore,
    truth: MemoryStore,
    world: Shared,
    instance: usize,
}

impl SimStore {
    /// `data`'s marks and tables, seen by instance `instance` through `clock`, under the
    /// world's faults.
    pub fn new(
        data: &MemoryStore,
        world: &Shared,
        instance: usize,
        clock: SimClock,
        lease: Duration,
    ) -> Self {
        let hook = world_faults(world);
        let inner = data
            .clone()
            .with_clock(Arc::new(clock))
            .with_lease(lease)
            .with_clock_skew(Duration::from_secs(1))
            .with_fault_hook(hook);
        Self {
            inner,
            truth: data.clone(),
            world: world.clone(),
            instance,
        }
    }

    fn mark(&self, key: &DedupKey) -> Option<Mark> {
        self.truth
            .marks()
            .into_iter()
            .find(|m| m.key.as_str() == key.as_str())
    }

    fn violate(&self, invariant: Invariant, detail: String) {
        lock(&self.world).violate(invariant, format!("i{} {detail}", self.instance));
    }

    /// A claim that took `before` over: its owner may still act unless its lease has ended
    /// by every instance's clock (checked while the clocks stay within half the allowance).
    fn check_takeover(&self, before: Option<&Mark>) {
        let Some(m) = before else { return };
        let (now_ms, max_skew) = {
            let w = lock(&self.world);
            (EPOCH_SECS * 1_000 + w.now_ms(), w.max_skew_ms)
        };
        let live = m.is_live(SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms));
        let released = m
            .owner
            .as_ref()
            .is_some_and(|o| o.as_str().starts_with("released-"));
        if m.status != MarkStatus::InProgress || !live || released || max_skew > 500 {
            return;
        }
        let held = m.lease_expires_at.map(epoch_millis).unwrap_or(0);
        if now_ms + max_skew < held {
            self.violate(
                Invariant::LeaseExclusive,
                format!("claim took over a lease held {} ms more", held - now_ms),
            );
        }
    }
}

impl MarkStoreImpl for SimStore {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        store_pause(&self.world).await;
        let before = self.mark(key);
        let r = self.inner.claim(key, fp, deadline).await;
        if let Ok(Claim::Claimed(_)) = &r {
            self.check_takeover(before.as_ref());
        }
        store_pause(&self.world).await;
        r
    }

    async fn commit(&self, request: CommitRequest<'_>) -> Result<lambda_dedup::Commit, StoreError> {
        store_pause(&self.world).await;
        let r = self.inner.commit(request).await;
        store_pause(&self.world).await;
        r
    }

    async fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a>],
    ) -> Vec<Result<Commit, StoreError>> {
        store_pause(&self.world).await;
        let r = self.inner.commit_batch(requests).await;
        store_pause(&self.world).await;
        r
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        store_pause(&self.world).await;
        let before = self.mark(&lease.key);
        let r = self.inner.complete(lease, result).await;
        if r.is_ok() && before.as_ref().and_then(|m| m.owner.as_ref()) != Some(&lease.owner) {
            self.violate(
                Invariant::StaleOwnerCompleted,
                "a complete by a lease no longer held succeeded".into(),
            );
        }
        store_pause(&self.world).await;
        r
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        store_pause(&self.world).await;
        let before = self.mark(&lease.key);
        let r = self.inner.release(lease).await;
        if r.is_ok()
            && let Some(m) = &before
            && m.status == MarkStatus::InProgress
            && let Some(owner) = &m.owner
            && owner != &lease.owner
            && owner.as_str() != format!("released-{}", lease.owner.as_str())
        {
            self.violate(
                Invariant::StaleOwnerReleased,
                "a release by a lease no longer held succeeded".into(),
            );
        }
        store_pause(&self.world).await;
        r
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        store_pause(&self.world).await;
        let r = self.inner.get(key).await;
        store_pause(&self.world).await;
        r
    }

    fn options(&self) -> &StoreOptions {
        self.inner.options()
    }
}

impl SequenceStoreImpl for SimStore {
    async fn apply_in_sequence(
        &self,
        write: SequencedWrite<'_>,
    ) -> Result<SequenceOutcome, StoreError> {
        store_pause(&self.world).await;
        let r = self.inner.apply_in_sequence(write).await;
        store_pause(&self.world).await;
        r
    }
}

impl CreateOnceStoreImpl for SimStore {
    async fn create_once(&self, write: CreateOnce<'_>) -> Result<lambda_dedup::Commit, StoreError> {
        store_pause(&self.world).await;
        let r = self.inner.create_once(write).await;
        store_pause(&self.world).await;
        r
    }
}
