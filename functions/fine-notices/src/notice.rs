//! What a fine notice writes.

use dedup::{Derived, Effect, Item};
use dedup_batch::{HandlerError, Plan};

/// The tables a notice writes to.
#[derive(Debug)]
pub(crate) struct Tables {
    pub(crate) fines: String,
    pub(crate) intents: String,
}

fn text<'a>(data: &'a serde_json::Value, field: &str, max: usize) -> Result<&'a str, HandlerError> {
    data.get(field)
        .and_then(|v| v.as_str())
        .filter(|v| !v.trim().is_empty() && v.len() <= max)
        .ok_or_else(|| HandlerError::Invalid(format!("data.{field} must be a non-empty string")))
}

/// A `fine.notice` event with `data: {notice_number, plate, offence, amount_cents, issued_at}`
/// writes the fine and a `PENDING` collection intent. Both are keyed by the event (never by the
/// plate), and the intent's id is the event's idempotency key, which the relay sends to the
/// collection API.
pub(crate) fn plan(tables: &Tables, event: &Derived) -> Result<Plan, HandlerError> {
    let data = HandlerError::data(event)?;
    let notice = text(data, "notice_number", 64)?;
    let plate = text(data, "plate", 16)?;
    let offence = text(data, "offence", 256)?;
    let issued_at = text(data, "issued_at", 64)?;
    let amount = data
        .get("amount_cents")
        .and_then(|a| a.as_i64())
        .filter(|a| *a > 0)
        .ok_or_else(|| {
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
        .with("status", "PENDING");
    Ok(Plan {
        effects: vec![
            Effect::put(&tables.fines, fine).condition("attribute_not_exists(fine_id)"),
            Effect::put(&tables.intents, intent).condition("attribute_not_exists(intent_id)"),
        ],
        result: Some(serde_json::json!({ "fine_id": fine_id, "intent_id": intent_id }).to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dedup::{DedupKey, Scope, Value};
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
}
