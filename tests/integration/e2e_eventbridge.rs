//! The EventBridge door end to end: the built `example-eventbridge-ledger` binary, unmodified,
//! polls a runtime API of this test's own ([`local_lambda::concurrent`]) and is handed AWS's
//! published sample (`events/example-eventbridge-event-obj.json`) with a credit as its `detail`,
//! its marks and balances in the shared local DynamoDB. The event is applied once; the
//! producer's retried `PutEvents` entry (a new `id`, the same `detail`) is a duplicate; an event
//! whose detail lacks the identity is answered `NotAcknowledged` (an invocation error: Lambda's
//! async retries, then the on-failure destination) with nothing applied; each invocation prints
//! one EMF line.
//!
//! It needs the built functions (`DEDUP_FUNCTIONS_DIR`; `cargo xtask test` sets it); without
//! them it says so and is skipped.

use std::time::Duration;

use local_lambda::concurrent::Answer;
use serde_json::json;

use crate::built;
use dedup_tests as support;

/// AWS's sample with `id` and `detail` in place of its own.
fn event(id: &str, detail: serde_json::Value) -> serde_json::Value {
    let mut sample = built::sample("example-eventbridge-event-obj.json");
    sample["id"] = json!(id);
    sample["detail"] = detail;
    sample
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_binary_credits_once_across_a_producer_retry_and_refuses_a_poison_event() {
    let Some(dir) = built::functions_on_stack("the EventBridge end-to-end test") else {
        return;
    };
    let (api, function, ledger) = built::ledger_example(&dir, "eventbridge", None, []).await;

    let (a, b) = (support::unique("a"), support::unique("b"));
    let credit = support::unique("credit");
    let detail = json!({"credit_id": credit, "account": a, "amount": 7});
    let first = api
        .invoke(
            event(&support::unique("put-1"), detail.clone()),
            Duration::from_secs(20),
        )
        .await;
    built::assert_acknowledged(&first, "acknowledged");
    assert_eq!(ledger.balance(&a).await, Some(7));

    // The producer's retried put: EventBridge gives the entry a new id; the detail is the same.
    let retry = api
        .invoke(
            event(&support::unique("put-2"), detail),
            Duration::from_secs(20),
        )
        .await;
    built::assert_acknowledged(&retry, "a duplicate, acknowledged");
    assert_eq!(ledger.balance(&a).await, Some(7), "not twice");

    // A poison event: its detail has no identity. Not acknowledged, so Lambda retries it and
    // then hands it to the on-failure destination; nothing applied.
    let poison_id = support::unique("put-poison");
    let poison = api
        .invoke(
            event(&poison_id, json!({"account": b, "amount": 3})),
            Duration::from_secs(20),
        )
        .await;
    let Answer::Error(error) = &poison.answer else {
        panic!("the poison event acknowledged: {poison:?}");
    };
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("1 of 1 records not acknowledged")
            && message.contains(&poison_id)
            && message.contains("rejected"),
        "{error}"
    );
    assert_eq!(ledger.balance(&b).await, None);
    assert_eq!(ledger.marks().await, 1);

    tokio::time::sleep(Duration::from_millis(300)).await;
    let emf = function.stop().await;
    assert_eq!(emf.len(), 3, "one EMF line per invocation: {emf:?}");
    let sum = |metric: &str| -> u64 { emf.iter().filter_map(|v| v[metric].as_u64()).sum() };
    assert_eq!(
        ["Received", "Applied", "Duplicate", "Rejected"].map(sum),
        [3, 1, 1, 1],
        "each event counted by its outcome: {emf:?}"
    );
}
