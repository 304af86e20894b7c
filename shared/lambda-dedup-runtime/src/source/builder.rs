//! The builder's doors, each a one-line convenience over [`Dedup::door`] with the door of its
//! source ([`crate::door`]); what a door is and does lives with its source (`crate::source`).

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sns::SnsEvent;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};

use crate::service::flow::Flow;
use crate::service::flow::seal::Ordered;
use crate::service::{BuildError, Dedup, Service};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The SQS service of `flow` (a closure `Fn(Event<T>) -> impl IntoPlan` is the
    /// transactional flow; see [`flow`](crate::service::flow) for the others): each message through it,
    /// FIFO groups in order, until `DEDUP_DEADLINE_MARGIN_MS` before the deadline; answered with
    /// a partial batch response (S12) and the invocation's account. With
    /// [`envelope`](Dedup::envelope), each body is opened first and the flow gets the message
    /// inside; a body that is not that envelope is rejected (`envelope_malformed`).
    pub fn sqs<M, F: Flow<S, M>>(
        self,
        flow: F,
    ) -> Result<Service<SqsEvent, SqsBatchResponse>, BuildError> {
        let envelope = self.envelope;
        self.door(crate::source::sqs::Sqs { envelope }, flow)
    }

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
        self.door(crate::source::asynchronous::Invoked::new(), flow)
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
        self.door(crate::source::asynchronous::Invoked::new(), flow)
    }

    /// The Kinesis service of `flow` (any flow of [`flow`](crate::service::flow) but a batch-wide
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
    #[cfg(feature = "kinesis")]
    pub fn kinesis<M, F>(
        self,
        flow: F,
    ) -> Result<
        Service<
            aws_lambda_events::event::kinesis::KinesisEvent,
            aws_lambda_events::event::streams::KinesisEventResponse,
        >,
        BuildError,
    >
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.door(crate::source::stream::Stream::new(), flow)
    }

    /// The DynamoDB Streams service of `flow`: each record's change
    /// ([`Change`](crate::events::Change), its images read into `T` of an
    /// `Event<Change<T>>`) in order per item, deduplicated by the identity the builder is given —
    /// a pointer into the record's `{"eventName", "keys", "newImage", "oldImage"}`, such as
    /// `.identity("/newImage/order_id")`, never the record's sequence number (S1). Records that
    /// can never apply are parked in `DEDUP_PARKING_QUEUE_URL` (required) before the checkpoint
    /// passes them (S15); a record without the identity (a `REMOVE`, when it is read from the
    /// new image) is one of them, so filter the trigger on `eventName` for the changes the
    /// function is for.
    #[cfg(feature = "dynamodb-streams")]
    pub fn dynamodb_stream<M, F>(
        self,
        flow: F,
    ) -> Result<
        Service<
            aws_lambda_events::event::dynamodb::Event,
            aws_lambda_events::event::streams::DynamoDbEventResponse,
        >,
        BuildError,
    >
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.door(crate::source::stream::Stream::new(), flow)
    }

    /// The Kafka service of `flow` (any flow but a batch-wide transaction, which would not
    /// keep order): records in order per partition, each partition's first record not done
    /// named in a [`KafkaEventResponse`](crate::source::kafka::KafkaEventResponse), records that can
    /// never apply parked in `DEDUP_PARKING_QUEUE_URL` (required) before the response passes
    /// them (S15).
    ///
    /// Unless the builder was given an identity (`identity_attribute("<header>")` for a record
    /// header, `identity("/pointer")` into the value, `cloudevents(..)`), a record's identity
    /// is its position — cluster, topic, partition and offset (`crate::source::kafka`): it catches
    /// every redelivery of a record, not a producer that writes one event twice. Keyed by
    /// position, it refuses to start without `DEDUP_KAFKA_CLUSTER_ID`
    /// (`crate::source::kafka::CLUSTER_ID_VARIABLE`), the name of a self-managed cluster (an MSK
    /// event is named by its `eventSourceArn`). The envelope id
    /// ([`identity_envelope_id`](Self::identity_envelope_id)) is refused: a Kafka record has
    /// none.
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, flow::transact};
    /// fn f(dedup: Dedup) {
    ///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
    ///     let _ = dedup.kafka(work.one_transaction_per_batch());
    /// }
    /// ```
    #[cfg(feature = "kafka")]
    pub fn kafka<M, F>(
        self,
        flow: F,
    ) -> Result<
        Service<
            aws_lambda_events::event::kafka::KafkaEvent,
            crate::source::kafka::KafkaEventResponse,
        >,
        BuildError,
    >
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        let door = crate::source::kafka::Kafka::on(&self)?;
        self.door(door, flow)
    }

    /// The ActiveMQ service of `flow` (Amazon MQ for ActiveMQ): each message once, by the
    /// identity the builder is given — the broker's `messageID` only when chosen openly,
    /// `.identity_attribute(mq::MESSAGE_ID_ATTRIBUTE)` (S1: it misses a producer's resend;
    /// `crate::source::mq`), a property (`.identity_attribute("event-id")`) or the data's own. A message
    /// that can never apply is parked in `DEDUP_PARKING_QUEUE_URL` (required) and the batch
    /// acknowledged; a transient failure fails the invocation, so the whole batch comes again
    /// and what applied is then a duplicate.
    #[cfg(feature = "mq")]
    pub fn activemq<M, F>(
        self,
        flow: F,
    ) -> Result<Service<aws_lambda_events::event::activemq::ActiveMqEvent, ()>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.door(
            crate::source::mq::Mq(crate::source::mq::activemq_messages),
            flow,
        )
    }

    /// The RabbitMQ service of `flow` (Amazon MQ for RabbitMQ), as
    /// [`activemq`](Self::activemq): the broker's id is `basicProperties.messageId`, which
    /// RabbitMQ leaves null unless the producer sets it (a message without the identity chosen
    /// is parked, never guessed): a header (`identity_attribute("<header>")`) or the data's own
    /// (`identity("/pointer")`) is the usual choice.
    #[cfg(feature = "mq")]
    pub fn rabbitmq<M, F>(
        self,
        flow: F,
    ) -> Result<Service<aws_lambda_events::event::rabbitmq::RabbitMqEvent, ()>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.door(
            crate::source::mq::Mq(crate::source::mq::rabbitmq_messages),
            flow,
        )
    }
}

#[cfg(feature = "s3")]
impl Dedup<crate::store::Items> {
    /// The service of S3 event notifications invoking the function directly (asynchronously):
    /// each record once (`crate::source::s3`: by default its bucket, decoded key, version id and
    /// sequencer), its work committed with its mark and its object's high-water sequencer
    /// ([`latest_wins`](crate::flow::latest_wins)), so a redelivery is a duplicate and an event
    /// older than one applied for the same object is superseded — acknowledged, counted,
    /// never applied over the newer one. A record that cannot be read (no key, a sequencer
    /// that is not hex…) is rejected `envelope_malformed`. Ok when every record is
    /// acknowledged; else an error, for Lambda's async retries and then the on-failure
    /// destination (the template must give the function one).
    ///
    /// Only on a store with latest-wins mode ([`Items`](crate::store::Items): DynamoDB,
    /// memory), not on a store of marks only, even of the same effects:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, Store, flow::latest_wins};
    /// fn f(dedup: Dedup<Store<Effect>>) {
    ///     let _ = dedup.s3(latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
    /// }
    /// ```
    ///
    /// ```
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, flow::latest_wins};
    /// fn f(dedup: Dedup) {
    ///     let _ = dedup.s3(latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
    /// }
    /// ```
    pub fn s3<M, F>(
        self,
        flow: crate::service::flow::LatestWins<F>,
    ) -> Result<Service<aws_lambda_events::event::s3::S3Event, ()>, BuildError>
    where
        crate::service::flow::LatestWins<F>: Flow<crate::store::Items, M>,
    {
        self.door(crate::source::asynchronous::Invoked::new(), flow)
    }
}
