//! The crate's doors, each given to [`Dedup::door`](crate::Dedup::door) with its flow:
//! `dedup.door(Kinesis, flow)` (SQS has its convenience, [`Dedup::sqs`](crate::Dedup::sqs)).
//! What a door is and does is the trait [`Door`](crate::door::Door); these are its
//! implementations, one file each: what a record of the door is and what answers for an
//! invocation; the runner does the rest, the same for all.
//!
//! - `sqs`: SQS messages, opened first when the builder was given an envelope; the partial
//!   batch response listing the report's failures;
//! - `kinesis`, `dynamodb_stream` (features `kinesis`, `dynamodb-streams`): one stream door
//!   (`stream::Stream`), the checkpoint as the partial batch response, records that can never
//!   apply parked (`Parking`);
//! - `sns`, `eventbridge`: SNS notifications and EventBridge events as messages, direct or
//!   in an SQS body (`envelope`: `Dedup::envelope`), the payload the inner message;
//! - `s3` (feature `s3`): S3 event notifications, each record once, latest wins;
//! - `asynchronous`: what the async doors (direct SNS, EventBridge, S3) answer, all or nothing;
//! - `kafka` (feature `kafka`): Amazon MSK and self-managed Kafka records, in order per
//!   partition, each partition's resume point in a partial batch response of its own type;
//! - `mq` (feature `mq`): Amazon MQ (ActiveMQ, RabbitMQ) messages, no partial batch response:
//!   poison parked and the batch acknowledged, a transient failure redelivering the batch;
//! - `stream`: what the doors that park share, each saying only what one of its records is
//!   (`stream::StreamRecord`);
//! - `builder`: the doors' public values (below) and `Dedup::sqs`.
//!
//! The webhook door is `crate::webhook`; the relays' streams, whose items settle themselves,
//! `crate::relay` (features `webhook`, `dynamodb-streams`).

pub(crate) mod asynchronous;
pub(crate) mod builder;
#[cfg(feature = "dynamodb-streams")]
pub(crate) mod dynamodb_stream;
pub(crate) mod envelope;
pub(crate) mod eventbridge;
#[cfg(test)]
mod inputs;
#[cfg(feature = "kafka")]
pub(crate) mod kafka;
#[cfg(feature = "kinesis")]
pub(crate) mod kinesis;
#[cfg(feature = "mq")]
pub(crate) mod mq;
#[cfg(feature = "s3")]
pub(crate) mod s3;
pub(crate) mod sns;
pub(crate) mod sqs;
#[cfg(feature = "parking")]
pub(crate) mod stream;

#[cfg(feature = "dynamodb-streams")]
pub use builder::DynamoDbStream;
#[cfg(feature = "kinesis")]
pub use builder::Kinesis;
#[cfg(feature = "s3")]
pub use builder::S3;
#[cfg(feature = "mq")]
pub use builder::{ActiveMq, RabbitMq};
pub use builder::{EventBridge, Sns};
#[cfg(feature = "kafka")]
pub use kafka::Kafka;
