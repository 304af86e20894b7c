//! The step guard: a durable step's effects once, across the replays of its execution.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_durable_execution_sdk::{BoxError, DurableContext, OperationError};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Lease, MarkStore, OwnerToken, Scope, Seen, StoreError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What a transactional step commits: its writes (of the store's effect type) and its output,
/// stored with the mark and returned to every replay of the step.
#[derive(Debug, Clone)]
pub struct Writes<E, O> {
    /// The writes, committed with the step's mark or not at all.
    pub effects: Vec<E>,
    /// The step's output.
    pub output: O,
}

/// Why a guarded step did not finish (the SDK's retry strategy for the step decides what
/// follows: by default it retries with a backoff).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The store failed or was unreachable; nothing is known to be written by this attempt.
    #[error("the mark store failed: {0}")]
    Store(#[from] StoreError),
    /// An effect's condition did not hold; nothing was written.
    #[error("effect {index}'s condition failed; nothing written")]
    EffectCondition {
        /// Position of the effect.
        index: usize,
    },
    /// An earlier attempt of this step claimed it and its claim was not checkpointed (the
    /// invocation ended between the two); its lease runs out at the time given.
    #[error("an earlier attempt of this step holds its claim until its lease runs out")]
    Held {
        /// When the earlier attempt's lease runs out.
        lease_expires_at: Option<SystemTime>,
    },
    /// The step's mark holds what this guard cannot read back as the step's output (another
    /// step of the execution under the same name, or an output type that changed).
    #[error("the step's stored result is not its output: {0}")]
    Stored(String),
    /// The output could not be written as JSON to be stored with the mark.
    #[error("the step's output is not JSON: {0}")]
    Output(#[source] serde_json::Error),
    /// The step's own work failed (the plan or the external call).
    #[error("the step failed: {0}")]
    Work(#[source] BoxError),
}

/// The claim of a [`Steps::call`], checkpointed by its own step: the owner's token and the
/// claim's times, so every replay of the execution holds the same claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "claim", rename_all = "snake_case")]
pub(super) enum Claimed {
    /// Claimed by this execution: the lease's owner, when it runs out and when the step was
    /// first attempted (milliseconds since the epoch).
    Held {
        owner: String,
        expires_ms: u64,
        first_attempt_ms: u64,
    },
    /// The step had completed before: its stored result (JSON).
    Done { result: String },
}

/// The step guard of a durable function: marks keyed by the execution's ARN and each step's
/// name, in the function's mark table ([`Dedup::durable_steps`](crate::Dedup::durable_steps)).
/// A step's name must be unique within its execution and the same on every replay, as the SDK's
/// own step names are meant to be.
#[derive(Debug, Clone)]
pub struct Steps<E = lambda_dedup::Effect> {
    store: Arc<dyn MarkStore<E>>,
    scope: Scope,
}

impl<E: Send + Sync + 'static> Steps<E> {
    /// A guard over `store`, keys under `scope`.
    pub fn new(store: Arc<dyn MarkStore<E>>, scope: Scope) -> Self {
        Steps { store, scope }
    }

    /// The mark's key of the step `name` of the execution `execution_arn`: the same on every
    /// replay, in every invocation, and different for every other execution or step.
    pub fn key(&self, execution_arn: &str, name: &str) -> DedupKey {
        DedupKey::new(&self.scope, "", &["durable-step", execution_arn, name])
    }

    /// The idempotency key the step `name` of `ctx`'s execution sends to an external system:
    /// derived from the execution and the step only, so the same on every replay.
    pub fn idempotency_key(&self, ctx: &DurableContext, name: &str) -> String {
        self.key(ctx.execution_arn(), name).idempotency_key()
    }

    /// The durable step `name`: `plan` says which writes the step makes and what it returns;
    /// the writes commit with the step's mark in one transaction (S5). A replay of a step whose
    /// commit went through (the invocation ended before the SDK checkpointed it) finds the mark
    /// and returns the output stored with it, writing nothing.
    pub async fn transact<O, F>(
        &self,
        ctx: &DurableContext,
        name: &str,
        plan: F,
    ) -> Result<O, OperationError>
    where
        O: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce() -> Result<Writes<E, O>, BoxError> + Send + 'static,
    {
        let (store, key) = (self.store.clone(), self.key(ctx.execution_arn(), name));
        let body = async move { commit_once(store.as_ref(), &key, plan).await };
        step(ctx, name.to_owned(), body).await
    }

    /// The durable step `name` that calls an external system: `call` gets the step's
    /// idempotency key (the same on every replay: send it, so the system applies a repeated
    /// call once) and returns the step's output, stored with the mark. The claim is a step of
    /// its own (`{name}/claim`), checkpointed before the call, so the lease is the execution's:
    /// a replay in a later invocation, however long after, completes it under the same owner. A
    /// replay of a step whose call completed returns the stored output without calling.
    pub async fn call<O, F, Fut>(
        &self,
        ctx: &DurableContext,
        name: &str,
        call: F,
    ) -> Result<O, OperationError>
    where
        O: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce(String) -> Fut + Send + 'static,
        Fut: Future<Output = Result<O, BoxError>> + Send + 'static,
    {
        let claimed = self.claim_step(ctx, name).await?;
        self.call_step(ctx, name, claimed, call).await
    }

    /// The claim step of the call `name` (`{name}/claim`): the step claimed for this execution
    /// (the owner's token checkpointed with the step), or its stored result.
    pub(super) async fn claim_step(
        &self,
        ctx: &DurableContext,
        name: &str,
    ) -> Result<Claimed, OperationError> {
        let (store, key) = (self.store.clone(), self.key(ctx.execution_arn(), name));
        let body = async move { claim(store.as_ref(), &key).await };
        step(ctx, format!("{name}/claim"), body).await
    }

    /// The call step `name`: the call under the checkpointed claim, however long after the
    /// claim step it runs (its owner completes the mark whether or not the lease has run out).
    pub(super) async fn call_step<O, F, Fut>(
        &self,
        ctx: &DurableContext,
        name: &str,
        claimed: Claimed,
        call: F,
    ) -> Result<O, OperationError>
    where
        O: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce(String) -> Fut + Send + 'static,
        Fut: Future<Output = Result<O, BoxError>> + Send + 'static,
    {
        let (store, key) = (self.store.clone(), self.key(ctx.execution_arn(), name));
        let body = async move { call_once(store.as_ref(), key, claimed, call).await };
        step(ctx, name.to_owned(), body).await
    }
}

/// The durable step `name` running `body`, the guard's error boxed for the SDK (whose retry
/// strategy for the step decides what follows).
async fn step<O, Fut>(ctx: &DurableContext, name: String, body: Fut) -> Result<O, OperationError>
where
    O: Serialize + DeserializeOwned + Send + 'static,
    Fut: Future<Output = Result<O, GuardError>> + Send + 'static,
{
    ctx.step(move |_| async move { body.await.map_err(BoxError::from) })
        .name(name)
        .await
}

/// The transactional step's body: the plan's writes with the mark, or the stored output.
async fn commit_once<E, O, F>(
    store: &dyn MarkStore<E>,
    key: &DedupKey,
    plan: F,
) -> Result<O, GuardError>
where
    O: Serialize + DeserializeOwned,
    F: FnOnce() -> Result<Writes<E, O>, BoxError>,
{
    let writes = plan().map_err(GuardError::Work)?;
    let result = serde_json::to_string(&writes.output).map_err(GuardError::Output)?;
    let committed = store
        .commit(CommitRequest {
            key,
            fingerprint: None,
            result: Some(&result),
            effects: &writes.effects,
        })
        .await?;
    match committed {
        Commit::Applied => Ok(writes.output),
        Commit::Seen(seen) => output(&stored_result(seen)?),
        Commit::EffectRejected { index } => Err(GuardError::EffectCondition { index }),
    }
}

/// The claim step's body: the step claimed for this execution, or its stored result.
async fn claim<E>(store: &dyn MarkStore<E>, key: &DedupKey) -> Result<Claimed, GuardError> {
    match store.claim(key, None, None).await? {
        Claim::Claimed(lease) => Ok(Claimed::Held {
            owner: lease.owner.as_str().to_owned(),
            expires_ms: millis(lease.expires_at),
            first_attempt_ms: millis(lease.first_attempt_at),
        }),
        Claim::Seen(seen) => Ok(Claimed::Done {
            result: stored_result(seen)?,
        }),
    }
}

/// The call step's body: the call under the checkpointed claim, then the mark completed with
/// its output; or the output stored by an earlier completion.
async fn call_once<E, O, F, Fut>(
    store: &dyn MarkStore<E>,
    key: DedupKey,
    claimed: Claimed,
    call: F,
) -> Result<O, GuardError>
where
    O: Serialize + DeserializeOwned,
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<O, BoxError>>,
{
    let (owner, expires_ms, first_attempt_ms) = match claimed {
        Claimed::Done { result } => return output(&result),
        Claimed::Held {
            owner,
            expires_ms,
            first_attempt_ms,
        } => (owner, expires_ms, first_attempt_ms),
    };
    // A replay of a call that completed but was not checkpointed: the stored output, no call.
    if let Some(mark) = store.get(&key).await?
        && let Some(seen @ Seen::Duplicate(_)) = mark.classify(None, store.now())
    {
        return output(&stored_result(seen)?);
    }
    let lease = Lease {
        key: key.clone(),
        owner: OwnerToken::from_stored(owner),
        expires_at: at(expires_ms),
        fingerprint: None,
        first_attempt_at: at(first_attempt_ms),
    };
    let output = call(key.idempotency_key())
        .await
        .map_err(GuardError::Work)?;
    let result = serde_json::to_string(&output).map_err(GuardError::Output)?;
    store.complete(&lease, Some(&result)).await?;
    Ok(output)
}

/// The result stored with a mark that stands in the step's way: a completed mark's; a live
/// claim or a conflict has none.
fn stored_result(seen: Seen) -> Result<String, GuardError> {
    match seen {
        Seen::Duplicate(mark) => mark
            .result
            .ok_or_else(|| GuardError::Stored("a completed mark without a result".into())),
        Seen::InProgress { lease_expires_at } => Err(GuardError::Held { lease_expires_at }),
        Seen::Conflict { .. } => Err(GuardError::Stored(
            "a conflicting fingerprint on a step's mark".into(),
        )),
    }
}

/// A stored result read back as the step's output.
fn output<O: DeserializeOwned>(result: &str) -> Result<O, GuardError> {
    serde_json::from_str(result).map_err(|e| GuardError::Stored(e.to_string()))
}

fn millis(t: SystemTime) -> u64 {
    lambda_dedup::clock::epoch_millis(t)
}

fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}
