//! What a payment request asks the provider for.

use lambda_dedup_runtime::{Dedup, HandlerError, Tenant};

/// What a payment's effect (the provider request) depends on: every field it sends.
/// The same event id with any of these changed is a conflict (S11), not a duplicate.
pub(crate) const DEPENDS_ON: &[&str] =
    &["/data/amount_cents", "/data/currency", "/data/customer_ref"];

/// How this function derives keys: CloudEvents `source` + `id`, tenant from `tenantid`, and a
/// fingerprint of [`DEPENDS_ON`]. The tenant is the payload's: the queue's producers are the
/// deployment's own (declared trusted; docs/SECURITY.md, webhook provenance).
pub(crate) fn configure<S>(dedup: Dedup<S>) -> Dedup<S> {
    dedup
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers()
        .fingerprint(DEPENDS_ON)
}

/// A payment request's `data`, as it arrives (other fields ignored).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Request {
    amount_cents: i64,
    currency: String,
    customer_ref: String,
}

impl Request {
    /// The provider request for a `payment.requested` event with
    /// `data: {amount_cents, currency, customer_ref}`, or why it cannot be sent (naming fields,
    /// never quoting values).
    pub(crate) fn checked(self) -> Result<serde_json::Value, HandlerError> {
        if self.amount_cents <= 0 {
            return Err(HandlerError::invalid(
                "data.amount_cents must be a positive integer",
            ));
        }
        let currency = self.currency.as_str();
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(HandlerError::invalid(
                "data.currency must be an ISO 4217 code",
            ));
        }
        let customer = self.customer_ref.as_str();
        if customer.trim().is_empty() || customer.len() > 128 {
            return Err(HandlerError::invalid(
                "data.customer_ref must be a non-empty string",
            ));
        }
        Ok(serde_json::json!({
            "amount_cents": self.amount_cents,
            "currency": currency,
            "customer_ref": customer,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_cli::template::{Flow, function_entry};
    use lambda_dedup_runtime::testing::assert_declared_key_spec;
    use serde_json::json;

    /// The template declares this function's key spec and flow for the operators' tool
    /// (`Metadata.LambdaDedupKeySpec`, `LambdaDedupFlow`; `lambda-dedup` links no function's
    /// code): they must stay the ones this code declares.
    #[test]
    fn the_template_declares_this_functions_key_spec_and_flow() {
        let template = include_str!("../../../infra/template.yaml");
        let entry =
            function_entry(template, Some("payment-dispatcher")).expect("the function's entry");
        assert_declared_key_spec(entry.key_spec.as_deref(), "payment-dispatcher", configure);
        assert_eq!(entry.flow, Some(Flow::Leased));
    }

    fn request(data: serde_json::Value) -> Result<serde_json::Value, HandlerError> {
        lambda_dedup_runtime::parse::<Request>(&data).and_then(Request::checked)
    }

    #[test]
    fn a_valid_request_is_forwarded_field_by_field() {
        let r = request(
            json!({"amount_cents": 1250, "currency": "EUR", "customer_ref": "c-9", "extra": 1}),
        )
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
                matches!(request(data.clone()), Err(HandlerError::Invalid(_))),
                "{data}"
            );
        }
    }

    /// S11: under the same event id, a change to any field the effect depends on is a
    /// conflict (another fingerprint); a change to the envelope's `time` is not.
    #[test]
    fn s11_every_field_the_effect_depends_on_is_fingerprinted() {
        let sample: serde_json::Value = serde_json::from_str(r#"{"specversion": "1.0", "type": "payment.requested", "source": "/shop", "id": "p-1", "tenantid": "shop-a", "time": "2026-11-30T10:00:00Z", "data": {"amount_cents": 1250, "currency": "EUR", "customer_ref": "c-9"}}"#).expect("sample");
        lambda_dedup_runtime::testing::assert_configured_fingerprint_covers(
            configure, &sample, DEPENDS_ON,
        );
    }
}
