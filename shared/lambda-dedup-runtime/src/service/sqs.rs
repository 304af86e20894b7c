//! The builder's SQS services: transactional (`sqs`, `sqs_then`), leased calls (`sqs_calls`),
//! and a write then a call (`sqs_write_then_call`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::{Derived, Lease, Message, Scope};
use lambda_dedup_batch::{Account, Deduplicator, LeasedDeduplicator, Outcome, Plan, Transient};
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;

use super::event::{event_of, plan, typed};
use super::{BuildError, Dedup, Event, IntoPlan, PayloadAt, Refusal, Runner, Service};
use crate::settings::SettingsError;
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
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
    pub(super) fn sqs_parts<T, F, P>(&self, effect: F) -> Result<SqsParts<S::Effect>, BuildError>
    where
        T: DeserializeOwned,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        let dedup = self.deduplicator(self.settings.scope.clone())?;
        Ok(self.sqs_parts_on(dedup, effect))
    }

    /// [`sqs_parts`](Self::sqs_parts) with the deduplicator `dedup` (of create-once mode, say).
    pub(super) fn sqs_parts_on<D, T, F, P>(&self, dedup: D, effect: F) -> SqsParts<S::Effect, D>
    where
        T: DeserializeOwned,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan<S::Effect>,
    {
        let at = self.payload_at();
        let effect: Arc<TypedWork<S::Effect>> =
            Arc::new(move |d: &Derived| plan::<_, _, _, S::Effect>(at, d, &effect));
        (Arc::new(dedup), effect, Arc::new(self.runner()))
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
}

/// An event's typed work, as the builder's SQS services hold it: its plan, or its refusal.
pub(super) type TypedWork<E> = dyn Fn(&Derived) -> Result<Plan<E>, Refusal> + Send + Sync;

/// What an SQS service of typed work holds ([`Dedup::sqs_parts`]): its deduplicator (a
/// [`Deduplicator`] unless said), its work and its runner.
pub(super) type SqsParts<E, D = Deduplicator<E>> = (Arc<D>, Arc<TypedWork<E>>, Arc<Runner>);

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
                    Err(_) => Err(Refusal::Transient(Transient::CallTimeout {
                        limit: self.timeout,
                    })),
                }
            })
            .await
    }
}

/// The outcome of a delivery whose write ended `written` and whose call, made only after an
/// acknowledged write, ended `called`: the first step not acknowledged decides; else applied
/// if either step applied now, else a duplicate (with the call's stored result).
pub(super) fn merged(written: Outcome, called: Option<Outcome>) -> Outcome {
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
