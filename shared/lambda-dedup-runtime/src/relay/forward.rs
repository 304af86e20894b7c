//! The inbox's forwarder (feature `inbox`): a DynamoDB Streams consumer of the inbox table that
//! the `webhook` module writes, handing each new inbox item to the SQS queue the rest of the system
//! reads (the inbox pattern).
//!
//! It is a relay ([`super`]: the never-stall walk, parking, the deadline, the tally and
//! the sweep, shared with `intent-relay`); this module is its [`Forward`] action and [`LAYOUT`]:
//! - records are handled in shard order; the first one that fails transiently (SQS or DynamoDB
//!   down, throttled) is reported as the batch item failure and the stream retries from it, so
//!   nothing is skipped (S12);
//! - each message carries the sender the receiver verified, as the message attribute
//!   [`VERIFIED_SENDER_ATTRIBUTE`] (`dedup-verified-sender`), taken from the inbox item's
//!   `tenant` (which the receiver wrote from `WEBHOOK_TENANT` after checking the signature),
//!   never from the body: the consumer binds the event's tenant to it and keys the event in the
//!   sender's own key space (`lambda_dedup::Provenance::Sender`). An item without a sender is
//!   never forwarded unattributed (it would pass for an internal producer's event): it is parked;
//! - an item that can never be sent (no body, no sender, a body over SQS's limit, a body the
//!   queue refuses) is **parked**: `forward_status = PARKED` with a reason code on the item, counted, and the
//!   shard moves on (S15). It stays in the inbox for whoever repairs it;
//! - before each record there must be time left for one more (`FORWARDER_RECORD_BUDGET_MS`);
//!   otherwise the record is reported and the stream retries from it in a fresh invocation, and
//!   a send still not answered `DEDUP_DEADLINE_MARGIN_MS` before the deadline is abandoned;
//! - a record without a new image is a stream misconfiguration (the view type must include new
//!   images): retried, never guessed around;
//! - the scheduled sweep re-drives items left unforwarded longer than a bound (the
//!   trigger gave their records up, after its maximum record age): it stamps
//!   `redrive_requested_at` on them, the stamp comes back on the stream as a modification, and
//!   the forwarder sends the item then. It also reports the oldest such item's age, alarmed on.
//!
//! Delivery into the queue is at least once: a retry from a checkpoint sends again what was sent
//! after it. The queue's consumers deduplicate by the event's own identity, which the inbox keeps
//! as the sender sent it. On a FIFO queue the event key's digest is also the
//! `MessageDeduplicationId`, so SQS drops such resends within its 5-minute window.

use aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup::{Item, VERIFIED_SENDER_ATTRIBUTE};

use super::{
    Act, Attribute, Attributes, Failure, Layout, Metric, REDRIVE, Read, RelayService, Repeats,
    StatusValue, Waiting,
};
use crate::in_order::image_part;
use crate::queue::{Queue, string_attribute};
use crate::service::{BuildError, Dedup};
use crate::store::Items;
use lambda_dedup_config::{FORWARDER, ForwarderConfig, SdkTimeouts};

/// The largest body SQS takes (1 MiB since January 2026), attributes included; kept clear of it.
pub(crate) const MAX_QUEUE_BODY_BYTES: usize = 1024 * 1024 - 1024;
/// `forward_status` of an item handed to the queue.
const FORWARDED: StatusValue = StatusValue::new("FORWARDED");
/// `forward_status` of an item that can never be sent; see `failure_reason`.
pub const PARKED: StatusValue = StatusValue::new("PARKED");
/// The attribute that says an item is settled (forwarded or parked).
const STATUS: Attribute = Attribute::new("forward_status");
/// The message attribute naming the inbox item on the forwarded message.
pub(crate) const INBOX_KEY_ATTRIBUTE: &str = "inbox_key";

/// How inbox items look to the forwarder: keyed by `event_key`, received at `received_at`,
/// unsettled while they have no `forward_status`; a repeat of a send is a second message
/// ([`Repeats::Effected`]).
pub const LAYOUT: Layout = Layout {
    attributes: Attributes {
        key: Attribute::new("event_key"),
        created: Attribute::new("received_at"),
        status: STATUS,
        parked_at: Attribute::new("parked_at"),
    },
    waiting: Waiting::Absent,
    settled: FORWARDED,
    parked: PARKED,
    repeats: Repeats::Effected,
    settled_metric: Metric::new("Forwarded"),
    waiting_metric: Metric::new("Pending"),
};

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

/// What the forwarder sends of an inbox item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The body, as the sender sent it.
    pub body: String,
    /// The sender the receiver verified (the item's `tenant`): the message attribute
    /// [`VERIFIED_SENDER_ATTRIBUTE`], and the FIFO message group.
    pub sender: String,
}

/// What a record of the inbox table's stream is to the forwarder: an insertion, or the sweep's
/// re-drive of an item still unsettled, to send; its own stamps and the rest ignored; an item
/// without a body, without a sender (`no_verified_sender`: never sent unattributed), or too
/// large for the queue, parked.
pub fn read(record: &EventRecord) -> Read<Message> {
    let image = &record.change.new_image;
    // An insertion, or the sweep's re-drive of an item still unsettled (our own FORWARDED and
    // PARKED stamps are modifications too, and carry a status).
    let redriven = record.event_name == "MODIFY"
        && image.contains_key(REDRIVE.name())
        && !image.contains_key(STATUS.name());
    if record.event_name != "INSERT" && !redriven {
        return Read::Ignored;
    }
    let Some(Key { event_key }) = image_part(image) else {
        return Read::NoImage;
    };
    let Some(Body { body }) = image_part(image) else {
        return Read::Park {
            key: event_key,
            reason: "malformed_inbox_item",
        };
    };
    // The sender the receiver verified, from the item: never the body's say.
    let Some(Tenant { tenant: sender }) =
        image_part::<Tenant>(image).filter(|t| !t.tenant.trim().is_empty())
    else {
        return Read::Park {
            key: event_key,
            reason: "no_verified_sender",
        };
    };
    if body.len() > MAX_QUEUE_BODY_BYTES {
        return Read::Park {
            key: event_key,
            reason: "too_large_for_queue",
        };
    }
    Read::Act {
        key: event_key,
        item: Message { body, sender },
    }
}

/// The forwarder's action: each inbox item sent to its queue.
#[derive(Debug)]
pub struct Forward {
    queue: Queue,
}

impl Forward {
    /// Sends to `queue` (its client built on the first send).
    pub(crate) fn new(queue: Queue) -> Self {
        Self { queue }
    }
}

impl Act for Forward {
    type Item = Message;

    fn read(&self, record: &EventRecord) -> Read<Message> {
        read(record)
    }

    async fn act(&self, event_key: &str, message: &Message) -> Result<Item, Failure> {
        let digest = hex::encode(lambda_dedup_signature::hmac_sha256(
            b"lambda-dedup/inbox",
            event_key.as_bytes(),
        ));
        let attribute = string_attribute(&digest).map_err(|e| Failure::Transient(e.to_string()))?;
        let sender =
            string_attribute(&message.sender).map_err(|e| Failure::Transient(e.to_string()))?;
        let url = self.queue.url();
        let mut send = self
            .queue
            .client()
            .await
            .send_message()
            .queue_url(url)
            .message_body(&message.body)
            .message_attributes(INBOX_KEY_ATTRIBUTE, attribute)
            .message_attributes(VERIFIED_SENDER_ATTRIBUTE, sender);
        if url.ends_with(".fifo") {
            send = send
                .message_group_id(&message.sender)
                .message_deduplication_id(&digest);
        }
        if let Err(e) = send.send().await {
            let code = e.as_service_error().and_then(|s| {
                use aws_sdk_sqs::error::ProvideErrorMetadata;
                s.code().map(str::to_owned)
            });
            // The queue refuses this message as it is: no retry changes that.
            if matches!(
                code.as_deref(),
                Some("InvalidMessageContents" | "InvalidParameterValue")
            ) {
                return Err(Failure::Permanent("refused_by_queue".into()));
            }
            return Err(Failure::Transient(format!(
                "sending to the queue: {}",
                code.unwrap_or_else(|| "no answer".into())
            )));
        }
        let now = lambda_dedup::clock::epoch_millis(std::time::SystemTime::now());
        Ok(Item::new().with("forwarded_at", now))
    }
}

/// The inbox's forwarder as `main` builds it, on the builder: the relay of the inbox table
/// ([`FORWARDER`]: `INBOX_TABLE`, `FORWARDER_RECORD_BUDGET_MS` (default 3000: the time one
/// record needs, whole), `FORWARDER_REDRIVE_AFTER_SECONDS` (default 3600: how long an item may
/// stay unforwarded before the sweep re-drives it)), each item sent to `FORWARD_QUEUE_URL`
/// ([`ForwarderConfig`], from the builder's own `Env`) through an SQS client with the
/// function's SDK timeouts, each record cut off the function's `DEDUP_DEADLINE_MARGIN_MS`
/// before the deadline. Give it to `lambda_runtime::run_concurrent`.
pub fn forwarder(dedup: Dedup<Items>) -> Result<RelayService<Forward>, BuildError> {
    forwarder_to(dedup, Queue::new)
}

/// [`forwarder`], its queue made by `queue` of the queue's URL and the SDK timeouts (tests: a
/// queue of their own).
fn forwarder_to(
    dedup: Dedup<Items>,
    queue: impl FnOnce(String, SdkTimeouts) -> Queue,
) -> Result<RelayService<Forward>, BuildError> {
    let config = ForwarderConfig::read(dedup.env())?;
    let forward = Forward::new(queue(config.queue_url, dedup.settings().sdk_timeouts));
    RelayService::with_config(dedup, &FORWARDER, config.relay, LAYOUT, forward)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_config::{Env, SettingsError};
    use lambda_dedup_memory::MemoryStore;
    use serde_json::json;
    use std::time::{Duration, SystemTime};

    fn record(name: &str, image: serde_json::Value) -> EventRecord {
        crate::testing::events::stream_record(name, image)
    }

    /// A queue whose every send fails to connect: the queue down.
    fn queue_down(url: String, _: SdkTimeouts) -> Queue {
        Queue::with_client(url, crate::queue::unreachable_client().0)
    }

    fn env() -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("FORWARD_QUEUE_URL", "https://q"),
            ("INBOX_TABLE", "inbox"),
        ])
    }

    /// The forwarder as `main` builds it (`forwarder`, on the builder), on the memory store of
    /// its own settings, with its `inbox` table; its queue down.
    fn service(env: &Env) -> Result<(RelayService<Forward>, MemoryStore), BuildError> {
        let (dedup, store) = crate::testing::on_memory(Dedup::read(env, "inbox-forwarder")?);
        store.create_table("inbox", "event_key");
        Ok((forwarder_to(dedup, queue_down)?, store))
    }

    /// The forwarder's own variables, as `main` reads them (`forwarder`): the queue and the
    /// inbox are required, the record budget and the sweep's age have their defaults and are
    /// read, the deadline margin is the function's one; the budget's former name is refused,
    /// naming the new one.
    #[test]
    fn the_forwarders_settings_are_read_as_main_reads_them() {
        for missing in ["FORWARD_QUEUE_URL", "INBOX_TABLE"] {
            let env = Env::from_pairs(
                ["DEDUP_NAMESPACE", "FORWARD_QUEUE_URL", "INBOX_TABLE"]
                    .into_iter()
                    .filter(|k| *k != missing)
                    .filter_map(|k| env().get(k).map(|v| (k, v))),
            );
            let Err(BuildError::Settings(err)) = service(&env) else {
                panic!("started without {missing}");
            };
            assert_eq!(err, SettingsError::Missing(missing.into()));
        }
        let (f, _) = service(&env()).expect("defaults");
        assert_eq!(f.per_record(), Duration::from_millis(3_000));
        assert_eq!(f.redrive_after(), Duration::from_secs(3_600));
        assert_eq!(
            f.deadline_margin(),
            lambda_dedup_config::DeadlineMargin::DEFAULT.get()
        );
        let set = env()
            .with("FORWARDER_RECORD_BUDGET_MS", "750")
            .with("FORWARDER_REDRIVE_AFTER_SECONDS", "90")
            .with("DEDUP_DEADLINE_MARGIN_MS", "400");
        let (f, _) = service(&set).expect("set");
        assert_eq!(f.per_record(), Duration::from_millis(750));
        assert_eq!(f.redrive_after(), Duration::from_secs(90));
        assert_eq!(f.deadline_margin(), Duration::from_millis(400));
        let retired = env().with("FORWARDER_DEADLINE_MARGIN_MS", "3000");
        let Err(BuildError::Settings(e @ SettingsError::Refused { .. })) = service(&retired) else {
            panic!("FORWARDER_DEADLINE_MARGIN_MS was accepted");
        };
        let why = e.to_string();
        assert!(
            why.contains("FORWARDER_DEADLINE_MARGIN_MS")
                && why.contains("FORWARDER_RECORD_BUDGET_MS"),
            "{why}"
        );
    }

    #[test]
    fn insertions_are_sent_malformed_ones_parked_and_missing_images_retried() {
        let item = json!({"event_key": {"S": "k"}, "body": {"S": "{}"}, "tenant": {"S": "acme"}});
        assert_eq!(
            read(&record("INSERT", item.clone())),
            Read::Act {
                key: "k".into(),
                item: Message {
                    body: "{}".into(),
                    sender: "acme".into()
                }
            }
        );
        assert_eq!(read(&record("MODIFY", item.clone())), Read::Ignored);
        // The sweep's re-drive of an unsettled item is sent; our own status stamps are not.
        let mut redriven = item.clone();
        redriven["redrive_requested_at"] = json!({"N": "1"});
        assert!(matches!(
            read(&record("MODIFY", redriven.clone())),
            Read::Act { .. }
        ));
        redriven["forward_status"] = json!({"S": "FORWARDED"});
        assert_eq!(read(&record("MODIFY", redriven)), Read::Ignored);
        assert_eq!(read(&record("INSERT", json!({}))), Read::NoImage);
        // The TTL's removal of an expired inbox item is no delivery.
        assert_eq!(read(&record("REMOVE", json!({}))), Read::Ignored);
        assert_eq!(
            read(&record(
                "INSERT",
                json!({"event_key": {"S": "k"}, "body": {"N": "1"}})
            )),
            Read::Park {
                key: "k".into(),
                reason: "malformed_inbox_item"
            }
        );
        let huge = "x".repeat(MAX_QUEUE_BODY_BYTES + 1);
        assert_eq!(
            read(&record(
                "INSERT",
                json!({"event_key": {"S": "k"}, "body": {"S": huge}, "tenant": {"S": "acme"}})
            )),
            Read::Park {
                key: "k".into(),
                reason: "too_large_for_queue"
            }
        );
    }

    fn insert(seq: u32, key: &str, body: serde_json::Value) -> serde_json::Value {
        json!({
            "eventID": format!("e{seq}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {"Keys": {"event_key": {"S": key}},
                         "NewImage": {"event_key": {"S": key}, "body": body,
                                      "tenant": {"S": "acme"}},
                         "SequenceNumber": format!("{seq:03}"), "SizeBytes": 10,
                         "StreamViewType": "NEW_IMAGE"}
        })
    }

    /// S15, S12 through the forwarder's service on the memory store: the items that can never
    /// be sent are parked on the item with their reason, without a send; the first item the
    /// queue cannot take now (the queue is down) is the checkpoint, left unsettled, and the
    /// item behind it is not attempted.
    #[tokio::test]
    async fn unsendable_items_are_parked_and_a_queue_outage_is_the_checkpoint() {
        let (forwarder, store) = service(&env()).expect("forwarder");
        for key in ["bad", "good", "behind"] {
            store
                .put_item(
                    "inbox",
                    Item::new().with("event_key", key).with("body", "{}"),
                )
                .expect("seed");
        }
        let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_value(json!({
            "Records": [insert(1, "bad", json!({"N": "42"})), insert(2, "good", json!({"S": "{}"})),
                        insert(3, "behind", json!({"S": "{}"}))]
        }))
        .expect("event");
        let handled = forwarder
            .handle(&event, Some(SystemTime::now() + Duration::from_secs(30)))
            .await;
        let status = |key: &str| {
            store
                .item("inbox", &Item::new().with("event_key", key))
                .and_then(|i| lambda_dedup::items::text(&i, STATUS.name()).map(str::to_owned))
        };
        assert_eq!(status("bad").as_deref(), Some(PARKED.value()));
        let bad = store
            .item("inbox", &Item::new().with("event_key", "bad"))
            .expect("item");
        assert_eq!(
            lambda_dedup::items::text(&bad, "failure_reason"),
            Some("malformed_inbox_item")
        );
        assert_eq!(status("good"), None, "not sent, not settled");
        assert_eq!(status("behind"), None);
        let failures: Vec<_> = handled
            .response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(failures, [Some("002".to_owned())]);
        let t = handled.tally;
        assert_eq!((t.parked, t.transient, t.deferred, t.settled), (1, 1, 1, 0));
        assert!(t.closes(), "{t:?}");
    }

    /// Issue 42 (webhook provenance), through the forwarder's service on the memory store and an
    /// SQS on loopback: each message carries the sender the receiver verified, from the inbox
    /// item's `tenant`, as `dedup-verified-sender` — not the tenant the body names, which is the
    /// sender's say; an item with no sender is parked (`no_verified_sender`), never sent
    /// unattributed, where it would pass for an internal producer's event.
    #[tokio::test]
    async fn the_verified_sender_is_sent_from_the_inbox_item_not_the_body() {
        let (client, url, taken) = crate::queue::sqs_on_loopback(MAX_QUEUE_BODY_BYTES);
        let (dedup, store) =
            crate::testing::on_memory(Dedup::read(&env(), "inbox-forwarder").expect("settings"));
        store.create_table("inbox", "event_key");
        let forwarder =
            forwarder_to(dedup, |_, _| Queue::with_client(url, client)).expect("forwarder");
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": "e-1", "tenantid": "globex", "dedup-verified-sender": "globex",
            "data": {"account": "a", "amount": 10}})
        .to_string();
        for key in ["signed", "unsigned"] {
            store
                .put_item(
                    "inbox",
                    Item::new()
                        .with("event_key", key)
                        .with("body", body.as_str()),
                )
                .expect("seed");
        }
        let mut unsigned = insert(2, "unsigned", json!({"S": body}));
        unsigned["dynamodb"]["NewImage"]
            .as_object_mut()
            .expect("image")
            .remove("tenant");
        let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_value(json!({
            "Records": [insert(1, "signed", json!({"S": body})), unsigned]
        }))
        .expect("event");
        let handled = forwarder
            .handle(&event, Some(SystemTime::now() + Duration::from_secs(30)))
            .await;
        let failures = &handled.response.batch_item_failures;
        assert!(failures.is_empty(), "{failures:?}");
        let sent = taken.lock().expect("taken").clone();
        assert_eq!(
            sent.len(),
            1,
            "only the item with a sender is sent: {sent:?}"
        );
        let (sent_body, attributes) = &sent[0];
        assert_eq!(sent_body, &body, "the body as the sender sent it");
        let sender: Vec<_> = attributes
            .iter()
            .filter(|(name, _)| name == VERIFIED_SENDER_ATTRIBUTE)
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(sender, ["acme"], "the inbox item's sender: {attributes:?}");
        let unsent = store
            .item("inbox", &Item::new().with("event_key", "unsigned"))
            .expect("item");
        assert_eq!(
            lambda_dedup::items::text(&unsent, STATUS.name()),
            Some(PARKED.value())
        );
        assert_eq!(
            lambda_dedup::items::text(&unsent, "failure_reason"),
            Some("no_verified_sender")
        );
    }

    /// The forwarder's sweep on the memory store: only items with no `forward_status`
    /// (unsettled) are counted; those received longer ago than the bound, or at no known time,
    /// are stamped `redrive_requested_at`; a recent one and a settled one are left alone.
    #[tokio::test]
    async fn the_sweep_stamps_only_unsettled_items_past_the_bound() {
        let (forwarder, store) = service(&env()).expect("forwarder");
        let now = SystemTime::now();
        let ms = |ago: u64| lambda_dedup::clock::epoch_millis(now - Duration::from_secs(ago));
        let put = |item: Item| store.put_item("inbox", item).expect("seed");
        put(Item::new()
            .with("event_key", "old")
            .with("received_at", ms(7_200)));
        put(Item::new().with("event_key", "unknown"));
        put(Item::new()
            .with("event_key", "recent")
            .with("received_at", ms(60)));
        put(Item::new()
            .with("event_key", "sent")
            .with("received_at", ms(9_000))
            .with(STATUS.name(), FORWARDED.value()));
        let swept = forwarder.sweep(now).await.expect("sweep");
        assert_eq!((swept.pending, swept.redriven), (3, 2), "{swept:?}");
        assert!(swept.oldest_pending >= Duration::from_secs(7_200));
        let stamped = |key: &str| {
            store
                .item("inbox", &Item::new().with("event_key", key))
                .is_some_and(|i| i.0.contains_key(REDRIVE.name()))
        };
        assert!(stamped("old") && stamped("unknown"));
        assert!(!stamped("recent") && !stamped("sent"));
    }

    /// The forwarder's EMF line is the one it always printed: `Forwarded`, no `AlreadySettled`.
    #[test]
    fn the_forwarders_tally_is_printed_with_its_own_names() {
        let t = crate::relay::Tally {
            records: 5,
            settled: 2,
            parked: 1,
            transient: 1,
            deferred: 1,
            ..Default::default()
        };
        assert!(t.closes());
        let v: serde_json::Value =
            serde_json::from_str(&t.emf_line("inbox-forwarder", &LAYOUT)).expect("json");
        let names = crate::testing::emf_metric_names(&v);
        assert_eq!(
            names,
            [
                "Records",
                "Forwarded",
                "Parked",
                "Ignored",
                "Transient",
                "Deferred"
            ]
        );
        assert_eq!(v["Forwarded"], 2);
    }
}
