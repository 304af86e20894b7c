//! The function as `main` wires it, on the memory store, through the public API only.

use super::*;
use lambda_dedup_runtime::Value;
use lambda_dedup_runtime::testing::events::sqs_event;
use lambda_dedup_runtime::testing::{attribute, env, failed_ids, service_on_memory};

fn credit(event_id: &str, tenant: &str, amount: i64) -> String {
    serde_json::json!({"envelope": {"event_id": event_id, "tenant": tenant},
        "data": {"account": "a-1", "amount": amount}})
    .to_string()
}

#[tokio::test]
async fn each_envelope_is_credited_once_in_its_tenant_and_a_stranger_is_failed() {
    let env = env(&[("BALANCES_TABLE", "balances")]);
    let balances = [("balances", "account")];
    let (service, store) =
        service_on_memory(&env, "custom-door", &balances, service).expect("service");
    // e1 sent twice (two SQS messages, one event), e1 again in another tenant, and a body that
    // is not the envelope.
    let (twice, other) = (credit("e1", "acme", 10), credit("e1", "globex", 7));
    let event = sqs_event(&[&twice, &twice, &other, r#"{"data": {}}"#]);
    let response = service.call_with(event).await.expect("handled");
    assert_eq!(failed_ids(response), ["m3"]);
    let again = service
        .call_with(sqs_event(&[&twice]))
        .await
        .expect("handled");
    assert!(failed_ids(again).is_empty(), "a redelivery is a duplicate");
    let balance = |account| attribute(&store, "balances", ("account", account), "balance");
    assert_eq!(balance("acme/a-1"), Some(Value::N("10".into())));
    assert_eq!(balance("globex/a-1"), Some(Value::N("7".into())));
}

/// The door counts by the account (`Door::metrics`, not overridden): one EMF line per
/// invocation, each record counted once by its outcome, the refused envelope by its reason.
#[tokio::test]
async fn each_invocation_is_accounted_in_one_emf_line() {
    let env = env(&[("BALANCES_TABLE", "balances")]);
    let balances = [("balances", "account")];
    let (service, _) = service_on_memory(&env, "custom-door", &balances, service).expect("service");
    let twice = credit("e1", "acme", 10);
    lambda_dedup_runtime::emf::capture();
    let event = sqs_event(&[&twice, &twice, r#"{"data": {}}"#]);
    service.call_with(event).await.expect("handled");
    let lines = lambda_dedup_runtime::emf::take_captured();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line: serde_json::Value = serde_json::from_str(&lines[0]).expect("an EMF line");
    let counts = ["Received", "Applied", "Duplicate", "Retry", "Rejected"].map(|n| &line[n]);
    assert_eq!(counts, [3, 1, 1, 0, 1], "{line}");
    assert_eq!(line["RejectedEnvelopeMalformed"], 1, "{line}");
    assert_eq!(line["Function"], "custom-door");
}
