//! What a ledger event changes.

use dedup::{Derived, Effect, Item};
use dedup_batch::{HandlerError, Plan};

/// Longest account id accepted.
const MAX_ACCOUNT: usize = 256;

/// The balance change of a `credit` or `debit` event with `data: {account, amount}` (a positive
/// integer, in minor units).
pub(crate) fn plan(balances: &str, event: &Derived) -> Result<Plan, HandlerError> {
    let body = event
        .body
        .as_ref()
        .ok_or_else(|| HandlerError::Invalid("no JSON body".into()))?;
    let sign = match body.get("type").and_then(|t| t.as_str()) {
        Some("credit") => 1,
        Some("debit") => -1,
        _ => {
            return Err(HandlerError::Invalid(
                "type must be \"credit\" or \"debit\"".into(),
            ));
        }
    };
    let data = body.get("data");
    let account = data
        .and_then(|d| d.get("account"))
        .and_then(|a| a.as_str())
        .filter(|a| !a.trim().is_empty() && a.len() <= MAX_ACCOUNT)
        .ok_or_else(|| HandlerError::Invalid("data.account must be a non-empty string".into()))?;
    let amount = data
        .and_then(|d| d.get("amount"))
        .and_then(|a| a.as_i64())
        .filter(|a| *a > 0)
        .ok_or_else(|| HandlerError::Invalid("data.amount must be a positive integer".into()))?;
    let delta = sign * amount;
    Ok(Plan {
        effects: vec![
            Effect::update(balances, Item::new().with("account", account))
                .expression("ADD #balance :delta, #events :one")
                .name("#balance", "balance")
                .name("#events", "events")
                .value(":delta", delta)
                .value(":one", 1),
        ],
        result: Some(serde_json::json!({ "delta": delta }).to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dedup::{DedupKey, Scope, Value};
    use serde_json::json;

    fn event(body: serde_json::Value) -> Derived {
        Derived {
            key: DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &["x"]),
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
}
