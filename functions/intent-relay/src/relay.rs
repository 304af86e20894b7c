//! The intent relay's own part: how an intent's stream record reads, and the call that applies
//! it. The walk, the settling and parking, the deadline, the tally and the sweep are the
//! runtime's relay ([`lambda_dedup_runtime::relay`]).

use std::time::Duration;

use lambda_dedup::Item;
use lambda_dedup_config::RelayVars;
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::Dedup;
use lambda_dedup_runtime::aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup_runtime::relay::image_part;
use lambda_dedup_runtime::relay::{
    Act, Attribute, Attributes, Failure, Layout, Metric, Read, RelayService, Repeats, StatusValue,
    Waiting,
};

/// The function's name: the `Function` dimension of its metrics.
pub const FUNCTION: &str = "intent-relay";

/// Where the relay's settings are: the intents table `INTENTS_TABLE`, and its own
/// `RELAY_RECORD_BUDGET_MS` (default 7000: one call of `PROVIDER_TIMEOUT_MS`'s default 5000, and
/// 2 s for the DynamoDB writes around it and the answer; it must exceed `PROVIDER_TIMEOUT_MS`)
/// and `RELAY_REDRIVE_AFTER_SECONDS` (default 3600: how long an intent may stay `PENDING`
/// before the sweep re-drives it).
pub const SETTINGS: RelayVars = lambda_dedup_config::relay_vars!("INTENTS_TABLE", "RELAY", 7_000);

/// Where intents are posted.
const COLLECTIONS: &str = "/v1/collections";

/// Receipts longer than this are not stored with the confirmation, only their length: the
/// confirmation must not be refused for the item's size after the effect took place (S16).
const MAX_RECEIPT_BYTES: usize = 32 * 1024;

/// `status` of an intent that waits for the API.
const PENDING: &str = "PENDING";

/// The attribute the sweep stamps on an intent it re-drives (epoch milliseconds).
const REDRIVE: &str = lambda_dedup_runtime::relay::REDRIVE.name();

/// Reason code of a pending intent whose image lacks a field the call needs.
const MALFORMED: &str = "malformed_intent";
/// Reason code of an intent whose id cannot be sent as an `Idempotency-Key` header.
const INVALID_KEY: &str = "invalid_idempotency_key";

/// How intents look: keyed by `intent_id`, written at `created_at` by `fine-notices`,
/// `PENDING` until `CONFIRMED` (with the API's `receipt`) or parked `FAILED` (with
/// `failure_reason` and `failed_at`). The API deduplicates by the intent's id, so a repeat is
/// answered as a replay ([`Repeats::Answered`]).
pub const LAYOUT: Layout = Layout {
    attributes: Attributes {
        key: Attribute::new("intent_id"),
        created: Attribute::new("created_at"),
        status: Attribute::new("status"),
        parked_at: Attribute::new("failed_at"),
    },
    waiting: Waiting::Holds(StatusValue::new(PENDING)),
    settled: StatusValue::new("CONFIRMED"),
    parked: StatusValue::new("FAILED"),
    repeats: Repeats::Answered,
    settled_metric: Metric::new("Confirmed"),
    waiting_metric: Metric::new("PendingIntents"),
};

/// What a pending intent posts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    /// The fine collected.
    pub fine_id: String,
    /// How much.
    pub amount_cents: i64,
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
struct PostingPart {
    fine_id: String,
    amount_cents: i64,
}

/// Reads a stream record: the intent from its new image.
pub(crate) fn read(record: &EventRecord) -> Read<Posting> {
    let image = &record.change.new_image;
    match record.event_name.as_str() {
        "INSERT" => {}
        // A re-drive by the sweep: it stamps `redrive_requested_at` on an intent left PENDING,
        // which comes back on the stream as a modification.
        "MODIFY" if redriven(record) => {}
        // Our own CONFIRMED/FAILED updates, TTL or manual deletions.
        _ => return Read::Ignored,
    }
    let Some(IntentId { intent_id }) = image_part(image) else {
        return Read::NoImage;
    };
    if image_part::<Status>(image).is_none_or(|s| s.status != PENDING) {
        return Read::Settled;
    }
    let Some(PostingPart {
        fine_id,
        amount_cents,
    }) = image_part(image)
    else {
        return Read::Park {
            key: intent_id,
            reason: MALFORMED,
        };
    };
    // A header value the HTTP client could not send would fail as a transport error, forever.
    if intent_id.is_empty() || !intent_id.bytes().all(|b| b.is_ascii_graphic()) {
        return Read::Park {
            key: intent_id,
            reason: INVALID_KEY,
        };
    }
    Read::Act {
        key: intent_id,
        item: Posting {
            fine_id,
            amount_cents,
        },
    }
}

/// Whether a modification is the sweep's re-drive: `redrive_requested_at` changed.
fn redriven(record: &EventRecord) -> bool {
    let stamp = |image: &serde_dynamo::Item| image.get(REDRIVE).cloned();
    let new = stamp(&record.change.new_image);
    new.is_some() && new != stamp(&record.change.old_image)
}

/// The relay's action: each intent posted to the collection API, its id as `Idempotency-Key`,
/// each call given up after `PROVIDER_TIMEOUT_MS`.
#[derive(Debug)]
pub struct Collections {
    api: IdempotentClient,
    timeout: Duration,
}

impl Act for Collections {
    type Item = Posting;

    fn read(&self, record: &EventRecord) -> Read<Posting> {
        read(record)
    }

    async fn act(&self, intent_id: &str, posting: &Posting) -> Result<Item, Failure> {
        let body = serde_json::json!({
            "fine_id": posting.fine_id,
            "amount_cents": posting.amount_cents,
        });
        match self.api.call(COLLECTIONS, intent_id, &body).await {
            Ok(receipt) => {
                tracing::info!(intent_id, replayed = receipt.replayed, "intent posted");
                Ok(if receipt.body.len() <= MAX_RECEIPT_BYTES {
                    Item::new().with("receipt", receipt.body)
                } else {
                    Item::new().with("receipt_bytes", receipt.body.len())
                })
            }
            Err(e) if e.is_permanent() => Err(Failure::Permanent(e.code())),
            Err(e) => Err(Failure::Transient(format!("POST {COLLECTIONS}: {e}"))),
        }
    }

    fn time_limit(&self) -> Option<(&'static str, Duration)> {
        Some(("PROVIDER_TIMEOUT_MS", self.timeout))
    }
}

/// The relay as `main` builds it, on the builder `dedup` (its settings, its store): the
/// relay's own settings ([`SETTINGS`]) and `COLLECTIONS_API_URL` from the builder's environment,
/// each call given up after `PROVIDER_TIMEOUT_MS` (default 5000), a record started only with
/// `RELAY_RECORD_BUDGET_MS` left and cut off `DEDUP_DEADLINE_MARGIN_MS` before the deadline.
pub fn service(dedup: Dedup) -> Result<RelayService<Collections>, lambda_runtime::Error> {
    let url = dedup.env().required("COLLECTIONS_API_URL")?;
    let timeout = dedup.settings().provider_timeout;
    let api = IdempotentClient::new(&url, timeout)?;
    Ok(RelayService::new(
        dedup,
        &SETTINGS,
        LAYOUT,
        Collections { api, timeout },
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::relay::Tally;
    use serde_json::json;

    fn record(name: &str, image: serde_json::Value) -> EventRecord {
        lambda_dedup_runtime::testing::events::stream_record(name, image)
    }

    #[test]
    fn s7_inserted_pending_intents_are_applied_and_nothing_else() {
        let image = json!({"intent_id": {"S": "ldd-1"}, "fine_id": {"S": "fine-1"},
                           "amount_cents": {"N": "10000"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", image.clone())),
            Read::Act {
                key: "ldd-1".into(),
                item: Posting {
                    fine_id: "fine-1".into(),
                    amount_cents: 10000
                }
            }
        );
        assert_eq!(read(&record("MODIFY", image)), Read::Ignored);
        let confirmed = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "CONFIRMED"}});
        assert_eq!(read(&record("INSERT", confirmed)), Read::Settled);
        let failed = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "FAILED"}});
        assert_eq!(read(&record("INSERT", failed)), Read::Settled);
    }

    /// S15, S16: a pending intent that no retry could post is parked, not retried forever; a
    /// record without a new image is a configuration fault, retried.
    #[test]
    fn s16_unpostable_intents_are_parked_and_missing_images_retried() {
        let parked = |key: &str, reason| Read::Park {
            key: key.into(),
            reason,
        };
        let broken = json!({"intent_id": {"S": "ldd-1"}, "status": {"S": "PENDING"}});
        assert_eq!(read(&record("INSERT", broken)), parked("ldd-1", MALFORMED));
        let bad_key = json!({"intent_id": {"S": "ldd 1\n"}, "fine_id": {"S": "f"},
                             "amount_cents": {"N": "1"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", bad_key)),
            parked("ldd 1\n", INVALID_KEY)
        );
        let text_amount = json!({"intent_id": {"S": "ldd-2"}, "fine_id": {"S": "f"},
                                 "amount_cents": {"S": "ten"}, "status": {"S": "PENDING"}});
        assert_eq!(
            read(&record("INSERT", text_amount)),
            parked("ldd-2", MALFORMED)
        );
        assert_eq!(read(&record("INSERT", json!({}))), Read::NoImage);
        let numeric_id = json!({"intent_id": {"N": "7"}, "status": {"S": "PENDING"}});
        assert_eq!(read(&record("INSERT", numeric_id)), Read::NoImage);
    }

    #[test]
    fn s14_the_tally_closes_and_is_printed_as_emf() {
        let t = Tally {
            records: 7,
            settled: 2,
            parked: 1,
            already_settled: 1,
            ignored: 1,
            transient: 1,
            deferred: 1,
        };
        assert!(t.closes());
        let v: serde_json::Value =
            serde_json::from_str(&t.emf_line(FUNCTION, &LAYOUT)).expect("json");
        assert_eq!(v["Function"], FUNCTION);
        assert_eq!(
            (v["Parked"].as_u64(), v["Confirmed"].as_u64()),
            (Some(1), Some(2))
        );
        let names = lambda_dedup_runtime::testing::emf_metric_names(&v);
        // The line the relay has always printed, the alarms' names among them.
        assert_eq!(
            names,
            [
                "Records",
                "Confirmed",
                "Parked",
                "AlreadySettled",
                "Ignored",
                "Transient",
                "Deferred"
            ]
        );
        // Not the SQS functions' outcome names: `cargo xtask audit` sums those per function.
        for audited in lambda_dedup_engine::Account::METRICS {
            assert!(v.get(audited).is_none(), "{audited}");
        }
    }
}
