//! What a payment request asks the provider for.

use lambda_dedup::Derived;
use lambda_dedup_batch::HandlerError;
use serde::Deserialize;

/// A payment request's `data`, as it arrives (other fields ignored).
#[derive(Debug, serde::Deserialize)]
struct Request {
    amount_cents: i64,
    currency: String,
    customer_ref: String,
}

/// The provider request for a `payment.requested` event with
/// `data: {amount_cents, currency, customer_ref}`.
pub(crate) fn request(event: &Derived) -> Result<serde_json::Value, HandlerError> {
    // serde's messages can quote the payload's values: the reason names fields only.
    let data = Request::deserialize(HandlerError::data(event)?).map_err(|_| {
        HandlerError::Invalid(
            "data must have an integer amount_cents and currency and customer_ref strings".into(),
        )
    })?;
    if data.amount_cents <= 0 {
        return Err(HandlerError::Invalid(
            "data.amount_cents must be a positive integer".into(),
        ));
    }
    let currency = data.currency.as_str();
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(HandlerError::Invalid(
            "data.currency must be an ISO 4217 code".into(),
        ));
    }
    let customer = data.customer_ref.as_str();
    if customer.trim().is_empty() || customer.len() > 128 {
        return Err(HandlerError::Invalid(
            "data.customer_ref must be a non-empty string".into(),
        ));
    }
    Ok(serde_json::json!({
        "amount_cents": data.amount_cents,
        "currency": currency,
        "customer_ref": customer,
    }))
}

/// What a payment's effect (the provider request) depends on: every field it sends.
/// The same event id with any of these changed is a conflict (S11), not a duplicate.
pub(crate) const DEPENDS_ON: &[&str] =
    &["/data/amount_cents", "/data/currency", "/data/customer_ref"];

/// How this function derives keys: CloudEvents `source` + `id`, tenant from `tenantid`, and a
/// fingerprint of [`DEPENDS_ON`].
pub(crate) fn key_spec(scope: lambda_dedup::Scope) -> lambda_dedup::KeySpec {
    lambda_dedup::KeySpec::cloudevents(scope, "tenantid")
        .fingerprint(lambda_dedup::FingerprintSource::pointers(DEPENDS_ON))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{DedupKey, Scope};
    use serde_json::json;

    /// The operators' tool is told this function's key spec in the README
    /// (`lambda-dedup --key-spec …`): it must stay the one this code declares.
    #[test]
    fn the_readme_gives_the_operators_tool_this_key_spec() {
        let readme = include_str!("../../../README.md");
        let spec = format!("--key-spec cloudevents:tenantid:{}", DEPENDS_ON.join(","));
        assert!(
            readme.contains(&spec),
            "README lacks `{spec}` for payment-dispatcher"
        );
    }

    fn event(data: serde_json::Value) -> Derived {
        Derived {
            key: DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &["x"]),
            tenant: "t1".into(),
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

    /// S11: under the same event id, a change to any field the effect depends on is a
    /// conflict (another fingerprint); a change to the envelope's `time` is not.
    #[test]
    fn s11_every_field_the_effect_depends_on_is_fingerprinted() {
        let sample: serde_json::Value = serde_json::from_str(r#"{"specversion": "1.0", "type": "payment.requested", "source": "/shop", "id": "p-1", "tenantid": "shop-a", "time": "2026-11-30T10:00:00Z", "data": {"amount_cents": 1250, "currency": "EUR", "customer_ref": "c-9"}}"#).expect("sample");
        lambda_dedup_runtime::testing::assert_fingerprint_covers(
            &key_spec(lambda_dedup::Scope::new("t", "c").expect("scope")),
            &sample,
            DEPENDS_ON,
        );
    }
}
