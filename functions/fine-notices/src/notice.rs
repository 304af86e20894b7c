//! What a fine notice writes.

use lambda_dedup::{Derived, Effect, Item};
use lambda_dedup_batch::{HandlerError, Plan};
use serde::Deserialize;

/// The tables a notice writes to.
#[derive(Debug)]
pub(crate) struct Tables {
    pub(crate) fines: String,
    pub(crate) intents: String,
}

/// A notice's `data`, as it arrives (other fields ignored).
#[derive(Debug, serde::Deserialize)]
struct Notice {
    notice_number: String,
    plate: String,
    offence: String,
    issued_at: String,
    amount_cents: i64,
}

/// `value` as a field of at most `max` bytes that is not blank.
fn text<'a>(value: &'a str, field: &str, max: usize) -> Result<&'a str, HandlerError> {
    if value.trim().is_empty() || value.len() > max {
        return Err(HandlerError::Invalid(format!(
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
pub(crate) fn plan(tables: &Tables, event: &Derived) -> Result<Plan, HandlerError> {
    // serde's messages can quote the payload's values (a plate): the reason names fields only.
    let data = Notice::deserialize(HandlerError::data(event)?).map_err(|_| {
        HandlerError::Invalid(
            "data must have notice_number, plate, offence and issued_at strings and an integer \
             amount_cents"
                .into(),
        )
    })?;
    let notice = text(&data.notice_number, "notice_number", 64)?;
    let plate = text(&data.plate, "plate", 16)?;
    let offence = text(&data.offence, "offence", 256)?;
    let issued_at = text(&data.issued_at, "issued_at", 64)?;
    let amount = Some(data.amount_cents).filter(|a| *a > 0).ok_or_else(|| {
        HandlerError::Invalid("data.amount_cents must be a positive integer".into())
    })?;
    let digest = event.key.as_str().rsplit('#').next().unwrap_or_default();
    let fine_id = format!("fine-{}", &digest[..digest.len().min(32)]);
    let intent_id = event.key.idempotency_key();
    let fine = Item::new()
        .with("fine_id", fine_id.as_str())
        .with("notice_number", notice)
        .with("plate", plate)
        .with("offence", offence)
        .with("issued_at", issued_at)
        .with("amount_cents", amount);
    let intent = Item::new()
        .with("intent_id", intent_id.as_str())
        .with("kind", "collection_task")
        .with("fine_id", fine_id.as_str())
        .with("amount_cents", amount)
        .with("status", "PENDING")
        // For the relay's sweep: how long the intent has been pending.
        .with("created_at", created_at_ms());
    Ok(Plan {
        effects: vec![
            Effect::put(&tables.fines, fine).condition("attribute_not_exists(fine_id)"),
            Effect::put(&tables.intents, intent).condition("attribute_not_exists(intent_id)"),
        ],
        result: Some(serde_json::json!({ "fine_id": fine_id, "intent_id": intent_id }).to_string()),
    })
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
];

/// How this function derives keys: CloudEvents `source` + `id`, tenant from `tenantid`, and a
/// fingerprint of [`DEPENDS_ON`].
pub(crate) fn key_spec(scope: lambda_dedup::Scope) -> lambda_dedup::KeySpec {
    lambda_dedup::KeySpec::cloudevents(scope, "tenantid")
        .fingerprint(lambda_dedup::FingerprintSource::pointers(DEPENDS_ON))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{DedupKey, Scope, Value};
    use serde_json::json;

    fn tables() -> Tables {
        Tables {
            fines: "fines".into(),
            intents: "intents".into(),
        }
    }

    fn event(id: &str, data: serde_json::Value) -> Derived {
        Derived {
            key: DedupKey::new(
                &Scope::new("t", "fines").expect("scope"),
                "dgt",
                &["cloudevents", "/dgt", id],
            ),
            tenant: "dgt".into(),
            fingerprint: None,
            body: Some(json!({ "data": data })),
            event_time: None,
        }
    }

    fn notice() -> serde_json::Value {
        json!({"notice_number": "N-1", "plate": "1234-ABC", "offence": "speeding",
               "amount_cents": 10000, "issued_at": "2026-11-01T10:00:00Z"})
    }

    #[test]
    fn s5_s7_a_notice_writes_the_fine_and_its_intent_together() {
        let p = plan(&tables(), &event("e1", notice())).expect("plan");
        assert_eq!(p.effects.len(), 2);
        assert_eq!(p.effects[0].table(), "fines");
        assert_eq!(p.effects[1].table(), "intents");
        let intent = &p.effects[1].item().0;
        assert_eq!(intent.get("status"), Some(&Value::S("PENDING".into())));
        assert_eq!(intent.get("fine_id"), p.effects[0].item().0.get("fine_id"));
    }

    #[test]
    fn s3_the_plate_is_in_no_key() {
        let e = event("e1", notice());
        let p = plan(&tables(), &e).expect("plan");
        for effect in &p.effects {
            let key_attr = if effect.table() == "fines" {
                "fine_id"
            } else {
                "intent_id"
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
        let a = plan(&tables(), &event("provider-a-1", notice())).expect("plan");
        let b = plan(&tables(), &event("provider-b-7", notice())).expect("plan");
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
                matches!(
                    plan(&tables(), &event("e", n)),
                    Err(HandlerError::Invalid(_))
                ),
                "{field}"
            );
        }
    }

    /// S11: under the same event id, a change to any field the effect depends on is a
    /// conflict (another fingerprint); a change to the envelope's `time` is not.
    #[test]
    fn s11_every_field_the_effect_depends_on_is_fingerprinted() {
        let sample: serde_json::Value = serde_json::from_str(r#"{"specversion": "1.0", "type": "fine.notice", "source": "/dgt", "id": "n-1", "tenantid": "dgt", "time": "2026-11-30T10:00:00Z", "data": {"notice_number": "N1", "plate": "1234ABC", "offence": "speeding", "issued_at": "2026-11-01", "amount_cents": 10000}}"#).expect("sample");
        lambda_dedup_runtime::testing::assert_fingerprint_covers(
            &key_spec(lambda_dedup::Scope::new("t", "c").expect("scope")),
            &sample,
            DEPENDS_ON,
        );
    }
}
