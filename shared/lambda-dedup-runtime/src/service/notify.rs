//! The asynchronous event sources: a direct SNS subscription and an EventBridge target. Lambda
//! invokes them asynchronously, with no partial batch response: an invocation is Ok when every
//! record is acknowledged, and an error ([`NotAcknowledged`]) otherwise, so Lambda's bounded
//! async retries and then the function's on-failure destination take it
//! ([`crate::asynchronous`]).

use std::sync::Arc;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sns::SnsEvent;
use lambda_dedup::Message;
use lambda_runtime::LambdaEvent;

use super::flow::Flow;
use super::flow::seal::{On, Ordered, Step};
use super::{BuildError, Dedup, PayloadAt, Service};
use crate::asynchronous::NotAcknowledged;
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The service of a direct SNS subscription: each record's `Message` through `flow` (any
    /// flow but a batch-wide transaction), its pointers relative to the `Message` (read inside
    /// it when it is JSON in a string, as it always is: `.identity("/order_id")`), its
    /// attributes the notification's `MessageAttributes`, reported by the SNS `MessageId`.
    /// Ok when every record is acknowledged; else an error, for Lambda's async retries and the
    /// on-failure destination (the template must give the function one).
    pub fn sns<M, F>(self, flow: F) -> Result<Service<SnsEvent, ()>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.async_service(flow, |event: &SnsEvent, _| crate::sns::messages(event))
    }

    /// The service of an EventBridge target: the event's `detail` through `flow`, its pointers
    /// relative to the `detail` (`.identity("/order_id")`: EventBridge gives every `PutEvents`
    /// entry a new `id`, so a producer's retry has a new `id` and the identity belongs in the
    /// detail), reported by the event's `id`. Answered as [`sns`](Self::sns) is.
    pub fn eventbridge<M, F>(self, flow: F) -> Result<Service<EventBridgeEvent, ()>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.async_service(flow, |event: &EventBridgeEvent, request_id| {
            vec![crate::eventbridge::message(event, request_id)]
        })
    }

    /// An asynchronous event source: `messages` of each invocation's event (and request id)
    /// through `flow`, message by message, all acknowledged or an error.
    fn async_service<E, M, F>(
        self,
        flow: F,
        messages: fn(&E, &str) -> Vec<Message>,
    ) -> Result<Service<E, ()>, BuildError>
    where
        E: Send + 'static,
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        let step = Arc::new(flow.build(On {
            dedup: &self,
            at: PayloadAt::Body,
        })?);
        let runner = Arc::new(self.runner());
        Ok(Service::new(move |event: LambdaEvent<E>| {
            let (step, runner) = (step.clone(), runner.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                let cutoff = crate::bound::cutoff_at(deadline, runner.margin);
                let batch = messages(&event.payload, &event.context.request_id);
                let state = <F::Step as Step>::State::default();
                let answer = {
                    let (step, state) = (&*step, &state);
                    crate::asynchronous::run(
                        &runner.accounting,
                        &runner.function,
                        &event.context,
                        batch,
                        cutoff,
                        runner.max_concurrency,
                        |m| step.message(m, deadline, state),
                    )
                    .await
                };
                step.finish(state, &runner).await;
                answer.map_err(|e: NotAcknowledged| lambda_runtime::Error::from(e))
            }
        }))
    }
}
