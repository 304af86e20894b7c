//! The builder's stream services: Kinesis and DynamoDB Streams, records in order per group,
//! those that can never apply parked before the checkpoint passes them (S15).

use std::sync::Arc;

#[cfg(any(feature = "dynamodb-streams", test))]
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
#[cfg(any(feature = "kinesis", test))]
use aws_lambda_events::event::kinesis::KinesisEvent;
#[cfg(any(feature = "dynamodb-streams", test))]
use aws_lambda_events::event::streams::DynamoDbEventResponse;
#[cfg(any(feature = "kinesis", test))]
use aws_lambda_events::event::streams::KinesisEventResponse;
use lambda_dedup::{Derived, Message};
use lambda_dedup_batch::{BatchReport, Deduplicator, Plan};
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;

use super::event::plan;
use super::{BuildError, Dedup, Event, IntoPlan, PayloadAt, Refusal, Runner, Service};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
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
