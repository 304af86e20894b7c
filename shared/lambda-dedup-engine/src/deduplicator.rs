//! The two ways to make an effect once, each mapping every answer of the store to exactly one
//! [`Outcome`].
//!
//! A transient store fault is a retry (S13). Writes DynamoDB refuses for good (a
//! `ValidationError` at the event's own position, a malformed expression, a write over a size
//! limit: [`StoreError::Refused`]) are rejected as `effect_refused`, so the queue's redrive
//! policy dead-letters them and they are counted (S15), in per-message and batch mode alike. A
//! panicking plan is a retry of its own message only (S12).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime};

use std::sync::Arc;

use lambda_dedup::{
    Claim, Commit, DedupKey, Derived, Effect, KeySpec, Lease, MarkCache, Message, Rejection, Seen,
};
use lambda_dedup::{
    CommitRequest, CreateOnce, CreateOnceStore, MarkStore, SequenceOutcome, SequenceSource,
    SequenceStore, SequencedWrite, StoreError,
};

mod batch;
mod latest;

pub use latest::LatestDeduplicator;

use crate::handler_error::HandlerError;
use crate::outcome::{Outcome, Reason};
use crate::retry::RetryCause;

/// What a transactional handler wants committed with the mark: effects of the store's own type
/// (DynamoDB writes by default; `SqlEffect`s on PostgreSQL).
#[derive(Debug, Clone)]
pub struct Plan<E = Effect> {
    /// The writes of the effect.
    pub effects: Vec<E>,
    /// A result to store with the mark and hand to duplicates (S8).
    pub result: Option<String>,
}

impl From<Effect> for Plan {
    /// One write, no stored result.
    fn from(effect: Effect) -> Self {
        Plan {
            effects: vec![effect],
            result: None,
        }
    }
}

// By hand: a derive would require `E: Default`.
impl<E> Default for Plan<E> {
    fn default() -> Self {
        Plan {
            effects: Vec::new(),
            result: None,
        }
    }
}

impl<E> From<Vec<E>> for Plan<E> {
    /// These writes, no stored result.
    fn from(effects: Vec<E>) -> Self {
        Plan {
            effects,
            result: None,
        }
    }
}

/// A [`Deduplicator`] for effects outside DynamoDB: built by
/// [`Deduplicator::with_provider_key_retention`], so the leased flow always knows how long the
/// provider keeps idempotency keys (S16). It derefs to the [`Deduplicator`] for everything else.
#[derive(Debug, Clone)]
pub struct LeasedDeduplicator<E = Effect>(Deduplicator<E>);

impl<E> std::ops::Deref for LeasedDeduplicator<E> {
    type Target = Deduplicator<E>;
    fn deref(&self) -> &Deduplicator<E> {
        &self.0
    }
}

impl<E: 'static> LeasedDeduplicator<E> {
    /// The leased flow (S6): claim the event under a lease no longer than `deadline`, run `call`
    /// (which must pass `lease.idempotency_key()` to the external system), then complete the mark
    /// with the call's result. A failed call releases the claim. A store fault anywhere leaves
    /// the message for redelivery, which reuses the same idempotency key. A takeover of an event
    /// first attempted longer ago than the provider keeps keys does not call (S16).
    pub async fn leased<F, Fut>(
        &self,
        msg: &Message,
        deadline: Option<SystemTime>,
        call: F,
    ) -> Outcome
    where
        F: FnOnce(Derived, Lease) -> Fut,
        Fut: Future<Output = Result<Option<String>, HandlerError>>,
    {
        self.0.leased(msg, deadline, call).await
    }
}

/// Key derivation plus the mark store: the per-message flows, on any store, committing the
/// store's own effect type `E` (DynamoDB writes by default).
#[derive(Debug, Clone)]
pub struct Deduplicator<E = Effect> {
    spec: KeySpec,
    store: Arc<dyn MarkStore<E>>,
    cache: Option<Arc<MarkCache>>,
    provider_key_retention: Option<Duration>,
    prefilter: bool,
}

impl<E: 'static> Deduplicator<E> {
    /// Derives keys with `spec` and keeps marks in `store`: `lambda_dedup_dynamodb::DynamoStore` in a
    /// Lambda function, `lambda_dedup_memory::MemoryStore` in tests (or any other store, such as
    /// `lambda_dedup_postgres::PgStore`).
    pub fn new(spec: KeySpec, store: impl MarkStore<E> + 'static) -> Self {
        Self::with_store(spec, Arc::new(store))
    }

    /// Like [`new`](Self::new), with a store already shared.
    pub fn with_store(spec: KeySpec, store: Arc<dyn MarkStore<E>>) -> Self {
        Self {
            spec,
            store,
            cache: None,
            provider_key_retention: None,
            prefilter: false,
        }
    }

    /// The leased flow's deduplicator (S6): how long the external API keeps idempotency keys
    /// (Stripe: 24 hours) is part of building it, so no leased flow runs without it. Past that
    /// retention a retry under the same key may be applied again, so a takeover of an event first
    /// attempted longer ago than this never calls the API blindly: it goes to reconciliation as
    /// `provider_key_expired` (S9, S10, S16).
    pub fn with_provider_key_retention(mut self, retention: Duration) -> LeasedDeduplicator<E> {
        self.provider_key_retention = Some(retention);
        LeasedDeduplicator(self)
    }

    /// Keeps up to `capacity` completed marks in memory, so duplicates this container has seen
    /// complete cost no DynamoDB call (see [`MarkCache`]). In-progress marks are never cached.
    pub fn with_cache(mut self, capacity: usize) -> Self {
        self.cache = (capacity > 0).then(|| Arc::new(MarkCache::new(capacity)));
        self
    }

    /// [`with_cache`](Self::with_cache), each mark held at most `max_age` (then the store is
    /// asked again): a mark removed on purpose (`lambda-dedup forget`) reaches this container
    /// within `max_age`.
    pub fn with_cache_for(mut self, capacity: usize, max_age: Duration) -> Self {
        self.cache =
            (capacity > 0).then(|| Arc::new(MarkCache::new(capacity).with_max_age(max_age)));
        self
    }

    /// Batch-transaction mode reads the batch's marks first (one strongly consistent
    /// `BatchGetItem` per 100 events) and leaves the events whose completed mark it finds out of
    /// the transactions. A filter only: an event it does not find is still decided by the
    /// conditional write (S4), and a failed read filters nothing. Worth it where duplicates are
    /// common: a duplicate in a shared transaction cancels the round (billed, if DynamoDB bills
    /// cancelled transactions, at 2 write units per item of it) and sends the round's other
    /// events again; a read is half a unit per mark. See docs/BENCHMARKS.md.
    pub fn with_duplicate_prefilter(mut self, on: bool) -> Self {
        self.prefilter = on;
        self
    }

    /// What the warm cache already knows about `event`.
    fn cached(&self, event: &Derived) -> Option<Seen> {
        // The store's clock: the cached mark's TTL and lease were written by it (S9).
        let now = self.store.now();
        self.cache
            .as_ref()?
            .seen(&cache_key(event), event.fingerprint.as_ref(), now)
    }

    fn remember_applied(&self, event: &Derived, result: Option<&str>) {
        if let Some(cache) = &self.cache {
            let mut mark = self
                .store
                .written_mark(&event.key, event.fingerprint.as_ref(), result);
            mark.key = cache_key(event);
            cache.insert_at(&mark, self.store.now());
        }
    }

    /// How keys are derived: the spec as built, every setting applied (late events sent to
    /// reconciliation are keyed with it too).
    pub fn spec(&self) -> &KeySpec {
        &self.spec
    }

    /// The store.
    pub fn store(&self) -> &dyn MarkStore<E> {
        self.store.as_ref()
    }

    /// The message's key and payload, or its outcome when it has no key (S2), is older than
    /// the retention window, or says it happens implausibly far in the future (S10: the mark
    /// table cannot judge it; reconciliation must).
    fn derive(&self, msg: &Message) -> Result<Derived, Outcome> {
        let event = self.spec.derive(msg).map_err(|r| rejected(msg, &r))?;
        if let Some(untimely) = self.untimely(&event) {
            let what = match untimely {
                Rejection::FromTheFuture { .. } => {
                    "event time in the future: not applied, for reconciliation"
                }
                _ => "late: beyond the retention window; not applied, for reconciliation",
            };
            tracing::warn!(message_id = %msg.message_id, key = %event.key, code = untimely.code(),
                reason = %untimely, "{what}");
            return Err(Outcome::Rejected {
                code: Reason::from(&untimely),
                reason: untimely.to_string(),
                key: Some(event.key),
                invalid: None,
            });
        }
        Ok(event)
    }

    /// Why the mark table cannot judge `event` (S10): its own time is further in the future than
    /// clocks disagree ([`Rejection::FromTheFuture`]) or older than the retention window
    /// ([`Rejection::Late`]); `None` when it can (or the event declares no time).
    pub(crate) fn untimely(&self, event: &Derived) -> Option<Rejection> {
        if let Some(ahead) = event
            .event_time
            .and_then(|t| self.store.ahead_of_clock(t))
            .filter(|ahead| *ahead > lambda_dedup::MAX_CLOCK_SKEW)
        {
            return Some(Rejection::FromTheFuture {
                ahead_secs: ahead.as_secs(),
                skew_secs: lambda_dedup::MAX_CLOCK_SKEW.as_secs(),
            });
        }
        let age = event
            .event_time
            .and_then(|t| self.store.beyond_retention(t))?;
        Some(Rejection::Late {
            age_secs: age.as_secs(),
            retention_secs: self.store.retention().duration().as_secs(),
        })
    }

    /// How long the external API keeps idempotency keys, for the leased flow.
    pub(crate) fn provider_key_retention(&self) -> Option<Duration> {
        self.provider_key_retention
    }

    /// The transactional flow (S5): derive the key, let `plan` say which writes the event makes,
    /// and commit them with the mark in one transaction. Writes DynamoDB refuses for good are
    /// `Rejected { code: Reason::EffectRefused }` (S15); a panicking `plan` is a retry.
    pub async fn transactional<F>(&self, msg: &Message, plan: F) -> Outcome
    where
        F: FnOnce(&Derived) -> Result<Plan<E>, HandlerError>,
    {
        let event = match self.derive(msg) {
            Ok(e) => e,
            Err(outcome) => return outcome,
        };
        if let Some(seen) = self.cached(&event) {
            return self.seen(msg, &event, seen);
        }
        let plan = match planned(msg, &event, plan) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        #[cfg(feature = "simulation-planted")]
        if lambda_dedup::planted::Planted::CacheFilledBeforeCommit.is_on() {
            self.remember_applied(&event, plan.result.as_deref());
        }
        let committed = self
            .store
            .commit(CommitRequest {
                key: &event.key,
                fingerprint: event.fingerprint.as_ref(),
                result: plan.result.as_deref(),
                effects: &plan.effects,
            })
            .await;
        self.committed(msg, &event, &plan, committed)
    }

    /// Maps the answer to one event's commit.
    fn committed(
        &self,
        msg: &Message,
        event: &Derived,
        plan: &Plan<E>,
        committed: Result<Commit, StoreError>,
    ) -> Outcome {
        match committed {
            Ok(Commit::Applied) => {
                tracing::info!(message_id = %msg.message_id, key = %event.key, "applied");
                self.remember_applied(event, plan.result.as_deref());
                Outcome::Applied
            }
            Ok(Commit::Seen(seen)) => self.seen(msg, event, seen),
            Ok(Commit::EffectRejected { index }) => {
                // A business condition did not hold (e.g. the account it debits does not exist
                // yet). Nothing was written; redelivery retries it, and the redrive policy
                // dead-letters it if it never holds.
                tracing::warn!(message_id = %msg.message_id, key = %event.key, effect = index,
                    "an effect's condition failed; nothing written, will retry");
                Outcome::retry(
                    RetryCause::EffectCondition,
                    format!("effect {index} condition failed"),
                )
            }
            Err(StoreError::Refused { code, position, .. }) => {
                // The store refused this event's own writes as they are (S15): no retry can make
                // them valid, so it is dead-lettered through the redrive policy and counted,
                // rather than retried until the queue gives up. Only the store's code is named:
                // its message may quote values (S3).
                let reason = match position {
                    Some(0) => format!("the store refused the mark's write ({code})"),
                    Some(p) => format!("the store refused effect {} ({code})", p - 1),
                    None => format!("the store refused the event's writes ({code})"),
                };
                tracing::warn!(message_id = %msg.message_id, key = %event.key, code = %code,
                    "rejected: the store refused the effect; nothing written; dead-lettering");
                rejected_event(event, Reason::EffectRefused, reason)
            }
            Err(e) => store_failed(msg, &event.key, &e),
        }
    }

    /// The leased flow: see [`LeasedDeduplicator::leased`], the only way in, so that the
    /// provider's key retention is always set.
    async fn leased<F, Fut>(&self, msg: &Message, deadline: Option<SystemTime>, call: F) -> Outcome
    where
        F: FnOnce(Derived, Lease) -> Fut,
        Fut: Future<Output = Result<Option<String>, HandlerError>>,
    {
        let event = match self.derive(msg) {
            Ok(e) => e,
            Err(outcome) => return outcome,
        };
        if let Some(seen) = self.cached(&event) {
            return self.seen(msg, &event, seen);
        }
        let lease = match self
            .store
            .claim(&event.key, event.fingerprint.as_ref(), deadline)
            .await
        {
            Ok(Claim::Claimed(lease)) => lease,
            Ok(Claim::Seen(seen)) => return self.seen(msg, &event, seen),
            Err(e) => return store_failed(msg, &event.key, &e),
        };
        let key = event.key.clone();
        let summary = event.clone();
        if let Some(expired) = self.provider_key_expired(&lease) {
            // An earlier holder may have called the API so long ago that it has forgotten the
            // key: calling again could apply the effect twice. The claim is kept (not released),
            // so every later takeover comes to the same answer.
            tracing::warn!(message_id = %msg.message_id, key = %key, code = expired.0.code(),
                reason = %expired.1, "not calling the provider: its idempotency key may be forgotten; for reconciliation");
            return Outcome::Rejected {
                code: expired.0,
                reason: expired.1,
                key: Some(key),
                invalid: None,
            };
        }
        #[cfg(feature = "simulation-planted")]
        if lambda_dedup::planted::Planted::LeasedCompletesBeforeCall.is_on()
            && let Err(e) = self.store.complete(&lease, None).await
        {
            return store_failed(msg, &key, &e);
        }
        // S16: nothing may fail after the effect. A result over the store's bound is kept as
        // its digest rather than refused by `complete`.
        match call(event, lease.clone())
            .await
            .map(|result| self.bounded(result))
        {
            Ok(result) => match self.store.complete(&lease, result.as_deref()).await {
                Ok(()) => {
                    tracing::info!(message_id = %msg.message_id, key = %key, "applied");
                    self.remember_applied(&summary, result.as_deref());
                    Outcome::Applied
                }
                Err(e) => {
                    // The external effect happened, under our idempotency key; the next delivery
                    // (or the process that took over) repeats the call with the same key, and the
                    // provider answers with the stored result instead of a second effect.
                    store_failed(msg, &key, &e)
                }
            },
            Err(err) => {
                if let Err(e) = self.store.release(&lease).await {
                    // The lease expires by itself; the redelivery claims it then.
                    tracing::warn!(message_id = %msg.message_id, key = %key, error = %e,
                        "could not release the claim");
                }
                handler_failed(msg, &summary, err)
            }
        }
    }

    /// `Some((code, reason))` when `lease` took over an event first attempted longer ago than
    /// the provider keeps keys.
    fn provider_key_expired(&self, lease: &Lease) -> Option<(Reason, String)> {
        let retention = self.provider_key_retention?;
        let now = self.store.now();
        let age = now.duration_since(lease.first_attempt_at).ok()?;
        (age > retention).then(|| {
            (
                Reason::ProviderKeyExpired,
                format!(
                    "first attempted {} s ago; the provider keeps idempotency keys {} s",
                    age.as_secs(),
                    retention.as_secs()
                ),
            )
        })
    }

    /// The result to store with a completed mark: as it is, or, over the store's bound, a
    /// digest of it (`{"digest": "sha256:…", "bytes": n}`), so `complete` cannot refuse it after
    /// the effect has happened (S16).
    fn bounded(&self, result: Option<String>) -> Option<String> {
        let max = self.store.max_result_bytes();
        result.map(|r| {
            if r.len() <= max {
                return r;
            }
            let digest = lambda_dedup::Fingerprint::of_bytes(r.as_bytes());
            serde_json::json!({"digest": format!("sha256:{digest}"), "bytes": r.len()}).to_string()
        })
    }
}

/// A [`Deduplicator`] of sequence mode: built on a store that has it ([`SequenceStore`]: the
/// DynamoDB and memory stores), so the flow cannot be asked of a store that cannot do it. It
/// derefs to the [`Deduplicator`] on the same store for everything else.
#[derive(Debug, Clone)]
pub struct SequencedDeduplicator {
    dedup: Deduplicator,
    store: Arc<dyn SequenceStore>,
}

/// A [`Deduplicator`] of create-once mode: built on a store that has it ([`CreateOnceStore`]:
/// the DynamoDB and memory stores), so the flow cannot be asked of a store that cannot do it.
/// It derefs to the [`Deduplicator`] on the same store for everything else.
#[derive(Debug, Clone)]
pub struct CreateOnceDeduplicator {
    dedup: Deduplicator,
    store: Arc<dyn CreateOnceStore>,
}

impl std::ops::Deref for SequencedDeduplicator {
    type Target = Deduplicator;
    fn deref(&self) -> &Deduplicator {
        &self.dedup
    }
}

impl std::ops::Deref for CreateOnceDeduplicator {
    type Target = Deduplicator;
    fn deref(&self) -> &Deduplicator {
        &self.dedup
    }
}

impl SequencedDeduplicator {
    /// Derives keys with `spec` and applies in sequence on `store`.
    pub fn new(spec: KeySpec, store: impl SequenceStore + 'static) -> Self {
        Self::with_store(spec, Arc::new(store))
    }

    /// Like [`new`](Self::new), with a store already shared.
    pub fn with_store(spec: KeySpec, store: Arc<dyn SequenceStore>) -> Self {
        let marks: Arc<dyn MarkStore> = store.clone();
        Self {
            dedup: Deduplicator::with_store(spec, marks),
            store,
        }
    }

    /// Sequence mode, for ordered sources (an SQS FIFO group, a Kinesis shard) whose producer
    /// stamps a sequence per aggregate (see [`lambda_dedup::sequence`]): `plan` says the one
    /// update of the aggregate's item the event makes; it is written together with the
    /// aggregate's new high-water in one conditional `UpdateItem` — no mark item, no
    /// transaction. A sequence at or below the high-water is a duplicate (its `first_seen_at`
    /// is now: the high-water keeps no time); the high-water's own sequence with another payload
    /// a conflict; a gap is `Rejected { code: crate::Reason::SequenceGap }`, counted and dead-lettered,
    /// never skipped. Marks never expire here, so there is no late-event rule. Use it with
    /// [`crate::run_batch`], which keeps each group's order and stops a group at its first
    /// failure.
    pub async fn sequenced<F>(&self, msg: &Message, source: &SequenceSource, plan: F) -> Outcome
    where
        F: FnOnce(&Derived) -> Result<Effect, HandlerError>,
    {
        let event = match self.dedup.spec.derive(msg) {
            Ok(e) => e,
            Err(r) => return rejected(msg, &r),
        };
        let sequence = match source.read(&event) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(message_id = %msg.message_id, key = %event.key, code = e.code(),
                    reason = %e, "rejected: no sequence; dead-lettering");
                return rejected_event(&event, Reason::from(&e), e.to_string());
            }
        };
        let effect = match planned(msg, &event, |e| {
            plan(e).map(|effect| Plan {
                effects: vec![effect],
                result: None,
            })
        }) {
            Ok(mut p) => p.effects.remove(0),
            Err(outcome) => return outcome,
        };
        let write = SequencedWrite {
            key: &event.key,
            effect: &effect,
            sequence,
            first: source.first_sequence(),
            fingerprint: event.fingerprint.as_ref(),
        };
        match self.store.apply_in_sequence(write).await {
            Ok(SequenceOutcome::Applied) => {
                tracing::info!(message_id = %msg.message_id, key = %event.key, sequence, "applied");
                Outcome::Applied
            }
            Ok(SequenceOutcome::Duplicate { high_water }) => {
                tracing::info!(message_id = %msg.message_id, key = %event.key, sequence,
                    high_water, "duplicate skipped (at or below the high-water)");
                Outcome::Duplicate {
                    first_seen_at: self.store.now(),
                    result: None,
                }
            }
            Ok(SequenceOutcome::Conflict { high_water }) => {
                tracing::warn!(message_id = %msg.message_id, key = %event.key, sequence,
                    high_water, "conflict: the high-water's sequence with another payload; dead-lettering");
                Outcome::Conflict
            }
            Ok(SequenceOutcome::Gap { expected, got }) => {
                tracing::warn!(message_id = %msg.message_id, key = %event.key, expected, got,
                    "rejected: sequence gap; not applied, dead-lettering");
                rejected_event(
                    &event,
                    Reason::SequenceGap,
                    format!("expected sequence {expected}, got {got}"),
                )
            }
            Ok(SequenceOutcome::EffectRejected) => {
                Outcome::retry(RetryCause::EffectCondition, "effect condition failed")
            }
            Err(StoreError::Refused { code, .. }) => {
                tracing::warn!(message_id = %msg.message_id, key = %event.key, code = %code,
                    "rejected: DynamoDB refused the effect; nothing written; dead-lettering");
                rejected_event(
                    &event,
                    Reason::EffectRefused,
                    format!("DynamoDB refused the event's write ({code})"),
                )
            }
            Err(e) => store_failed(msg, &event.key, &e),
        }
    }
}

impl CreateOnceDeduplicator {
    /// Derives keys with `spec` and creates each event's item once on `store`.
    pub fn new(spec: KeySpec, store: impl CreateOnceStore + 'static) -> Self {
        Self::with_store(spec, Arc::new(store))
    }

    /// Like [`new`](Self::new), with a store already shared.
    pub fn with_store(spec: KeySpec, store: Arc<dyn CreateOnceStore>) -> Self {
        let marks: Arc<dyn MarkStore> = store.clone();
        Self {
            dedup: Deduplicator::with_store(spec, marks),
            store,
        }
    }

    /// Keeps up to `capacity` of the items this container created or found, as completed
    /// marks, each at most `max_age` (see [`Deduplicator::with_cache_for`]): a duplicate this
    /// container has seen costs no store call, and another payload under its key is the
    /// conflict the item would answer. Keyed by the whole key (scope and tenant in it), so it
    /// never answers another sender's event. Deleting an item forgets the event in every warm
    /// container within `max_age`.
    pub fn with_cache_for(mut self, capacity: usize, max_age: Duration) -> Self {
        self.dedup = self.dedup.with_cache_for(capacity, max_age);
        self
    }

    /// Create-once mode, for an effect that creates an item which exists once per event (an
    /// order, an inbox item, a record keyed by the event; see [`lambda_dedup::create_once`]):
    /// `plan` says the one [`Effect::put`] of that item and the result to store in it; the item
    /// is the mark — one conditional `Put`, no mark item, no transaction. A duplicate is judged
    /// from the item (its stored result returned, S8), another payload is a conflict (S11), and an
    /// item the event did not create (or the put's own condition failing) is a retry, as an
    /// effect's failed condition is. The item lives as long as the caller keeps it, so there is
    /// no late-event rule; deleting the item forgets the event (in a deduplicator built
    /// [`with_cache_for`](Self::with_cache_for), once the cached mark is older than its maximum
    /// age). A plan of anything but one put is rejected as `effect_refused`.
    pub async fn create_once<F>(&self, msg: &Message, plan: F) -> Outcome
    where
        F: FnOnce(&Derived) -> Result<Plan<Effect>, HandlerError>,
    {
        let event = match self.dedup.spec.derive(msg) {
            Ok(e) => e,
            Err(r) => return rejected(msg, &r),
        };
        if let Some(seen) = self.dedup.cached(&event) {
            return self.dedup.seen(msg, &event, seen);
        }
        let plan = match planned(msg, &event, plan) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        let [effect] = plan.effects.as_slice() else {
            tracing::warn!(message_id = %msg.message_id, key = %event.key,
                effects = plan.effects.len(), "rejected: create-once takes exactly one put");
            return rejected_event(
                &event,
                Reason::EffectRefused,
                format!("create-once takes one put, not {}", plan.effects.len()),
            );
        };
        let write = CreateOnce {
            key: &event.key,
            effect,
            fingerprint: event.fingerprint.as_ref(),
            result: plan.result.as_deref(),
        };
        match self.store.create_once(write).await {
            Ok(Commit::Applied) => {
                tracing::info!(message_id = %msg.message_id, key = %event.key, "applied (created)");
                self.dedup.remember_applied(&event, plan.result.as_deref());
                Outcome::Applied
            }
            Ok(Commit::Seen(Seen::Duplicate(mark))) => {
                if let Some(cache) = &self.dedup.cache {
                    cache.insert_at(&mark, self.store.now());
                }
                tracing::info!(message_id = %msg.message_id, key = %event.key,
                    "duplicate skipped (the item exists)");
                Outcome::Duplicate {
                    first_seen_at: mark.first_seen_at,
                    result: mark.result,
                }
            }
            Err(StoreError::Invalid(reason)) => {
                tracing::warn!(message_id = %msg.message_id, key = %event.key, reason = %reason,
                    "rejected: not a create-once write; dead-lettering");
                rejected_event(&event, Reason::EffectRefused, reason)
            }
            other => self.dedup.committed(msg, &event, &plan, other),
        }
    }
}

impl<E: 'static> Deduplicator<E> {
    fn seen(&self, msg: &Message, event: &Derived, seen: Seen) -> Outcome {
        match seen {
            Seen::Duplicate(mark) => {
                if let Some(cache) = &self.cache {
                    cache.insert_at(&mark, self.store.now());
                }
                let first_seen_ms = lambda_dedup::clock::epoch_millis(mark.first_seen_at);
                tracing::info!(message_id = %msg.message_id, key = %event.key,
                    first_seen_ms, "duplicate skipped");
                Outcome::Duplicate {
                    first_seen_at: mark.first_seen_at,
                    result: mark.result.clone(),
                }
            }
            Seen::InProgress { lease_expires_at } => {
                let lease_expires_ms = lease_expires_at.map(lambda_dedup::clock::epoch_millis);
                tracing::info!(message_id = %msg.message_id, key = %event.key,
                    lease_expires_ms, "in progress elsewhere; will retry");
                Outcome::retry(
                    RetryCause::InProgress,
                    "in progress under another live lease",
                )
            }
            Seen::Conflict {
                stored, offered, ..
            } => {
                tracing::warn!(message_id = %msg.message_id, key = %event.key,
                    stored_fingerprint = %stored, offered_fingerprint = %offered,
                    "conflict: same key, different payload; dead-lettering");
                Outcome::Conflict
            }
        }
    }
}

fn rejected(msg: &Message, r: &Rejection) -> Outcome {
    tracing::warn!(message_id = %msg.message_id, code = r.code(), reason = %r,
        "rejected: no key; dead-lettering");
    Outcome::Rejected {
        code: Reason::from(r),
        reason: r.to_string(),
        key: None,
        invalid: None,
    }
}

/// The event is rejected (dead-lettered) with `code` and `reason`, under its key.
fn rejected_event(event: &Derived, code: Reason, reason: String) -> Outcome {
    Outcome::Rejected {
        code,
        reason,
        key: Some(event.key.clone()),
        invalid: None,
    }
}

/// The outcome of the work's refusal, its typed cause kept: [`Invalid`](crate::Invalid) is
/// rejected as `invalid_payload`, [`Transient`](crate::Transient) a retry.
fn handler_failed(msg: &Message, event: &Derived, e: HandlerError) -> Outcome {
    match e {
        HandlerError::Invalid(invalid) => {
            tracing::warn!(message_id = %msg.message_id, key = %event.key,
                cause = %invalid.cause(), reason = %invalid,
                "rejected: invalid payload; dead-lettering");
            Outcome::Rejected {
                code: Reason::InvalidPayload,
                reason: invalid.to_string(),
                key: Some(event.key.clone()),
                invalid: Some(invalid),
            }
        }
        HandlerError::Transient(transient) => {
            tracing::warn!(message_id = %msg.message_id, key = %event.key,
                cause = %transient.cause(), reason = %transient, "handler failed; will retry");
            Outcome::Retry {
                cause: RetryCause::Transient,
                reason: transient.to_string(),
                transient: Some(transient),
            }
        }
    }
}

/// The key the warm cache holds `event`'s mark under: its dedup key, scope and tenant in it.
fn cache_key(event: &Derived) -> DedupKey {
    #[cfg(feature = "simulation-planted")]
    if lambda_dedup::planted::Planted::CacheSharedAcrossTenants.is_on()
        && let Some(body) = &event.body
    {
        return DedupKey::from_stored(format!("planted#{}#{}", body["source"], body["id"]));
    }
    event.key.clone()
}

/// Runs a message's `plan`: its plan, or the outcome of its failure. A panic is caught, so one
/// message's bug fails that message only: a retry, as in [`crate::run_batch`].
fn planned<F, E>(msg: &Message, event: &Derived, plan: F) -> Result<Plan<E>, Outcome>
where
    F: FnOnce(&Derived) -> Result<Plan<E>, HandlerError>,
{
    match std::panic::catch_unwind(AssertUnwindSafe(|| plan(event))) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(handler_failed(msg, event, e)),
        Err(_) => {
            tracing::error!(message_id = %msg.message_id, key = %event.key,
                "plan panicked; the message will be redelivered");
            Err(Outcome::retry(RetryCause::Panicked, "plan panicked"))
        }
    }
}

fn store_failed(msg: &Message, key: &DedupKey, e: &StoreError) -> Outcome {
    if let StoreError::Corrupt { .. } = e {
        // S15: a mark that cannot be decoded stays so on every redelivery: dead-letter and count
        // it, do not retry it until the queue gives up. Its effects are not touched.
        tracing::error!(message_id = %msg.message_id, key = %key, error = %e,
            "rejected: the stored mark is corrupt; dead-lettering");
        return Outcome::Rejected {
            code: Reason::MarkCorrupt,
            reason: "the stored mark cannot be decoded".into(),
            key: Some(key.clone()),
            invalid: None,
        };
    }
    #[cfg(feature = "simulation-planted")]
    if lambda_dedup::planted::Planted::StoreFaultAcknowledged.is_on() && e.is_retryable() {
        return Outcome::Applied;
    }
    // S13: fail closed. Nothing is acknowledged without its mark.
    tracing::warn!(message_id = %msg.message_id, key = %key, error = %e,
        retryable = e.is_retryable(), "mark store failed; will retry");
    Outcome::retry(RetryCause::Store, format!("mark store: {e}"))
}
