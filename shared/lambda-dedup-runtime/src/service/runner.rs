//! The one runner of every door ([`crate::door`]): the builder's generic entry
//! ([`Dedup::door`]), one invocation from event to answer ([`Runner::invoke`]), and the service
//! type every door's builder method returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use std::collections::HashMap;
use std::time::SystemTime;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::{IdentitySource, Message, TenantSource};
use lambda_dedup_engine::{BatchReport, Outcome, run_batch};
use lambda_runtime::LambdaEvent;

use super::account::{Accounting, Reconciliation, count, distinct, print_account, rebuilt};
use super::flow::Flow;
use super::flow::seal::{Admits, On, Reported, Step};
use super::{BuildError, Dedup, PayloadAt};
use crate::door::{Answered, Cut, Door, Parking, Refused};
use crate::store::Marks;

/// What one invocation's runner needs: the function's name, where its account goes, the deadline
/// margin and the concurrency.
#[derive(Debug, Clone)]
pub struct Runner {
    pub(crate) function: String,
    pub(super) accounting: Accounting,
    pub(super) margin: Duration,
    pub(super) max_concurrency: usize,
}

impl<S: Marks> Dedup<S> {
    /// The service of `door` ([`crate::door`]) running `flow`: the builder's doors
    /// ([`sqs`](Self::sqs), `kafka`, …) are this with their own door, and a
    /// function's own door is given here. A door's [ordering](Door::Ordering) says which flows
    /// it takes; a parking door refuses to start without `DEDUP_PARKING_QUEUE_URL`.
    pub fn door<D, M, F>(
        self,
        door: D,
        flow: F,
    ) -> Result<Service<D::Event, D::Response>, BuildError>
    where
        D: Door,
        F: Flow<S, M>,
        F::Step: Admits<D::Ordering>,
    {
        let mut dedup = self;
        if !D::ENVELOPE_ID {
            dedup.refuse_envelope_id(D::NAME)?;
        }
        if let Some(attribute) = D::IDENTITY
            && !dedup.identity_chosen
        {
            dedup.identity = IdentitySource::MessageAttribute(attribute.to_owned());
        }
        if let Some(attribute) = D::TENANT
            && dedup.tenant == TenantSource::Single
        {
            dedup.tenant = TenantSource::MessageAttribute(attribute.to_owned());
        }
        let at = match D::CLOUDEVENTS_DATA {
            true => dedup.payload_at(),
            false => PayloadAt::Body,
        };
        let parking = parking_of(&dedup, D::PARKS)?;
        let step = Arc::new(flow.build(On { dedup: &dedup, at })?);
        let runner = Arc::new(dedup.runner());
        let door = Arc::new(door);
        Ok(Service::new(move |event: LambdaEvent<D::Event>| {
            let (step, runner, door, parking) =
                (step.clone(), runner.clone(), door.clone(), parking.clone());
            async move {
                let state = <F::Step as Step>::State::default();
                let work = Stepped {
                    step: &*step,
                    state: &state,
                    deadline: crate::bound::deadline(&event.context),
                    max_concurrency: runner.max_concurrency,
                };
                let answer = runner
                    .invoke(&*door, parking.as_deref(), &event, &work)
                    .await;
                step.finish(state, &runner).await;
                answer
            }
        }))
    }
}

/// The parking of a door that `parks` (none without a parking door compiled in).
fn parking_of<S>(dedup: &Dedup<S>, parks: bool) -> Result<Option<Arc<Parking>>, BuildError> {
    #[cfg(feature = "parking")]
    if parks {
        return Ok(Some(dedup.parking_queue()?));
    }
    let _ = (dedup, parks);
    Ok(None)
}

/// What the runner does with the invocation's messages: a flow's step, or in tests a closure.
pub(crate) trait Work: Sync {
    /// One message's outcome, its work over by `cutoff` (the invocation's one cutoff).
    fn message(
        &self,
        m: Message,
        cutoff: Option<SystemTime>,
    ) -> impl Future<Output = Outcome> + Send;

    /// Whether the batch goes whole ([`batch`](Self::batch)).
    fn whole(&self) -> bool {
        false
    }

    /// The batch whole.
    fn batch(&self, batch: Vec<Message>) -> Reported<'_> {
        let _ = batch;
        unreachable!("a work that goes message by message is never given a batch")
    }
}

/// A flow's step, for one invocation.
struct Stepped<'a, St: Step> {
    step: &'a St,
    state: &'a St::State,
    deadline: Option<SystemTime>,
    max_concurrency: usize,
}

impl<St: Step> Work for Stepped<'_, St> {
    fn message(&self, m: Message, _: Option<SystemTime>) -> impl Future<Output = Outcome> + Send {
        self.step.message(m, self.deadline, self.state)
    }

    fn whole(&self) -> bool {
        self.step.per_batch()
    }

    fn batch(&self, batch: Vec<Message>) -> Reported<'_> {
        self.step.batch(batch, self.max_concurrency, self.state)
    }
}

/// A closure of a message and the cutoff: the work of a door that answers one request.
impl<F, Fut> Work for F
where
    F: Fn(Message, Option<SystemTime>) -> Fut + Sync,
    Fut: Future<Output = Outcome> + Send,
{
    fn message(
        &self,
        m: Message,
        cutoff: Option<SystemTime>,
    ) -> impl Future<Output = Outcome> + Send {
        self(m, cutoff)
    }
}

impl Runner {
    /// The runner of function `function` with the default margin, no reconciliation queue,
    /// `max_concurrency` at once.
    #[cfg(test)]
    pub(crate) fn for_tests(function: &str, max_concurrency: usize) -> Self {
        Self {
            max_concurrency,
            ..Self::of(function, lambda_dedup_config::DeadlineMargin::DEFAULT.get())
        }
    }

    /// The runner of function `function` with `margin`, the default namespace, no
    /// reconciliation queue, one request at a time (a door that answers one request).
    #[cfg(feature = "webhook")]
    pub(crate) fn of(function: &str, margin: Duration) -> Self {
        Self {
            function: function.to_owned(),
            accounting: Accounting {
                namespace: crate::emf::NAMESPACE.to_owned(),
                reconciliation: Reconciliation::To(None),
            },
            margin,
            max_concurrency: 1,
        }
    }

    /// One invocation of `door`: one cutoff from the margin, each record in a span through
    /// `work` until it (per record or the batch whole: [`Door::CUT`]), the report rebuilt by
    /// record, late events routed to reconciliation until the cutoff, the account printed as
    /// one EMF line (or the door's own [metrics](Door::metrics)), then the door's answer.
    pub(crate) async fn invoke<D: Door, W: Work>(
        &self,
        door: &D,
        parking: Option<&Parking>,
        event: &LambdaEvent<D::Event>,
        work: &W,
    ) -> Result<D::Response, lambda_runtime::Error> {
        let (function, context) = (self.function.as_str(), &event.context);
        let cutoff = crate::bound::cutoff_at(crate::bound::deadline(context), self.margin);
        let mut refused: HashMap<String, Outcome> = HashMap::new();
        let messages =
            door.messages(&event.payload, context)
                .into_iter()
                .map(|record| match record {
                    Ok(m) if D::SENDER_VOUCHED => m,
                    Ok(m) => Message {
                        attributes: crate::door::unvouched(m.attributes),
                        ..m
                    },
                    Err(Refused { id, group, outcome }) => {
                        refused.insert(id.clone(), *outcome);
                        Message {
                            message_id: id,
                            group_id: group,
                            ..Message::default()
                        }
                    }
                });
        let (batch, ids) = distinct(function, messages.collect());
        let late = door.reconciled(&event.payload, &batch);
        let refused = &refused;
        let report = if work.whole() && door.whole(&event.payload) {
            // The whole batch until the cutoff (batch-transaction mode): abandoned whole after
            // it, what committed meanwhile is a duplicate then.
            let (inner, out): (Vec<Message>, Vec<Message>) = batch
                .into_iter()
                .partition(|m| !refused.contains_key(&m.message_id));
            let whole = async move {
                let mut outcomes = work.batch(inner).await.into_outcomes();
                outcomes.extend(out.into_iter().filter_map(|m| {
                    let outcome = refused.get(&m.message_id)?.clone();
                    Some((m.message_id, outcome))
                }));
                BatchReport::from_outcomes(outcomes)
            };
            crate::bound::report_within(cutoff, &ids, whole).await
        } else {
            let each = move |m: Message| async move {
                use tracing::Instrument as _;
                let id = m.message_id.clone();
                let span = tracing::info_span!("message", message_id = %id, outcome = tracing::field::Empty);
                let process = async {
                    match refused.get(&id) {
                        Some(outcome) => outcome.clone(),
                        None => work.message(m, cutoff).await,
                    }
                };
                let outcome = match D::CUT {
                    Cut::EachRecord => {
                        crate::bound::outcome_within(cutoff, &id, process)
                            .instrument(span.clone())
                            .await
                    }
                    Cut::WholeBatch => process.instrument(span.clone()).await,
                };
                span.record("outcome", outcome.label());
                outcome
            };
            let all = run_batch(batch, self.max_concurrency, each);
            match D::CUT {
                Cut::EachRecord => all.await,
                Cut::WholeBatch => crate::bound::report_within(cutoff, &ids, all).await,
            }
        };
        let mut report = rebuilt(function, &ids, report);
        if let Some(late) = late {
            let Reconciliation::To(queue) = &self.accounting.reconciliation;
            let route = crate::reconcile::route_to(queue.as_deref(), &late, &mut report);
            if crate::bound::within(cutoff, route).await.is_none() {
                tracing::warn!(
                    function,
                    "late events not all routed before the deadline: the rest are redelivered"
                );
            }
        }
        match door.metrics(&event.payload, &report) {
            Some(counts) => count(function, &counts),
            None => print_account(
                &self.accounting.namespace,
                function,
                &context.request_id,
                &report,
            ),
        }
        let done = Answered {
            report: &report,
            function,
            parking,
        };
        door.answer(&event.payload, done).await
    }
}

/// The event of a door that answers one request (an HTTP answer, an invoke response) rather
/// than a batch: the request, and the answer its work keeps for the door's
/// [`answer`](Door::answer) (none when the cutoff came first).
#[derive(Debug)]
pub(crate) struct Asked<E, A> {
    pub(crate) request: E,
    pub(crate) kept: Mutex<Option<A>>,
}

impl<E, A> Asked<E, A> {
    pub(crate) fn new(request: E) -> Self {
        Self {
            request,
            kept: Mutex::new(None),
        }
    }

    /// Keeps `answer` for the door.
    pub(crate) fn keep(&self, answer: A) {
        if let Ok(mut kept) = self.kept.lock() {
            *kept = Some(answer);
        }
    }

    /// The answer kept, taken.
    pub(crate) fn take(&self) -> Option<A> {
        self.kept.lock().ok().and_then(|mut kept| kept.take())
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
    pub(super) fn new<F, Fut>(handler: F) -> Self
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
