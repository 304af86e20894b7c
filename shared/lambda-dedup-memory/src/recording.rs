//! The memory store for a store's own effect type: marks with the memory store's semantics
//! (leases, fencing, fingerprints, TTL counted at read), effects of any type `E` — a
//! PostgreSQL statement, a Valkey command — recorded in commit order instead of executed. A
//! function written for PostgreSQL or Valkey runs its tests on it: what it committed, once per
//! event, is [`Recording::committed`].

use std::fmt;
use std::sync::{Arc, Mutex};

use std::future::Future;

use lambda_dedup::store::{MarkStoreImpl, StoreOptions};
use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, Fingerprint, Lease, Mark, StoreError};

use crate::MemoryStore;

/// A [`MemoryStore`]'s marks, with the effects of type `E` each commit carried recorded, in
/// commit order, when (and only when) the mark was written with them. Cheap to clone; clones
/// share marks and records.
pub struct Recording<E> {
    marks: MemoryStore,
    committed: Arc<Mutex<Committed<E>>>,
}

/// Each commit that wrote its mark: the event's key and its effects.
type Committed<E> = Vec<(DedupKey, Vec<E>)>;

impl<E> Clone for Recording<E> {
    fn clone(&self) -> Self {
        Self {
            marks: self.marks.clone(),
            committed: self.committed.clone(),
        }
    }
}

impl<E> fmt::Debug for Recording<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recording")
            .field("marks", &self.marks)
            .finish_non_exhaustive()
    }
}

impl<E: Clone> Recording<E> {
    /// Records the commits made on `marks` (its retention, lease and clock are the store's).
    pub fn new(marks: MemoryStore) -> Self {
        Self {
            marks,
            committed: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The marks' store: to read marks, move its clock or inject faults.
    pub fn marks(&self) -> &MemoryStore {
        &self.marks
    }

    /// Every commit that wrote its mark, in order: the event's key and the effects written
    /// with it.
    pub fn committed(&self) -> Committed<E> {
        self.committed.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The effects committed, in order, whatever their event.
    pub fn effects(&self) -> Vec<E> {
        self.committed().into_iter().flat_map(|(_, e)| e).collect()
    }

    fn record(&self, request: &CommitRequest<'_, E>) {
        if let Ok(mut committed) = self.committed.lock() {
            committed.push((request.key.clone(), request.effects.to_vec()));
        }
    }
}

/// The request's mark without its effects: what the marks' store judges and writes.
fn mark_only<'a, E>(request: &CommitRequest<'a, E>) -> CommitRequest<'a> {
    CommitRequest {
        key: request.key,
        fingerprint: request.fingerprint,
        result: request.result,
        effects: &[],
    }
}

impl<E: Clone + Send + Sync + fmt::Debug> MarkStoreImpl<E> for Recording<E> {
    fn claim<'a>(
        &'a self,
        key: &'a DedupKey,
        fp: Option<&'a Fingerprint>,
        deadline: Option<std::time::SystemTime>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        MarkStoreImpl::claim(&self.marks, key, fp, deadline)
    }

    async fn commit(&self, request: CommitRequest<'_, E>) -> Result<Commit, StoreError> {
        let commit = MarkStoreImpl::commit(&self.marks, mark_only(&request)).await?;
        if commit == Commit::Applied {
            self.record(&request);
        }
        Ok(commit)
    }

    async fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a, E>],
    ) -> Vec<Result<Commit, StoreError>> {
        let marks: Vec<CommitRequest<'_>> = requests.iter().map(mark_only).collect();
        let results = MarkStoreImpl::commit_batch(&self.marks, &marks).await;
        for (request, result) in requests.iter().zip(&results) {
            if matches!(result, Ok(Commit::Applied)) {
                self.record(request);
            }
        }
        results
    }

    fn complete<'a>(
        &'a self,
        lease: &'a Lease,
        result: Option<&'a str>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        MarkStoreImpl::complete(&self.marks, lease, result)
    }

    fn release<'a>(
        &'a self,
        lease: &'a Lease,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        MarkStoreImpl::release(&self.marks, lease)
    }

    fn get<'a>(
        &'a self,
        key: &'a DedupKey,
    ) -> impl Future<Output = Result<Option<Mark>, StoreError>> + Send {
        MarkStoreImpl::get(&self.marks, key)
    }

    fn options(&self) -> &StoreOptions {
        MarkStoreImpl::options(&self.marks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{Retention, Scope};
    use std::time::Duration;

    /// A commit records its effects once: the duplicate commit records nothing, and a batch
    /// records only the requests that wrote their mark.
    #[tokio::test]
    async fn a_recording_store_records_each_events_effects_once() {
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let store: Recording<String> = Recording::new(MemoryStore::new(retention));
        let scope = Scope::new("t", "c").expect("scope");
        let (k1, k2) = (
            DedupKey::new(&scope, "", &["e1"]),
            DedupKey::new(&scope, "", &["e2"]),
        );
        let effects = ["credit 5".to_owned()];
        let request = CommitRequest {
            key: &k1,
            fingerprint: None,
            result: None,
            effects: &effects,
        };
        assert_eq!(
            store.commit(request).await.expect("commit"),
            Commit::Applied
        );
        assert!(matches!(
            store.commit(request).await.expect("commit"),
            Commit::Seen(_)
        ));
        let batch = [
            request,
            CommitRequest {
                key: &k2,
                ..request
            },
        ];
        let results = store.commit_batch(&batch).await;
        assert!(matches!(results[0], Ok(Commit::Seen(_))), "{results:?}");
        assert_eq!(results[1].as_ref().ok(), Some(&Commit::Applied));
        let committed = store.committed();
        assert_eq!(committed.len(), 2, "{committed:?}");
        assert_eq!(committed[1].0, k2);
        assert_eq!(store.effects(), ["credit 5", "credit 5"]);
    }
}
