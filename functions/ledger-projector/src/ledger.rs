//! What a ledger event changes.

use lambda_dedup::{Derived, Effect, Item};
use lambda_dedup_batch::{HandlerError, Plan};
use serde::Deserialize;

/// Longest account id accepted.
const MAX_ACCOUNT: usize = 256;

/// A ledger event as it arrives: the CloudEvents `type` and `data` (other attributes ignored).
#[derive(Debug, serde::Deserialize)]
struct LedgerEvent {
    #[serde(rename = "type")]
    kind: Kind,
    data: Movement,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Credit,
    Debit,
}

#[derive(Debug, serde::Deserialize)]
struct Movement {
    account: String,
    /// In minor units; an integer in JSON (a string or a fraction is refused).
    amount: i64,
}

/// The balance change of a `credit` or `debit` event with `data: {account, amount}` (a positive
/// integer, in minor units). The balance item is the account *within the event's tenant*
/// (`<tenant>/<account>`, S1): a message can only move its own tenant's balances.
pub fn plan(balances: &str, event: &Derived) -> Result<Plan, HandlerError> {
    let body = event
        .body
        .as_ref()
        .ok_or_else(|| HandlerError::Invalid("no JSON body".into()))?;
    // serde's messages can quote the payload's values; the reason names fields only (S3).
    let LedgerEvent { kind, data } = LedgerEvent::deserialize(body).map_err(|_| {
        HandlerError::Invalid(
            "expected type \"credit\" or \"debit\" and data {account: string, amount: integer}"
                .into(),
        )
    })?;
    let account = data.account.as_str();
    if account.trim().is_empty() || account.len() > MAX_ACCOUNT {
        return Err(HandlerError::Invalid(
            "data.account must be a non-empty string".into(),
        ));
    }
    if data.amount <= 0 {
        return Err(HandlerError::Invalid(
            "data.amount must be a positive integer".into(),
        ));
    }
    let (sign, amount) = match kind {
        Kind::Credit => (1, data.amount),
        Kind::Debit => (-1, data.amount),
    };
    let delta = sign * amount;
    Ok(Plan {
        effects: vec![
            Effect::update(
                balances,
                Item::new().with(
                    "account",
                    lambda_dedup::tenant_scoped(&event.tenant, account).as_str(),
                ),
            )
            .expression("ADD #balance :delta, #events :one")
            .name("#balance", "balance")
            .name("#events", "events")
            .value(":delta", delta)
            .value(":one", 1),
        ],
        result: Some(serde_json::json!({ "delta": delta }).to_string()),
    })
}

/// What a ledger event's effect depends on: credit or debit, which account, how much.
/// The same event id with any of these changed is a conflict (S11), not a duplicate.
pub const DEPENDS_ON: &[&str] = &["/type", "/data/account", "/data/amount"];

/// How this function derives keys: CloudEvents `source` + `id`, tenant from `tenantid`, and a
/// fingerprint of [`DEPENDS_ON`].
pub fn key_spec(scope: lambda_dedup::Scope) -> lambda_dedup::KeySpec {
    lambda_dedup::KeySpec::cloudevents(scope, "tenantid")
        .fingerprint(lambda_dedup::FingerprintSource::pointers(DEPENDS_ON))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{DedupKey, Scope, Value};
    use serde_json::json;

    fn event(body: serde_json::Value) -> Derived {
        Derived {
            key: DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &["x"]),
            tenant: "t1".into(),
            fingerprint: None,
            body: Some(body),
            event_time: None,
        }
    }

    #[test]
    fn credit_and_debit_move_the_balance_by_their_sign() {
        let credit = plan(
            "b",
            &event(json!({"type": "credit", "data": {"account": "credito-17", "amount": 10}})),
        )
        .expect("plan");
        assert_eq!(credit.effects.len(), 1);
        assert_eq!(credit.effects[0].table(), "b");
        assert_eq!(
            credit.effects[0].values().get(":delta"),
            Some(&Value::N("10".into()))
        );
        let debit = plan(
            "b",
            &event(json!({"type": "debit", "data": {"account": "a", "amount": 3}})),
        )
        .expect("plan");
        assert_eq!(
            debit.effects[0].values().get(":delta"),
            Some(&Value::N("-3".into()))
        );
    }

    /// S1: tenants stay apart in the effects: the same account name under two tenants is two
    /// balance items, so one tenant's message cannot move another tenant's balance.
    #[test]
    fn s1_the_balance_item_is_the_account_within_the_tenant() {
        let body = json!({"type": "credit", "data": {"account": "credito-17", "amount": 10}});
        let mut a = event(body.clone());
        a.tenant = "bank-a".into();
        let mut b = event(body);
        b.tenant = "bank-b".into();
        let item = |e: &Derived| plan("b", e).expect("plan").effects[0].item().clone();
        assert_ne!(item(&a), item(&b));
        assert_eq!(
            item(&a).0.get("account"),
            Some(&Value::S("bank-a/credito-17".into()))
        );
    }

    #[test]
    fn invalid_payloads_are_rejected_not_retried() {
        for body in [
            json!({"type": "refund", "data": {"account": "a", "amount": 1}}),
            json!({"type": "credit", "data": {"amount": 1}}),
            json!({"type": "credit", "data": {"account": "", "amount": 1}}),
            json!({"type": "credit", "data": {"account": "a", "amount": -5}}),
            json!({"type": "credit", "data": {"account": "a", "amount": "10"}}),
            json!({"type": "credit", "data": {"account": "a", "amount": 1.5}}),
            json!({"type": "credit"}),
        ] {
            assert!(
                matches!(
                    plan("b", &event(body.clone())),
                    Err(HandlerError::Invalid(_))
                ),
                "{body}"
            );
        }
    }

    /// S11: under the same event id, a change to any field the effect depends on is a
    /// conflict (another fingerprint); a change to the envelope's `time` is not.
    #[test]
    fn s11_every_field_the_effect_depends_on_is_fingerprinted() {
        let sample: serde_json::Value = serde_json::from_str(r#"{"specversion": "1.0", "type": "credit", "source": "/bank", "id": "e-1", "tenantid": "bank-a", "time": "2026-11-30T10:00:00Z", "data": {"account": "credito-17", "amount": 10}}"#).expect("sample");
        lambda_dedup_runtime::testing::assert_fingerprint_covers(
            &key_spec(lambda_dedup::Scope::new("t", "c").expect("scope")),
            &sample,
            DEPENDS_ON,
        );
    }
}
