//! The stream sources: Kinesis and DynamoDB Streams, every flow that keeps records in order
//! ([`Ordered`]), records in order per group, those that can never apply parked before the
//! checkpoint passes them (S15).

use std::sync::Arc;

#[cfg(any(feature = "dynamodb-streams", test))]
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
#[cfg(any(feature = "kinesis", test))]
use aws_lambda_events::event::kinesis::KinesisEvent;
#[cfg(any(feature = "dynamodb-streams", test))]
use aws_lambda_events::event::streams::DynamoDbEventResponse;
#[cfg(any(feature = "kinesis", test))]
use aws_lambda_events::event::streams::KinesisEventResponse;
use lambda_runtime::LambdaEvent;

use super::flow::Flow;
use super::flow::seal::{On, Ordered, Step};
use super::{BuildError, Dedup, PayloadAt, Service};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The Kinesis service of `flow` (any flow of [`flow`](super::flow) but a batch-wide
    /// transaction, which would not keep order): records in order per partition key, records
    /// that can never apply parked in `DEDUP_PARKING_QUEUE_URL` (required) before the
    /// checkpoint passes them (S15).
    ///
    /// A batch-wide transaction would not keep the records' order, so it does not compile here:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, flow::transact};
    /// fn f(dedup: Dedup) {
    ///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
    ///     let _ = dedup.kinesis(work.one_transaction_per_batch());
    /// }
    /// ```
    ///
    /// ```
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, flow::transact};
    /// fn f(dedup: Dedup) {
    ///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
    ///     let _ = dedup.kinesis(work);
    /// }
    /// ```
    #[cfg(any(feature = "kinesis", test))]
    pub fn kinesis<M, F>(
        self,
        flow: F,
    ) -> Result<Service<KinesisEvent, KinesisEventResponse>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.refuse_envelope_id("Kinesis")?;
        let at = self.payload_at();
        self.stream_service(at, flow, |event: &KinesisEvent| &event.records)
    }

    /// The DynamoDB Streams service of `flow`: each record's change
    /// ([`Change`](crate::dynamodb_stream::Change), its images read into `T` of an
    /// `Event<Change<T>>`) in order per item, deduplicated by the identity the builder is given —
    /// a pointer into the record's `{"eventName", "keys", "newImage", "oldImage"}`, such as
    /// `.identity("/newImage/order_id")`, never the record's sequence number (S1). Records that
    /// can never apply are parked in `DEDUP_PARKING_QUEUE_URL` (required) before the checkpoint
    /// passes them (S15); a record without the identity (a `REMOVE`, when it is read from the
    /// new image) is one of them, so filter the trigger on `eventName` for the changes the
    /// function is for.
    #[cfg(any(feature = "dynamodb-streams", test))]
    pub fn dynamodb_stream<M, F>(
        self,
        flow: F,
    ) -> Result<Service<StreamEvent, DynamoDbEventResponse>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.refuse_envelope_id("DynamoDB Streams")?;
        self.stream_service(PayloadAt::Body, flow, |event: &StreamEvent| &event.records)
    }

    /// A stream service: the records `records` reads from each invocation's event, in order
    /// per group, through `flow` read `at` ([`crate::stream::run`]).
    fn stream_service<E, R, M, F>(
        self,
        at: PayloadAt,
        flow: F,
        records: fn(&E) -> &[R],
    ) -> Result<Service<E, R::Response>, BuildError>
    where
        E: Send + 'static,
        R: crate::stream::StreamRecord + 'static,
        R::Response: Send + 'static,
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        let parking = self.parking_queue()?;
        let step = Arc::new(flow.build(On { dedup: &self, at })?);
        let runner = Arc::new(self.runner());
        Ok(Service::new(move |event: LambdaEvent<E>| {
            let (step, runner, parking) = (step.clone(), runner.clone(), parking.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                let state = <F::Step as Step>::State::default();
                let (namespace, function) = (&runner.accounting.namespace, &runner.function);
                let work = |batch| {
                    lambda_dedup_engine::run_batch(batch, runner.max_concurrency, |m| {
                        step.message(m, deadline, &state)
                    })
                };
                let records = records(&event.payload);
                let answer = crate::stream::run(
                    namespace,
                    function,
                    runner.margin,
                    &event.context,
                    records,
                    &parking,
                    work,
                )
                .await;
                step.finish(state, &runner).await;
                answer
            }
        }))
    }
}
