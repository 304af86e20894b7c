//! The direct (synchronous or asynchronous) invoke door: any JSON event, any serde response.
//!
//! The event is deduplicated by the identity the builder is given — a JSON pointer into the
//! event (`.identity("/order_id")`, reading inside a JSON-encoded string field too,
//! [`lambda_dedup::pointer`]) — never by the request id, which Lambda keeps across its own
//! async retries but a caller that invokes again does not: the request id is only the opt-in
//! fallback [`Identity::envelope_id`](crate::Identity::envelope_id). The work runs under a lease (S6), within
//! `PROVIDER_TIMEOUT_MS` (past it the claim is released and the caller told to retry), and its response
//! is stored with the mark: a duplicate gets the first response back (S8), read into `R`. A
//! concurrent duplicate waits for the first to finish, up to `DEDUP_IN_PROGRESS_WAIT_MS`, and
//! then gets [`InvokeError::InProgress`], which the caller retries. Every invocation is one
//! counted outcome in the account (S14).
//!
//! **Whose answers.** Lambda tells a function nothing of who invoked it, so the door cannot
//! keep one invoker's stored answers from another: the key space is chosen openly when the
//! service is built ([`InvokeScope`]), and the door does not build without it. A fixed tenant
//! ([`InvokeScope::tenant`]) keys every event in that tenant alone — the function serves that
//! tenant, its resource policy names who may invoke it, and no tenant is read from the payload
//! (a builder that reads one is refused, [`BuildError::InvokeScope`]); a shared key space
//! ([`InvokeScope::shared_key_space`]) says that every invoker naming an identity gets the
//! answer stored under it. Either way store a minimal answer (a receipt), never a provider's
//! whole response.
//!
//! **Identity typed.** An identity (or tenant) read from the payload by a pointer is a JSON
//! string: `{"order_id": "42"}` is the order `42`, and `{"order_id": 42}` is refused
//! `identity_wrong_type` (`tenant`: the same), never read as the same key as `"42"`.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lambda_dedup::{AttributeValue, ENVELOPE_ID_ATTRIBUTE, IdentitySource, Message, TenantSource};
use lambda_dedup_engine::{Outcome, Reason, RetryCause};
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::event::typed;
use super::runner::Asked;
use super::{BuildError, Dedup, Event, HandlerError, Service, Transient};
use crate::door::{Answered, AnyOrder, Door, Record, Refused};
use crate::store::Marks;

/// Why a direct invocation is answered with an error, typed so that a caller (or a test)
/// matches it; it names no value (S3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvokeError {
    /// Another invocation of the same event holds its lease, still after the wait
    /// (`DEDUP_IN_PROGRESS_WAIT_MS`): retry later; the retry gets the first one's response.
    #[error("the same event is in progress in another invocation: retry later")]
    InProgress,
    /// Not done now (a store fault, the work's transient refusal, the deadline): retry, with
    /// the same event.
    #[error("not done now ({cause:?}): retry")]
    Retry {
        /// Why.
        cause: RetryCause,
    },
    /// The identity was used before with another payload (S11): never applied.
    #[error("the same identity came before with another payload (conflict)")]
    Conflict,
    /// The event can never be handled: no identity, a payload that is not the work's type, the
    /// work's own refusal (S2).
    #[error("rejected: {code}")]
    Rejected {
        /// Why.
        code: Reason,
    },
    /// The event was handled before, but what was stored cannot be read back as the response
    /// type (a response over the result bound is stored as its digest only).
    #[error("handled before; its stored response cannot be read back as the response type")]
    StoredResponseUnreadable,
}

/// The longest fixed tenant, as the key's own checks bound a tenant.
const MAX_TENANT_BYTES: usize = 1024;

/// The key space of the direct invoke door, chosen openly ([`Dedup::invoke`]'s first
/// argument): Lambda does not tell the function who invoked it, so whoever names an identity
/// in this space gets the answer stored under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvokeScope(Space);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Space {
    Tenant(String),
    Shared,
}

impl InvokeScope {
    /// Every event keyed in the fixed tenant `tenant`: the function serves that tenant alone
    /// (its resource policy names the invokers that act for it). No tenant is read from the
    /// payload. An empty tenant, one over 1024 bytes or with control characters is refused
    /// when the service is built.
    pub fn tenant(tenant: &str) -> Self {
        Self(Space::Tenant(tenant.to_owned()))
    }

    /// One key space shared by every invoker, said openly: any invoker that names an identity
    /// gets the answer stored under it. For invokers that trust each other; a tenant the
    /// builder reads from the payload (`.tenant(..)`) is then only a partition the invoker
    /// names, not a boundary, and the builder says so openly with
    /// [`Dedup::trusted_producers`](crate::Dedup::trusted_producers), as every door does.
    pub fn shared_key_space() -> Self {
        Self(Space::Shared)
    }
}

/// Why the direct invoke door refused its scope when built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvokeScopeError {
    /// The fixed tenant is empty, over 1024 bytes, or holds control characters.
    #[error("the invoke door's fixed tenant is empty, over 1024 bytes or holds control characters")]
    TenantInvalid,
    /// The tenant is fixed, and the builder also reads one from the payload (`.tenant(..)`,
    /// an attribute): which one keys the event would be ambiguous.
    #[error(
        "the invoke door's tenant is fixed, and the builder also reads a tenant from the payload: choose one"
    )]
    TenantFromPayload,
}

impl<S: Marks> Dedup<S> {
    /// The direct invoke service of `work` in the key space `scope`: the event (any JSON)
    /// read into the work's `T`, its response `R` stored with the mark and returned to every
    /// duplicate in that space. An error answer is an [`InvokeError`]; invoked
    /// asynchronously, Lambda retries it and then sends the event to the function's
    /// on-failure destination.
    ///
    /// The scope is not optional: without one the door does not build.
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Event, HandlerError};
    /// fn f(dedup: Dedup) {
    ///     let _ = dedup.identity("/order_id").invoke(|e: Event<serde_json::Value>| async move {
    ///         Ok::<_, HandlerError>(e.payload)
    ///     });
    /// }
    /// ```
    ///
    /// ```
    /// use lambda_dedup_runtime::{Dedup, Event, InvokeScope, HandlerError};
    /// fn f(dedup: Dedup) {
    ///     let scope = InvokeScope::tenant("acme");
    ///     let _ = dedup.identity("/order_id").invoke(scope, |e: Event<serde_json::Value>| async move {
    ///         Ok::<_, HandlerError>(e.payload)
    ///     });
    /// }
    /// ```
    pub fn invoke<T, R, F, Fut>(
        mut self,
        scope: InvokeScope,
        work: F,
    ) -> Result<Service<serde_json::Value, R>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        R: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(Event<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, HandlerError>> + Send + 'static,
    {
        if let Space::Tenant(tenant) = scope.0 {
            if !matches!(self.tenant, TenantSource::Single) {
                return Err(InvokeScopeError::TenantFromPayload.into());
            }
            let valid = !tenant.trim().is_empty()
                && tenant.len() <= MAX_TENANT_BYTES
                && !tenant.chars().any(char::is_control);
            if !valid {
                return Err(InvokeScopeError::TenantInvalid.into());
            }
            self.tenant = TenantSource::Fixed(tenant);
        }
        let door = Arc::new(Direct {
            pointers: typed_pointers(&self.identity, &self.tenant),
            response: PhantomData,
        });
        let at = self.payload_at();
        let dedup = Arc::new(self.leased(self.settings.scope.clone())?);
        let (wait, limit) = (
            self.settings.in_progress_wait,
            self.settings.provider_timeout,
        );
        let runner = Arc::new(self.runner());
        let work = Arc::new(work);
        Ok(Service::new(
            move |event: LambdaEvent<serde_json::Value>| {
                let (dedup, runner, work, door) =
                    (dedup.clone(), runner.clone(), work.clone(), door.clone());
                async move {
                    let (payload, context) = event.into_parts();
                    let event = LambdaEvent::new(Asked::new(payload), context);
                    let (deadline, kept) = (crate::bound::deadline(&event.context), &event.payload);
                    let (work, dedup) = (&*work, &*dedup);
                    // The event under a lease, within `limit`, its response kept for the answer
                    // and stored with the mark; a duplicate in progress waited for up to `wait`.
                    let leased = |m: Message, cutoff| async move {
                        let started = Instant::now();
                        let mut pause = Duration::from_millis(50);
                        loop {
                            let once = dedup.leased(&m, deadline, |d, _lease| async move {
                                let event = typed::<T>(at, &d)?;
                                // Bounded as a leased call is, so that a hung work releases its claim.
                                let response = tokio::time::timeout(limit, work(event))
                                    .await
                                    .map_err(|_| {
                                        HandlerError::Transient(Transient::CallTimeout { limit })
                                    })??;
                                let stored = serde_json::to_string(&response).map_err(|_| {
                                    HandlerError::invalid("the response does not serialise")
                                })?;
                                kept.keep(response);
                                Ok(Some(stored))
                            });
                            let outcome =
                                crate::bound::outcome_within(cutoff, &m.message_id, once).await;
                            let in_progress = matches!(
                                outcome,
                                Outcome::Retry {
                                    cause: RetryCause::InProgress,
                                    ..
                                }
                            );
                            let left = wait.saturating_sub(started.elapsed());
                            if !in_progress || left.is_zero() {
                                return outcome;
                            }
                            let nap = tokio::time::sleep(pause.min(left));
                            if crate::bound::within(cutoff, nap).await.is_none() {
                                return outcome;
                            }
                            pause = (pause * 2).min(Duration::from_secs(1));
                        }
                    };
                    runner.invoke(&*door, None, &event, &leased).await
                }
            },
        ))
    }
}

/// The direct invoke door: the event one record under the invocation's request id, answered
/// with the response its work kept, the stored one of a duplicate, or an [`InvokeError`].
struct Direct<R> {
    /// The pointers whose values must be JSON strings ([`typed_pointers`]).
    pointers: Vec<String>,
    response: PhantomData<fn() -> R>,
}

impl<R: DeserializeOwned + Send + 'static> Door for Direct<R> {
    type Event = Asked<serde_json::Value, R>;
    type Response = R;
    type Ordering = AnyOrder;
    const NAME: &'static str = "direct invoke";

    fn messages(&self, event: &Self::Event, context: &lambda_runtime::Context) -> Vec<Record> {
        let m = message(&context.request_id, &event.request);
        vec![match untyped(&self.pointers, &event.request) {
            Some(refused) => Err(Refused::of(&m, refused)),
            None => Ok(m),
        }]
    }

    async fn answer(
        &self,
        event: &Self::Event,
        done: Answered<'_>,
    ) -> Result<R, lambda_runtime::Error> {
        let outcome = done.report().outcomes().first().map_or_else(
            || Outcome::retry(RetryCause::NotProcessed, "no outcome"),
            |(_, outcome)| outcome.clone(),
        );
        answer(outcome, event.take()).map_err(lambda_runtime::Error::from)
    }
}

/// The pointers whose values must be JSON strings: the identity's and the tenant's, when read
/// from the payload by a pointer.
fn typed_pointers(identity: &IdentitySource, tenant: &TenantSource) -> Vec<String> {
    let mut pointers = Vec::new();
    if let IdentitySource::JsonPointer(p) = identity {
        pointers.push(p.clone());
    }
    if let TenantSource::JsonPointer(p) = tenant {
        pointers.push(p.clone());
    }
    pointers
}

/// The refusal of a payload whose identity (or tenant) is not a JSON string: `42` is not the
/// key of `"42"`. A value absent or unreadable is left to the key's own checks.
fn untyped(pointers: &[String], payload: &serde_json::Value) -> Option<Outcome> {
    pointers.iter().find_map(
        |pointer| match lambda_dedup::pointer::resolve(payload, pointer) {
            Ok(Some(v)) if !v.is_string() => Some(Outcome::Rejected {
                code: Reason::IdentityWrongType,
                reason: format!("the field `{pointer}` is not a JSON string"),
                key: None,
                invalid: None,
            }),
            _ => None,
        },
    )
}

/// The invocation's event as a library message, reported by its request id (also kept for the
/// opt-in fallback identity).
fn message(request_id: &str, payload: &serde_json::Value) -> Message {
    let mut m = Message {
        message_id: request_id.to_owned(),
        body: payload.to_string().into_bytes(),
        ..Message::default()
    };
    m.attributes.insert(
        ENVELOPE_ID_ATTRIBUTE.to_owned(),
        AttributeValue::String(request_id.to_owned()),
    );
    m
}

/// The answer of `outcome`: the response made now, the stored one of a duplicate, or the
/// typed error.
fn answer<R: DeserializeOwned>(outcome: Outcome, fresh: Option<R>) -> Result<R, InvokeError> {
    match outcome {
        // The invoke door's leased flow never supersedes; were it to, no response was made.
        Outcome::Applied | Outcome::Superseded => fresh.ok_or(InvokeError::Retry {
            cause: RetryCause::NotProcessed,
        }),
        Outcome::Duplicate { result, .. } => result
            .and_then(|stored| serde_json::from_str(&stored).ok())
            .ok_or(InvokeError::StoredResponseUnreadable),
        Outcome::Retry {
            cause: RetryCause::InProgress,
            ..
        } => Err(InvokeError::InProgress),
        Outcome::Retry { cause, .. } => Err(InvokeError::Retry { cause }),
        Outcome::Conflict => Err(InvokeError::Conflict),
        Outcome::Rejected { code, .. } | Outcome::Reconciled { code, .. } => {
            Err(InvokeError::Rejected { code })
        }
    }
}
