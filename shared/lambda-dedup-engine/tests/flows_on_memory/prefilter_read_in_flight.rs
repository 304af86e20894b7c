//! The duplicate pre-filter's read is in flight while the batch's plans are made (issue 45): on
//! a store whose `BatchGetItem` answers only when told, every plan of the batch runs while the
//! read is sent and not yet answered, and the batch's outcomes are the pre-filter's as before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use lambda_dedup::store::{MarkStoreImpl, StoreOptions};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Fingerprint, Lease, Mark, Message, Retention,
    StoreError,
};
use lambda_dedup_engine::{Deduplicator, Outcome, Reason};
use lambda_dedup_memory::MemoryStore;
use tokio::sync::Notify;

use super::{credit, plan, spec};
use crate::support::code;

/// The memory store, its `get_many` sent (noted) and then held until [`Notify`]d.
#[derive(Debug)]
struct HeldRead {
    inner: MemoryStore,
    /// The keys of each read, in the order asked.
    reads: Mutex<Vec<Vec<String>>>,
    /// A read is sent and not yet answered.
    pending: AtomicBool,
    /// Lets the read answer (a notice given before the read waits is kept for it).
    answer: Notify,
}

impl MarkStoreImpl for HeldRead {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        self.inner.claim(key, fp, deadline).await
    }

    async fn commit(&self, request: CommitRequest<'_>) -> Result<Commit, StoreError> {
        self.inner.commit(request).await
    }

    async fn commit_batch(
        &self,
        requests: &[CommitRequest<'_>],
    ) -> Vec<Result<Commit, StoreError>> {
        self.inner.commit_batch(requests).await
    }

    async fn commit_batch_bounded(
        &self,
        requests: &[CommitRequest<'_>],
        max_in_flight: usize,
    ) -> Vec<Result<Commit, StoreError>> {
        self.inner
            .commit_batch_bounded(requests, max_in_flight)
            .await
    }

    async fn get_many(&self, keys: &[&DedupKey]) -> Result<Vec<Option<Mark>>, StoreError> {
        let asked = keys.iter().map(|k| k.as_str().to_owned()).collect();
        self.reads.lock().expect("reads").push(asked);
        self.pending.store(true, Ordering::SeqCst);
        self.answer.notified().await;
        self.pending.store(false, Ordering::SeqCst);
        self.inner.get_many(keys).await
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        self.inner.complete(lease, result).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease).await
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        self.inner.get(key).await
    }

    fn options(&self) -> &StoreOptions {
        self.inner.options()
    }
}

#[tokio::test]
async fn the_prefilter_read_is_in_flight_while_the_batch_is_planned() {
    let memory = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("ok"));
    memory.create_table("balances", "account");
    let store = Arc::new(HeldRead {
        inner: memory,
        reads: Mutex::default(),
        pending: AtomicBool::new(false),
        answer: Notify::new(),
    });
    let held: Arc<dyn lambda_dedup::MarkStore> = store.clone();
    let dedup = Deduplicator::with_store(spec(), held).with_duplicate_prefilter(true);
    let known = credit("m1", "e1", "a", 1);
    assert_eq!(dedup.transactional(&known, plan).await, Outcome::Applied);
    let not_json = Message {
        message_id: "m3".into(),
        body: b"not json".to_vec(),
        ..Message::default()
    };
    let mut no_amount = credit("m4", "e4", "a", 0);
    no_amount.body = serde_json::json!({"specversion": "1.0", "type": "credit",
        "source": "/bank", "id": "e4", "tenantid": "acme", "data": {"account": "a"}})
    .to_string()
    .into_bytes();
    let batch = [known, credit("m2", "e2", "a", 2), not_json, no_amount];

    let planned_while_pending = Mutex::new(Vec::new());
    let outcomes = dedup
        .transactional_batch(&batch, 4, |event| {
            let pending = store.pending.load(Ordering::SeqCst);
            planned_while_pending.lock().expect("noted").push(pending);
            store.answer.notify_one();
            plan(event)
        })
        .await;

    let noted = planned_while_pending.into_inner().expect("noted");
    assert_eq!(
        noted, [true; 3],
        "every plan made while the pre-filter's read was in flight"
    );
    assert!(
        matches!(outcomes[0], Outcome::Duplicate { .. }),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], Outcome::Applied);
    assert_eq!(code(&outcomes[2]), Some(Reason::BodyNotJson));
    assert_eq!(
        code(&outcomes[3]),
        Some(Reason::InvalidPayload),
        "{outcomes:?}"
    );
    let key = |m: &Message| spec().derive(m).expect("key").key.as_str().to_owned();
    assert_eq!(
        store.reads.lock().expect("reads").clone(),
        [vec![key(&batch[0]), key(&batch[1]), key(&batch[3])]],
        "one read, of the keys derived, in order; never the rejected message's"
    );
}
