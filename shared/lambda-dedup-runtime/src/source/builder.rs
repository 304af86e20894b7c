//! The builder's doors: [`Dedup::sqs`], the one-line convenience of the door every example
//! starts from, and the other doors of the crate's sources, each a value given to
//! [`Dedup::door`] with its flow (`dedup.door(Kinesis, flow)`); what a door is and does lives
//! with its source (`crate::source`).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};

use crate::service::flow::Flow;
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
}

/// A door of the crate's that stands for another of its own (`$inner`): every answer that
/// one's.
macro_rules! door_of {
    ($(#[cfg($cfg:meta)])? $(#[doc = $doc:expr])* $name:ident => $inner:ty = $new:expr, $event:ty => $response:ty, $ordering:ty) => {
        $(#[cfg($cfg)])?
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        $(#[cfg($cfg)])?
        impl crate::door::Door for $name {
            type Event = $event;
            type Response = $response;
            type Ordering = $ordering;
            const NAME: &'static str = <$inner as crate::door::Door>::NAME;
            const ENVELOPE_ID: bool = <$inner as crate::door::Door>::ENVELOPE_ID;
            const CLOUDEVENTS_DATA: bool = <$inner as crate::door::Door>::CLOUDEVENTS_DATA;
            const SENDER_VOUCHED: bool = <$inner as crate::door::Door>::SENDER_VOUCHED;
            const PARKS: bool = <$inner as crate::door::Door>::PARKS;
            const CUT: crate::door::Cut = <$inner as crate::door::Door>::CUT;
            const IDENTITY: Option<&'static str> = <$inner as crate::door::Door>::IDENTITY;
            const TENANT: Option<&'static str> = <$inner as crate::door::Door>::TENANT;

            fn messages(
                &self,
                event: &Self::Event,
                context: &lambda_runtime::Context,
            ) -> Vec<crate::door::Record> {
                crate::door::Door::messages(&$new, event, context)
            }

            fn whole(&self, event: &Self::Event) -> bool {
                crate::door::Door::whole(&$new, event)
            }

            fn reconciled<'a>(
                &self,
                event: &'a Self::Event,
                batch: &[lambda_dedup::Message],
            ) -> Option<std::borrow::Cow<'a, aws_lambda_events::event::sqs::SqsEvent>> {
                crate::door::Door::reconciled(&$new, event, batch)
            }

            fn metrics(
                &self,
                event: &Self::Event,
                report: &lambda_dedup_engine::BatchReport,
            ) -> Option<Vec<(&'static str, u64)>> {
                crate::door::Door::metrics(&$new, event, report)
            }

            async fn answer(
                &self,
                event: &Self::Event,
                done: crate::door::Answered<'_>,
            ) -> Result<Self::Response, lambda_runtime::Error> {
                crate::door::Door::answer(&$new, event, done).await
            }
        }
    };
}

door_of! {
    /// A direct SNS subscription, for [`Dedup::door`]: each record's `Message` through the flow
    /// (any flow but a batch-wide transaction), its pointers relative to the `Message` (read
    /// inside it when it is JSON in a string, as it always is: `.identity("/order_id")`), its
    /// attributes the notification's `MessageAttributes`, reported by the SNS `MessageId`. Ok
    /// when every record is acknowledged; else an error, for Lambda's async retries and the
    /// on-failure destination (the template must give the function one).
    Sns => crate::source::asynchronous::Invoked<aws_lambda_events::event::sns::SnsEvent>
        = crate::source::asynchronous::Invoked::<aws_lambda_events::event::sns::SnsEvent>::new(),
    aws_lambda_events::event::sns::SnsEvent => (),
    crate::door::InOrder
}

door_of! {
    /// An EventBridge target, for [`Dedup::door`]: the event's `detail` through the flow, its
    /// pointers relative to the `detail` (`.identity("/order_id")`: EventBridge gives every
    /// `PutEvents` entry a new `id`, so a producer's retry has a new `id` and the identity
    /// belongs in the detail), reported by the event's `id`. Answered as [`Sns`] is.
    EventBridge => crate::source::asynchronous::Invoked<aws_lambda_events::event::eventbridge::EventBridgeEvent>
        = crate::source::asynchronous::Invoked::<aws_lambda_events::event::eventbridge::EventBridgeEvent>::new(),
    aws_lambda_events::event::eventbridge::EventBridgeEvent => (),
    crate::door::InOrder
}

door_of! {
    #[cfg(feature = "kinesis")]
    /// Kinesis (feature `kinesis`), for [`Dedup::door`]: records in order per partition key
    /// (any flow of [`flow`](crate::service::flow) but a batch-wide transaction), records that can
    /// never apply parked in `DEDUP_PARKING_QUEUE_URL` (required) before the checkpoint passes
    /// them (S15).
    ///
    /// A batch-wide transaction would not keep the records' order, so it does not compile here:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, source::Kinesis, flow::transact};
    /// fn f(dedup: Dedup) {
    ///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
    ///     let _ = dedup.door(Kinesis, work.one_transaction_per_batch());
    /// }
    /// ```
    ///
    /// ```
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, source::Kinesis, flow::transact};
    /// fn f(dedup: Dedup) {
    ///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
    ///     let _ = dedup.door(Kinesis, work);
    /// }
    /// ```
    Kinesis => crate::source::stream::Stream<aws_lambda_events::event::kinesis::KinesisEvent>
        = crate::source::stream::Stream::<aws_lambda_events::event::kinesis::KinesisEvent>::new(),
    aws_lambda_events::event::kinesis::KinesisEvent => aws_lambda_events::event::streams::KinesisEventResponse,
    crate::door::InOrder
}

door_of! {
    #[cfg(feature = "dynamodb-streams")]
    /// DynamoDB Streams (feature `dynamodb-streams`), for [`Dedup::door`]: each record's change
    /// ([`Change`](crate::events::Change), its images read into `T` of an
    /// `Event<Change<T>>`) in order per item, deduplicated by the identity the builder is given
    /// — a pointer into the record's `{"eventName", "keys", "newImage", "oldImage"}`, such as
    /// `.identity("/newImage/order_id")`, never the record's sequence number (S1). Records that
    /// can never apply are parked in `DEDUP_PARKING_QUEUE_URL` (required) before the checkpoint
    /// passes them (S15); a record without the identity (a `REMOVE`, when it is read from the
    /// new image) is one of them, so filter the trigger on `eventName` for the changes the
    /// function is for.
    DynamoDbStream => crate::source::stream::Stream<aws_lambda_events::event::dynamodb::Event>
        = crate::source::stream::Stream::<aws_lambda_events::event::dynamodb::Event>::new(),
    aws_lambda_events::event::dynamodb::Event => aws_lambda_events::event::streams::DynamoDbEventResponse,
    crate::door::InOrder
}

door_of! {
    #[cfg(feature = "mq")]
    /// Amazon MQ for ActiveMQ (feature `mq`), for [`Dedup::door`]: each message once, by the
    /// identity the builder is given — the broker's `messageID` only when chosen openly,
    /// `.identity(Identity::attribute(events::MQ_MESSAGE_ID_ATTRIBUTE))` (S1: it misses a
    /// producer's resend), a property (`.identity(Identity::attribute("event-id"))`) or the
    /// data's own. A message that can never apply is parked in `DEDUP_PARKING_QUEUE_URL`
    /// (required) and the batch acknowledged; a transient failure fails the invocation, so the
    /// whole batch comes again and what applied is then a duplicate.
    ActiveMq => crate::source::mq::Mq<aws_lambda_events::event::activemq::ActiveMqEvent>
        = crate::source::mq::Mq(crate::source::mq::activemq_messages),
    aws_lambda_events::event::activemq::ActiveMqEvent => (),
    crate::door::InOrder
}

door_of! {
    #[cfg(feature = "mq")]
    /// Amazon MQ for RabbitMQ (feature `mq`), for [`Dedup::door`], as [`ActiveMq`]: the
    /// broker's id is `basicProperties.messageId`, which RabbitMQ leaves null unless the
    /// producer sets it (a message without the identity chosen is parked, never guessed): a
    /// header (`.identity(Identity::attribute("<header>"))`) or the data's own
    /// (`.identity("/pointer")`) is the usual choice.
    RabbitMq => crate::source::mq::Mq<aws_lambda_events::event::rabbitmq::RabbitMqEvent>
        = crate::source::mq::Mq(crate::source::mq::rabbitmq_messages),
    aws_lambda_events::event::rabbitmq::RabbitMqEvent => (),
    crate::door::InOrder
}

door_of! {
    #[cfg(feature = "s3")]
    /// S3 event notifications invoking the function directly (asynchronously; feature `s3`),
    /// for [`Dedup::door`] with the [`latest_wins`](crate::flow::latest_wins) flow only: each
    /// record once (by default its bucket, decoded key, version id and sequencer), its work
    /// committed with its mark and its object's high-water sequencer, so a redelivery is a
    /// duplicate and an event older than one applied for the same object is superseded —
    /// acknowledged, counted, never applied over the newer one. A record that cannot be read
    /// (no key, a sequencer that is not hex…) is rejected `envelope_malformed`. Ok when every
    /// record is acknowledged; else an error, for Lambda's async retries and then the
    /// on-failure destination (the template must give the function one).
    ///
    /// Only on a store with latest-wins mode ([`Items`](crate::store::Items): DynamoDB,
    /// memory), not on a store of marks only, even of the same effects:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, source::S3, store::Store, flow::latest_wins};
    /// fn f(dedup: Dedup<Store<Effect>>) {
    ///     let _ = dedup.door(S3, latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
    /// }
    /// ```
    ///
    /// nor with another flow:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, source::S3};
    /// fn f(dedup: Dedup) {
    ///     let _ = dedup.door(S3, |_: Event<serde_json::Value>| Vec::<Effect>::new());
    /// }
    /// ```
    ///
    /// ```
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, source::S3, flow::latest_wins};
    /// fn f(dedup: Dedup) {
    ///     let _ = dedup.door(S3, latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
    /// }
    /// ```
    S3 => crate::source::asynchronous::Invoked<aws_lambda_events::event::s3::S3Event>
        = crate::source::asynchronous::Invoked::<aws_lambda_events::event::s3::S3Event>::new(),
    aws_lambda_events::event::s3::S3Event => (),
    crate::service::flow::seal::LatestOnly
}
