//! The SQS source: one service for every flow ([`super::flow`]), message by message (FIFO
//! groups in order) or, for a transactional flow in batch-transaction mode, the batch whole.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::Message;
use lambda_dedup_engine::BatchReport;
use lambda_runtime::LambdaEvent;

use super::flow::Flow;
use super::flow::seal::{On, Step};
use super::{BuildError, Dedup, Service};
use crate::source::envelope::{opened, opened_all};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The SQS service of `flow` (a closure `Fn(Event<T>) -> impl IntoPlan` is the
    /// transactional flow; see [`flow`](super::flow) for the others): each message through it,
    /// FIFO groups in order, until `DEDUP_DEADLINE_MARGIN_MS` before the deadline; answered with
    /// a partial batch response (S12) and the invocation's account. With
    /// [`envelope`](Dedup::envelope), each body is opened first and the flow gets the message
    /// inside; a body that is not that envelope is rejected (`envelope_malformed`).
    pub fn sqs<M, F: Flow<S, M>>(
        self,
        flow: F,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError> {
        let step = Arc::new(flow.build(On {
            dedup: &self,
            at: self.payload_at(),
        })?);
        let runner = Arc::new(self.runner());
        let envelope = self.envelope;
        Ok(Service::new(move |event: LambdaEvent<SqsEvent>| {
            let (step, runner) = (step.clone(), runner.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                let state = <F::Step as Step>::State::default();
                // A FIFO batch in an envelope goes message by message, so that a message whose
                // envelope is refused stops its group as any refusal does (S12).
                let fifo = event
                    .payload
                    .records
                    .iter()
                    .any(|r| r.attributes.contains_key("MessageGroupId"));
                let whole = step.per_batch() && !(fifo && envelope.is_some());
                let answer = {
                    let (step, state) = (&*step, &state);
                    if whole {
                        let max = runner.max_concurrency;
                        runner
                            .sqs_batch(event, |batch| async move {
                                let (inner, refused) = opened_all(envelope, batch);
                                let report = step.batch(inner, max, state).await;
                                let mut outcomes = report.into_outcomes();
                                outcomes.extend(refused);
                                BatchReport::from_outcomes(outcomes)
                            })
                            .await
                    } else {
                        runner
                            .sqs(event, |m: Message| async move {
                                match opened(envelope, m) {
                                    Ok(m) => step.message(m, deadline, state).await,
                                    Err(refused) => refused,
                                }
                            })
                            .await
                    }
                };
                step.finish(state, &runner).await;
                answer
            }
        }))
    }
}
