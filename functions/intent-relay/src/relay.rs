//! Applying intents from the stream: one record at a time, in shard order.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_dedup::{Effect, Item};
use lambda_dedup_dynamodb::Client;
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::in_order::{self, Swept, image_part};
use lambda_dedup_runtime::settings::{Env, SettingsError};

/// The function's name: the `Function` dimension of its metrics.
pub const FUNCTION: &str = "intent-relay";

/// Where intents are posted.
const COLLECTIONS: &str = "/v1/collections";

/// Receipts longer than this are not stored with the confirmation, only their length: the
/// confirmation must not be refused for the item's size after the effect took place (S16).
const MAX_RECEIPT_BYTES: usize = 32 * 1024;

/// `status` of an intent that waits for the API.
const PENDING: &str = "PENDING";
/// `status` of an intent the API confirmed.
const CONFIRMED: &str = "CONFIRMED";
/// `status` of a parked intent: refused for good, see `failure_reason`.
const FAILED: &str = "FAILED";

/// The attribute the sweep stamps on an intent it re-drives (epoch milliseconds).
const REDRIVE: &str = "redrive_requested_at";
/// When the intent was written (epoch milliseconds), set by `fine-notices`.
const CREATED: &str = "created_at";

/// Reason code of a pending intent whose image lacks a field the call needs.
const MALFORMED: &str = "malformed_intent";
/// Reason code of an intent whose id cannot be sent as an `Idempotency-Key` header.
const INVALID_KEY: &str = "invalid_idempotency_key";

/// A new collection intent, as read from a stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) intent_id: String,
    pub(crate) fine_id: String,
    pub(crate) amount_cents: i64,
}

/// What a stream record is to the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// Not the insertion of an intent: our own `CONFIRMED`/`FAILED` updates, TTL or manual
    /// deletions. Nothing to do.
    NotAnInsertion,
    /// An inserted intent whose image is not `PENDING`: nothing to post.
    NotPending,
    /// A pending intent to post.
    Pending(Intent),
    /// A pending intent that no retry could post (S16): parked with this reason code.
    Unpostable {
        intent_id: String,
        reason: &'static str,
    },
    /// An insertion whose record has no new image naming the intent: the stream's view type
    /// does not carry new images. A configuration fault, so retried, never guessed around.
    NoImage,
}

/// The parts of an intent's stream image the relay reads, each on its own, so that one field of
/// the wrong type says which part is wrong (read with `serde_dynamo`, not by hand).
#[derive(serde::Deserialize)]
struct IntentId {
    intent_id: String,
}

#[derive(serde::Deserialize)]
struct Status {
    status: String,
}

#[derive(serde::Deserialize)]
struct Posting {
    fine_id: String,
    amount_cents: i64,
}

/// Reads a stream record: the intent from its new image.
pub(crate) fn read(record: &EventRecord) -> Record {
    let image = &record.change.new_image;
    match record.event_name.as_str() {
        "INSERT" => {}
        // A re-drive by the sweep ([`Relay::sweep`]): it stamps `redrive_requested_at` on an
        // intent left PENDING, which comes back on the stream as a modification.
        "MODIFY" if redriven(record) => {}
        _ => return Record::NotAnInsertion,
    }
    let Some(IntentId { intent_id }) = image_part(image) else {
        return Record::NoImage;
    };
    if image_part::<Status>(image).is_none_or(|s| s.status != PENDING) {
        return Record::NotPending;
    }
    let unpostable = |reason| Record::Unpostable {
        intent_id: intent_id.clone(),
        reason,
    };
    let Some(Posting {
        fine_id,
        amount_cents,
    }) = image_part(image)
    else {
        return unpostable(MALFORMED);
    };
    // A header value the HTTP client could not send would fail as a transport error, forever.
    if intent_id.is_empty() || !intent_id.bytes().all(|b| b.is_ascii_graphic()) {
        return unpostable(INVALID_KEY);
    }
    Record::Pending(Intent {
        intent_id,
        fine_id,
        amount_cents,
    })
}

/// Whether a modification is the sweep's re-drive: `redrive_requested_at` changed.
fn redriven(record: &EventRecord) -> bool {
    let stamp = |image: &serde_dynamo::Item| image.get(REDRIVE).cloned();
    let new = stamp(&record.change.new_image);
    new.is_some() && new != stamp(&record.change.old_image)
}

/// How one record ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    /// Posted (or replayed by the provider) and marked `CONFIRMED` now.
    Confirmed,
    /// Refused for good and marked `FAILED`.
    Parked,
    /// An intent no longer (or never) pending: not posted.
    AlreadySettled,
    /// Not an intent insertion.
    Ignored,
}

/// The account of one invocation: every record ends in exactly one of these counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Records in the batch.
    pub records: u64,
    /// Intents posted and confirmed.
    pub confirmed: u64,
    /// Intents parked as `FAILED` (permanent refusal or unpostable intent): alarmed on.
    pub parked: u64,
    /// Intent insertions not posted because the intent was already confirmed or parked.
    pub already_settled: u64,
    /// Records that are not intent insertions.
    pub ignored: u64,
    /// The record that failed transiently (0 or 1): the stream retries from it.
    pub transient: u64,
    /// Records not attempted: behind a transient failure, or not reached before the deadline.
    pub deferred: u64,
}

impl Tally {
    /// Whether every record has exactly one ending.
    pub fn closes(&self) -> bool {
        self.records
            == self.confirmed
                + self.parked
                + self.already_settled
                + self.ignored
                + self.transient
                + self.deferred
    }

    /// One CloudWatch EMF record of this tally (namespace `lambda-dedup`, dimension `Function`).
    /// Its names are not the SQS functions' outcomes, so `cargo xtask audit` leaves it alone.
    pub fn emf_line(&self) -> String {
        lambda_dedup_runtime::emf::line(
            FUNCTION,
            &[
                ("Records", "Count", self.records),
                ("Confirmed", "Count", self.confirmed),
                ("Parked", "Count", self.parked),
                ("AlreadySettled", "Count", self.already_settled),
                ("Ignored", "Count", self.ignored),
                ("Transient", "Count", self.transient),
                ("Deferred", "Count", self.deferred),
            ],
        )
    }
}

/// What one invocation answers and counted.
#[derive(Debug)]
pub struct Handled {
    /// The partial batch response: empty, or the one record the stream retries from.
    pub response: DynamoDbEventResponse,
    /// The account, also printed as an EMF line.
    pub tally: Tally,
}

/// The relay: the collection API and the intents table.
#[derive(Debug)]
pub struct Relay {
    api: IdempotentClient,
    provider_timeout: Duration,
    margin: Duration,
    intents: String,
    client: Client,
}

impl Relay {
    /// A relay posting to the collection API at `api_url` (each call given up after
    /// `provider_timeout`), keeping `margin` on top of one call for the DynamoDB writes around it,
    /// and settling intents in the table `intents`.
    pub fn new(
        api_url: &str,
        provider_timeout: Duration,
        margin: Duration,
        intents: String,
        client: Client,
    ) -> Result<Self, lambda_dedup_http::BuildError> {
        Ok(Self {
            api: IdempotentClient::new(api_url, provider_timeout)?,
            provider_timeout,
            margin,
            intents,
            client,
        })
    }

    /// The relay as `main` builds it, from `env` (the process environment in Lambda):
    /// `COLLECTIONS_API_URL`, `INTENTS_TABLE`, `PROVIDER_TIMEOUT_MS` (default 5000) and
    /// `RELAY_DEADLINE_MARGIN_MS` (default 2000); intents through `client`.
    pub fn read(env: &Env, client: Client) -> Result<Self, lambda_runtime::Error> {
        Ok(Self::new(
            &env.required("COLLECTIONS_API_URL")?,
            lambda_dedup_runtime::settings::provider_timeout_in(env)?,
            Duration::from_millis(env.optional("RELAY_DEADLINE_MARGIN_MS", 2_000u64)?),
            env.required("INTENTS_TABLE")?,
            client,
        )?)
    }

    /// `RELAY_REDRIVE_AFTER_SECONDS` in `env` (default 3600): how long an intent may stay
    /// `PENDING` before the scheduled sweep re-drives it.
    pub fn redrive_after(env: &Env) -> Result<Duration, SettingsError> {
        env.optional("RELAY_REDRIVE_AFTER_SECONDS", 3_600u64)
            .map(Duration::from_secs)
    }

    /// The time left that one more record needs: a whole provider call plus the margin.
    pub fn per_record(&self) -> Duration {
        self.provider_timeout + self.margin
    }

    /// Handles one stream batch, in order. It stops at the first record that fails transiently,
    /// or before the first record it has no time left for (`deadline`: the invocation's; `None`
    /// for no limit), and reports that record as the batch item failure: the stream retries from
    /// it, so order is kept and nothing is skipped (S12). Permanent refusals are parked and do
    /// not stop it (S15). Prints the tally as one EMF line and returns it with the response.
    pub async fn handle(&self, event: &Event, deadline: Option<SystemTime>) -> Handled {
        let walk = in_order::walk(&event.records, self.per_record(), deadline, |r| {
            self.apply(r)
        })
        .await;
        let mut tally = Tally {
            records: event.records.len() as u64,
            transient: walk.transient,
            deferred: walk.deferred,
            ..Tally::default()
        };
        for done in walk.done {
            match done {
                Done::Confirmed => tally.confirmed += 1,
                Done::Parked => tally.parked += 1,
                Done::AlreadySettled => tally.already_settled += 1,
                Done::Ignored => tally.ignored += 1,
            }
        }
        // EMF must be a bare JSON line on stdout for CloudWatch to extract it, hence not `tracing`.
        println!("{}", tally.emf_line());
        tracing::info!(
            records = tally.records,
            confirmed = tally.confirmed,
            parked = tally.parked,
            already_settled = tally.already_settled,
            ignored = tally.ignored,
            transient = tally.transient,
            deferred = tally.deferred,
            closes = tally.closes(),
            "stream batch done"
        );
        Handled {
            response: walk.response,
            tally,
        }
    }

    /// One record: `Err` is a transient failure (retry from this record).
    async fn apply(&self, record: &EventRecord) -> Result<Done, String> {
        let intent = match read(record) {
            Record::NotAnInsertion => return Ok(Done::Ignored),
            Record::NotPending => return Ok(Done::AlreadySettled),
            Record::NoImage => {
                return Err(
                    "the record has no new image with an intent_id: the stream must \
                            carry new images"
                        .into(),
                );
            }
            Record::Unpostable { intent_id, reason } => return self.park(&intent_id, reason).await,
            Record::Pending(intent) => intent,
        };
        // The stream replays records (a retried or bisected batch, an invocation that died after
        // confirming): the image says PENDING, the table may not. Checked strongly consistently
        // before the call, so a confirmed or parked intent is never posted again.
        if !self.still_pending(&intent.intent_id).await? {
            tracing::info!(intent_id = %intent.intent_id, "intent already settled; not posted");
            return Ok(Done::AlreadySettled);
        }
        let body = serde_json::json!({
            "fine_id": intent.fine_id,
            "amount_cents": intent.amount_cents,
        });
        match self.api.call(COLLECTIONS, &intent.intent_id, &body).await {
            Ok(receipt) => self.confirm(&intent.intent_id, receipt).await,
            Err(e) if e.is_permanent() => self.park(&intent.intent_id, &e.code()).await,
            Err(e) => Err(format!("POST {COLLECTIONS}: {e}")),
        }
    }

    fn key(intent_id: &str) -> Item {
        Item::new().with("intent_id", intent_id)
    }

    /// Whether the intent is still `PENDING`, read strongly consistently.
    async fn still_pending(&self, intent_id: &str) -> Result<bool, String> {
        let item =
            lambda_dedup_dynamodb::read_item(&self.client, &self.intents, &Self::key(intent_id))
                .await
                .map_err(|e| format!("reading the intent: {e}"))?;
        Ok(item.is_some_and(|i| i.get("status").map(String::as_str) == Some(PENDING)))
    }

    /// Marks the intent `CONFIRMED` with the API's receipt. Bookkeeping only: the API's
    /// idempotency already made the effect once; the condition makes a repeat a no-op.
    async fn confirm(
        &self,
        intent_id: &str,
        receipt: lambda_dedup_http::Receipt,
    ) -> Result<Done, String> {
        let confirm = Effect::update(&self.intents, Self::key(intent_id))
            .condition("#status = :pending")
            .name("#status", "status")
            .value(":confirmed", CONFIRMED)
            .value(":pending", PENDING);
        let confirm = if receipt.body.len() <= MAX_RECEIPT_BYTES {
            confirm
                .expression("SET #status = :confirmed, #receipt = :receipt")
                .name("#receipt", "receipt")
                .value(":receipt", receipt.body)
        } else {
            confirm
                .expression("SET #status = :confirmed, #receipt_bytes = :bytes")
                .name("#receipt_bytes", "receipt_bytes")
                .value(":bytes", receipt.body.len())
        };
        match lambda_dedup_dynamodb::write_effects(&self.client, &[confirm]).await {
            Ok(true) => {
                tracing::info!(intent_id, replayed = receipt.replayed, "intent confirmed");
                Ok(Done::Confirmed)
            }
            Ok(false) => Ok(Done::AlreadySettled),
            Err(e) => Err(format!("confirming the intent: {e}")),
        }
    }

    /// Parks the intent: `FAILED` with `reason` (a code, never a value from the payload or the
    /// answer), only while it is `PENDING`.
    async fn park(&self, intent_id: &str, reason: &str) -> Result<Done, String> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let park = Effect::update(&self.intents, Self::key(intent_id))
            .expression("SET #status = :failed, #reason = :reason, #failed_at = :now")
            .condition("#status = :pending")
            .name("#status", "status")
            .name("#reason", "failure_reason")
            .name("#failed_at", "failed_at")
            .value(":failed", FAILED)
            .value(":pending", PENDING)
            .value(":reason", reason)
            .value(":now", now_ms);
        match lambda_dedup_dynamodb::write_effects(&self.client, &[park]).await {
            Ok(true) => {
                tracing::warn!(
                    intent_id,
                    reason,
                    "intent refused for good; parked as FAILED"
                );
                Ok(Done::Parked)
            }
            Ok(false) => Ok(Done::AlreadySettled),
            Err(e) => Err(format!("parking the intent: {e}")),
        }
    }
}

impl Relay {
    /// The sweep (run on a schedule): nothing stays `PENDING` silently. When the stream gives a
    /// batch up (its maximum record age, or a bisected poison), an intent can be left `PENDING`
    /// with no record left to carry it. Every intent pending longer than `older_than` (or with
    /// no `created_at`) is stamped `redrive_requested_at`, conditioned on still being pending:
    /// the stamp comes back on the stream as a modification, which [`Relay::handle`] applies
    /// like a new intent (same idempotency key, so a re-drive of an intent already on its way
    /// costs at most a replayed answer). The age of the oldest pending intent is emitted as
    /// `OldestPendingSeconds`, for an alarm.
    /// A store error stops the sweep (the next scheduled run starts over; stamps are idempotent).
    pub async fn sweep(
        &self,
        now: SystemTime,
        older_than: Duration,
    ) -> Result<Swept, lambda_dedup_dynamodb::Error> {
        let pending =
            lambda_dedup_dynamodb::scan_where(&self.client, &self.intents, "status", PENDING)
                .await?;
        let swept = in_order::redrive(
            &self.client,
            pending,
            ("intent_id", CREATED),
            now,
            older_than,
            |id, now_ms| {
                Effect::update(&self.intents, Self::key(id))
                    .expression("SET #redrive = :now")
                    .condition("#status = :pending")
                    .name("#redrive", REDRIVE)
                    .name("#status", "status")
                    .value(":now", now_ms)
                    .value(":pending", PENDING)
            },
        )
        .await?;
        println!("{}", swept.emf_line(FUNCTION, "PendingIntents"));
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(name: &str, image: serde_json::Value) -> EventRecord {
        serde_json::from_value(json!({
            "awsRegion": "us-east-1", "eventID": "1", "eventName": name, "eventSource": "aws:dynamodb",
            "dynamodb": {"ApproximateCreationDateTime": 1700000000, "Keys": {}, "NewImage": image,
                         "SequenceNumber": "100", "SizeBytes": 10, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        }))
        .expect("record")
    }

    #[test]
    fn s7_inserted_pending_intents_are_applied_and_nothing_else() {
        let image = json!({"intent_id": {"S": "ldd-1"}, "fine_id": {"S": "fine-1"},
                           "amount_cents": {"N": "10000"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", image.clone())),
            Record::Pending(Intent {
                intent_id: "ldd-1".into(),
                fine_id: "fine-1".into(),
                amount_cents: 10000
            })
        );
        assert_eq!(read(&record("MODIFY", image)), Record::NotAnInsertion);
        let confirmed = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "CONFIRMED"}});
        assert_eq!(read(&record("INSERT", confirmed)), Record::NotPending);
        let failed = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "FAILED"}});
        assert_eq!(read(&record("INSERT", failed)), Record::NotPending);
    }

    /// S15, S16: a pending intent that no retry could post is parked, not retried forever; a
    /// record without a new image is a configuration fault, retried.
    #[test]
    fn s16_unpostable_intents_are_parked_and_missing_images_retried() {
        let broken = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", broken)),
            Record::Unpostable {
                intent_id: "ldd-1".into(),
                reason: MALFORMED
            }
        );
        let bad_key = json!({"intent_id": {"S": "ldd 1\n"}, "fine_id": {"S": "f"},
                             "amount_cents": {"N": "1"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", bad_key)),
            Record::Unpostable {
                intent_id: "ldd 1\n".into(),
                reason: INVALID_KEY
            }
        );
        let text_amount = json!({"intent_id": {"S": "ldd-2"}, "fine_id": {"S": "f"},
                                 "amount_cents": {"S": "ten"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", text_amount)),
            Record::Unpostable {
                intent_id: "ldd-2".into(),
                reason: MALFORMED
            }
        );
        assert_eq!(read(&record("INSERT", json!({}))), Record::NoImage);
        let numeric_id = json!({"intent_id": {"N": "7"}, "status": {"S": "PENDING"}});
        assert_eq!(read(&record("INSERT", numeric_id)), Record::NoImage);
    }

    /// A record is started only with a whole provider call plus the margin left.
    #[test]
    fn a_record_is_started_only_with_time_for_a_whole_call() {
        let now = SystemTime::now();
        let per_record = Duration::from_millis(700);
        assert!(in_order::time_for_one_more(
            now + Duration::from_secs(1),
            now,
            per_record
        ));
        assert!(in_order::time_for_one_more(
            now + per_record,
            now,
            per_record
        ));
        assert!(!in_order::time_for_one_more(
            now + Duration::from_millis(699),
            now,
            per_record
        ));
        assert!(!in_order::time_for_one_more(
            now - Duration::from_secs(1),
            now,
            per_record
        ));
    }

    #[test]
    fn s14_the_tally_closes_and_is_printed_as_emf() {
        let t = Tally {
            records: 7,
            confirmed: 2,
            parked: 1,
            already_settled: 1,
            ignored: 1,
            transient: 1,
            deferred: 1,
        };
        assert!(t.closes());
        let v: serde_json::Value = serde_json::from_str(&t.emf_line()).expect("json");
        assert_eq!(v["Function"], FUNCTION);
        assert_eq!(v["Parked"], 1);
        let names: Vec<&str> = v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .collect();
        assert!(names.contains(&"Parked") && names.contains(&"Deferred"));
        // Not the SQS functions' outcome names: `cargo xtask audit` sums those per function.
        for audited in [
            "Received",
            "Applied",
            "Duplicate",
            "Retry",
            "Conflict",
            "Rejected",
        ] {
            assert!(v.get(audited).is_none(), "{audited}");
        }
    }
}
