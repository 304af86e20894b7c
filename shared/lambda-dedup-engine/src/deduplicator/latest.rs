//! Latest-wins mode ([`lambda_dedup::latest`]): the transactional flow with the object's
//! high-water sequencer in the same transaction, so an event older than one applied for its
//! object is [`Outcome::Superseded`] — acknowledged, counted, not applied over the newer one.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{
    CommitRequest, DedupKey, Derived, KeySpec, Latest, LatestStore, LatestWrite, MarkStore,
    Message, Sequencer,
};

use super::{Deduplicator, Plan, planned};
use crate::handler_error::HandlerError;
use crate::outcome::Outcome;

/// A [`Deduplicator`] of latest-wins mode: built on a store that has it ([`LatestStore`]: the
/// DynamoDB and memory stores), so the flow cannot be asked of a store that cannot do it. It
/// derefs to the [`Deduplicator`] on the same store for everything else.
#[derive(Debug, Clone)]
pub struct LatestDeduplicator {
    dedup: Deduplicator,
    store: Arc<dyn LatestStore>,
}

impl std::ops::Deref for LatestDeduplicator {
    type Target = Deduplicator;
    fn deref(&self) -> &Deduplicator {
        &self.dedup
    }
}

impl LatestDeduplicator {
    /// Derives keys with `spec` and commits on `store`, latest wins.
    pub fn new(spec: KeySpec, store: impl LatestStore + 'static) -> Self {
        Self::with_store(spec, Arc::new(store))
    }

    /// Like [`new`](Self::new), with a store already shared.
    pub fn with_store(spec: KeySpec, store: Arc<dyn LatestStore>) -> Self {
        let marks: Arc<dyn MarkStore> = store.clone();
        Self {
            dedup: Deduplicator::with_store(spec, marks),
            store,
        }
    }

    /// Keeps up to `capacity` of the marks this container committed or found, each at most
    /// `max_age` (see [`Deduplicator::with_cache_for`]): a redelivery of an event this container
    /// has seen (its key and fingerprint) costs no store call, as the store judges a seen mark
    /// before the high-water. Only marks are cached, never an object's high-water: an older
    /// event of the object has a key of its own (its sequencer is in it), so it is not in the
    /// cache and the store says whether it is superseded; a superseded event writes no mark, so
    /// its redelivery asks the store again.
    pub fn with_cache_for(mut self, capacity: usize, max_age: Duration) -> Self {
        self.dedup = self.dedup.with_cache_for(capacity, max_age);
        self
    }

    /// The high-water key of `object` (the object's own name, e.g. bucket and key) within the
    /// event's scope and tenant: a hash, so no object name is stored in clear (S3).
    pub fn object_key(&self, event: &Derived, object: &str) -> DedupKey {
        DedupKey::new(
            self.dedup.spec.scope(),
            &event.tenant,
            &["lambda-dedup/latest", object],
        )
    }

    /// The transactional flow (S5) with the object's high-water: the event's mark, `plan`'s
    /// writes and the high-water update commit together, on the condition that no sequencer at
    /// or above `sequencer` is applied for `object`. A redelivery is a duplicate (its mark
    /// answers first); an older event of the object is [`Outcome::Superseded`]; everything
    /// else is answered as [`Deduplicator::transactional`] answers it.
    pub async fn latest<F>(
        &self,
        msg: &Message,
        object: &str,
        sequencer: &Sequencer,
        plan: F,
    ) -> Outcome
    where
        F: FnOnce(&Derived) -> Result<Plan, HandlerError>,
    {
        let event = match self.dedup.derive(msg) {
            Ok(e) => e,
            Err(outcome) => return outcome,
        };
        if let Some(seen) = self.dedup.cached(&event) {
            return self.dedup.seen(msg, &event, seen);
        }
        let plan = match planned(msg, &event, plan) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        let object = self.object_key(&event, object);
        let committed = self
            .store
            .commit_latest(
                CommitRequest {
                    key: &event.key,
                    fingerprint: event.fingerprint.as_ref(),
                    result: plan.result.as_deref(),
                    effects: &plan.effects,
                },
                LatestWrite {
                    object: &object,
                    sequencer,
                },
            )
            .await;
        match committed {
            Ok(Latest::Superseded) => {
                tracing::info!(message_id = %msg.message_id, key = %event.key,
                    "superseded: a newer event of the object is applied; nothing written");
                Outcome::Superseded
            }
            Ok(Latest::Committed(commit)) => self.dedup.committed(msg, &event, &plan, Ok(commit)),
            Err(e) => self.dedup.committed(msg, &event, &plan, Err(e)),
        }
    }
}
