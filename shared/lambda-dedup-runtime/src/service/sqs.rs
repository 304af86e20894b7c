//! The SQS source: one service for every flow ([`super::flow`]), message by message (FIFO
//! groups in order) or, for a transactional flow in batch-transaction mode, the batch whole.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;

use super::flow::Flow;
use super::flow::seal::{On, Step};
use super::{BuildError, Dedup, Service};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The SQS service of `flow` (a closure `Fn(Event<T>) -> impl IntoPlan` is the
    /// transactional flow; see [`flow`](super::flow) for the others): each message through it,
    /// FIFO groups in order, until `DEDUP_DEADLINE_MARGIN_MS` before the deadline; answered with
    /// a partial batch response (S12) and the invocation's account.
    pub fn sqs<M, F: Flow<S, M>>(
        self,
        flow: F,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError> {
        let step = Arc::new(flow.build(On {
            dedup: &self,
            at: self.payload_at(),
        })?);
        let runner = Arc::new(self.runner());
        Ok(Service::new(move |event: LambdaEvent<SqsEvent>| {
            let (step, runner) = (step.clone(), runner.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                let state = <F::Step as Step>::State::default();
                let answer = if step.per_batch() {
                    let max = runner.max_concurrency;
                    runner
                        .sqs_batch(event, |batch| step.batch(batch, max, &state))
                        .await
                } else {
                    runner
                        .sqs(event, |m| step.message(m, deadline, &state))
                        .await
                };
                step.finish(state, &runner).await;
                answer
            }
        }))
    }
}
