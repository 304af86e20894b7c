//! [`ModelledStore`]: the memory store (`lambda_dedup_memory::MemoryStore`, the DynamoDB
//! store's semantics) behind the requests the DynamoDB store (`lambda_dedup_dynamodb`) would
//! send for each call, each held for its draw of the calibrated latency model, then executed at
//! once in memory.
//!
//! The mapping, call by call, as `DynamoStore` sends them:
//!
//! | call | requests |
//! | --- | --- |
//! | `claim`, `complete`, `release` | one `UpdateItem` |
//! | `commit` | one `TransactWriteItems` of the mark and the effects (1 + effects items) |
//! | `commit_batch_bounded` | waves of rounds, as `DynamoStore::commit_batch_bounded` builds them (below) |
//! | `get` | one `GetItem` |
//! | `get_many` | one `BatchGetItem` per 100 distinct keys, one after another |
//! | `apply_in_sequence` (sequence mode) | one `UpdateItem` |
//! | `create_once` (create-once mode) | one `PutItem` |
//!
//! A batch commit is built as the DynamoDB store builds it: requests taken in order into rounds
//! of at most 100 items, no item written by two rounds of a wave, up to `max_in_flight` rounds a
//! wave, all in flight together, waves one after another; a round of one request is that
//! request's own `commit`. A round in which some event's mark already stands (a duplicate) is
//! cancelled as DynamoDB cancels it: those events are settled by their own mark (nothing
//! written), the others go again in a later wave. The byte estimate that also bounds a round on
//! DynamoDB is not modelled (the bench's items are a few hundred bytes, far under it), nor a
//! cancellation by an effect's own condition (the bench's effects have none).

use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, SystemTime};

use futures::future::join_all;
use lambda_dedup::Effect;
use lambda_dedup::store::{
    CreateOnceStoreImpl, LatestStoreImpl, MarkStoreImpl, SequenceStoreImpl, StoreOptions,
};
use lambda_dedup::{
    Claim, Commit, CommitRequest, CreateOnce, DedupKey, Fingerprint, Lease, Mark, SequenceOutcome,
    SequencedWrite, StoreError,
};
use lambda_dedup_memory::MemoryStore;
use local_dynamodb::latency::Delays;

use super::draws::{Draw, Recorder};

/// DynamoDB's limit of items in one transaction.
const MAX_ITEMS: usize = 100;
/// DynamoDB's limit of keys in one `BatchGetItem`.
const MAX_BATCH_GET: usize = 100;

/// The memory store, each call held for the draws of the requests DynamoDB would be sent.
pub(crate) struct ModelledStore {
    inner: MemoryStore,
    recorder: std::sync::Arc<Recorder>,
    /// Hedge the single writes (sequence's `UpdateItem`, create-once's `PutItem`) after this,
    /// the copies' draws from their own stream.
    hedge: Option<(Duration, Delays)>,
    /// Each hold on tokio's timer alone ([`ModelledStore::on_tokio_timer`]).
    coarse: bool,
}

impl fmt::Debug for ModelledStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelledStore").finish_non_exhaustive()
    }
}

/// What one round settled, and the requests it sends again.
type Settled = (Vec<(usize, Result<Commit, StoreError>)>, Vec<usize>);

impl ModelledStore {
    /// `inner` behind the requests drawn from `recorder`'s stream.
    pub(crate) fn new(inner: MemoryStore, recorder: Recorder) -> Self {
        Self {
            inner,
            recorder: std::sync::Arc::new(recorder),
            hedge: None,
            coarse: false,
        }
    }

    /// The same, each hold on tokio's timer alone (rounded up to its 1 ms tick): for a bench
    /// that measures CPU time rather than latency (`bench cpu`), where [`hold_for`]'s blocking
    /// thread per hold would add its own wake-ups to the process measured; and for tests on
    /// tokio's paused clock, which a blocking thread's sleep does not advance.
    pub(crate) fn on_tokio_timer(self) -> Self {
        Self {
            coarse: true,
            ..self
        }
    }

    /// Holds the calling task for `held`: [`hold_for`], or tokio's timer alone.
    async fn wait(&self, held: Duration) {
        if self.coarse {
            tokio::time::sleep(held).await;
        } else {
            hold_for(held).await;
        }
    }

    /// The same, each single write (sequence, create-once) hedged: its copy sent again
    /// `after` the first when the first has not answered, drawn from `copies`
    /// (`Recorder::draw_hedged`).
    pub(crate) fn hedged(self, after: Duration, copies: Delays) -> Self {
        Self {
            hedge: Some((after, copies)),
            ..self
        }
    }

    /// The hedges sent so far, taken.
    pub(crate) fn take_hedges(&self) -> u64 {
        self.recorder.take_hedges()
    }

    /// The memory store behind it (its tables hold the effects).
    pub(crate) fn memory(&self) -> &MemoryStore {
        &self.inner
    }

    /// Its record, to take the draws from after the store is given away.
    pub(crate) fn recorder(&self) -> std::sync::Arc<Recorder> {
        self.recorder.clone()
    }

    /// The draws recorded so far, taken.
    pub(crate) fn take_draws(&self) -> Vec<Draw> {
        self.recorder.take()
    }

    /// Holds the calling task for one request of its own call.
    async fn hold(&self, operation: &'static str, items: usize) {
        let call = self.recorder.call();
        let held = self.recorder.draw(call, 0, operation, items);
        self.wait(held).await;
    }

    /// Holds the calling task for one single write (sequence, create-once), hedged when the
    /// store hedges.
    async fn hold_single(&self, operation: &'static str) {
        match &self.hedge {
            None => self.hold(operation, 1).await,
            Some((after, copies)) => {
                let call = self.recorder.call();
                let held = self.recorder.draw_hedged(call, operation, *after, copies);
                self.wait(held).await;
            }
        }
    }

    /// One round of a batch commit: one `TransactWriteItems` of its requests' items.
    async fn round(
        &self,
        requests: &[CommitRequest<'_>],
        round: &[usize],
        call: u64,
        stage: usize,
    ) -> Settled {
        let items = round.iter().map(|&i| 1 + requests[i].effects.len()).sum();
        let held = self.recorder.draw(call, stage, "TransactWriteItems", items);
        self.wait(held).await;
        let now = self.inner.options().now();
        let mut blocked = Vec::new();
        for &i in round {
            let r = &requests[i];
            let mark = self.inner.get(r.key).await.ok().flatten();
            if mark.and_then(|m| m.classify(r.fingerprint, now)).is_some() {
                blocked.push(i);
            }
        }
        let mut settled = Vec::new();
        if blocked.is_empty() || round.len() == 1 {
            for &i in round {
                settled.push((i, self.inner.commit(requests[i]).await));
            }
            return (settled, Vec::new());
        }
        // Cancelled: the blocked ones settled by their marks (nothing written), the rest again.
        for &i in &blocked {
            settled.push((i, self.inner.commit(requests[i]).await));
        }
        let again = round
            .iter()
            .copied()
            .filter(|i| !blocked.contains(i))
            .collect();
        (settled, again)
    }
}

/// How much of a hold is left to the kernel's own timer rather than tokio's ([`hold_for`]).
const FINE: Duration = Duration::from_millis(2);

/// Holds the calling task for `held`, to within tens of microseconds. Tokio's timer rounds a
/// sleep up to its next 1 ms tick and wakes the task later still, so each hold cost the bed up
/// to a millisecond or more beyond its draw, which the bound (the draws alone) does not have:
/// on a batch whose critical path is one short request (the pre-filter's `BatchGetItem` on all
/// duplicates, about 8 ms) that alone was a tenth of the bound. So the hold sleeps on tokio's
/// timer until `FINE` before it is due and the rest on a blocking thread
/// (`std::thread::sleep`: the kernel's high-resolution timer), the task yielding meanwhile.
pub(crate) async fn hold_for(held: Duration) {
    let due = std::time::Instant::now() + held;
    if let Some(coarse) = held.checked_sub(FINE) {
        tokio::time::sleep(coarse).await;
    }
    let rest = due.saturating_duration_since(std::time::Instant::now());
    if !rest.is_zero() {
        // A blocking thread gone is a hold already over: nothing to wait for.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)).await;
    }
}

/// What identifies the items a request writes (its mark, each effect's item or key), as the
/// DynamoDB store tells them apart to keep two writes of one item out of one wave.
fn touched(r: &CommitRequest<'_>) -> Vec<String> {
    let mark = format!("mark\u{0}{}", r.key.as_str());
    std::iter::once(mark)
        .chain(r.effects.iter().map(Effect::target))
        .collect()
}

/// One wave: rounds of at most [`MAX_ITEMS`] items, requests taken in order, none touching an
/// item another round of the wave has taken, at most `max_rounds` rounds; the first request of
/// a round always fits. Returns the rounds and the requests left for later.
pub(crate) fn next_wave(
    requests: &[CommitRequest<'_>],
    pending: &[usize],
    max_rounds: usize,
) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut wave: Vec<Vec<usize>> = vec![Vec::new()];
    let mut later = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut count = 0;
    for &i in pending {
        let n = 1 + requests[i].effects.len();
        let keys = touched(&requests[i]);
        if keys.iter().any(|k| seen.contains(k)) {
            later.push(i);
            continue;
        }
        let round_empty = wave.last().is_none_or(Vec::is_empty);
        if !round_empty && count + n > MAX_ITEMS {
            if wave.len() >= max_rounds {
                later.push(i);
                continue;
            }
            wave.push(Vec::new());
            count = 0;
        }
        seen.extend(keys);
        count += n;
        if let Some(round) = wave.last_mut() {
            round.push(i);
        }
    }
    wave.retain(|r| !r.is_empty());
    (wave, later)
}

impl MarkStoreImpl for ModelledStore {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        self.hold("UpdateItem", 1).await;
        self.inner.claim(key, fp, deadline).await
    }

    async fn commit(&self, request: CommitRequest<'_>) -> Result<Commit, StoreError> {
        self.hold("TransactWriteItems", 1 + request.effects.len())
            .await;
        self.inner.commit(request).await
    }

    async fn commit_batch(
        &self,
        requests: &[CommitRequest<'_>],
    ) -> Vec<Result<Commit, StoreError>> {
        self.commit_batch_bounded(requests, 1).await
    }

    async fn commit_batch_bounded(
        &self,
        requests: &[CommitRequest<'_>],
        max_in_flight: usize,
    ) -> Vec<Result<Commit, StoreError>> {
        let call = self.recorder.call();
        let mut results: Vec<Option<Result<Commit, StoreError>>> =
            requests.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            // Refused before anything is sent, as the DynamoDB store refuses them.
            if r.effects.len() > lambda_dedup::store::MAX_EFFECTS
                || self.inner.options().check_result(r.result).is_err()
            {
                results[i] = Some(self.inner.commit(*r).await);
            } else {
                pending.push(i);
            }
        }
        let mut stage = 0;
        while !pending.is_empty() {
            let (wave, later) = next_wave(requests, &pending, max_in_flight.max(1));
            pending = later;
            let sent = join_all(
                wave.iter()
                    .map(|round| self.round(requests, round, call, stage)),
            )
            .await;
            for (settled, again) in sent {
                for (i, r) in settled {
                    results[i] = Some(r);
                }
                pending.extend(again);
            }
            pending.sort_unstable();
            stage += 1;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Invalid("not processed".into()))))
            .collect()
    }

    async fn get_many(&self, keys: &[&DedupKey]) -> Result<Vec<Option<Mark>>, StoreError> {
        let call = self.recorder.call();
        let mut unique: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
        unique.sort_unstable();
        unique.dedup();
        for (stage, chunk) in unique.chunks(MAX_BATCH_GET).enumerate() {
            let held = self.recorder.draw(call, stage, "BatchGetItem", chunk.len());
            self.wait(held).await;
        }
        self.inner.get_many(keys).await
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        self.hold("UpdateItem", 1).await;
        self.inner.complete(lease, result).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.hold("UpdateItem", 1).await;
        self.inner.release(lease).await
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        self.hold("GetItem", 1).await;
        self.inner.get(key).await
    }

    fn options(&self) -> &StoreOptions {
        self.inner.options()
    }
}

impl SequenceStoreImpl for ModelledStore {
    async fn apply_in_sequence(
        &self,
        write: SequencedWrite<'_>,
    ) -> Result<SequenceOutcome, StoreError> {
        self.hold_single("UpdateItem").await;
        self.inner.apply_in_sequence(write).await
    }
}

impl CreateOnceStoreImpl for ModelledStore {
    async fn create_once(&self, write: CreateOnce<'_>) -> Result<Commit, StoreError> {
        self.hold_single("PutItem").await;
        self.inner.create_once(write).await
    }
}

impl LatestStoreImpl for ModelledStore {
    fn high_water_table(&self) -> &str {
        LatestStoreImpl::high_water_table(&self.inner)
    }
}
