//! The mark semantics, as the DynamoDB store's: claims under leases with owner fencing, takeover
//! of an ended lease keeping the first attempt's time, fingerprints, TTL counted at read,
//! all-or-nothing commits with DynamoDB's order of verdicts, sequence and create-once modes, and
//! the core's [`MarkStore`], [`SequenceStore`] and [`CreateOnceStore`] on them.

use std::future::{Future, ready};
use std::time::SystemTime;

use lambda_dedup::clock::{epoch_millis, epoch_secs, from_epoch_millis};
use lambda_dedup::create_once::{self, CreateOnce};
use lambda_dedup::sequence::{SequenceOutcome, SequencedWrite};
use lambda_dedup::store::{
    CreateOnceStoreImpl, LatestStoreImpl, MAX_EFFECTS, MarkStoreImpl, SequenceStoreImpl,
    StoreOptions,
};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Fingerprint, Lease, Mark, MarkStatus, OwnerToken,
    StoreError,
};

use crate::faults::copy_fault;
use crate::tables::{Judged, judged, planned, refused, write_all};
use crate::{MemoryStore, Op, State};

impl MemoryStore {
    /// Every mark stored, live or past its TTL (the TTL sweep has not run), for audits in tests.
    pub fn marks(&self) -> Vec<Mark> {
        self.lock().marks.values().cloned().collect()
    }

    /// Deletes the marks whose TTL has passed, as DynamoDB's TTL sweep does some time after
    /// it; returns how many. Until it runs, such marks still count as absent (S9).
    pub fn purge_expired(&self) -> usize {
        let now = self.options.now();
        let mut state = self.lock();
        let before = state.marks.len();
        state.marks.retain(|_, m| m.is_live(now));
        before - state.marks.len()
    }

    /// The TTL a mark written at `now` gets: rounded up to whole seconds, as stored.
    fn ttl(&self, now: SystemTime) -> SystemTime {
        lambda_dedup::clock::from_epoch_secs(epoch_secs(self.options.expires_at(now)))
    }

    fn claim_now(
        &self,
        state: &mut State,
        now: SystemTime,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        let lease_end = self.options.lease_end(now, deadline)?;
        let now = ms(now);
        let first_attempt_at = match state.marks.get(key.as_str()) {
            None => now,
            Some(m) if !m.is_live(now) => now,
            Some(m) if taken_over(m, now) && fp_allows(m, fp) => m.first_seen_at,
            Some(m) => return explain(key, m, fp, now).map(Claim::Seen),
        };
        let owner = OwnerToken::random();
        let (held, lease_end) = (ms(self.options.lease_held_until(lease_end)), ms(lease_end));
        state.marks.insert(
            key.as_str().to_owned(),
            Mark {
                key: key.clone(),
                status: MarkStatus::InProgress,
                owner: Some(owner.clone()),
                lease_expires_at: Some(held),
                expires_at: self.ttl(now),
                fingerprint: fp.cloned(),
                result: None,
                first_seen_at: first_attempt_at,
                completed_at: None,
            },
        );
        Ok(Claim::Claimed(Lease {
            key: key.clone(),
            owner,
            expires_at: lease_end,
            fingerprint: fp.cloned(),
            first_attempt_at,
        }))
    }

    /// One commit, all or nothing, with DynamoDB's order of verdicts (see
    /// `DynamoStore::verdict`): the mark's condition, an effect's condition, then a refusal of
    /// the event's own writes.
    fn commit_now(
        &self,
        state: &mut State,
        now: SystemTime,
        r: &CommitRequest<'_>,
    ) -> Result<Commit, StoreError> {
        if r.effects.len() > MAX_EFFECTS {
            return Err(StoreError::Invalid(format!(
                "{} effects; one transaction holds the mark and at most {MAX_EFFECTS}",
                r.effects.len()
            )));
        }
        self.options.check_result(r.result)?;
        let now = ms(now);
        let plans = planned(state, r)?;
        // The mark: written only where a claim could be taken.
        if let Some(m) = state.marks.get(r.key.as_str())
            && m.is_live(now)
            && !(lease_over(m, now) && fp_allows(m, r.fingerprint))
        {
            let seen = explain(r.key, m, r.fingerprint, now).map(Commit::Seen);
            #[cfg(feature = "simulation-planted")]
            if lambda_dedup::planted::Planted::CommitNotAtomic.is_on()
                && let Ok(Judged::Writes(w)) = judged(state, r.effects, &plans)
            {
                write_all(state, w);
            }
            return seen;
        }
        let written = match judged(state, r.effects, &plans)? {
            Judged::Writes(w) => w,
            Judged::FailedCondition(index) => return Ok(Commit::EffectRejected { index }),
            Judged::Refused(position) => {
                return Err(refused(r, "ValidationError", Some(position)));
            }
        };
        write_all(state, written);
        state.marks.insert(
            r.key.as_str().to_owned(),
            Mark {
                key: r.key.clone(),
                status: MarkStatus::Completed,
                owner: None,
                lease_expires_at: None,
                expires_at: self.ttl(now),
                fingerprint: r.fingerprint.cloned(),
                result: r.result.map(str::to_owned),
                first_seen_at: now,
                completed_at: Some(now),
            },
        );
        Ok(Commit::Applied)
    }

    fn complete_now(
        &self,
        state: &mut State,
        now: SystemTime,
        lease: &Lease,
        result: Option<&str>,
    ) -> Result<(), StoreError> {
        self.options.check_result(result)?;
        let Some(m) = state.marks.get_mut(lease.key.as_str()) else {
            return Err(fenced(lease, None));
        };
        let ours = m.owner.as_ref() == Some(&lease.owner);
        #[cfg(feature = "simulation-planted")]
        let ours = ours || lambda_dedup::planted::Planted::CompleteIgnoresOwner.is_on();
        match m.status {
            MarkStatus::InProgress if ours => {
                m.status = MarkStatus::Completed;
                m.completed_at = Some(ms(now));
                if let Some(r) = result {
                    m.result = Some(r.to_owned());
                }
                m.lease_expires_at = None;
                Ok(())
            }
            // Our own earlier completion (a retry after a lost answer).
            MarkStatus::Completed if ours => Ok(()),
            _ => Err(fenced(lease, Some(m.clone()))),
        }
    }

    /// Sequence mode: the effect with its high-water, judged like the DynamoDB store's
    /// conditional update.
    fn sequence_now(
        &self,
        state: &mut State,
        w: &SequencedWrite<'_>,
    ) -> Result<SequenceOutcome, StoreError> {
        let effect = w.effect_to_send()?;
        match Self::write_one(state, &effect, w.key)? {
            None => Ok(SequenceOutcome::Applied),
            #[cfg(feature = "simulation-planted")]
            Some(Some(old))
                if lambda_dedup::planted::Planted::SequenceOlderApplied.is_on()
                    && lambda_dedup::sequence::high_water(&old)
                        .is_some_and(|(hw, _)| hw > w.sequence) =>
            {
                Self::write_one(state, w.effect, w.key)?;
                Ok(SequenceOutcome::Applied)
            }
            Some(old) => Ok(w.judge_failed(old.as_ref())),
        }
    }

    fn create_once_now(
        &self,
        state: &mut State,
        now: SystemTime,
        w: &CreateOnce<'_>,
    ) -> Result<Commit, StoreError> {
        self.options.check_result(w.result)?;
        let effect = w.effect_to_send(ms(now))?;
        match Self::write_one(state, &effect, w.key)? {
            None => Ok(Commit::Applied),
            #[cfg(feature = "simulation-planted")]
            Some(_) if lambda_dedup::planted::Planted::CreateOnceOverwrites.is_on() => {
                Ok(Commit::Applied)
            }
            Some(old) => Ok(create_once::judge(old.as_ref(), w.key, w.fingerprint)),
        }
    }

    fn release_now(&self, state: &mut State, lease: &Lease) -> Result<(), StoreError> {
        let released = OwnerToken::from_stored(format!("released-{}", lease.owner.as_str()));
        let Some(m) = state.marks.get_mut(lease.key.as_str()) else {
            return Ok(());
        };
        let ours = m.owner.as_ref() == Some(&lease.owner) || m.owner.as_ref() == Some(&released);
        #[cfg(feature = "simulation-planted")]
        let ours = ours || lambda_dedup::planted::Planted::ReleaseIgnoresOwner.is_on();
        if ours && m.status == MarkStatus::InProgress {
            m.lease_expires_at = Some(std::time::UNIX_EPOCH);
            m.owner = Some(released);
            Ok(())
        } else {
            Err(fenced(lease, Some(m.clone())))
        }
    }
}

/// The trait methods: each one store call ([`MemoryStore::call`]: counted, meeting a fault or
/// applied under the lock), answered at once.
impl MemoryStore {
    fn claim_call(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        #[cfg(feature = "simulation-planted")]
        let stale = self.read_then_act(key);
        self.call(Op::Claim, Some(key), |s, now| {
            #[cfg(feature = "simulation-planted")]
            if let Some(stale) = stale {
                stale(s);
            }
            self.claim_now(s, now, key, fp, deadline)
        })
    }

    fn commit_call(&self, request: CommitRequest<'_>) -> Result<Commit, StoreError> {
        #[cfg(feature = "simulation-planted")]
        let stale = self.read_then_act(request.key);
        self.call(Op::Commit, Some(request.key), |s, now| {
            #[cfg(feature = "simulation-planted")]
            if let Some(stale) = stale {
                stale(s);
            }
            self.commit_now(s, now, &request)
        })
    }

    fn commit_batch_call(&self, requests: &[CommitRequest<'_>]) -> Vec<Result<Commit, StoreError>> {
        // One call for the batch; each request all or nothing, as in DynamoDB's rounds.
        match self.call(Op::CommitBatch, None, |s, now| {
            Ok(requests
                .iter()
                .map(|r| self.commit_now(s, now, r))
                .collect::<Vec<_>>())
        }) {
            Ok(results) => results,
            Err(e) => requests.iter().map(|_| Err(copy_fault(&e))).collect(),
        }
    }

    fn complete_call(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        self.call(Op::Complete, Some(&lease.key), |s, now| {
            self.complete_now(s, now, lease, result)
        })
    }

    fn release_call(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call(Op::Release, Some(&lease.key), |s, _| {
            self.release_now(s, lease)
        })
    }

    fn get_call(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        self.call(Op::Get, Some(key), |s, now| {
            Ok(s.marks
                .get(key.as_str())
                .filter(|m| m.is_live(now))
                .cloned())
        })
    }

    fn sequence_call(&self, write: SequencedWrite<'_>) -> Result<SequenceOutcome, StoreError> {
        self.call(Op::Sequence, Some(write.key), |s, _| {
            self.sequence_now(s, &write)
        })
    }

    fn create_once_call(&self, write: CreateOnce<'_>) -> Result<Commit, StoreError> {
        self.call(Op::CreateOnce, Some(write.key), |s, now| {
            self.create_once_now(s, now, &write)
        })
    }
}

impl MemoryStore {
    /// Planted `check-then-act`: the mark of `key` read under a lock of its own; the call then
    /// judges that copy under the next lock, over whatever was written in between (a write
    /// decided by a read, not by one conditional write: S4). Only an exploring scheduler
    /// switches callers between the two locks.
    #[cfg(feature = "simulation-planted")]
    fn read_then_act(&self, key: &DedupKey) -> Option<impl FnOnce(&mut State) + use<>> {
        if !lambda_dedup::planted::Planted::CheckThenAct.is_on() {
            return None;
        }
        let read = self.lock().marks.get(key.as_str()).cloned();
        let key = key.as_str().to_owned();
        Some(move |s: &mut State| match read {
            Some(m) => {
                s.marks.insert(key, m);
            }
            None => {
                s.marks.remove(&key);
            }
        })
    }
}

// The memory store answers at once: each method does its work when it is called and returns
// the answer as a ready future (as it did when the futures were boxed).
impl MarkStoreImpl for MemoryStore {
    fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        ready(self.claim_call(key, fp, deadline))
    }

    fn commit(
        &self,
        request: CommitRequest<'_>,
    ) -> impl Future<Output = Result<Commit, StoreError>> + Send {
        ready(self.commit_call(request))
    }

    fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a>],
    ) -> impl Future<Output = Vec<Result<Commit, StoreError>>> + Send {
        ready(self.commit_batch_call(requests))
    }

    fn complete(
        &self,
        lease: &Lease,
        result: Option<&str>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        ready(self.complete_call(lease, result))
    }

    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send {
        ready(self.release_call(lease))
    }

    fn get(&self, key: &DedupKey) -> impl Future<Output = Result<Option<Mark>, StoreError>> + Send {
        ready(self.get_call(key))
    }

    fn options(&self) -> &StoreOptions {
        &self.options
    }
}

impl SequenceStoreImpl for MemoryStore {
    fn apply_in_sequence(
        &self,
        write: SequencedWrite<'_>,
    ) -> impl Future<Output = Result<SequenceOutcome, StoreError>> + Send {
        ready(self.sequence_call(write))
    }
}

/// The memory store's table of high-water items (latest-wins mode), created on first use, as
/// a DynamoDB store keeps them in its mark table.
pub const HIGH_WATER_TABLE: &str = "dedup-high-water";

impl LatestStoreImpl for MemoryStore {
    fn high_water_table(&self) -> &str {
        self.create_table(HIGH_WATER_TABLE, lambda_dedup::latest::HIGH_WATER_KEY);
        HIGH_WATER_TABLE
    }
}

impl CreateOnceStoreImpl for MemoryStore {
    fn create_once(
        &self,
        write: CreateOnce<'_>,
    ) -> impl Future<Output = Result<Commit, StoreError>> + Send {
        ready(self.create_once_call(write))
    }
}

/// Time as the DynamoDB store keeps it: whole milliseconds.
fn ms(t: SystemTime) -> SystemTime {
    from_epoch_millis(epoch_millis(t))
}

/// Whether a claim may take `m` over now: its lease is over.
fn taken_over(m: &Mark, now: SystemTime) -> bool {
    #[cfg(feature = "simulation-planted")]
    if lambda_dedup::planted::Planted::ClaimIgnoresLiveLease.is_on()
        && m.status == MarkStatus::InProgress
    {
        return true;
    }
    lease_over(m, now)
}

/// An in-progress claim whose lease has ended (a missing lease never has).
fn lease_over(m: &Mark, now: SystemTime) -> bool {
    m.status == MarkStatus::InProgress
        && m.lease_expires_at
            .is_some_and(|l| epoch_millis(l) <= epoch_millis(now))
}

/// The takeover's fingerprint condition: none offered, none stored, or the same.
fn fp_allows(m: &Mark, fp: Option<&Fingerprint>) -> bool {
    match (fp, &m.fingerprint) {
        (Some(offered), Some(stored)) => offered == stored,
        _ => true,
    }
}

fn explain(
    key: &DedupKey,
    m: &Mark,
    fp: Option<&Fingerprint>,
    now: SystemTime,
) -> Result<lambda_dedup::Seen, StoreError> {
    #[cfg(feature = "simulation-planted")]
    let fp = fp.filter(|_| !lambda_dedup::planted::Planted::FingerprintNotCompared.is_on());
    m.clone()
        .classify(fp, now)
        .ok_or_else(|| StoreError::Contended(key.clone()))
}

fn fenced(lease: &Lease, current: Option<Mark>) -> StoreError {
    StoreError::Fenced {
        key: lease.key.clone(),
        current: current.map(Box::new),
    }
}
