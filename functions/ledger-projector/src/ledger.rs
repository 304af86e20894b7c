//! What a ledger event changes.

use lambda_dedup::{Effect, Item};
use lambda_dedup_engine::Plan;
use lambda_dedup_runtime::{Dedup, Event, HandlerError, Identity, Provenance, Tenant};

/// Longest account id accepted.
const MAX_ACCOUNT: usize = 256;

/// A ledger event as it arrives: the CloudEvents `type` and `data` (other attributes ignored).
#[derive(Debug, serde::Deserialize)]
pub struct LedgerEvent {
    #[serde(rename = "type")]
    kind: Kind,
    data: Movement,
}

#[derive(Debug, Clone, Copy, serde::Deserialize)]
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
/// (`<tenant>/<account>`, S1): a message can only move its own tenant's balances. An event a
/// verified sender vouched for (a webhook's, forwarded from the inbox) moves only that sender's
/// own balances: the key derivation refuses one naming another tenant (`tenant_not_sender`), and
/// the plan checks it again.
pub fn plan(balances: &str, event: Event<LedgerEvent>) -> Result<Plan, HandlerError> {
    if let Provenance::Sender(sender) = &event.provenance
        && *sender != event.tenant
    {
        return Err(HandlerError::invalid(
            "tenantid is not the verified sender's own tenant",
        ));
    }
    let LedgerEvent { kind, data } = &event.payload;
    let account = data.account.as_str();
    if account.trim().is_empty() || account.len() > MAX_ACCOUNT {
        return Err(HandlerError::invalid(
            "data.account must be a non-empty string",
        ));
    }
    if data.amount <= 0 {
        return Err(HandlerError::invalid(
            "data.amount must be a positive integer",
        ));
    }
    let (sign, amount) = match *kind {
        Kind::Credit => (1, data.amount),
        Kind::Debit => (-1, data.amount),
    };
    let delta = sign * amount;
    Ok(Plan {
        effects: vec![
            Effect::update(
                balances,
                Item::new().with("account", event.scoped(account).as_str()),
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

/// How a ledger function derives keys and reads events: CloudEvents with the tenant in
/// `tenantid`, the fingerprint of every field the effect depends on ([`DEPENDS_ON`]), and the
/// whole body as the payload (the effect reads the envelope's `type`). The ledger functions
/// (SQS, Kinesis, SNS fan-out) configure their [`Dedup`] with it.
///
/// Who may name the tenant, said openly: the ledger's producers are trusted
/// ([`Dedup::trusted_producers`]) — the internal producers the queue's policy names
/// (`LedgerProducerArns` in infra/template.yaml) and, for webhooks, the inbox forwarder. A
/// forwarded webhook event carries its verified sender (`dedup-verified-sender`, written by the
/// forwarder from the inbox item): its `tenantid` must be that sender, or it is refused
/// (`tenant_not_sender`, dead-lettered, nothing applied), and its key lies in the sender's own
/// key space, so it never shadows an internal producer's event with the same `source` + `id`.
pub fn configure<S>(dedup: Dedup<S>) -> Dedup<S> {
    dedup
        .identity(Identity::cloudevents_whole_body())
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers()
        .fingerprint(DEPENDS_ON)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::{DedupKey, Scope, Value};
    use lambda_dedup_cli::template::{Flow, function_entry};
    use lambda_dedup_runtime::testing::assert_declared_key_spec;
    use serde_json::json;

    /// `body` as the event the service hands to [`plan`], or the refusal of its payload.
    fn planned(tenant: &str, body: serde_json::Value) -> Result<Plan, HandlerError> {
        let payload = lambda_dedup_runtime::parse(&body)?;
        let key = DedupKey::new(&Scope::new("t", "c").expect("scope"), tenant, &["x"]);
        let tenant = tenant.to_owned();
        plan(
            "b",
            Event {
                payload,
                tenant,
                key,
                time: None,
                provenance: Provenance::Payload,
            },
        )
    }

    #[test]
    fn credit_and_debit_move_the_balance_by_their_sign() {
        let credit = planned(
            "t1",
            json!({"type": "credit", "data": {"account": "credito-17", "amount": 10}}),
        )
        .expect("plan");
        assert_eq!(credit.effects.len(), 1);
        assert_eq!(credit.effects[0].table(), "b");
        assert_eq!(
            credit.effects[0].values().get(":delta"),
            Some(&Value::N("10".into()))
        );
        let debit = planned(
            "t1",
            json!({"type": "debit", "data": {"account": "a", "amount": 3}}),
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
        let item = |t: &str| {
            planned(t, body.clone()).expect("plan").effects[0]
                .item()
                .clone()
        };
        assert_ne!(item("bank-a"), item("bank-b"));
        assert_eq!(
            item("bank-a").0.get("account"),
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
                matches!(planned("t1", body.clone()), Err(HandlerError::Invalid(_))),
                "{body}"
            );
        }
    }

    /// The template declares this function's key spec and flow for the operators' tool
    /// (`Metadata.LambdaDedupKeySpec`, `LambdaDedupFlow`; `lambda-dedup` links no function's
    /// code): they must stay the ones this code declares.
    #[test]
    fn the_template_declares_this_functions_key_spec_and_flow() {
        let template = include_str!("../../../infra/template.yaml");
        let entry = function_entry(template, Some(crate::FUNCTION)).expect("the function's entry");
        assert_declared_key_spec(entry.key_spec.as_deref(), crate::FUNCTION, configure);
        assert_eq!(entry.flow, Some(Flow::Transactional));
    }

    /// S11: under the same event id, a change to any field the effect depends on is a
    /// conflict (another fingerprint); a change to the envelope's `time` is not.
    #[test]
    fn s11_every_field_the_effect_depends_on_is_fingerprinted() {
        let sample: serde_json::Value = serde_json::from_str(r#"{"specversion": "1.0", "type": "credit", "source": "/bank", "id": "e-1", "tenantid": "bank-a", "time": "2026-11-30T10:00:00Z", "data": {"account": "credito-17", "amount": 10}}"#).expect("sample");
        lambda_dedup_runtime::testing::assert_configured_fingerprint_covers(
            configure, &sample, DEPENDS_ON,
        );
    }
}
