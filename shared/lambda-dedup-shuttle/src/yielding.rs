//! A store whose every call is a point where the exploring scheduler may switch tasks: it
//! yields before and after the memory store's call (the call itself is one lock, as a
//! DynamoDB request is one write), and records which commits landed, in order, as they land.

use std::sync::{Arc, Mutex};

use lambda_dedup::store::{MarkStoreImpl, StoreOptions};
use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, Fingerprint, Lease, Mark, StoreError};
use lambda_dedup_memory::MemoryStore;
use shuttle::future::yield_now;

/// The memory store, with a yield to the scheduler around each call.
#[derive(Debug, Clone)]
pub struct Yielding {
    inner: MemoryStore,
    /// The keys whose commit applied, recorded as each call returns (after the store's lock is
    /// released, itself a switching point): the landing order of commits made one after another
    /// (a FIFO group's), not of two in flight at once. A std lock, held for no await.
    landed: Arc<Mutex<Vec<DedupKey>>>,
}

impl Yielding {
    /// `inner` seen through yields.
    pub fn new(inner: &MemoryStore) -> Self {
        Self {
            inner: inner.clone(),
            landed: Arc::default(),
        }
    }

    /// The keys whose commit applied, in the order they landed.
    pub fn landed(&self) -> Vec<DedupKey> {
        self.landed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the commit of `key` has landed.
    pub fn has_landed(&self, key: &DedupKey) -> bool {
        self.landed().contains(key)
    }

    fn record(&self, key: &DedupKey, commit: &Result<Commit, StoreError>) {
        if let Ok(Commit::Applied) = commit {
            self.landed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(key.clone());
        }
    }
}

impl MarkStoreImpl for Yielding {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<std::time::SystemTime>,
    ) -> Result<Claim, StoreError> {
        yield_now().await;
        let r = self.inner.claim(key, fp, deadline).await;
        yield_now().await;
        r
    }

    async fn commit(&self, request: CommitRequest<'_>) -> Result<Commit, StoreError> {
        yield_now().await;
        let r = self.inner.commit(request).await;
        self.record(request.key, &r);
        yield_now().await;
        r
    }

    async fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a>],
    ) -> Vec<Result<Commit, StoreError>> {
        yield_now().await;
        let r = self.inner.commit_batch(requests).await;
        for (request, commit) in requests.iter().zip(&r) {
            self.record(request.key, commit);
        }
        yield_now().await;
        r
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        yield_now().await;
        let r = self.inner.complete(lease, result).await;
        yield_now().await;
        r
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        yield_now().await;
        let r = self.inner.release(lease).await;
        yield_now().await;
        r
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        yield_now().await;
        let r = self.inner.get(key).await;
        yield_now().await;
        r
    }

    fn options(&self) -> &StoreOptions {
        self.inner.options()
    }
}
