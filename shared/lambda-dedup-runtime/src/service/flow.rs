//! Flows: what a service does with each event, as values that every source takes.
//!
//! A source ([`Dedup::sqs`](crate::Dedup::sqs), `source::Kinesis`, `source::DynamoDbStream`)
//! takes one flow; the flow says how the event's effect happens once.
//!
//! | flow | the effect | stores | sources |
//! | --- | --- | --- | --- |
//! | a closure `Fn(Event<T>) -> impl IntoPlan`, or [`transact`] | the writes commit with the mark in one transaction (S5) | every store | every source |
//! | [`transact`]`(work).one_transaction_per_batch()` | as `transact`, the SQS batch in as few transactions as fit | every store | SQS (FIFO batches still message by message) |
//! | [`transact`]`(work).then(follow)` | as `transact`; then `follow` gets the events applied now | every store | every source |
//! | [`calls`]`(call)`, [`calls_service`]`(service)` | an external call under a lease, with the event's idempotency key (S6), within `PROVIDER_TIMEOUT_MS` | every store | every source |
//! | [`transact`]`(write).then_call(call)` | the write commits with the mark; then the call under its own step's lease | every store | every source |
//! | [`create_once`]`(work)` | the one item the event creates is its mark: one conditional `Put` (S8) | [`Items`](crate::store::Items): DynamoDB, memory | every source |
//! | `latest_wins(work)` (feature `s3`) | as `transact`, with the object's high-water sequencer in the transaction: an older event of the object is superseded | [`Items`](crate::store::Items): DynamoDB, memory | S3 |
//! | [`sequence`]`(pointer, work)` | one update per event with the aggregate's high-water, in order: no mark item | [`Items`](crate::store::Items): DynamoDB, memory | ordered ones: Kinesis, DynamoDB Streams, SQS FIFO |
//!
//! A flow a store cannot do, or a batch-wide transaction on a stream (whose records must go in
//! order), does not compile. A call can be any `tower::Service` of [`Call`]s
//! ([`calls_service`]), so a function puts its own per-message layers (a timeout, a rate limit,
//! metrics) around it.
//!
//! ```
//! use lambda_dedup_runtime::flow::{calls, transact};
//! use lambda_dedup_runtime::{Dedup, Effect, Event, SqsService, lambda_runtime::Error};
//!
//! #[derive(serde::Deserialize)]
//! struct Order { id: String, total: i64 }
//!
//! fn services(dedup: impl Fn() -> Dedup) -> Result<[SqsService; 3], Error> {
//!     let write = |e: Event<Order>| Effect::put("orders", ("id", e.payload.id.as_str()).into());
//!     Ok([
//!         // A closure is the transactional flow.
//!         dedup().sqs(write)?,
//!         // A call under a lease, with the event's idempotency key.
//!         dedup().sqs(calls(|e: Event<Order>, lease| async move {
//!             let _key = lease.key.idempotency_key();
//!             Ok(Some(format!("charged {}", e.payload.total)))
//!         }))?,
//!         // The write with the mark, then the call.
//!         dedup().sqs(transact(write).then_call(|_: Event<Order>, _| async { Ok(None) }))?,
//!     ])
//! }
//! ```
//!
//! A store without create-once mode has no create-once flow, even a store of the same effects
//! (a [`Store`](crate::store::Store) of marks only):
//!
//! ```compile_fail
//! use lambda_dedup_runtime::{Dedup, Effect, Event, store::Store, flow::create_once};
//! fn f(dedup: Dedup<Store<Effect>>) {
//!     let _ = dedup.sqs(create_once(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
//! }
//! ```
//!
//! while the item stores (DynamoDB, memory) have it:
//!
//! ```
//! use lambda_dedup_runtime::{Dedup, Effect, Event, flow::create_once};
//! fn f(dedup: Dedup) {
//!     let _ = dedup.sqs(create_once(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
//! }
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use lambda_dedup::{Derived, Message, Scope};
use lambda_dedup_engine::{BatchReport, Deduplicator, Outcome, Plan};
use serde::de::DeserializeOwned;

use super::event::{event_of, plan};
use super::{BuildError, Dedup, Event, HandlerError, IntoPlan, PayloadAt, Runner};
use crate::store::Marks;

pub(in crate::service) mod call;
#[cfg(feature = "s3")]
mod latest;
mod once;

#[cfg(feature = "durable")]
pub(crate) use call::Calls;
pub(crate) use call::Served;
use call::WriteThenCall;
pub use call::{Call, calls, calls_service};
#[cfg(feature = "s3")]
pub use latest::latest_wins;
#[cfg(feature = "s3")]
pub(crate) use latest::{OBJECT_ATTRIBUTE, SEQUENCER_ATTRIBUTE};
pub use once::{Sequence, create_once, sequence};

/// What a source's service does with each event: one of this module's flows, or a closure
/// `Fn(Event<T>) -> impl IntoPlan` (the transactional flow). `M` only tells the implementations
/// apart; it is inferred.
#[diagnostic::on_unimplemented(
    message = "this is not a flow the store `{S}` can run",
    note = "a closure flow is `Fn(Event<T>) -> impl IntoPlan<E>`, `E` the store's effect type",
    note = "create_once, sequence and latest_wins need a store with every mode (`Items`): DynamoDB or memory"
)]
pub trait Flow<S: Marks, M>: Sized {
    /// What the flow runs per message, once built.
    #[doc(hidden)]
    type Step: seal::Step;

    /// The flow on `on`'s store, deduplicator and settings.
    #[doc(hidden)]
    fn build(self, on: seal::On<'_, S>) -> Result<Self::Step, BuildError>;
}

/// What the sources need of a built flow, out of the public API.
pub(crate) mod seal {
    use super::*;

    /// The builder a flow is built on, and where its source's payload is read.
    #[allow(missing_debug_implementations)]
    pub struct On<'a, S> {
        pub(in crate::service) dedup: &'a Dedup<S>,
        pub(in crate::service) at: PayloadAt,
    }

    impl<'a, S> On<'a, S> {
        /// The builder, for a flow built outside this module (the durable dispatcher).
        #[cfg(feature = "durable")]
        pub(crate) fn dedup(&self) -> &'a Dedup<S> {
            self.dedup
        }
    }

    impl<S> Clone for On<'_, S> {
        fn clone(&self) -> Self {
            *self
        }
    }

    impl<S> Copy for On<'_, S> {}

    /// A batch's report, to come.
    pub(crate) type Reported<'a> = Pin<Box<dyn Future<Output = BatchReport> + Send + 'a>>;

    /// A flow built: what it does with one message, and around one invocation.
    pub trait Step: Send + Sync + 'static {
        /// What one invocation keeps (the events applied now, each step's account).
        type State: Default + Send + Sync;

        /// Message `m`, its invocation due at `deadline`.
        fn message<'a>(
            &'a self,
            m: Message,
            deadline: Option<SystemTime>,
            state: &'a Self::State,
        ) -> impl Future<Output = Outcome> + Send + 'a;

        /// Whether a batch goes whole ([`batch`](Self::batch)) rather than message by message.
        fn per_batch(&self) -> bool {
            false
        }

        /// A whole batch, up to `max_concurrency` transactions at once.
        fn batch<'a>(
            &'a self,
            batch: Vec<Message>,
            max_concurrency: usize,
            state: &'a Self::State,
        ) -> Reported<'a> {
            Box::pin(lambda_dedup_engine::run_batch(
                batch,
                max_concurrency,
                move |m| self.message(m, None, state),
            ))
        }

        /// After the invocation's work is answered for: a follow-up, the steps' own accounts.
        fn finish<'a>(
            &'a self,
            state: Self::State,
            runner: &'a Runner,
        ) -> impl Future<Output = ()> + Send + 'a {
            let _ = (state, runner);
            async {}
        }
    }

    /// A step that keeps each group's records in order, message by message: what a stream
    /// (Kinesis, DynamoDB Streams) takes. A batch-wide transaction is not one.
    #[diagnostic::on_unimplemented(
        message = "a stream's records go in order: this flow does not keep it",
        note = "a batch-wide transaction (`one_transaction_per_batch`) is for SQS only"
    )]
    pub trait Ordered {}

    /// A step a door of ordering `O` ([`crate::door::Ordering`]) takes: every step an
    /// [`AnyOrder`](crate::door::AnyOrder) door, an [`Ordered`] one an
    /// [`InOrder`](crate::door::InOrder) door.
    #[diagnostic::on_unimplemented(
        message = "this door's records go in order: this flow does not keep it",
        note = "a batch-wide transaction (`one_transaction_per_batch`) is for SQS only"
    )]
    pub trait Admits<O> {}

    impl<T: Step> Admits<crate::door::AnyOrder> for T {}
    impl<T: Step + Ordered> Admits<crate::door::InOrder> for T {}

    /// The ordering of the S3 door (`source::S3`): the latest-wins flow only, whose
    /// step admits it (unnameable outside the crate, so no other flow can).
    #[cfg(feature = "s3")]
    #[derive(Debug)]
    pub enum LatestOnly {}

    #[cfg(feature = "s3")]
    impl crate::door::Ordering for LatestOnly {}
}

use seal::{On, Ordered, Reported, Step};

/// `Debug` for a step: its name (its parts are closures and stores).
macro_rules! step_debug {
    ($($name:ident $(<$($p:ident),*>)?),* $(,)?) => {$(
        impl$(<$($p),*>)? std::fmt::Debug for $name$(<$($p),*>)? {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($name))
            }
        }
    )*};
}
pub(crate) use step_debug;

step_debug!(TransactStep<E, B>, ThenStep<T, E, B>);

/// Each message in its own transaction (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct PerMessage;

/// An SQS batch in as few transactions as fit ([`Transact::one_transaction_per_batch`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PerBatch;

/// How a transactional flow commits a batch: [`PerMessage`] or [`PerBatch`].
pub trait BatchMode: Send + Sync + 'static {
    /// Whether a batch commits whole.
    const PER_BATCH: bool;
}

impl BatchMode for PerMessage {
    const PER_BATCH: bool = false;
}

impl BatchMode for PerBatch {
    const PER_BATCH: bool = true;
}

/// The transactional flow: `work` says what one event writes, and the writes commit with the
/// event's mark in one transaction (S5), so a redelivery is a duplicate and writes nothing. A
/// closure given to a source directly is this flow.
pub fn transact<T, F, P>(work: F) -> Transact<F>
where
    F: Fn(Event<T>) -> P,
{
    Transact {
        work,
        mode: PhantomData,
    }
}

/// The transactional flow ([`transact`]).
#[derive(Debug, Clone)]
pub struct Transact<F, B = PerMessage> {
    work: F,
    mode: PhantomData<B>,
}

impl<F> Transact<F> {
    /// An SQS batch commits in as few transactions as fit (batch-transaction mode) instead of
    /// one per message; FIFO batches still go message by message, in order. Not for streams.
    pub fn one_transaction_per_batch(self) -> Transact<F, PerBatch> {
        Transact {
            work: self.work,
            mode: PhantomData,
        }
    }

    /// Two effects for one event: this write commits with the event's mark (S5), and only once
    /// it is committed `call` makes the external call under a lease of its own step (S6, keyed
    /// to the same event in the consumer `<consumer>-call`). A redelivery after the write finds
    /// it a duplicate and still makes a call that did not complete, with the same idempotency
    /// key. One outcome per delivery in the account; each step is logged and its own account
    /// printed (EMF dimension `Step`: `write`, `call`).
    pub fn then_call<T, C, Fut>(self, call: C) -> WriteThenCall<F, C>
    where
        C: Fn(Event<T>, lambda_dedup::Lease) -> Fut,
    {
        WriteThenCall::new(self.work, call)
    }

    /// [`then_call`](Self::then_call) with the call a `tower::Service` of [`Call`]s.
    pub fn then_call_service<Svc>(self, service: Svc) -> WriteThenCall<F, Served<Svc>> {
        WriteThenCall::new(self.work, Served(service))
    }
}

impl<F, B> Transact<F, B> {
    /// Then, once the invocation's writes are committed, `follow` with the events applied now
    /// (not the duplicates, conflicts or refusals): a best-effort follow-up that needs the
    /// committed writes, such as a consistent read or a metric of its own. It cannot change an
    /// outcome: the writes are committed whatever it does.
    pub fn then<T, A, Fut>(self, follow: A) -> Then<F, A, B>
    where
        A: Fn(Vec<Event<T>>) -> Fut,
    {
        Then { flow: self, follow }
    }
}

/// The transactional flow with a follow-up ([`Transact::then`]).
#[derive(Debug, Clone)]
pub struct Then<F, A, B = PerMessage> {
    flow: Transact<F, B>,
    follow: A,
}

/// An event's typed work, as a step holds it: its plan, or its refusal.
pub(super) type TypedWork<E> = dyn Fn(&Derived) -> Result<Plan<E>, HandlerError> + Send + Sync;

/// The typed `work` of `on`'s payload.
fn typed_work<S, T, F, P>(on: On<'_, S>, work: F) -> Arc<TypedWork<S::Effect>>
where
    S: Marks,
    T: DeserializeOwned,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan<S::Effect>,
{
    let at = on.at;
    Arc::new(move |d: &Derived| plan::<_, _, _, S::Effect>(at, d, &work))
}

/// The transactional step: the deduplicator in the function's scope and the typed work.
pub struct TransactStep<E, B> {
    dedup: Deduplicator<E>,
    work: Arc<TypedWork<E>>,
    mode: PhantomData<B>,
}

impl<E: Send + Sync + 'static, B: BatchMode> TransactStep<E, B> {
    fn on<S: Marks<Effect = E>>(
        on: On<'_, S>,
        work: Arc<TypedWork<E>>,
    ) -> Result<Self, BuildError> {
        Self::in_scope(on, on.dedup.settings.scope.clone(), work)
    }

    fn in_scope<S: Marks<Effect = E>>(
        on: On<'_, S>,
        scope: Scope,
        work: Arc<TypedWork<E>>,
    ) -> Result<Self, BuildError> {
        Ok(Self {
            dedup: on.dedup.deduplicator(scope)?,
            work,
            mode: PhantomData,
        })
    }
}

impl<E: Send + Sync + 'static, B: BatchMode> Step for TransactStep<E, B> {
    type State = ();

    async fn message(&self, m: Message, _: Option<SystemTime>, _: &()) -> Outcome {
        self.dedup.transactional(&m, |d| (self.work)(d)).await
    }

    fn per_batch(&self) -> bool {
        B::PER_BATCH
    }

    fn batch<'a>(&'a self, batch: Vec<Message>, max_concurrency: usize, _: &'a ()) -> Reported<'a> {
        Box::pin(lambda_dedup_engine::run_batch_transactional(
            batch,
            max_concurrency,
            &self.dedup,
            |d| (self.work)(d),
        ))
    }
}

impl<E> Ordered for TransactStep<E, PerMessage> {}

impl<S, T, F, P> Flow<S, fn(Event<T>) -> P> for F
where
    S: Marks,
    T: DeserializeOwned + 'static,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan<S::Effect>,
{
    type Step = TransactStep<S::Effect, PerMessage>;

    fn build(self, on: On<'_, S>) -> Result<Self::Step, BuildError> {
        TransactStep::on(on, typed_work(on, self))
    }
}

impl<S, T, F, P, B> Flow<S, (Event<T>, P)> for Transact<F, B>
where
    S: Marks,
    T: DeserializeOwned + 'static,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan<S::Effect>,
    B: BatchMode,
{
    type Step = TransactStep<S::Effect, B>;

    fn build(self, on: On<'_, S>) -> Result<Self::Step, BuildError> {
        TransactStep::on(on, typed_work(on, self.work))
    }
}

/// A follow-up after an invocation's commits, given the events applied now.
type Follow<T> = dyn Fn(Vec<Event<T>>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// The transactional step with a follow-up: the events applied now kept per invocation.
pub struct ThenStep<T, E, B> {
    step: TransactStep<E, B>,
    at: PayloadAt,
    follow: Box<Follow<T>>,
}

impl<T, E, B> Step for ThenStep<T, E, B>
where
    T: DeserializeOwned + Send + 'static,
    E: Send + Sync + 'static,
    B: BatchMode,
{
    type State = Mutex<Vec<Event<T>>>;

    async fn message(
        &self,
        m: Message,
        deadline: Option<SystemTime>,
        applied: &Self::State,
    ) -> Outcome {
        let spec = self.step.dedup.spec();
        let outcome = self.step.message(m.clone(), deadline, &()).await;
        if outcome == Outcome::Applied
            && let (Some(e), Ok(mut applied)) = (event_of(self.at, spec, &m), applied.lock())
        {
            applied.push(e);
        }
        outcome
    }

    fn per_batch(&self) -> bool {
        self.step.per_batch()
    }

    fn batch<'a>(
        &'a self,
        batch: Vec<Message>,
        max_concurrency: usize,
        applied: &'a Self::State,
    ) -> Reported<'a> {
        Box::pin(async move {
            let kept = batch.clone();
            let report = self.step.batch(batch, max_concurrency, &()).await;
            let ids: std::collections::HashSet<&str> = report
                .outcomes()
                .iter()
                .filter(|(_, o)| *o == Outcome::Applied)
                .map(|(id, _)| id.as_str())
                .collect();
            let spec = self.step.dedup.spec();
            if let Ok(mut applied) = applied.lock() {
                applied.extend(
                    kept.iter()
                        .filter(|m| ids.contains(m.message_id.as_str()))
                        .filter_map(|m| event_of(self.at, spec, m)),
                );
            }
            report
        })
    }

    fn finish<'a>(
        &'a self,
        applied: Self::State,
        _: &'a Runner,
    ) -> impl Future<Output = ()> + Send + 'a {
        let applied = applied.into_inner().unwrap_or_default();
        async move {
            if !applied.is_empty() {
                (self.follow)(applied).await;
            }
        }
    }
}

impl<T, E> Ordered for ThenStep<T, E, PerMessage> {}

impl<S, T, F, P, A, Fut, B> Flow<S, (Event<T>, P, Fut)> for Then<F, A, B>
where
    S: Marks,
    T: DeserializeOwned + Send + 'static,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan<S::Effect>,
    A: Fn(Vec<Event<T>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
    B: BatchMode,
{
    type Step = ThenStep<T, S::Effect, B>;

    fn build(self, on: On<'_, S>) -> Result<Self::Step, BuildError> {
        let follow = self.follow;
        Ok(ThenStep {
            step: TransactStep::on(on, typed_work(on, self.flow.work))?,
            at: on.at,
            follow: Box::new(move |events| Box::pin(follow(events))),
        })
    }
}

#[cfg(test)]
mod tests;
