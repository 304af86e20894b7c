//! The dispatcher: a flow that starts one durable execution per event, on any door.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use lambda_dedup::Message;
use lambda_dedup_config::DurableConfig;
use lambda_dedup_engine::{HandlerError, Outcome};
use lambda_runtime::tower::Service;
use serde_json::Value;

use crate::durable::name::execution_name;
use crate::service::flow::seal::{On, Ordered, Step};
use crate::service::flow::{Call, Calls, Flow, Served, calls_service};
use crate::service::{BuildError, Event, Runner};
use crate::store::Marks;

/// What a start of a durable execution found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Started {
    /// The execution runs (Lambda's answer to a name it already had with the same payload is
    /// this too: the existing execution).
    New {
        /// Its ARN, when the answer names it.
        execution_arn: Option<String>,
    },
    /// The name is taken by an execution of another payload: this event's execution was
    /// started before (its mark gone or never written). Counted as a duplicate.
    NameTaken,
}

/// Why a start failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Refused for good because of the event (its payload too large, or not valid): the event is
    /// rejected and dead-lettered. The service's error code.
    #[error("the start was refused: {code}")]
    Refused {
        /// The service's error code.
        code: String,
    },
    /// It may work later (throttled, the service or the network failing, the deployment
    /// misconfigured): retried under the same name.
    #[error("the start failed for now: {code}")]
    Unavailable {
        /// The service's error code, or what failed before an answer.
        code: String,
    },
}

/// A boxed start.
pub type StartFuture<'a> = Pin<Box<dyn Future<Output = Result<Started, StartError>> + Send + 'a>>;

/// What starts a durable execution named `name` with `payload` (JSON): Lambda's `Invoke` with
/// a durable execution name ([`LambdaStarter`](crate::durable::LambdaStarter)), or a test's own.
pub trait Starter: Send + Sync + 'static {
    /// Starts (or finds) the execution `name`.
    fn start<'a>(&'a self, name: &'a str, payload: &'a [u8]) -> StartFuture<'a>;
}

/// The dispatcher's flow, for any door: each event claimed under its key (a redelivery, or a
/// producer's retry of the same event under a new message id, is a duplicate of its mark), then
/// one execution started, named from the key ([`execution_name`]) so that Lambda itself starts
/// it once; a start that finds the name taken is counted as a duplicate. The execution gets the
/// event's payload (the CloudEvents `data`, or the whole body).
pub fn starts<St: Starter>(starter: St) -> Starts<St> {
    Starts(Arc::new(starter))
}

/// The dispatcher's flow ([`starts`]).
#[derive(Debug)]
pub struct Starts<St>(Arc<St>);

tokio::task_local! {
    /// Whether the start of the message this task handles found the name taken.
    static NAME_TAKEN: Cell<bool>;
}

/// One start as a call of the leased flow.
pub struct StartCall<St>(Arc<St>);

impl<St> std::fmt::Debug for StartCall<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartCall")
    }
}

impl<St> Clone for StartCall<St> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<St: Starter> Service<Call<Value>> for StartCall<St> {
    type Response = Option<String>;
    type Error = HandlerError;
    type Future = Pin<Box<dyn Future<Output = Result<Option<String>, HandlerError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HandlerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call<Value>) -> Self::Future {
        let starter = self.0.clone();
        Box::pin(async move {
            let name = execution_name(&call.event.key);
            let payload = serde_json::to_vec(&call.event.payload)
                .map_err(|_| HandlerError::invalid("the payload is not JSON"))?;
            match starter.start(&name, &payload).await {
                Ok(Started::New { .. }) => {}
                Ok(Started::NameTaken) => {
                    let _ = NAME_TAKEN.try_with(|taken| taken.set(true));
                }
                Err(StartError::Refused { code }) => {
                    tracing::warn!(key = %call.event.key, code = %code, "the start was refused");
                    return Err(HandlerError::invalid(
                        "the durable function refused the start",
                    ));
                }
                Err(StartError::Unavailable { code }) => {
                    tracing::warn!(key = %call.event.key, code = %code, "the start failed for now");
                    return Err(HandlerError::transient(
                        "the durable function's start failed",
                    ));
                }
            }
            // What a duplicate of the event is answered with: the execution's name.
            Ok(Some(serde_json::json!({ "execution": name }).to_string()))
        })
    }
}

/// The leased flow's step, a start that found the name taken counted as a duplicate.
pub struct StartStep<Inner>(Inner);

impl<Inner> std::fmt::Debug for StartStep<Inner> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartStep")
    }
}

impl<Inner: Step> Step for StartStep<Inner> {
    type State = Inner::State;

    async fn message(
        &self,
        m: Message,
        deadline: Option<SystemTime>,
        state: &Self::State,
    ) -> Outcome {
        let (outcome, taken) = NAME_TAKEN
            .scope(Cell::new(false), async {
                let outcome = self.0.message(m, deadline, state).await;
                (outcome, NAME_TAKEN.with(Cell::get))
            })
            .await;
        match outcome {
            Outcome::Applied if taken => Outcome::Duplicate {
                first_seen_at: SystemTime::now(),
                result: None,
            },
            outcome => outcome,
        }
    }

    fn finish<'a>(
        &'a self,
        state: Self::State,
        runner: &'a Runner,
    ) -> impl Future<Output = ()> + Send + 'a {
        self.0.finish(state, runner)
    }
}

impl<Inner: Ordered> Ordered for StartStep<Inner> {}

impl<S, St> Flow<S, Starts<St>> for Starts<St>
where
    S: Marks,
    St: Starter,
    Calls<Served<StartCall<St>>>: Flow<S, (Event<Value>, Call<Value>)>,
{
    type Step =
        StartStep<<Calls<Served<StartCall<St>>> as Flow<S, (Event<Value>, Call<Value>)>>::Step>;

    fn build(self, on: On<'_, S>) -> Result<Self::Step, BuildError> {
        // S9, S16: the execution's limits against the marks' retention and the key retention.
        DurableConfig::read(on.dedup().env(), on.dedup().settings())?;
        let calls = calls_service(StartCall(self.0));
        Ok(StartStep(Flow::<S, (Event<Value>, Call<Value>)>::build(
            calls, on,
        )?))
    }
}

#[cfg(test)]
mod tests;
