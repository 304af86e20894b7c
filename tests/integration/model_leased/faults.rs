//! Crash during complete: on DynamoDB an SDK interceptor on a second client of the same local
//! DynamoDB table fails the store's complete (never sent, or written and its answer lost); on
//! PostgreSQL a wrapper of a second store on the same marks table does (never begun, or
//! committed and its answer dropped), and on Valkey the same wrapper (never sent, or its script
//! run and its answer dropped); the memory store has a fault hook of its own.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CompleteFault {
    /// The `UpdateItem` never leaves the process.
    NeverSent,
    /// DynamoDB applies the `UpdateItem`; its answer is dropped.
    AnswerLost,
}

#[derive(Debug, Default)]
pub(super) struct CompleteFaults {
    pub(super) mode: Mutex<Option<CompleteFault>>,
    /// Marks (partition keys) whose complete (or write-back) never reached DynamoDB.
    pub(super) unsent: Mutex<Vec<String>>,
    /// Marks whose complete DynamoDB wrote, with the answer lost on the way back.
    pub(super) lost: Mutex<Vec<String>>,
}

#[derive(Debug, Clone)]
pub(super) struct CompleteInterceptor(pub(super) Arc<CompleteFaults>);

/// The partition key of a complete in flight, from before to after transmission.
#[derive(Debug, Clone)]
pub(super) struct SentComplete(String);

impl Storable for SentComplete {
    type Storer = StoreReplace<Self>;
}

impl Intercept for CompleteInterceptor {
    fn name(&self) -> &'static str {
        "model-leased-complete-faults"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        // The store's `UpdateItem`s: `complete` (it sets `:done`); claims and releases are
        // `UpdateItem`s too, and are let through.
        if request.headers().get("x-amz-target") != Some("DynamoDB_20120810.UpdateItem") {
            return Ok(());
        }
        let body = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .unwrap_or_default();
        let pk = body["Key"]["pk"]["S"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let values = &body["ExpressionAttributeValues"];
        let complete = values.get(":done").is_some();
        let mode = *lock(&self.0.mode);
        match mode {
            None => Ok(()),
            Some(_) if !complete => Ok(()),
            Some(CompleteFault::NeverSent) => {
                lock(&self.0.unsent).push(pk);
                Err("injected: the process died before its complete reached DynamoDB".into())
            }
            Some(CompleteFault::AnswerLost) => {
                cfg.interceptor_state().store_put(SentComplete(pk));
                Ok(())
            }
        }
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(SentComplete(pk)) = cfg.load::<SentComplete>() else {
            return Ok(());
        };
        if context.response().status().is_success() {
            lock(&self.0.lost).push(pk.clone());
        }
        Err("injected: the complete's answer was lost".into())
    }
}

/// Crash during complete on PostgreSQL or Valkey (no SDK to intercept): the real store on the
/// same marks, its `complete` failed per [`CompleteFaults`] — never sent (the transaction not
/// begun, the script not sent), or committed on the server and its answer dropped. Every other
/// call goes through.
pub(super) struct FaultyCompletes<E> {
    pub(super) inner: Arc<dyn lambda_dedup::MarkStore<E>>,
    pub(super) faults: Arc<CompleteFaults>,
}

// By hand: a derive would require `E: Debug`.
impl<E> std::fmt::Debug for FaultyCompletes<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyCompletes")
            .field("inner", &self.inner)
            .field("faults", &self.faults)
            .finish()
    }
}

impl<E: 'static> lambda_dedup::store::MarkStoreImpl<E> for FaultyCompletes<E> {
    fn claim<'a>(
        &'a self,
        key: &'a DedupKey,
        fp: Option<&'a lambda_dedup::Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> impl Future<Output = Result<lambda_dedup::Claim, StoreError>> + Send {
        self.inner.claim(key, fp, deadline)
    }
    fn commit<'a>(
        &'a self,
        request: lambda_dedup::CommitRequest<'a, E>,
    ) -> impl Future<Output = Result<lambda_dedup::Commit, StoreError>> + Send {
        self.inner.commit(request)
    }
    fn commit_batch<'a>(
        &'a self,
        requests: &'a [lambda_dedup::CommitRequest<'a, E>],
    ) -> impl Future<Output = Vec<Result<lambda_dedup::Commit, StoreError>>> + Send {
        self.inner.commit_batch(requests)
    }
    fn commit_batch_bounded<'a>(
        &'a self,
        requests: &'a [lambda_dedup::CommitRequest<'a, E>],
        max_in_flight: usize,
    ) -> impl Future<Output = Vec<Result<lambda_dedup::Commit, StoreError>>> + Send {
        self.inner.commit_batch_bounded(requests, max_in_flight)
    }
    fn get_many<'a>(
        &'a self,
        keys: &'a [&'a DedupKey],
    ) -> impl Future<Output = Result<Vec<Option<lambda_dedup::Mark>>, StoreError>> + Send {
        self.inner.get_many(keys)
    }
    async fn complete(
        &self,
        lease: &lambda_dedup::Lease,
        result: Option<&str>,
    ) -> Result<(), StoreError> {
        let pk = lease.key.as_str().to_owned();
        let mode = *lock(&self.faults.mode);
        match mode {
            None => self.inner.complete(lease, result).await,
            Some(CompleteFault::NeverSent) => {
                lock(&self.faults.unsent).push(pk);
                Err(StoreError::store(
                    FaultKind::Network,
                    "injected: the process died before its complete reached PostgreSQL",
                ))
            }
            Some(CompleteFault::AnswerLost) => {
                if self.inner.complete(lease, result).await.is_ok() {
                    lock(&self.faults.lost).push(pk);
                }
                Err(StoreError::store(
                    FaultKind::Timeout,
                    "injected: the complete's answer was lost",
                ))
            }
        }
    }
    fn release<'a>(
        &'a self,
        lease: &'a lambda_dedup::Lease,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.release(lease)
    }
    fn get<'a>(
        &'a self,
        key: &'a DedupKey,
    ) -> impl Future<Output = Result<Option<lambda_dedup::Mark>, StoreError>> + Send {
        self.inner.get(key)
    }
    fn options(&self) -> &lambda_dedup::StoreOptions {
        self.inner.options()
    }
}
