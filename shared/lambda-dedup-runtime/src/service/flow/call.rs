//! The flows of an external call: [`calls`] (a leased call per event) and
//! [`WriteThenCall`] (a write with the mark, then the call), the call a closure or any
//! `tower::Service` of [`Call`]s.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use lambda_dedup::{Lease, Message, Scope};
use lambda_dedup_engine::{Account, LeasedDeduplicator, Outcome, Transient};
use lambda_runtime::tower::{Service, ServiceExt};
use serde::de::DeserializeOwned;

use super::super::event::typed;
use super::seal::{On, Ordered, Step};
use super::{BuildError, Event, Flow, HandlerError, IntoPlan, PayloadAt, PerMessage, TransactStep};
use super::{Runner, typed_work};
use crate::store::Marks;
use lambda_dedup_config::SettingsError;

super::step_debug!(ByFn<F>, CallStep<E, C>, Typed<T, I>, WriteThenCallStep<E, C>);

/// One call to make: the typed event, and the lease it is made under — pass
/// `lease.key.idempotency_key()` to the system called, so a retry is not applied twice.
#[derive(Debug, Clone)]
pub struct Call<T> {
    /// The event.
    pub event: Event<T>,
    /// The lease the call is made under, with the event's key.
    pub lease: Lease,
}

/// The flow of a call to an external system: each event is claimed under a lease no longer
/// than the invocation, `call` makes the call (passing `lease.key.idempotency_key()` to the
/// system, so a retry is not applied twice) within `PROVIDER_TIMEOUT_MS`, and the mark completes
/// with its result (S6). A takeover older than `PROVIDER_KEY_RETENTION_SECONDS` is not called
/// but sent to reconciliation (S16).
pub fn calls<T, F, Fut>(call: F) -> Calls<F>
where
    F: Fn(Event<T>, Lease) -> Fut,
    Fut: Future<Output = Result<Option<String>, HandlerError>>,
{
    Calls(call)
}

/// [`calls`] with the call a `tower::Service` of [`Call`]s, answering the result to store
/// (`Some`) or none: wrap it in your own layers (a timeout, a rate limit, a metric) and they
/// run per message, inside the lease and `PROVIDER_TIMEOUT_MS`. An error that is a
/// [`HandlerError`] keeps its kind; any other error of the service or its layers is transient (the
/// message is redelivered and the call made again under the same key).
pub fn calls_service<Svc>(service: Svc) -> Calls<Served<Svc>> {
    Calls(Served(service))
}

/// The flow of a leased call ([`calls`], [`calls_service`]).
#[derive(Debug, Clone)]
pub struct Calls<C>(C);

/// A `tower::Service` of [`Call`]s, as a flow's call ([`calls_service`]).
#[derive(Debug, Clone)]
pub struct Served<Svc>(pub(super) Svc);

/// A write with the mark, then a leased call ([`super::Transact::then_call`]).
#[derive(Debug, Clone)]
pub struct WriteThenCall<W, C> {
    write: W,
    call: C,
}

impl<W, C> WriteThenCall<W, C> {
    pub(super) fn new(write: W, call: C) -> Self {
        Self { write, call }
    }
}

/// What makes a flow's call: a closure, or a service.
pub trait Caller<T>: Send + Sync + 'static {
    /// The call of `event` under `lease`.
    fn call(
        &self,
        event: Event<T>,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<String>, HandlerError>> + Send;
}

/// A closure `Fn(Event<T>, Lease) -> Fut` as a [`Caller`].
pub struct ByFn<F>(F);

impl<T, F, Fut> Caller<T> for ByFn<F>
where
    F: Fn(Event<T>, Lease) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<String>, HandlerError>> + Send,
{
    fn call(
        &self,
        event: Event<T>,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<String>, HandlerError>> + Send {
        (self.0)(event, lease)
    }
}

impl<T, Svc> Caller<T> for Served<Svc>
where
    T: Send + 'static,
    Svc: Service<Call<T>, Response = Option<String>> + Clone + Send + Sync + 'static,
    Svc::Error: Into<HandlerError>,
    Svc::Future: Send,
{
    fn call(
        &self,
        event: Event<T>,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<String>, HandlerError>> + Send {
        let service = self.0.clone();
        async move {
            service
                .oneshot(Call { event, lease })
                .await
                .map_err(Into::into)
        }
    }
}

/// What a flow's call may be: a closure (`M` its future) or a [`Served`] service.
pub trait AsCaller<T, M> {
    /// The caller.
    type Caller: Caller<T>;
    /// `self` as one.
    fn caller(self) -> Self::Caller;
}

impl<T, F, Fut> AsCaller<T, (Lease, Fut)> for F
where
    F: Fn(Event<T>, Lease) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<String>, HandlerError>> + Send,
{
    type Caller = ByFn<F>;
    fn caller(self) -> ByFn<F> {
        ByFn(self)
    }
}

impl<T, Svc> AsCaller<T, Call<T>> for Served<Svc>
where
    Served<Svc>: Caller<T>,
{
    type Caller = Self;
    fn caller(self) -> Self {
        self
    }
}

/// The leased step: the typed call, bounded by the provider timeout.
pub struct CallStep<E, C> {
    dedup: LeasedDeduplicator<E>,
    at: PayloadAt,
    timeout: Duration,
    call: C,
}

impl<E: 'static, C> CallStep<E, C> {
    fn on<S: Marks<Effect = E>>(on: On<'_, S>, scope: Scope, call: C) -> Result<Self, BuildError> {
        Ok(Self {
            dedup: on.dedup.leased(scope)?,
            at: on.at,
            timeout: on.dedup.settings.provider_timeout,
            call,
        })
    }

    async fn run<T>(&self, m: &Message, deadline: Option<SystemTime>) -> Outcome
    where
        T: DeserializeOwned,
        C: Caller<T>,
    {
        self.dedup
            .leased(m, deadline, |d, lease| async move {
                let event = typed::<T>(self.at, &d)?;
                match tokio::time::timeout(self.timeout, self.call.call(event, lease)).await {
                    Ok(result) => result,
                    Err(_) => Err(HandlerError::Transient(Transient::CallTimeout {
                        limit: self.timeout,
                    })),
                }
            })
            .await
    }
}

/// A [`CallStep`] of `T`s: the payload type the step's messages are read into.
pub struct Typed<T, Inner>(Inner, std::marker::PhantomData<fn() -> T>);

impl<T, E, C> Step for Typed<T, CallStep<E, C>>
where
    T: DeserializeOwned + Send + 'static,
    E: Send + Sync + 'static,
    C: Caller<T>,
{
    type State = ();

    async fn message(&self, m: Message, deadline: Option<SystemTime>, _: &()) -> Outcome {
        self.0.run::<T>(&m, deadline).await
    }
}

impl<T, E, C> Ordered for Typed<T, CallStep<E, C>> {}

impl<S, T, C, MC> Flow<S, (Event<T>, MC)> for Calls<C>
where
    S: Marks,
    T: DeserializeOwned + Send + 'static,
    C: AsCaller<T, MC>,
{
    type Step = Typed<T, CallStep<S::Effect, C::Caller>>;

    fn build(self, on: On<'_, S>) -> Result<Self::Step, BuildError> {
        let scope = on.dedup.settings.scope.clone();
        let step = CallStep::on(on, scope, self.0.caller())?;
        Ok(Typed(step, std::marker::PhantomData))
    }
}

/// The write-then-call step: the write's transaction, then the call's lease in the consumer
/// `<consumer>-call`; each step's account kept per invocation.
pub struct WriteThenCallStep<E, C> {
    write: TransactStep<E, PerMessage>,
    call: CallStep<E, C>,
}

impl<T, E, C> Step for Typed<T, WriteThenCallStep<E, C>>
where
    T: DeserializeOwned + Send + 'static,
    E: Send + Sync + 'static,
    C: Caller<T>,
{
    type State = Mutex<[Account; 2]>;

    async fn message(
        &self,
        m: Message,
        deadline: Option<SystemTime>,
        steps: &Self::State,
    ) -> Outcome {
        let written = self.0.write.message(m.clone(), deadline, &()).await;
        let called = if written.acknowledged() {
            Some(self.0.call.run::<T>(&m, deadline).await)
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

    fn finish<'a>(
        &'a self,
        steps: Self::State,
        runner: &'a Runner,
    ) -> impl Future<Output = ()> + Send + 'a {
        let steps = steps.into_inner().unwrap_or_default();
        for (name, account) in [("write", steps[0]), ("call", steps[1])] {
            crate::emf::emit(account.emf_line_with(
                &runner.accounting.namespace,
                &[("Function", &runner.function), ("Step", name)],
            ));
        }
        async {}
    }
}

impl<T, E, C> Ordered for Typed<T, WriteThenCallStep<E, C>> {}

impl<S, T, W, P, C, MC> Flow<S, (Event<T>, P, MC)> for WriteThenCall<W, C>
where
    S: Marks,
    T: DeserializeOwned + Send + 'static,
    W: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan<S::Effect>,
    C: AsCaller<T, MC>,
{
    type Step = Typed<T, WriteThenCallStep<S::Effect, C::Caller>>;

    fn build(self, on: On<'_, S>) -> Result<Self::Step, BuildError> {
        let scope = on.dedup.settings.scope.clone();
        let call_scope = Scope::new(scope.namespace(), &format!("{}-call", scope.consumer()))
            .map_err(SettingsError::Core)?;
        let write = TransactStep::in_scope(on, scope, typed_work(on, self.write))?;
        let call = CallStep::on(on, call_scope, self.call.caller())?;
        Ok(Typed(
            WriteThenCallStep { write, call },
            std::marker::PhantomData,
        ))
    }
}

/// The outcome of a delivery whose write ended `written` and whose call, made only after an
/// acknowledged write, ended `called`: the first step not acknowledged decides; else applied
/// if either step applied now, else a duplicate (with the call's stored result).
pub(in crate::service) fn merged(written: Outcome, called: Option<Outcome>) -> Outcome {
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
