//! What a payment request asks the provider for.

use dedup::Derived;
use dedup_batch::HandlerError;

/// The provider request for a `payment.requested` event with
/// `data: {amount_cents, currency, customer_ref}`.
pub(crate) fn request(event: &Derived) -> Result<serde_json::Value, HandlerError> {
    let data = HandlerError::data(event)?;
    let amount = data
        .get("amount_cents")
        .and_then(|a| a.as_i64())
        .filter(|a| *a > 0)
        .ok_or_else(|| {
            HandlerError::Invalid("data.amount_cents must be a positive integer".into())
        })?;
    let currency = data
        .get("currency")
        .and_then(|c| c.as_str())
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()))
        .ok_or_else(|| HandlerError::Invalid("data.currency must be an ISO 4217 code".into()))?;
    let customer = data
        .get("customer_ref")
        .and_then(|c| c.as_str())
        .filter(|c| !c.trim().is_empty() && c.len() <= 128)
        .ok_or_else(|| {
            HandlerError::Invalid("data.customer_ref must be a non-empty string".into())
        })?;
    Ok(serde_json::json!({
        "amount_cents": amount,
        "currency": currency,
        "customer_ref": customer,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dedup::{DedupKey, Scope};
    use serde_json::json;

    fn event(data: serde_json::Value) -> Derived {
        Derived {
            key: DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &["x"]),
            fingerprint: None,
            body: Some(json!({ "data": data })),
            event_time: None,
        }
    }

    #[test]
    fn a_valid_request_is_forwarded_field_by_field() {
        let r = request(&event(
            json!({"amount_cents": 1250, "currency": "EUR", "customer_ref": "c-9", "extra": 1}),
        ))
        .expect("valid");
        assert_eq!(
            r,
            json!({"amount_cents": 1250, "currency": "EUR", "customer_ref": "c-9"})
        );
    }

    #[test]
    fn invalid_requests_are_rejected() {
        for data in [
            json!({"amount_cents": 0, "currency": "EUR", "customer_ref": "c"}),
            json!({"amount_cents": 10, "currency": "euro", "customer_ref": "c"}),
            json!({"amount_cents": 10, "currency": "EUR"}),
            json!({"currency": "EUR", "customer_ref": "c"}),
        ] {
            assert!(
                matches!(request(&event(data.clone())), Err(HandlerError::Invalid(_))),
                "{data}"
            );
        }
    }
}
