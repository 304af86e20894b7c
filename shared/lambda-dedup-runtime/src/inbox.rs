//! The inbox's forwarder (feature `inbox`): a DynamoDB Streams consumer of the inbox table that
//! the `webhook` module writes, handing each new inbox item to the SQS queue the rest of the system
//! reads (the inbox pattern).
//!
//! The never-stall rules of the intent relay hold here too:
//! - records are handled in shard order; the first one that fails transiently (SQS or DynamoDB
//!   down, throttled) is reported as the batch item failure and the stream retries from it, so
//!   nothing is skipped (S12);
//! - an item that can never be sent (no body, a body over SQS's limit, a body the queue refuses)
//!   is **parked**: `forward_status = PARKED` with a reason code on the item, counted, and the
//!   shard moves on (S15). It stays in the inbox for whoever repairs it;
//! - before each record there must be time left for one more (`per_record`); otherwise the
//!   record is reported and the stream retries from it in a fresh invocation;
//! - a record without a new image is a stream misconfiguration (the view type must include new
//!   images): retried, never guessed around;
//! - a scheduled [`Forwarder::sweep`] re-drives items left unforwarded longer than a bound (the
//!   trigger gave their records up, after its maximum record age): it stamps
//!   `redrive_requested_at` on them, the stamp comes back on the stream as a modification, and
//!   the forwarder sends the item then. It also reports the oldest such item's age, alarmed on.
//!
//! Delivery into the queue is at least once: a retry from a checkpoint sends again what was sent
//! after it. The queue's consumers deduplicate by the event's own identity, which the inbox keeps
//! as the sender sent it. On a FIFO queue the event key's digest is also the
//! `MessageDeduplicationId`, so SQS drops such resends within its 5-minute window.

use std::time::{Duration, SystemTime};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_sqs::types::MessageAttributeValue;
use lambda_dedup::{Effect, Item};
use lambda_dedup_dynamodb::Client;

use crate::in_order::{self, Swept, image_part};

/// The largest body SQS takes (1 MiB since January 2026), attributes included; kept clear of it.
pub const MAX_QUEUE_BODY_BYTES: usize = 1024 * 1024 - 1024;
/// `forward_status` of an item handed to the queue.
pub const FORWARDED: &str = "FORWARDED";
/// `forward_status` of an item that can never be sent; see `failure_reason`.
pub const PARKED: &str = "PARKED";
/// The attribute the sweep stamps on an item it re-drives (epoch milliseconds).
pub const REDRIVE: &str = "redrive_requested_at";
/// The attribute that says an item is settled (forwarded or parked).
const STATUS: &str = "forward_status";
/// The message attribute naming the inbox item on the forwarded message.
pub const INBOX_KEY_ATTRIBUTE: &str = "inbox_key";

/// The parts of an inbox image the forwarder reads, each on its own, so a malformed one says
/// which part is wrong.
#[derive(serde::Deserialize)]
struct Key {
    event_key: String,
}

#[derive(serde::Deserialize)]
struct Body {
    body: String,
}

#[derive(serde::Deserialize)]
struct Tenant {
    tenant: String,
}

/// What a stream record is to the forwarder.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Record {
    /// Not an insertion: our own status updates, TTL or manual deletions.
    Ignored,
    /// No new image naming the item: a stream configuration fault; retried.
    NoImage,
    /// An item that can never be sent: parked with this reason.
    Unsendable {
        event_key: String,
        reason: &'static str,
    },
    /// An item to send.
    Send {
        event_key: String,
        body: String,
        tenant: Option<String>,
    },
}

fn read(record: &EventRecord) -> Record {
    let image = &record.change.new_image;
    // An insertion, or the sweep's re-drive of an item still unsettled (our own FORWARDED and
    // PARKED stamps are modifications too, and carry a status).
    let redriven =
        record.event_name == "MODIFY" && image.contains_key(REDRIVE) && !image.contains_key(STATUS);
    if record.event_name != "INSERT" && !redriven {
        return Record::Ignored;
    }
    let Some(Key { event_key }) = image_part(image) else {
        return Record::NoImage;
    };
    let Some(Body { body }) = image_part(image) else {
        return Record::Unsendable {
            event_key,
            reason: "malformed_inbox_item",
        };
    };
    if body.len() > MAX_QUEUE_BODY_BYTES {
        return Record::Unsendable {
            event_key,
            reason: "too_large_for_queue",
        };
    }
    Record::Send {
        event_key,
        body,
        tenant: image_part::<Tenant>(image).map(|t| t.tenant),
    }
}

/// The account of one invocation: every record ends in exactly one of these counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Records in the batch.
    pub records: u64,
    /// Items sent to the queue.
    pub forwarded: u64,
    /// Items parked (never sendable): alarmed on.
    pub parked: u64,
    /// Records that are not insertions.
    pub ignored: u64,
    /// The record that failed transiently (0 or 1): the stream retries from it.
    pub transient: u64,
    /// Records not attempted: behind a transient failure, or not reached before the deadline.
    pub deferred: u64,
}

impl Tally {
    /// Whether every record has exactly one ending.
    pub fn closes(&self) -> bool {
        self.records == self.forwarded + self.parked + self.ignored + self.transient + self.deferred
    }

    /// One CloudWatch EMF record of this tally.
    pub fn emf_line(&self, function: &str) -> String {
        crate::emf::line(
            function,
            &[
                ("Records", "Count", self.records),
                ("Forwarded", "Count", self.forwarded),
                ("Parked", "Count", self.parked),
                ("Ignored", "Count", self.ignored),
                ("Transient", "Count", self.transient),
                ("Deferred", "Count", self.deferred),
            ],
        )
    }
}

/// How one record ended, when it did not fail transiently.
enum Done {
    Forwarded,
    Parked,
    Ignored,
}

/// The forwarder: the inbox table and the queue.
#[derive(Debug)]
pub struct Forwarder {
    function: String,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    dynamodb: Client,
    inbox: String,
    per_record: Duration,
}

impl Forwarder {
    /// A forwarder for `function`, from the `inbox` table to the queue at `queue_url`, starting a
    /// record only with `per_record` left before the invocation's deadline.
    pub fn new(
        function: &str,
        sqs: aws_sdk_sqs::Client,
        queue_url: String,
        dynamodb: Client,
        inbox: String,
        per_record: Duration,
    ) -> Self {
        Self {
            function: function.to_owned(),
            sqs,
            queue_url,
            dynamodb,
            inbox,
            per_record,
        }
    }

    /// The forwarder as `main` builds it, from `env` (the process environment in Lambda):
    /// `FORWARD_QUEUE_URL`, `INBOX_TABLE` and `FORWARDER_DEADLINE_MARGIN_MS` (default 3000: the
    /// time one record needs, at least, before the invocation's deadline).
    pub fn read(
        function: &str,
        env: &crate::settings::Env,
        sqs: aws_sdk_sqs::Client,
        dynamodb: Client,
    ) -> Result<Self, crate::SettingsError> {
        Ok(Self::new(
            function,
            sqs,
            env.required("FORWARD_QUEUE_URL")?,
            dynamodb,
            env.required("INBOX_TABLE")?,
            Duration::from_millis(env.optional("FORWARDER_DEADLINE_MARGIN_MS", 3_000u64)?),
        ))
    }

    /// `FORWARDER_REDRIVE_AFTER_SECONDS` in `env` (default 3600): how long an item may stay
    /// unforwarded before the sweep re-drives it.
    pub fn redrive_after(env: &crate::settings::Env) -> Result<Duration, crate::SettingsError> {
        env.optional("FORWARDER_REDRIVE_AFTER_SECONDS", 3_600u64)
            .map(Duration::from_secs)
    }

    /// The time left before the deadline that a record needs to be started.
    pub fn per_record(&self) -> Duration {
        self.per_record
    }

    /// Handles one stream batch in order (see the module's rules), prints the tally as one EMF
    /// line, and answers with the record the stream must retry from, if any.
    pub async fn handle(
        &self,
        event: &Event,
        deadline: Option<SystemTime>,
    ) -> (DynamoDbEventResponse, Tally) {
        let walk =
            in_order::walk(&event.records, self.per_record, deadline, |r| self.apply(r)).await;
        let mut tally = Tally {
            records: event.records.len() as u64,
            transient: walk.transient,
            deferred: walk.deferred,
            ..Tally::default()
        };
        for done in walk.done {
            match done {
                Done::Forwarded => tally.forwarded += 1,
                Done::Parked => tally.parked += 1,
                Done::Ignored => tally.ignored += 1,
            }
        }
        let response = walk.response;
        println!("{}", tally.emf_line(&self.function));
        tracing::info!(
            records = tally.records,
            forwarded = tally.forwarded,
            parked = tally.parked,
            ignored = tally.ignored,
            transient = tally.transient,
            deferred = tally.deferred,
            closes = tally.closes(),
            "inbox batch done"
        );
        (response, tally)
    }

    /// One record: `Err` is a transient failure.
    async fn apply(&self, record: &EventRecord) -> Result<Done, String> {
        let (event_key, body, tenant) = match read(record) {
            Record::Ignored => return Ok(Done::Ignored),
            Record::NoImage => {
                return Err(
                    "the record has no new image with an event_key: the stream must \
                     carry new images (NEW_IMAGE or NEW_AND_OLD_IMAGES)"
                        .into(),
                );
            }
            Record::Unsendable { event_key, reason } => {
                return self.park(&event_key, reason).await;
            }
            Record::Send {
                event_key,
                body,
                tenant,
            } => (event_key, body, tenant),
        };
        let digest = hex::encode(lambda_dedup::signature::hmac_sha256(
            b"lambda-dedup/inbox",
            event_key.as_bytes(),
        ));
        let mut send = self
            .sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_attributes(
                INBOX_KEY_ATTRIBUTE,
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(&digest)
                    .build()
                    .map_err(|e| e.to_string())?,
            );
        if self.queue_url.ends_with(".fifo") {
            send = send
                .message_group_id(tenant.unwrap_or_else(|| "inbox".into()))
                .message_deduplication_id(&digest);
        }
        match send.send().await {
            Ok(_) => {}
            Err(e) => {
                let code = e.as_service_error().and_then(|s| {
                    use aws_sdk_sqs::error::ProvideErrorMetadata;
                    s.code().map(str::to_owned)
                });
                // The queue refuses this message as it is: no retry changes that.
                if matches!(
                    code.as_deref(),
                    Some("InvalidMessageContents" | "InvalidParameterValue")
                ) {
                    return self.park(&event_key, "refused_by_queue").await;
                }
                return Err(format!(
                    "sending to the queue: {}",
                    code.unwrap_or_else(|| "no answer".into())
                ));
            }
        }
        // S16: nothing may fail after the effect. The status is for people and sweeps; a failure
        // to write it is logged, not retried (a retry would send the message again).
        let now = lambda_dedup::clock::epoch_millis(SystemTime::now());
        let stamp = Effect::update(
            &self.inbox,
            Item::new().with("event_key", event_key.as_str()),
        )
        .expression("SET forward_status = :s, forwarded_at = :now")
        .condition("attribute_exists(event_key)")
        .value(":s", FORWARDED)
        .value(":now", now);
        if let Err(e) = lambda_dedup_dynamodb::write_effects(&self.dynamodb, &[stamp]).await {
            tracing::warn!(error = %e, "forwarded, but the inbox item's status was not written");
        }
        Ok(Done::Forwarded)
    }

    /// Re-drives inbox items left unforwarded for longer than `older_than` (see the module's
    /// rules), prints the result as one EMF line and returns it.
    pub async fn sweep(
        &self,
        now: SystemTime,
        older_than: Duration,
    ) -> Result<Swept, lambda_dedup_dynamodb::Error> {
        let unsettled =
            lambda_dedup_dynamodb::scan_without(&self.dynamodb, &self.inbox, STATUS).await?;
        let swept = in_order::redrive(
            &self.dynamodb,
            unsettled,
            ("event_key", "received_at"),
            now,
            older_than,
            |key, now_ms| {
                Effect::update(&self.inbox, Item::new().with("event_key", key))
                    .expression("SET #redrive = :now")
                    .condition("attribute_exists(event_key) AND attribute_not_exists(#status)")
                    .name("#redrive", REDRIVE)
                    .name("#status", STATUS)
                    .value(":now", now_ms)
            },
        )
        .await?;
        println!("{}", swept.emf_line(&self.function, "Pending"));
        Ok(swept)
    }

    /// Parks the item with `reason` (a code, never a value from the payload).
    async fn park(&self, event_key: &str, reason: &str) -> Result<Done, String> {
        let now = lambda_dedup::clock::epoch_millis(SystemTime::now());
        let park = Effect::update(&self.inbox, Item::new().with("event_key", event_key))
            .expression("SET forward_status = :s, failure_reason = :r, parked_at = :now")
            .condition("attribute_exists(event_key)")
            .value(":s", PARKED)
            .value(":r", reason)
            .value(":now", now);
        match lambda_dedup_dynamodb::write_effects(&self.dynamodb, &[park]).await {
            Ok(_) => {
                tracing::warn!(reason, "inbox item can never be sent; parked");
                Ok(Done::Parked)
            }
            Err(e) => Err(format!("parking the inbox item: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(name: &str, image: serde_json::Value) -> EventRecord {
        serde_json::from_value(json!({
            "eventID": "1", "eventName": name, "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {"Keys": {"event_key": {"S": "k"}}, "NewImage": image,
                         "SequenceNumber": "100", "SizeBytes": 10, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        }))
        .expect("record")
    }

    /// The forwarder's own variables, as `main` reads them (`Forwarder::read`): the queue and
    /// the inbox are required, the margin and the sweep's age have their defaults and are read.
    #[tokio::test]
    async fn the_forwarders_settings_are_read_as_main_reads_them() {
        use crate::settings::Env;
        // The clients as `main` builds them; nothing is sent.
        let sqs = aws_sdk_sqs::Client::new(&lambda_dedup_dynamodb::sdk_config().await);
        let dynamodb = lambda_dedup_dynamodb::connect().await;
        let full = [("FORWARD_QUEUE_URL", "https://q"), ("INBOX_TABLE", "inbox")];
        for missing in ["FORWARD_QUEUE_URL", "INBOX_TABLE"] {
            let env = Env::from_pairs(full.into_iter().filter(|(k, _)| *k != missing));
            let Err(err) = Forwarder::read("f", &env, sqs.clone(), dynamodb.clone()) else {
                panic!("started without {missing}");
            };
            assert_eq!(err, crate::SettingsError::Missing(missing.into()));
        }
        let env = Env::from_pairs(full);
        let f = Forwarder::read("f", &env, sqs.clone(), dynamodb.clone()).expect("defaults");
        assert_eq!(f.per_record(), Duration::from_millis(3_000));
        assert_eq!(
            Forwarder::redrive_after(&env).expect("default"),
            Duration::from_secs(3_600)
        );
        let env = env
            .with("FORWARDER_DEADLINE_MARGIN_MS", "750")
            .with("FORWARDER_REDRIVE_AFTER_SECONDS", "90");
        let f = Forwarder::read("f", &env, sqs, dynamodb).expect("set");
        assert_eq!(f.per_record(), Duration::from_millis(750));
        assert_eq!(
            Forwarder::redrive_after(&env).expect("set"),
            Duration::from_secs(90)
        );
    }

    #[test]
    fn insertions_are_sent_malformed_ones_parked_and_missing_images_retried() {
        let item = json!({"event_key": {"S": "k"}, "body": {"S": "{}"}, "tenant": {"S": "acme"}});
        assert_eq!(
            read(&record("INSERT", item.clone())),
            Record::Send {
                event_key: "k".into(),
                body: "{}".into(),
                tenant: Some("acme".into())
            }
        );
        assert_eq!(read(&record("MODIFY", item.clone())), Record::Ignored);
        // The sweep's re-drive of an unsettled item is sent; our own status stamps are not.
        let mut redriven = item.clone();
        redriven["redrive_requested_at"] = json!({"N": "1"});
        assert!(matches!(
            read(&record("MODIFY", redriven.clone())),
            Record::Send { .. }
        ));
        redriven["forward_status"] = json!({"S": "FORWARDED"});
        assert_eq!(read(&record("MODIFY", redriven)), Record::Ignored);
        assert_eq!(read(&record("INSERT", json!({}))), Record::NoImage);
        assert_eq!(
            read(&record(
                "INSERT",
                json!({"event_key": {"S": "k"}, "body": {"N": "1"}})
            )),
            Record::Unsendable {
                event_key: "k".into(),
                reason: "malformed_inbox_item"
            }
        );
        let huge = "x".repeat(MAX_QUEUE_BODY_BYTES + 1);
        assert_eq!(
            read(&record(
                "INSERT",
                json!({"event_key": {"S": "k"}, "body": {"S": huge}})
            )),
            Record::Unsendable {
                event_key: "k".into(),
                reason: "too_large_for_queue"
            }
        );
    }

    #[test]
    fn the_tally_closes() {
        let t = Tally {
            records: 5,
            forwarded: 2,
            parked: 1,
            ignored: 0,
            transient: 1,
            deferred: 1,
        };
        assert!(t.closes());
        assert!(t.emf_line("inbox-forwarder").contains("\"Parked\""));
    }
}
