//! What a fine notice writes.

use lambda_dedup::{DedupKey, Effect, Item};
use lambda_dedup_engine::{HandlerError, Plan};
use lambda_dedup_runtime::{Dedup, Event, Tenant};
use lambda_dedup_signature::hmac_sha256;

/// The tables a notice writes to, and the secret of the correlation key.
pub(crate) struct Tables {
    pub(crate) fines: String,
    pub(crate) intents: String,
    /// Correlation items: one per real-world fine, keyed by a keyed hash of its facts.
    pub(crate) reviews: String,
    /// The key of that hash (`FINES_CORRELATION_KEY`): without it, no one can test a plate
    /// against the correlation keys.
    pub(crate) correlation_secret: Vec<u8>,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("fines", &self.fines)
            .field("intents", &self.intents)
            .field("reviews", &self.reviews)
            .finish_non_exhaustive()
    }
}

/// The fields two notices must share to be flagged as one real-world fine.
pub(crate) const MATCHED_FIELDS: &str = "plate,time,place,amount";

/// A plate as written on any notice: letters and digits, upper case (`1234-abc` = `1234 ABC`).
fn plate_key(plate: &str) -> String {
    plate
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// A time to the minute in UTC when it is an RFC 3339 timestamp; otherwise as written, trimmed.
fn time_key(issued_at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(issued_at.trim())
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%dT%H:%M")
                .to_string()
        })
        .unwrap_or_else(|_| issued_at.trim().to_owned())
}

/// A place: lower case, single spaces.
fn place_key(place: &str) -> String {
    place
        .split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The correlation key of a fine: a keyed hash of its normalised plate, time, place and amount,
/// so two notices of one fine from different providers meet on one item, and no plate appears in
/// clear in a key, a log or a metric.
pub(crate) fn correlation_key(
    secret: &[u8],
    plate: &str,
    issued_at: &str,
    place: &str,
    amount_cents: i64,
) -> String {
    let facts = [
        plate_key(plate),
        time_key(issued_at),
        place_key(place),
        amount_cents.to_string(),
    ]
    .join("\u{1f}");
    hex::encode(hmac_sha256(secret, facts.as_bytes()))
}

/// A notice's `data`, as it arrives (other fields ignored).
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Notice {
    notice_number: String,
    plate: String,
    offence: String,
    issued_at: String,
    amount_cents: i64,
    /// Where the offence happened; optional (older providers leave it out).
    #[serde(default)]
    place: Option<String>,
}

/// `value` as a field of at most `max` bytes that is not blank.
fn text<'a>(value: &'a str, field: &str, max: usize) -> Result<&'a str, HandlerError> {
    if value.trim().is_empty() || value.len() > max {
        return Err(HandlerError::invalid(format!(
            "data.{field} must be a non-empty string"
        )));
    }
    Ok(value)
}

fn created_at_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A `fine.notice` event with `data: {notice_number, plate, offence, amount_cents, issued_at}`
/// writes the fine and a `PENDING` collection intent. Both are keyed by the event (never by the
/// plate), and the intent's id is the event's idempotency key, which the relay sends to the
/// collection API.
///
/// Besides the fine and its intent, every notice updates its fine's correlation item in the same
/// transaction: the first notice and the latest, how many notices, and the fields that matched.
/// A second notice of one fine (another provider, another event) is recorded like the first —
/// never suppressed — and its correlation item, now naming both notices, is the review
/// (`notices` ≥ 2).
pub(crate) fn plan(tables: &Tables, event: &Event<Notice>) -> Result<Plan, HandlerError> {
    let data = checked(&event.payload)?;
    let Review {
        fine_id,
        correlation,
    } = review_of(tables, &event.key, data);
    let intent_id = event.key.idempotency_key();
    let fine = Item::new()
        .with("fine_id", fine_id.as_str())
        .with("notice_number", data.notice_number.as_str())
        .with("plate", data.plate.as_str())
        .with("offence", data.offence.as_str())
        .with("issued_at", data.issued_at.as_str())
        .with("amount_cents", data.amount_cents);
    let intent = Item::new()
        .with("intent_id", intent_id.as_str())
        .with("kind", "collection_task")
        .with("fine_id", fine_id.as_str())
        .with("amount_cents", data.amount_cents)
        .with("status", "PENDING")
        // For the relay's sweep: how long the intent has been pending.
        .with("created_at", created_at_ms());
    let review = Effect::update(
        &tables.reviews,
        Item::new().with("correlation", correlation.as_str()),
    )
    .expression(
        "SET #first = if_not_exists(#first, :me), #last = :me, #fields = :fields ADD #n :one",
    )
    .name("#first", "first_notice")
    .name("#last", "last_notice")
    .name("#fields", "matched_fields")
    .name("#n", "notices")
    .value(":me", fine_id.as_str())
    .value(":fields", MATCHED_FIELDS)
    .value(":one", 1);
    Ok(Plan {
        effects: vec![
            Effect::put(&tables.fines, fine).condition("attribute_not_exists(fine_id)"),
            Effect::put(&tables.intents, intent).condition("attribute_not_exists(intent_id)"),
            review,
        ],
        result: Some(serde_json::json!({ "fine_id": fine_id, "intent_id": intent_id }).to_string()),
    })
}

/// The notice's `data`, checked.
fn checked(data: &Notice) -> Result<&Notice, HandlerError> {
    text(&data.notice_number, "notice_number", 64)?;
    text(&data.plate, "plate", 16)?;
    text(&data.offence, "offence", 256)?;
    text(&data.issued_at, "issued_at", 64)?;
    if let Some(place) = &data.place {
        text(place, "place", 256)?;
    }
    if data.amount_cents <= 0 {
        return Err(HandlerError::invalid(
            "data.amount_cents must be a positive integer",
        ));
    }
    Ok(data)
}

/// The fine's id and its correlation key, for the review check after the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Review {
    pub(crate) fine_id: String,
    pub(crate) correlation: String,
}

fn review_of(tables: &Tables, key: &DedupKey, data: &Notice) -> Review {
    let digest = key.as_str().rsplit('#').next().unwrap_or_default();
    Review {
        fine_id: format!("fine-{}", &digest[..digest.len().min(32)]),
        correlation: correlation_key(
            &tables.correlation_secret,
            &data.plate,
            &data.issued_at,
            data.place.as_deref().unwrap_or(""),
            data.amount_cents,
        ),
    }
}

/// What the review check after the commit needs of a notice: its fine's id and correlation key
/// (no plan built, no effects).
pub(crate) fn review(tables: &Tables, event: &Event<Notice>) -> Result<Review, HandlerError> {
    checked(&event.payload).map(|data| review_of(tables, &event.key, data))
}

/// What a notice's effect (the fine record and its collection intent) depends on: every field
/// the fine stores.
/// The same event id with any of these changed is a conflict (S11), not a duplicate.
pub(crate) const DEPENDS_ON: &[&str] = &[
    "/data/notice_number",
    "/data/plate",
    "/data/offence",
    "/data/issued_at",
    "/data/amount_cents",
    "/data/place",
];

/// How this function derives keys: CloudEvents `source` + `id`, tenant from `tenantid`, and a
/// fingerprint of [`DEPENDS_ON`]. The tenant is the payload's: the queue's producers are the
/// deployment's own (declared trusted; docs/SECURITY.md, webhook provenance).
pub(crate) fn configure<S>(dedup: Dedup<S>) -> Dedup<S> {
    dedup
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers()
        .fingerprint(DEPENDS_ON)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{Scope, Value};
    use lambda_dedup_cli::template::{Flow, function_entry};
    use lambda_dedup_runtime::testing::assert_declared_key_spec;
    use serde_json::json;

    /// The template declares this function's key spec and flow for the operators' tool
    /// (`Metadata.LambdaDedupKeySpec`, `LambdaDedupFlow`; `lambda-dedup` links no function's
    /// code): they must stay the ones this code declares.
    #[test]
    fn the_template_declares_this_functions_key_spec_and_flow() {
        let template = include_str!("../../../infra/template.yaml");
        let entry = function_entry(template, Some("fine-notices")).expect("the function's entry");
        assert_declared_key_spec(entry.key_spec.as_deref(), "fine-notices", configure);
        assert_eq!(entry.flow, Some(Flow::Transactional));
    }

    fn tables() -> Tables {
        Tables {
            fines: "fines".into(),
            intents: "intents".into(),
            reviews: "reviews".into(),
            correlation_secret: b"test-secret-of-16+".to_vec(),
        }
    }

    /// `data` as the service hands it to [`plan`], or the refusal of a payload that is not a
    /// notice.
    fn event(id: &str, data: serde_json::Value) -> Result<Event<Notice>, HandlerError> {
        Ok(Event {
            payload: lambda_dedup_runtime::parse(&data)?,
            key: DedupKey::new(
                &Scope::new("t", "fines").expect("scope"),
                "dgt",
                &["cloudevents", "/dgt", id],
            ),
            tenant: "dgt".into(),
            time: None,
            provenance: lambda_dedup_runtime::Provenance::Payload,
        })
    }

    fn planned(id: &str, data: serde_json::Value) -> Result<Plan, HandlerError> {
        plan(&tables(), &event(id, data)?)
    }

    fn notice() -> serde_json::Value {
        json!({"notice_number": "N-1", "plate": "1234-ABC", "offence": "speeding",
               "amount_cents": 10000, "issued_at": "2026-11-01T10:00:00Z"})
    }

    /// Two providers' notices of one fine meet on one correlation key, however they write the
    /// plate, the time and the place; another amount, time or plate is another fine; the key is a
    /// keyed hash (no plate in it, and another secret gives another key).
    #[test]
    fn business_duplicates_meet_on_one_keyed_correlation() {
        let s = b"test-secret-of-16+";
        let a = correlation_key(
            s,
            "1234-ABC",
            "2026-11-01T10:00:00Z",
            "Calle Mayor  3",
            10000,
        );
        let b = correlation_key(
            s,
            "1234 abc",
            "2026-11-01T11:00:30+01:00",
            "calle mayor 3",
            10000,
        );
        assert_eq!(a, b);
        assert_ne!(
            a,
            correlation_key(s, "1234ABC", "2026-11-01T10:00:00Z", "calle mayor 3", 9000)
        );
        assert_ne!(
            a,
            correlation_key(s, "1234ABD", "2026-11-01T10:00:00Z", "calle mayor 3", 10000)
        );
        assert_ne!(
            a,
            correlation_key(s, "1234ABC", "2026-11-01T10:05:00Z", "calle mayor 3", 10000)
        );
        assert_ne!(
            a,
            correlation_key(
                b"another-secret-16",
                "1234ABC",
                "2026-11-01T10:00:00Z",
                "calle mayor 3",
                10000
            )
        );
        assert!(!a.contains("1234") && !a.to_uppercase().contains("ABC"));
        // Each notice's plan updates the correlation item in its own transaction.
        let p = planned("e1", notice()).expect("plan");
        let review = &p.effects[2];
        assert_eq!(review.table(), "reviews");
        let Some(Value::S(k)) = review.item().0.get("correlation") else {
            panic!("a correlation key")
        };
        assert!(!k.contains("1234"), "{k}");
    }

    #[test]
    fn s5_s7_a_notice_writes_the_fine_and_its_intent_together() {
        let p = planned("e1", notice()).expect("plan");
        assert_eq!(p.effects.len(), 3);
        assert_eq!(p.effects[0].table(), "fines");
        assert_eq!(p.effects[1].table(), "intents");
        let intent = &p.effects[1].item().0;
        assert_eq!(intent.get("status"), Some(&Value::S("PENDING".into())));
        assert_eq!(intent.get("fine_id"), p.effects[0].item().0.get("fine_id"));
    }

    #[test]
    fn s3_the_plate_is_in_no_key() {
        let e = event("e1", notice()).expect("a notice");
        let p = plan(&tables(), &e).expect("plan");
        for effect in &p.effects {
            let key_attr = match effect.table() {
                "fines" => "fine_id",
                "intents" => "intent_id",
                _ => "correlation",
            };
            let Some(Value::S(k)) = effect.item().0.get(key_attr) else {
                panic!("key")
            };
            assert!(!k.contains("1234"), "{k}");
        }
        assert!(!e.key.as_str().contains("1234"));
        assert!(!p.result.unwrap_or_default().contains("1234"));
        // The intent sent onward carries no plate at all.
        assert!(!p.effects[1].item().0.contains_key("plate"));
    }

    #[test]
    fn s3_two_events_about_one_fine_are_two_records() {
        let a = planned("provider-a-1", notice()).expect("plan");
        let b = planned("provider-b-7", notice()).expect("plan");
        assert_ne!(
            a.effects[0].item().0.get("fine_id"),
            b.effects[0].item().0.get("fine_id")
        );
    }

    #[test]
    fn incomplete_notices_are_rejected() {
        for field in [
            "notice_number",
            "plate",
            "offence",
            "issued_at",
            "amount_cents",
        ] {
            let mut n = notice();
            n.as_object_mut().expect("object").remove(field);
            assert!(
                matches!(planned("e", n), Err(HandlerError::Invalid(_))),
                "{field}"
            );
        }
    }

    /// S11: under the same event id, a change to any field the effect depends on is a
    /// conflict (another fingerprint); a change to the envelope's `time` is not.
    #[test]
    fn s11_every_field_the_effect_depends_on_is_fingerprinted() {
        let sample: serde_json::Value = serde_json::from_str(r#"{"specversion": "1.0", "type": "fine.notice", "source": "/dgt", "id": "n-1", "tenantid": "dgt", "time": "2026-11-30T10:00:00Z", "data": {"notice_number": "N1", "plate": "1234ABC", "offence": "speeding", "issued_at": "2026-11-01", "amount_cents": 10000, "place": "Calle Mayor 3"}}"#).expect("sample");
        lambda_dedup_runtime::testing::assert_configured_fingerprint_covers(
            configure, &sample, DEPENDS_ON,
        );
    }
}
