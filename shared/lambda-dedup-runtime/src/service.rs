//! The builder: one function's deduplication, built from its settings in `main`, as a
//! [`tower::Service`](lambda_runtime::Service) per source that `lambda_runtime::run` takes directly.
//!
//! ```no_run
//! use lambda_dedup_runtime::{Dedup, Effect, Event, Refusal};
//!
//! #[derive(serde::Deserialize)]
//! struct Credit { account: String, amount: i64 }
//!
//! fn credit(balances: &str, e: Event<Credit>) -> Result<Effect, Refusal> {
//!     let account = e.scoped(&e.payload.account);
//!     Ok(Effect::add(balances, ("account", account), "balance", e.payload.amount))
//! }
//!
//! # async fn run() -> Result<(), lambda_runtime::Error> {
//! let dedup = Dedup::from_env("sqs-credit")?.cloudevents("tenantid").dynamodb().await;
//! let balances = dedup.setting("BALANCES_TABLE")?;
//! lambda_runtime::run(dedup.sqs(move |e| credit(&balances, e))?).await
//! # }
//! ```
//!
//! [`Dedup::from_env`] reads every setting of [`crate::settings`] and refuses to start on a bad
//! one (S9); the store is chosen once ([`Dedup::dynamodb`] in Lambda, [`Dedup::store`] with a
//! `MemoryStore` in tests), and every guard the settings document is applied to the service it
//! builds. The work per event is a plain function of a typed [`Event`]: the payload deserialised
//! into the user's own type, with its tenant, key and time.
//!
//! | source | transactional (the effect commits with the mark) | external (a call under a lease) |
//! | --- | --- | --- |
//! | SQS, standard and FIFO | [`Dedup::sqs`] ([`Dedup::one_transaction_per_batch`]; [`Dedup::sqs_then`] with a follow-up) | [`Dedup::sqs_calls`] |
//! | SQS, a write then a call | [`Dedup::sqs_write_then_call`] | |
//! | Kinesis (feature `kinesis`) | `Dedup::kinesis` | |
//! | DynamoDB Streams (feature `dynamodb-streams`) | `Dedup::dynamodb_stream` | |
//! | SQS, an item created once per event | [`Dedup::sqs_create_once`] (the item is the mark) | |
//! | HTTP, signed webhooks (feature `webhook`) | `Dedup::webhook`: the inbox item created once | |

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, SystemTime};

#[cfg(any(feature = "dynamodb-streams", test))]
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
#[cfg(any(feature = "kinesis", test))]
use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
#[cfg(any(feature = "dynamodb-streams", test))]
use aws_lambda_events::event::streams::DynamoDbEventResponse;
#[cfg(any(feature = "kinesis", test))]
use aws_lambda_events::event::streams::KinesisEventResponse;
use lambda_dedup::{
    DedupKey, Derived, EventTimeSource, FingerprintSource, IdentitySource, KeySpec, Lease,
    MarkStore, Message, Scope, TenantSource, TimeFormat,
};
use lambda_dedup_batch::{
    Account, BatchReport, Deduplicator, HandlerError, LeasedDeduplicator, Outcome, Plan,
};
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;

use crate::queue::Queue;
use crate::settings::{Env, Settings, SettingsError};
use crate::sqs::{Accounting, Reconciliation};
use crate::store::{CreateOnceMarks, Items, Marks, NoStore, OnDynamoDb};

mod create_once;
#[cfg(any(feature = "webhook", test))]
mod webhook;
#[cfg(any(feature = "webhook", test))]
pub use webhook::WebhookService;

/// Why an event's work refuses it: [`Refusal::Invalid`] can never be handled (dead-lettered),
/// [`Refusal::Transient`] may work later (redelivered). Reasons name fields, never values.
pub type Refusal = HandlerError;

/// What an event's transactional work returns: the writes to commit with its mark — an
/// effect of the store's type `E` ([`Effect`](lambda_dedup::Effect) on DynamoDB and memory),
/// several, a [`Plan`] (writes and a result stored for duplicates) — or, as a `Result`, a
/// [`Refusal`].
pub trait IntoPlan<E = lambda_dedup::Effect> {
    /// The plan, or the refusal.
    fn into_plan(self) -> Result<Plan<E>, Refusal>;
}

impl IntoPlan for lambda_dedup::Effect {
    fn into_plan(self) -> Result<Plan, Refusal> {
        Ok(self.into())
    }
}

#[cfg(feature = "postgres")]
impl IntoPlan<lambda_dedup_postgres::SqlEffect> for lambda_dedup_postgres::SqlEffect {
    fn into_plan(self) -> Result<Plan<Self>, Refusal> {
        Ok(vec![self].into())
    }
}

#[cfg(feature = "valkey")]
impl IntoPlan<lambda_dedup_valkey::ValkeyEffect> for lambda_dedup_valkey::ValkeyEffect {
    fn into_plan(self) -> Result<Plan<Self>, Refusal> {
        Ok(vec![self].into())
    }
}

impl<E> IntoPlan<E> for Vec<E> {
    fn into_plan(self) -> Result<Plan<E>, Refusal> {
        Ok(self.into())
    }
}

impl<E> IntoPlan<E> for Plan<E> {
    fn into_plan(self) -> Result<Plan<E>, Refusal> {
        Ok(self)
    }
}

impl<E, P: IntoPlan<E>> IntoPlan<E> for Result<P, Refusal> {
    fn into_plan(self) -> Result<Plan<E>, Refusal> {
        self.and_then(IntoPlan::into_plan)
    }
}

/// One event, typed: the payload deserialised into the user's type `T`, with what its key was
/// derived from.
#[derive(Debug, Clone)]
pub struct Event<T> {
    /// The payload: the CloudEvents `data` for a CloudEvents function, else the whole body.
    pub payload: T,
    /// The tenant the key is scoped to (empty for a single-tenant function). Key the event's own
    /// items within it with [`Event::scoped`], so tenants stay apart in the data too (S1).
    pub tenant: String,
    /// The dedup key: pass [`DedupKey::idempotency_key`] to systems that take one.
    pub key: DedupKey,
    /// When the producer says the event happened, if it says.
    pub time: Option<SystemTime>,
}

impl<T> Event<T> {
    /// `id` within the event's tenant (`tenant/id`, [`lambda_dedup::tenant_scoped`]), for the
    /// keys of the items it writes; a single-tenant function's `id` itself (its tenant is
    /// empty, which a multi-tenant function's never is: an empty tenant is rejected).
    pub fn scoped(&self, id: &str) -> String {
        if self.tenant.is_empty() {
            id.to_owned()
        } else {
            lambda_dedup::tenant_scoped(&self.tenant, id)
        }
    }
}

/// Where the typed payload is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PayloadAt {
    /// The CloudEvents `data` member.
    Data,
    /// The whole JSON body.
    Body,
}

/// One function's deduplication: its settings, how keys are derived, the store `S`, and where
/// the account and late events go. Build it in `main`; turn it into the service of its source.
///
/// Without a store there is no service: a `Dedup<NoStore>` has no `sqs` (nor any other source).
///
/// ```compile_fail
/// # fn f(env: &lambda_dedup_runtime::Env) {
/// use lambda_dedup_runtime::{Dedup, Effect, Event};
/// let dedup = Dedup::read(env, "orders").unwrap();
/// // No `.dynamodb().await` or `.store(…)`: does not compile.
/// let _ = dedup.sqs(|_: Event<serde_json::Value>| Vec::<Effect>::new());
/// # }
/// ```
pub struct Dedup<S = Items> {
    function: String,
    env: Env,
    settings: Settings,
    identity: IdentitySource,
    tenant: TenantSource,
    fingerprint: Option<FingerprintSource>,
    time: Option<EventTimeSource>,
    store: S,
    accounting: Accounting,
    #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
    parking: Option<Arc<crate::parking::Parking>>,
    one_transaction: bool,
    whole_body: bool,
}

impl<S> std::fmt::Debug for Dedup<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedup")
            .field("function", &self.function)
            .field("identity", &self.identity)
            .field("store", &std::any::type_name::<S>())
            .finish_non_exhaustive()
    }
}

/// What the builder refuses: a setting (S9 and the rest of [`crate::settings`]). A service
/// without a store is not refused: it does not compile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting is missing or invalid.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

impl Dedup<NoStore> {
    /// The deduplication of `function` from the process environment: every setting of
    /// [`crate::settings`] read and checked, or the reason it cannot start. Events are
    /// CloudEvents (identity `source` + `id`, single tenant) until told otherwise.
    pub fn from_env(function: &str) -> Result<Self, SettingsError> {
        Self::read(&Env::process(), function)
    }

    /// [`from_env`](Self::from_env) from `env`: what tests call, with the same wiring.
    pub fn read(env: &Env, function: &str) -> Result<Self, SettingsError> {
        let settings = Settings::read(env, function)?;
        let reconciliation = env.get("DEDUP_RECONCILIATION_QUEUE_URL");
        Ok(Self {
            function: function.to_owned(),
            env: env.clone(),
            settings,
            identity: IdentitySource::CloudEvents,
            tenant: TenantSource::Single,
            fingerprint: None,
            time: None,
            store: NoStore,
            accounting: Accounting {
                namespace: crate::emf::NAMESPACE.into(),
                reconciliation: Reconciliation::To(
                    reconciliation
                        .filter(|u| !u.trim().is_empty())
                        .map(|u| Arc::new(Queue::new(u))),
                ),
            },
            #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
            parking: None,
            one_transaction: false,
            whole_body: false,
        })
    }

    /// Marks in the settings' DynamoDB mark table, through a client with the SDK timeouts of
    /// the settings. The store of a Lambda function.
    pub async fn dynamodb(self) -> Dedup {
        let client = lambda_dedup_dynamodb::connect().await;
        self.dynamodb_client(client)
    }

    /// Marks in the settings' DynamoDB mark table through `client` (tests: the local DynamoDB);
    /// a webhook service's marks are its inbox items, so it needs no mark table. A service
    /// that needs one is refused without `DEDUP_MARK_TABLE`.
    pub fn dynamodb_client(self, client: impl Into<lambda_dedup_dynamodb::Client>) -> Dedup {
        self.store(OnDynamoDb(client.into()))
    }

    /// Marks in `store`, a store of item effects with every capability: a
    /// `lambda_dedup_memory::MemoryStore` in tests (built with [`settings`](Self::settings)'
    /// retention and lease, as `testing::on_memory` does). The same builder type as
    /// [`dynamodb`](Self::dynamodb)'s.
    pub fn store(self, store: impl CreateOnceMarks) -> Dedup {
        self.on(Items::new(store))
    }

    /// Marks in `store`, keeping its type: a PostgreSQL or Valkey store (or
    /// `lambda_dedup_memory::Recording` of their effects in tests), or any [`Marks`] of your own.
    /// The builder then has the services the store can do.
    pub fn on<M: Marks>(self, store: M) -> Dedup<M> {
        Dedup {
            function: self.function,
            env: self.env,
            settings: self.settings,
            identity: self.identity,
            tenant: self.tenant,
            fingerprint: self.fingerprint,
            time: self.time,
            store,
            accounting: self.accounting,
            #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
            parking: self.parking,
            one_transaction: self.one_transaction,
            whole_body: self.whole_body,
        }
    }
}

impl<S> Dedup<S> {
    /// Events are structured CloudEvents: the identity is `source` + `id`, the tenant the
    /// extension `tenant_extension`, the fingerprint the `data`, the time the `time`; the
    /// payload is the `data`.
    pub fn cloudevents(mut self, tenant_extension: &str) -> Self {
        self.identity = IdentitySource::CloudEvents;
        self.tenant = TenantSource::CloudEventsExtension(tenant_extension.to_owned());
        self
    }

    /// Events are the user's own JSON: the identity is the value at `pointer` (e.g.
    /// `/order_id`), the fingerprint the whole body unless [`fingerprint`](Self::fingerprint)
    /// says otherwise; the payload is the whole body.
    pub fn identity(mut self, pointer: &str) -> Self {
        self.identity = IdentitySource::JsonPointer(pointer.to_owned());
        self
    }

    /// The identity is the message attribute `name` (the payload is still the whole body).
    pub fn identity_attribute(mut self, name: &str) -> Self {
        self.identity = IdentitySource::MessageAttribute(name.to_owned());
        self
    }

    /// The tenant is the value at `pointer` of the body (S1).
    pub fn tenant(mut self, pointer: &str) -> Self {
        self.tenant = TenantSource::JsonPointer(pointer.to_owned());
        self
    }

    /// The fingerprint is the values at `pointers`: the same identity with another value in any
    /// of them is a conflict (S11), while other fields may differ between retries.
    pub fn fingerprint(mut self, pointers: &[&str]) -> Self {
        self.fingerprint = Some(FingerprintSource::pointers(pointers));
        self
    }

    /// The event's own time is the value at `pointer`, written as `format` (late events, S10).
    /// `DEDUP_EVENT_TIME_FROM` still overrides it.
    pub fn time(mut self, pointer: &str, format: TimeFormat) -> Self {
        self.time = Some(EventTimeSource::JsonPointer {
            pointer: pointer.to_owned(),
            format,
        });
        self
    }

    /// The payload is the whole JSON body, for CloudEvents too (work that reads the envelope,
    /// such as its `type`).
    pub fn whole_body(mut self) -> Self {
        self.whole_body = true;
        self
    }

    /// The EMF namespace the account is printed in (default `lambda-dedup`).
    pub fn metrics_namespace(mut self, namespace: &str) -> Self {
        self.accounting.namespace = namespace.to_owned();
        self
    }

    /// Stream records that can never apply are parked in `parking` rather than in the queue
    /// `DEDUP_PARKING_QUEUE_URL` names (S15).
    #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
    pub fn parking(mut self, parking: crate::parking::Parking) -> Self {
        self.parking = Some(Arc::new(parking));
        self
    }

    /// Where stream records that can never apply are parked: [`parking`](Self::parking), or
    /// the queue `DEDUP_PARKING_QUEUE_URL` names (required then).
    #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
    fn parking_queue(&self) -> Result<Arc<crate::parking::Parking>, SettingsError> {
        match &self.parking {
            Some(p) => Ok(p.clone()),
            None => crate::parking::Parking::read(&self.env).map(Arc::new),
        }
    }

    /// SQS batches commit in as few `TransactWriteItems` as fit (batch-transaction mode) instead
    /// of one per message; FIFO batches still go message by message, in order.
    pub fn one_transaction_per_batch(mut self) -> Self {
        self.one_transaction = true;
        self
    }

    /// The settings read.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The environment the settings were read from.
    #[cfg(any(feature = "postgres", feature = "valkey"))]
    pub(crate) fn env(&self) -> &Env {
        &self.env
    }

    /// The function's own required variable `name` (a table, a URL), from the same environment.
    pub fn setting(&self, name: &str) -> Result<String, SettingsError> {
        self.env.required(name)
    }

    /// The key spec: the identity, tenant, fingerprint and time chosen, with the settings'
    /// body limit and event-time source applied.
    pub fn key_spec(&self) -> KeySpec {
        self.settings
            .key_spec(self.raw_spec(self.settings.scope.clone()))
    }

    /// The spec chosen, before the settings' body limit and event-time source.
    fn raw_spec(&self, scope: Scope) -> KeySpec {
        let mut spec = match self.identity {
            IdentitySource::CloudEvents => KeySpec::cloudevents(scope, "tenantid"),
            ref identity => {
                KeySpec::new(scope, identity.clone()).fingerprint(FingerprintSource::WholeBody)
            }
        }
        .tenant(self.tenant.clone());
        if let Some(f) = &self.fingerprint {
            spec = spec.fingerprint(f.clone());
        }
        if let Some(t) = &self.time {
            spec = spec.event_time(t.clone());
        }
        spec
    }

    fn payload_at(&self) -> PayloadAt {
        match self.identity {
            IdentitySource::CloudEvents if !self.whole_body => PayloadAt::Data,
            _ => PayloadAt::Body,
        }
    }
}

impl<S: Marks> Dedup<S> {
    /// The store's marks for a service in the function's mark table.
    fn mark_store(&self) -> Result<Arc<dyn MarkStore<S::Effect>>, BuildError> {
        Ok(self.store.mark_store(&self.settings)?)
    }

    fn deduplicator(&self, scope: Scope) -> Result<Deduplicator<S::Effect>, BuildError> {
        let store = self.mark_store()?;
        // The settings apply their guards (body limit, event time, cache size and age) in one
        // place, for the builder and `Settings::deduplicator` alike.
        Ok(self.settings.deduplicator_on(self.raw_spec(scope), store))
    }

    fn leased(&self, scope: Scope) -> Result<LeasedDeduplicator<S::Effect>, BuildError> {
        Ok(self
            .deduplicator(scope)?
            .with_provider_key_retention(self.settings.provider_key_retention))
    }

    /// A stream service's parts, parking required (S15).
    #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
    fn stream<W>(&self, effect: W) -> Result<Arc<Stream<W, S::Effect>>, BuildError> {
        Ok(Arc::new(Stream {
            parking: self.parking_queue()?,
            dedup: self.deduplicator(self.settings.scope.clone())?,
            effect,
            runner: self.runner(),
        }))
    }

    fn runner(&self) -> Runner {
        Runner {
            function: self.function.clone(),
            accounting: self.accounting.clone(),
            margin: self.settings.deadline_margin,
            max_concurrency: self.settings.max_concurrency,
        }
    }

    /// The SQS service of a transactional function: `effect` says what one event writes; the
    /// writes commit with the event's mark in one transaction (S5), so a redelivery is a
    /// duplicate and writes nothing. Answers with a partial batch response (S12). Refused
    /// without a store.
    pub fn sqs<T, F, P>(self, effect: F) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        self.sqs_service(effect, None)
    }

    /// [`sqs`](Self::sqs), then, once the invocation's writes are committed, `then` with the
    /// events applied now (not the duplicates, conflicts or refusals): a best-effort follow-up
    /// that needs the committed writes, such as a consistent read or a metric of its own. It
    /// cannot change an outcome: the writes are committed whatever it does.
    pub fn sqs_then<T, F, P, A, AFut>(
        self,
        effect: F,
        then: A,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
        A: Fn(Vec<Event<T>>) -> AFut + Send + Sync + 'static,
        AFut: Future<Output = ()> + Send + 'static,
    {
        let then: Arc<Then<T>> = Arc::new(move |events| Box::pin(then(events)));
        self.sqs_service(effect, Some(then))
    }

    /// What an SQS service of typed work holds: its deduplicator (in the function's scope), the
    /// work on the payload read where the builder says, and its runner.
    fn sqs_parts<T, F, P>(&self, effect: F) -> Result<SqsParts<S::Effect>, BuildError>
    where
        T: DeserializeOwned,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        let dedup = Arc::new(self.deduplicator(self.settings.scope.clone())?);
        let at = self.payload_at();
        let effect: Arc<TypedWork<S::Effect>> =
            Arc::new(move |d: &Derived| plan::<_, _, _, S::Effect>(at, d, &effect));
        Ok((dedup, effect, Arc::new(self.runner())))
    }

    fn sqs_service<T, F, P>(
        self,
        effect: F,
        then: Option<Arc<Then<T>>>,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        let (dedup, effect, runner) = self.sqs_parts(effect)?;
        let (at, one_transaction) = (self.payload_at(), self.one_transaction);
        Ok(Service::new(move |event: LambdaEvent<SqsEvent>| {
            let (dedup, effect, runner, then) =
                (dedup.clone(), effect.clone(), runner.clone(), then.clone());
            async move {
                let plan = |d: &Derived| effect(d);
                let applied = std::sync::Mutex::new(Vec::new());
                let answer = if one_transaction {
                    runner
                        .sqs_batch(event, |batch| async {
                            let kept = then.as_ref().map(|_| batch.clone());
                            let report = lambda_dedup_batch::run_batch_transactional(
                                batch,
                                runner.max_concurrency,
                                &dedup,
                                plan,
                            )
                            .await;
                            if let (Some(batch), Ok(mut applied)) = (kept, applied.lock()) {
                                let ids: std::collections::HashSet<&str> = report
                                    .outcomes()
                                    .iter()
                                    .filter(|(_, o)| *o == Outcome::Applied)
                                    .map(|(id, _)| id.as_str())
                                    .collect();
                                applied.extend(
                                    batch
                                        .iter()
                                        .filter(|m| ids.contains(m.message_id.as_str()))
                                        .filter_map(|m| event_of(at, dedup.spec(), m)),
                                );
                            }
                            report
                        })
                        .await
                } else {
                    runner
                        .sqs(event, |m| {
                            let (dedup, applied, keep) = (dedup.clone(), &applied, then.is_some());
                            async move {
                                let outcome = dedup.transactional(&m, plan).await;
                                if keep
                                    && outcome == Outcome::Applied
                                    && let (Some(e), Ok(mut applied)) =
                                        (event_of(at, dedup.spec(), &m), applied.lock())
                                {
                                    applied.push(e);
                                }
                                outcome
                            }
                        })
                        .await
                };
                if let Some(then) = then {
                    let applied = applied.into_inner().unwrap_or_default();
                    if !applied.is_empty() {
                        then(applied).await;
                    }
                }
                answer
            }
        }))
    }

    /// The SQS service of a function whose effect is a call to an external system: each event
    /// is claimed under a lease no longer than the invocation, `call` makes the call (passing
    /// `lease.key.idempotency_key()` to the system, so a retry is not applied twice) within
    /// `PROVIDER_TIMEOUT_MS`, and the mark completes with its result (S6). A takeover older
    /// than `PROVIDER_KEY_RETENTION_SECONDS` is not called but sent to reconciliation (S16).
    pub fn sqs_calls<T, F, Fut>(
        self,
        call: F,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(Event<T>, Lease) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<String>, Refusal>> + Send + 'static,
    {
        let dedup = Arc::new(self.leased(self.settings.scope.clone())?);
        let step = Arc::new(CallStep {
            at: self.payload_at(),
            timeout: self.settings.provider_timeout,
            call,
        });
        let runner = Arc::new(self.runner());
        Ok(Service::new(move |event: LambdaEvent<SqsEvent>| {
            let (dedup, step, runner) = (dedup.clone(), step.clone(), runner.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                runner
                    .sqs(event, |m| {
                        let (dedup, step) = (dedup.clone(), step.clone());
                        async move { step.run(&dedup, &m, deadline).await }
                    })
                    .await
            }
        }))
    }

    /// Two effects for one event: `write` commits with the event's mark (S5), and only once it
    /// is committed `call` makes the external call under a lease of its own step (S6, keyed to
    /// the same event in the consumer `<consumer>-call`). A redelivery after the write finds it a
    /// duplicate and still makes a call that did not complete, with the same idempotency key.
    /// One outcome per delivery in the account; each step is logged and its own account printed
    /// (EMF dimension `Step`: `write`, `call`).
    pub fn sqs_write_then_call<T, W, P, F, Fut>(
        self,
        write: W,
        call: F,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        W: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
        F: Fn(Event<T>, Lease) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<String>, Refusal>> + Send + 'static,
    {
        let scope = self.settings.scope.clone();
        let call_scope = Scope::new(scope.namespace(), &format!("{}-call", scope.consumer()))
            .map_err(SettingsError::Core)?;
        let writer = Arc::new(self.deduplicator(scope)?);
        let caller = Arc::new(self.leased(call_scope)?);
        let at = self.payload_at();
        let write = Arc::new(move |d: &Derived| plan::<_, _, _, S::Effect>(at, d, &write));
        let step = Arc::new(CallStep {
            at,
            timeout: self.settings.provider_timeout,
            call,
        });
        let runner = Arc::new(self.runner());
        Ok(Service::new(move |event: LambdaEvent<SqsEvent>| {
            let (writer, caller, write, step, runner) = (
                writer.clone(),
                caller.clone(),
                write.clone(),
                step.clone(),
                runner.clone(),
            );
            async move {
                let deadline = crate::deadline(&event.context);
                let steps = Arc::new(std::sync::Mutex::new([Account::default(); 2]));
                let counted = steps.clone();
                let answer = runner
                    .sqs(event, |m| {
                        let (writer, caller, write, step, steps) = (
                            writer.clone(),
                            caller.clone(),
                            write.clone(),
                            step.clone(),
                            counted.clone(),
                        );
                        async move {
                            let written = writer.transactional(&m, |d| write(d)).await;
                            let called = if written.acknowledged() {
                                Some(step.run(&caller, &m, deadline).await)
                            } else {
                                None
                            };
                            if let Ok(mut steps) = steps.lock() {
                                steps[0].record(&written);
                                if let Some(c) = &called {
                                    steps[1].record(c);
                                }
                            }
                            tracing::info!(message_id = %m.message_id, write = written.label(),
                                call = called.as_ref().map_or("not_made", Outcome::label), "steps");
                            merged(written, called)
                        }
                    })
                    .await;
                let steps = steps.lock().map(|s| *s).unwrap_or_default();
                for (name, account) in [("write", steps[0]), ("call", steps[1])] {
                    println!(
                        "{}",
                        account.emf_line_with(
                            &runner.accounting.namespace,
                            &[("Function", &runner.function), ("Step", name)]
                        )
                    );
                }
                answer
            }
        }))
    }

    /// The Kinesis service of a transactional function: records in order per partition key,
    /// records that can never apply parked in `DEDUP_PARKING_QUEUE_URL` (required) before the
    /// checkpoint passes them (S15).
    #[cfg(any(feature = "kinesis", test))]
    pub fn kinesis<T, F, P>(
        self,
        effect: F,
    ) -> Result<Service<KinesisEvent, KinesisEventResponse>, BuildError>
    where
        T: DeserializeOwned + 'static,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        let at = self.payload_at();
        self.stream_service(at, effect, |event: &KinesisEvent| &event.records)
    }

    /// The DynamoDB Streams service of a transactional function: each record's change
    /// ([`Change`](crate::dynamodb_stream::Change), its images read into `T`) in order per
    /// item, deduplicated by the identity the builder is given — a pointer into the record's
    /// `{"eventName", "keys", "newImage", "oldImage"}`, such as `.identity("/newImage/order_id")`,
    /// never the record's sequence number (S1). Records that can never apply are parked in
    /// `DEDUP_PARKING_QUEUE_URL` (required) before the checkpoint passes them (S15); a record
    /// without the identity (a `REMOVE`, when it is read from the new image) is one of them,
    /// so filter the trigger on `eventName` for the changes the function is for.
    #[cfg(any(feature = "dynamodb-streams", test))]
    pub fn dynamodb_stream<T, F, P>(
        self,
        effect: F,
    ) -> Result<Service<StreamEvent, DynamoDbEventResponse>, BuildError>
    where
        T: DeserializeOwned + 'static,
        F: Fn(Event<crate::dynamodb_stream::Change<T>>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        self.stream_service(PayloadAt::Body, effect, |event: &StreamEvent| {
            &event.records
        })
    }

    /// A stream service: the records `records` reads from each invocation's event, in order
    /// per group, through the typed work read `at` ([`crate::stream::run`]).
    #[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
    fn stream_service<E, R, T, F, P>(
        self,
        at: PayloadAt,
        effect: F,
        records: fn(&E) -> &[R],
    ) -> Result<Service<E, R::Response>, BuildError>
    where
        E: Send + 'static,
        R: crate::stream::StreamRecord + 'static,
        R::Response: 'static,
        T: DeserializeOwned + 'static,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        let stream = self.stream(move |d: &Derived| plan::<_, _, _, S::Effect>(at, d, &effect))?;
        Ok(Service::new(move |event: LambdaEvent<E>| {
            let s = stream.clone();
            async move {
                let (namespace, function) = (&s.runner.accounting.namespace, &s.runner.function);
                let (margin, parking) = (s.runner.margin, &s.parking);
                let records = records(&event.payload);
                let work = |batch| s.in_order(batch);
                crate::stream::run(
                    namespace,
                    function,
                    margin,
                    &event.context,
                    records,
                    parking,
                    work,
                )
                .await
            }
        }))
    }
}

/// An event's typed work, as the builder's SQS services hold it: its plan, or its refusal.
type TypedWork<E> = dyn Fn(&Derived) -> Result<Plan<E>, Refusal> + Send + Sync;

/// What an SQS service of typed work holds ([`Dedup::sqs_parts`]).
type SqsParts<E> = (Arc<Deduplicator<E>>, Arc<TypedWork<E>>, Arc<Runner>);

/// What a stream service (Kinesis, DynamoDB Streams) holds: its deduplicator, its typed work,
/// its runner and its parking.
#[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
struct Stream<W, E> {
    dedup: Deduplicator<E>,
    effect: W,
    runner: Runner,
    parking: Arc<crate::parking::Parking>,
}

#[cfg(any(feature = "kinesis", feature = "dynamodb-streams", test))]
impl<W, E: 'static> Stream<W, E>
where
    W: Fn(&Derived) -> Result<Plan<E>, Refusal>,
{
    /// A batch's work: each record's writes committed with its mark, records of one group in
    /// order, up to `max_concurrency` groups at once.
    async fn in_order(&self, batch: Vec<Message>) -> BatchReport {
        lambda_dedup_batch::run_batch(batch, self.runner.max_concurrency, |m| async move {
            self.dedup.transactional(&m, |d| (self.effect)(d)).await
        })
        .await
    }
}

/// The leased step: the typed call, bounded by the provider timeout.
struct CallStep<F> {
    at: PayloadAt,
    timeout: Duration,
    call: F,
}

impl<F> CallStep<F> {
    async fn run<T, Fut, E: 'static>(
        &self,
        dedup: &LeasedDeduplicator<E>,
        m: &Message,
        deadline: Option<SystemTime>,
    ) -> Outcome
    where
        T: DeserializeOwned,
        F: Fn(Event<T>, Lease) -> Fut,
        Fut: Future<Output = Result<Option<String>, Refusal>>,
    {
        dedup
            .leased(m, deadline, |d, lease| async move {
                let event = typed::<T>(self.at, &d)?;
                match tokio::time::timeout(self.timeout, (self.call)(event, lease)).await {
                    Ok(result) => result,
                    Err(_) => Err(Refusal::Transient(format!(
                        "the call took over {} ms (PROVIDER_TIMEOUT_MS)",
                        self.timeout.as_millis()
                    ))),
                }
            })
            .await
    }
}

/// The outcome of a delivery whose write ended `written` and whose call, made only after an
/// acknowledged write, ended `called`: the first step not acknowledged decides; else applied
/// if either step applied now, else a duplicate (with the call's stored result).
fn merged(written: Outcome, called: Option<Outcome>) -> Outcome {
    match (written, called) {
        (w, None) => w,
        (w, Some(_)) if !w.acknowledged() => w,
        (_, Some(c)) if !c.acknowledged() => c,
        (Outcome::Applied, Some(_)) | (_, Some(Outcome::Applied)) => Outcome::Applied,
        (Outcome::Duplicate { first_seen_at, .. }, Some(Outcome::Duplicate { result, .. })) => {
            Outcome::Duplicate {
                first_seen_at,
                result,
            }
        }
        (w, Some(_)) => w,
    }
}

/// A follow-up after an invocation's commits, given the events applied now.
type Then<T> = dyn Fn(Vec<Event<T>>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// The typed event of message `m` under `spec`, if it has one (an applied message does).
fn event_of<T: DeserializeOwned>(at: PayloadAt, spec: &KeySpec, m: &Message) -> Option<Event<T>> {
    spec.derive(m).ok().and_then(|d| typed(at, &d).ok())
}

/// The typed event of `d`, or the refusal of a payload that is not a `T`.
fn typed<T: DeserializeOwned>(at: PayloadAt, d: &Derived) -> Result<Event<T>, Refusal> {
    let body = d
        .body
        .as_ref()
        .ok_or_else(|| Refusal::Invalid("the body is not JSON".into()))?;
    let value = match at {
        PayloadAt::Body => body,
        PayloadAt::Data => body
            .get("data")
            .ok_or_else(|| Refusal::Invalid("data missing".into()))?,
    };
    let payload = parse(value)?;
    Ok(Event {
        payload,
        tenant: d.tenant.clone(),
        key: d.key.clone(),
        time: d.event_time,
    })
}

/// `value` as the user's type `T`, or the refusal the service gives a payload that is not one
/// (naming fields, never quoting values): what an event's payload goes through before the work.
pub fn parse<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, Refusal> {
    T::deserialize(value).map_err(|e| Refusal::Invalid(described(&e)))
}

/// Why a payload is not a `T`, naming fields but never quoting values (S3): serde's own message
/// only where it names a field alone.
fn described(e: &serde_json::Error) -> String {
    let message = e.to_string();
    if message.starts_with("missing field") || message.starts_with("duplicate field") {
        format!("the payload does not fit: {message}")
    } else {
        "the payload does not fit its type (a field has the wrong type or value)".into()
    }
}

/// The plan of `d` from the user's typed `effect`.
fn plan<T, F, P, E>(at: PayloadAt, d: &Derived, effect: &F) -> Result<Plan<E>, Refusal>
where
    T: DeserializeOwned,
    F: Fn(Event<T>) -> P,
    P: IntoPlan<E>,
{
    effect(typed(at, d)?).into_plan()
}

/// What one invocation's runner needs: the function's name, where its account goes, the deadline
/// margin and the concurrency.
#[derive(Debug, Clone)]
struct Runner {
    function: String,
    accounting: Accounting,
    margin: Duration,
    max_concurrency: usize,
}

impl Runner {
    async fn sqs<F, Fut>(
        &self,
        event: LambdaEvent<SqsEvent>,
        process: F,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error>
    where
        F: Fn(Message) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let cutoff = crate::bound::cutoff_at(crate::deadline(&event.context), self.margin);
        let (accounting, function) = (&self.accounting, &self.function);
        crate::sqs::per_message(
            accounting,
            function,
            event,
            cutoff,
            self.max_concurrency,
            process,
        )
        .await
    }

    async fn sqs_batch<F, Fut>(
        &self,
        event: LambdaEvent<SqsEvent>,
        process: F,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error>
    where
        F: FnOnce(Vec<Message>) -> Fut,
        Fut: Future<Output = BatchReport>,
    {
        let cutoff = crate::bound::cutoff_at(crate::deadline(&event.context), self.margin);
        // The whole batch until the cutoff (batch-transaction mode): abandoned whole after it,
        // what committed meanwhile is a duplicate then.
        crate::sqs::answer_to(&self.accounting, &self.function, event, cutoff, |batch| {
            let ids: Vec<String> = batch.iter().map(|m| m.message_id.clone()).collect();
            async move { crate::bound::report_within(cutoff, &ids, process(batch)).await }
        })
        .await
    }
}

/// The service of an SQS function: SQS events in, partial batch responses out.
pub type SqsService = Service<SqsEvent, SqsBatchResponse>;

type Handler<E, R> = dyn Fn(LambdaEvent<E>) -> Pin<Box<dyn Future<Output = Result<R, lambda_runtime::Error>> + Send>>
    + Send
    + Sync;

/// A function's service: takes the source's event, answers with its response (a partial batch
/// response for SQS and Kinesis). Give it to `lambda_runtime::run`; in tests, call it with
/// `tower::ServiceExt::oneshot` (or [`Service::call_with`]).
pub struct Service<E, R> {
    handler: Arc<Handler<E, R>>,
}

impl<E, R> Clone for Service<E, R> {
    fn clone(&self) -> Self {
        Self {
            handler: self.handler.clone(),
        }
    }
}

impl<E, R> std::fmt::Debug for Service<E, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Service")
    }
}

impl<E: 'static, R: 'static> Service<E, R> {
    fn new<F, Fut>(handler: F) -> Self
    where
        F: Fn(LambdaEvent<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, lambda_runtime::Error>> + Send + 'static,
    {
        Self {
            handler: Arc::new(move |event| Box::pin(handler(event))),
        }
    }

    /// One invocation with `payload` and a default context (no deadline): for tests.
    pub async fn call_with(&self, payload: E) -> Result<R, lambda_runtime::Error> {
        (self.handler)(LambdaEvent::new(
            payload,
            lambda_runtime::Context::default(),
        ))
        .await
    }
}

impl<E, R> lambda_runtime::Service<LambdaEvent<E>> for Service<E, R> {
    type Response = R;
    type Error = lambda_runtime::Error;
    type Future = Pin<Box<dyn Future<Output = Result<R, lambda_runtime::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, event: LambdaEvent<E>) -> Self::Future {
        (self.handler)(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, serde::Deserialize)]
    struct Payment {
        amount: i64,
    }

    fn env() -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("PROVIDER_TIMEOUT_MS", "200"),
            ("DEDUP_LEASE_SECONDS", "5"),
        ])
    }

    fn dedup() -> Dedup {
        let dedup = Dedup::read(&env(), "payer").expect("settings");
        crate::testing::on_memory(dedup).0.identity("/id")
    }

    fn event(bodies: &[&str]) -> SqsEvent {
        crate::testing::sqs_event(bodies)
    }

    fn failed(r: &SqsBatchResponse) -> Vec<&str> {
        r.batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }

    /// S6 through the builder: one call per event however often it is delivered, with the
    /// event's idempotency key; a payload that is not the user's type is rejected uncalled.
    #[tokio::test]
    async fn sqs_calls_makes_one_call_per_event_with_its_key() {
        let calls = Arc::new(AtomicUsize::new(0));
        let keys = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, k) = (calls.clone(), keys.clone());
        let service = dedup()
            .sqs_calls(move |e: Event<Payment>, lease: Lease| {
                c.fetch_add(1, Ordering::SeqCst);
                k.lock().expect("lock").push(lease.key.idempotency_key());
                let amount = e.payload.amount;
                async move { Ok(Some(format!("paid {amount}"))) }
            })
            .expect("service");
        let bodies = [
            r#"{"id": "p-1", "amount": 5}"#,
            r#"{"id": "p-1", "amount": 5}"#,
            r#"{"id": "p-2", "amount": "five"}"#,
        ];
        let answer = service.call_with(event(&bodies)).await.expect("answer");
        assert_eq!(failed(&answer), ["m2"]);
        let answer = service
            .call_with(event(&bodies[..1]))
            .await
            .expect("answer");
        assert!(failed(&answer).is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let keys = keys.lock().expect("lock");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0], keys[0].trim(), "a key");
    }

    /// `PROVIDER_TIMEOUT_MS` through the builder: a call that outlives it is given up and the
    /// message redelivered (a retry under the same key), never left to hang the invocation.
    #[tokio::test]
    async fn sqs_calls_gives_up_a_call_at_the_provider_timeout() {
        let service = dedup()
            .sqs_calls(|_: Event<Payment>, _: Lease| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(None)
            })
            .expect("service");
        let started = std::time::Instant::now();
        let answer = service
            .call_with(event(&[r#"{"id": "p-3", "amount": 1}"#]))
            .await
            .expect("answer");
        assert_eq!(failed(&answer), ["m0"]);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    /// `DEDUP_CACHE_SECONDS` through the builder: a duplicate the warm cache knows costs no
    /// store call, until the cached mark is older than the setting; then the store is asked
    /// again (so a mark an operator forgot is seen gone).
    #[tokio::test]
    async fn the_builder_ages_the_warm_cache_by_the_setting() {
        let env = env().with("DEDUP_CACHE_SECONDS", "5");
        let dedup = Dedup::read(&env, "payer").expect("settings");
        let clock = Arc::new(lambda_dedup::ManualClock::new(SystemTime::now()));
        let store = crate::testing::memory_store(dedup.settings()).with_clock(clock.clone());
        let service = dedup
            .identity("/id")
            .store(store.clone())
            .sqs(|_: Event<Payment>| Vec::<lambda_dedup::Effect>::new())
            .expect("service");
        let body = [r#"{"id": "p-9", "amount": 1}"#];
        for _ in 0..2 {
            let answer = service.call_with(event(&body)).await.expect("answer");
            assert!(failed(&answer).is_empty());
        }
        let warm = store.calls();
        service.call_with(event(&body)).await.expect("answer");
        assert_eq!(store.calls(), warm, "a cached duplicate asks no store");
        clock.advance(Duration::from_secs(6));
        service.call_with(event(&body)).await.expect("answer");
        assert!(
            store.calls() > warm,
            "past DEDUP_CACHE_SECONDS the store is asked"
        );
    }

    /// `sqs_then` hands the follow-up exactly the events applied now, typed, in both modes: not
    /// a duplicate, not a refusal, and nothing at all for a batch with none applied.
    #[tokio::test]
    async fn sqs_then_follows_up_the_events_applied_now() {
        for one_transaction in [false, true] {
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let calls = Arc::new(AtomicUsize::new(0));
            let (s, c) = (seen.clone(), calls.clone());
            let mut dedup = dedup();
            if one_transaction {
                dedup = dedup.one_transaction_per_batch();
            }
            let service = dedup
                .sqs_then(
                    |_: Event<Payment>| Vec::<lambda_dedup::Effect>::new(),
                    move |applied: Vec<Event<Payment>>| {
                        c.fetch_add(1, Ordering::SeqCst);
                        s.lock()
                            .expect("lock")
                            .extend(applied.iter().map(|e| e.payload.amount));
                        async {}
                    },
                )
                .expect("service");
            let bodies = [
                r#"{"id": "p-1", "amount": 5}"#,
                r#"{"id": "p-1", "amount": 5}"#,
                r#"{"id": "p-2", "amount": "five"}"#,
                r#"{"id": "p-3", "amount": 7}"#,
            ];
            let answer = service.call_with(event(&bodies)).await.expect("answer");
            assert_eq!(failed(&answer), ["m2"]);
            let mut amounts = seen.lock().expect("lock").clone();
            amounts.sort_unstable();
            assert_eq!(amounts, [5, 7], "one_transaction={one_transaction}");
            service
                .call_with(event(&bodies[..2]))
                .await
                .expect("answer");
            assert_eq!(
                calls.load(Ordering::SeqCst),
                1,
                "no follow-up for duplicates"
            );
        }
    }

    /// S3: a payload that does not fit names the field, never quotes the value.
    #[test]
    fn a_misfit_payload_is_refused_without_quoting_it() {
        let value = serde_json::json!({"amount": "4111 1111 1111 1111"});
        let Err(Refusal::Invalid(reason)) = parse::<Payment>(&value) else {
            panic!("accepted");
        };
        assert!(!reason.contains("4111"), "{reason}");
        let Err(Refusal::Invalid(reason)) = parse::<Payment>(&serde_json::json!({})) else {
            panic!("accepted");
        };
        assert!(reason.contains("amount"), "{reason}");
    }

    /// Two steps, one outcome: the first step not acknowledged decides; applied if either
    /// step applied now; a duplicate carries the call's stored result.
    #[test]
    fn the_steps_merge_into_one_outcome_per_delivery() {
        let at = SystemTime::now();
        let dup = |r: &str| Outcome::Duplicate {
            first_seen_at: at,
            result: Some(r.into()),
        };
        let retry = Outcome::retry(lambda_dedup_batch::RetryCause::Transient, "x");
        assert_eq!(merged(Outcome::Conflict, None), Outcome::Conflict);
        assert_eq!(merged(Outcome::Applied, Some(retry.clone())), retry);
        assert_eq!(merged(dup("w"), Some(Outcome::Applied)), Outcome::Applied);
        assert_eq!(merged(Outcome::Applied, Some(dup("c"))), Outcome::Applied);
        assert_eq!(merged(dup("w"), Some(dup("c"))), dup("c"));
    }

    /// A context whose deadline is `secs` from now, in epoch milliseconds as Lambda sends it.
    pub(crate) fn context_due_in(secs: u64) -> lambda_runtime::Context {
        let mut context = lambda_runtime::Context::default();
        let due = SystemTime::now() + Duration::from_secs(secs);
        context.deadline = due
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis() as u64;
        context
    }

    /// `DEDUP_DEADLINE_MARGIN_MS` of the builder's own `Env` bounds a stream service: with a
    /// margin longer than the time to the deadline, nothing is started and the shard is retried
    /// from its first record; with the default margin the same records apply.
    #[tokio::test]
    async fn a_stream_service_keeps_the_margin_of_its_settings() {
        let records = || {
            let e = r#"{"specversion": "1.0", "type": "t", "source": "/s", "id": "e1", "data": {"id": "e1"}}"#;
            let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, e);
            let record = serde_json::json!({"eventSource": "aws:kinesis", "eventID": "shardId-0:1",
                "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "a",
                    "sequenceNumber": "1", "approximateArrivalTimestamp": 1_700_000_000.0,
                    "data": data}});
            serde_json::from_value::<aws_lambda_events::event::kinesis::KinesisEvent>(
                serde_json::json!({ "Records": [record] }),
            )
            .expect("event")
        };
        for (margin, retried) in [(None, 0), (Some("60000"), 1)] {
            let env = crate::testing::with_margin(env(), margin);
            let (dedup, _) =
                crate::testing::on_memory(Dedup::read(&env, "streamer").expect("settings"));
            let mut service = dedup
                .parking(crate::parking::Parking::unreachable())
                .kinesis(|_: Event<serde_json::Value>| Vec::<lambda_dedup::Effect>::new())
                .expect("service");
            let answer = lambda_runtime::Service::call(
                &mut service,
                LambdaEvent::new(records(), context_due_in(30)),
            )
            .await
            .expect("answer");
            assert_eq!(
                answer.batch_item_failures.len(),
                retried,
                "margin {margin:?}: {answer:?}"
            );
        }
    }
}
