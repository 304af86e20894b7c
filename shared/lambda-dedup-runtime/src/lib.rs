//! The Lambda runtime glue that every function shares: the only library that knows `aws_lambda_events`
//! and `lambda_runtime`. It converts SQS events to the library's [`lambda_dedup::Message`]s and the
//! [`lambda_dedup_engine::BatchReport`] back to a partial batch response, reads the configuration every
//! function has from the environment (refusing to start on a bad one), and logs the account.
//!
//! # What a function uses
//! - At the root: the builder [`Dedup`] and what it is built from ([`Env`], [`Settings`],
//!   [`Envelope`], `Parking`) or refuses with ([`BuildError`], [`SettingsError`]); the work's
//!   [`Event`], [`Effect`] and [`HandlerError`]; the services it builds ([`SqsService`],
//!   [`Service`], …).
//! - [`store`]: the stores it runs on, bound to the settings when chosen ([`Dedup::on`]):
//!   [`store::Items`] (DynamoDB, memory: every mode) or a [`store::Store`] of marks only
//!   (PostgreSQL, Valkey).
//! - [`flow`]: what is done once per event (a closure, a transaction, a call, created once, a
//!   sequence, latest wins).
//! - [`events`]: the event and response types of the doors.
//! - [`door`]: what a door is ([`door::Door`]); a function's own door is one more
//!   ([`Dedup::door`]).
//! - `http`, `webhook`, `relay` (features `http`, `webhook`, `dynamodb-streams`): what those
//!   doors' functions name beyond the builder (their settings, the reply, the relay's layout).
//! - [`emf`]: the account's EMF lines; [`testing`]: what a function's tests share (with the
//!   feature `memory`, the function on the memory store of its own settings).
//! - [`MainError`]: what its `main` returns, so that a refusal at start prints its message.
//! - The crates its types come from, in the versions it was built with: `lambda_runtime`,
//!   `aws_lambda_events`, and `lambda_http` (features `webhook`, `http`); and the [`Item`]s and
//!   [`Value`]s a test reads back.
//!
//! Everything else is the crate's own: the doors one file each (SQS, SNS, EventBridge, Kinesis,
//! DynamoDB Streams, Kafka, Amazon MQ, S3), the one runner every door goes through (the cutoff
//! before the deadline, a span per record, the account, late events to the reconciliation
//! queue, parking), the side queues and the stores' binding to the settings.
//!
//! # Features
//! `dynamodb`, the DynamoDB store and item tables, is the default. A function on PostgreSQL or
//! Valkey leaves it out (`default-features = false`) and carries no AWS SDK. One feature per
//! store (`dynamodb`, `postgres`, `valkey`, and `memory` for tests) and per door beyond SQS, SNS
//! and EventBridge (`kinesis`, `dynamodb-streams`, `kafka`, `mq`, `s3`, `webhook`, `http`,
//! `inbox`), plus two clients: `sqs-client`, the side queues' SQS client, which a function that
//! sets `DEDUP_RECONCILIATION_QUEUE_URL` names (without it that variable refuses the start; the
//! doors that park and `inbox` enable it), and `secrets-manager`. `aws`, `parking`,
//! `checkpoint`, `shards` and `broker` are internal: what several doors share, enabled by them.

#![warn(missing_docs, unreachable_pub)]

mod aws;
mod bound;
pub mod door;
#[cfg(feature = "durable")]
pub mod durable;
pub mod emf;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "dynamodb-streams")]
mod in_order;
mod main_error;
#[cfg(feature = "parking")]
mod parking;
mod queue;
mod reconcile;
#[cfg(feature = "dynamodb-streams")]
pub mod relay;
#[cfg(feature = "secrets-manager")]
mod secrets;
mod service;
pub mod source;
pub mod store;
pub mod testing;
#[cfg(feature = "webhook")]
pub mod webhook;

/// The items a flow writes and a test reads back: an [`Item`] of [`Value`]s.
pub use lambda_dedup::{Effect, Item, Provenance, TimeFormat, Value};
/// Why a delivery was rejected (what [`InvokeError::Rejected`] names).
pub use lambda_dedup_engine::Reason;
/// `lambda_http` (features `webhook`, `http`), re-exported for the same reason: the HTTP and
/// webhook services take its requests and answer its bodies, and a function on another
/// `lambda_http` would not fit them (`expected aws_lambda_events::encodings::Body, found
/// lambda_http::Body`). Its `run_concurrent` and `Error` come from here too.
#[cfg(feature = "webhook")]
pub use lambda_http;
/// The crates the builder's types come from, re-exported so that a function uses the versions
/// this crate was built with: `lambda_runtime` (`run`, `Error`, `LambdaEvent`, `Context`) and
/// `aws_lambda_events` (the event types, with the features this crate's own features enable).
pub use {aws_lambda_events, lambda_runtime};

/// The event and response types of the builder's doors: those of `aws_lambda_events`, and the
/// few the doors add (a DynamoDB stream record's `Change`, feature `dynamodb-streams`; Kafka's
/// partial batch response; what the async doors answer when not all was acknowledged).
pub mod events {
    pub use crate::source::asynchronous::NotAcknowledged;
    pub use aws_lambda_events::event::eventbridge::EventBridgeEvent;
    pub use aws_lambda_events::event::sns::{SnsEvent, SnsMessage};
    pub use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
    #[cfg(feature = "kinesis")]
    pub use aws_lambda_events::event::{kinesis::KinesisEvent, streams::KinesisEventResponse};
    #[cfg(feature = "dynamodb-streams")]
    pub use {
        crate::source::dynamodb_stream::Change,
        aws_lambda_events::event::{
            dynamodb::Event as DynamoDbEvent, streams::DynamoDbEventResponse,
        },
    };
    #[cfg(feature = "kafka")]
    pub use {
        crate::source::kafka::{KafkaBatchItemFailure, KafkaEventResponse, KafkaItemIdentifier},
        aws_lambda_events::event::kafka::KafkaEvent,
    };
    #[cfg(feature = "mq")]
    pub use {
        crate::source::mq::MESSAGE_ID_ATTRIBUTE as MQ_MESSAGE_ID_ATTRIBUTE,
        aws_lambda_events::event::{activemq::ActiveMqEvent, rabbitmq::RabbitMqEvent},
    };
}
/// The AWS SDK configuration with the settings' SDK timeouts, for a function's own clients.
#[cfg(feature = "aws")]
pub use aws::sdk_config;
#[cfg(feature = "http")]
pub use http::builder::{HttpEvent, HttpService};
/// The settings a function's `main` (and its tests) reads the builder with, from
/// `lambda-dedup-config`, where every other setting is.
pub use lambda_dedup_config::{Env, SettingRule, Settings, SettingsError};
pub use main_error::MainError;
#[cfg(feature = "parking")]
pub use parking::Parking;
pub use queue::Queue;
#[cfg(feature = "secrets-manager")]
pub use secrets::SecretsManagerSecret;
pub use service::{
    BuildError, Dedup, Envelope, Event, HandlerError, Identity, IntoPlan, Invalid, InvokeError,
    InvokeScope, InvokeScopeError, Service, SqsService, Tenant, Transient, flow, parse,
};
#[cfg(feature = "webhook")]
pub use webhook::builder::WebhookService;

/// Sets up JSON or text logging as the Lambda environment asks (`AWS_LAMBDA_LOG_FORMAT`,
/// `AWS_LAMBDA_LOG_LEVEL`, or `RUST_LOG`).
pub fn init_tracing() {
    lambda_runtime::tracing::init_default_subscriber();
}

#[cfg(test)]
mod sample_events {
    //! The sample events in `events/` (for `cargo lambda invoke --data-file`) stay valid: each
    //! parses as the event its function takes, and every SQS message in them has a key.

    use aws_lambda_events::event::dynamodb::Event;
    use aws_lambda_events::event::sqs::SqsEvent;

    /// The sample `name` parsed as a `T`, or a panic naming it.
    fn sample<T: serde::de::DeserializeOwned>(name: &str) -> T {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../events")
            .join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).expect(name)
    }

    /// What a sample must be for its function.
    enum Expect {
        /// An SQS event whose every message derives a key.
        SqsKeys,
        /// A DynamoDB stream event of one record.
        OneStreamRecord,
    }

    /// The key spec of the samples' functions: CloudEvents, the tenant in `tenantid`.
    fn sample_spec() -> lambda_dedup::KeySpec {
        let scope = lambda_dedup::Scope::new("demo", "sample").expect("scope");
        lambda_dedup::KeySpec::cloudevents(scope, "tenantid")
    }

    #[test]
    fn sqs_and_stream_samples_parse_as_their_functions_events() {
        use Expect::{OneStreamRecord, SqsKeys};
        for (name, expect) in [
            ("ledger-credit.json", SqsKeys),
            ("fine-notice.json", SqsKeys),
            ("payment-request.json", SqsKeys),
            ("intent-insert.json", OneStreamRecord),
            ("mark-ttl-purge.json", OneStreamRecord),
            ("inbox-insert.json", OneStreamRecord),
        ] {
            match expect {
                SqsKeys => {
                    let event: SqsEvent = sample(name);
                    let spec = sample_spec();
                    for m in crate::door::sqs::messages(&event) {
                        assert!(spec.derive(&m).is_ok(), "{name}: {}", m.message_id);
                    }
                }
                OneStreamRecord => {
                    let event: Event = sample(name);
                    assert_eq!(event.records.len(), 1, "{name}");
                }
            }
        }
    }

    #[test]
    fn the_kinesis_sample_parses_and_derives_keys_from_the_payload() {
        let event: aws_lambda_events::event::kinesis::KinesisEvent = sample("ledger-kinesis.json");
        let spec = sample_spec();
        let keys: Vec<_> = crate::source::stream::messages(&event.records)
            .iter()
            .map(|m| spec.derive(m).expect("a key").key)
            .collect();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0], keys[2], "the same event in two records: one key");
        assert_ne!(keys[0], keys[1]);
    }

    #[test]
    fn the_relay_sweep_sample_is_no_stream_event() {
        let sweep: serde_json::Value = sample("relay-sweep.json");
        assert!(
            sweep.get("Records").is_none(),
            "the relay tells a sweep by its shape"
        );
    }
}
