//! The Amazon MQ door end to end: the built `example-mq-ledger` binary, unmodified, polls a
//! runtime API of this test's own ([`local_lambda::concurrent`]) and is handed AWS's published
//! ActiveMQ sample (`events/example-activemq-event.json`) grown to a batch, with its marks and
//! balances in the shared local DynamoDB (behind a gate the test can freeze) and its parking
//! queue in the local SQS. With no partial batch response: the poison message is parked and the
//! batch acknowledged; with the store out, the invocation fails (the broker would redeliver the
//! whole batch); the whole batch redelivered credits what was missing and nothing twice.
//!
//! It needs the built functions (`DEDUP_FUNCTIONS_DIR`) and the local SQS (`cargo xtask test`
//! sets both); without them it says so and is skipped.

use std::time::Duration;

use lambda_dedup_conformance::gate::Gate;
use local_lambda::concurrent::Answer;
use serde_json::json;

use crate::built::{self, credit};
use dedup_tests as support;

/// AWS's sample with one message per `(messageID, data)` in place of its own.
fn event(messages: &[(&str, &str)]) -> serde_json::Value {
    built::sample_messages(
        "example-activemq-event.json",
        "/messages",
        messages,
        |m, id| m["messageID"] = json!(id),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activemq_binary_parks_poison_fails_on_transient_and_credits_once_across_redelivery() {
    let Some(dir) = built::functions_on_stack("the Amazon MQ end-to-end test") else {
        return;
    };
    let ddb = local_dynamodb::shared().endpoint();
    let gate = Gate::start(ddb.trim_start_matches("http://").to_owned())
        .await
        .expect("gate");
    let timeouts = [
        ("DEDUP_SDK_ATTEMPT_TIMEOUT_MS", "1000".into()),
        ("DEDUP_SDK_OPERATION_TIMEOUT_MS", "2000".into()),
    ];
    let (api, function, ledger, parking) =
        built::ledger_example_parking(&dir, "mq", Some(gate.endpoint()), timeouts).await;

    let (a, b) = (support::unique("a"), support::unique("b"));
    let run = support::unique("ID:run");
    let id = |n: u32| format!("{run}:{n}");
    let (m1, m2, m3, m4) = (id(1), id(2), id(3), id(4));
    let (c1, c3, c4) = (credit(&a, 1), credit(&b, 2), credit(&a, 5));
    let first = [(m1.as_str(), c1.as_str()), (&m2, "not json"), (&m3, &c3)];
    let answer = api.invoke(event(&first), Duration::from_secs(20)).await;
    built::assert_acknowledged(&answer, "the batch acknowledged, its poison parked");
    assert_eq!(ledger.balance(&a).await, Some(1));
    assert_eq!(ledger.balance(&b).await, Some(2));

    // The store out: the invocation fails, so the broker would redeliver the whole batch.
    gate.freeze(true);
    let second = [(m4.as_str(), c4.as_str())];
    let failed = api.invoke(event(&second), Duration::from_secs(20)).await;
    gate.freeze(false);
    assert!(matches!(failed.answer, Answer::Error(_)), "{failed:?}");
    assert!(failed.answered_in_time(), "{failed:?}");

    // The whole batch again (the broker's redelivery, both batches together): the missing credit
    // applied, the others duplicates.
    let whole = [first.as_slice(), second.as_slice()].concat();
    let again = api.invoke(event(&whole), Duration::from_secs(20)).await;
    built::assert_acknowledged(&again, "acknowledged");
    assert_eq!(ledger.balance(&a).await, Some(6));
    assert_eq!(ledger.balance(&b).await, Some(2), "not twice");
    assert_eq!(ledger.marks().await, 3);
    let parked = built::parked(&parking).await;
    // Parked once per batch that reached it: the reader deduplicates by message id.
    assert_eq!(parked.len(), 2, "{parked:?}");
    for p in &parked {
        let attribute = |n: &str| p.get(n).cloned();
        assert_eq!(attribute("dedup-reason").as_deref(), Some("body_not_json"));
        assert_eq!(attribute("dedup-mq-message-id"), Some(m2.clone()));
    }
    function.stop().await;
}

/// AWS's RabbitMQ sample with one message per `(event-id header, data)` in place of its own, the
/// header in the sample's byte-array shape (`None`: no such header), marked `redelivered`.
fn rabbitmq_event(messages: &[(Option<&str>, &str)], redelivered: bool) -> serde_json::Value {
    built::sample_messages(
        "example-rabbitmq-event.json",
        "/rmqMessagesByQueue/test::~1",
        messages,
        |m, id| {
            if let Some(id) = id {
                m["basicProperties"]["headers"]["event-id"] = json!({"bytes": id.as_bytes()});
            }
            m["redelivered"] = json!(redelivered);
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_binary_parks_poison_acknowledges_the_batch_and_credits_once_across_redelivery() {
    let Some(dir) = built::functions_on_stack("the RabbitMQ end-to-end test") else {
        return;
    };
    let (api, function, ledger, parking) =
        built::ledger_example_parking(&dir, "rabbitmq", None, []).await;

    let (a, b) = (support::unique("a"), support::unique("b"));
    let run = support::unique("e");
    let id = |n: u32| format!("{run}:{n}");
    let (e1, e2, e4) = (id(1), id(2), id(4));
    let (c1, c3, c4) = (credit(&a, 1), credit(&b, 9), credit(&b, 2));
    // A credit; data that is no credit; a credit with no event-id (never guessed); a credit.
    let batch = [
        (Some(e1.as_str()), c1.as_str()),
        (Some(e2.as_str()), "not json"),
        (None, c3.as_str()),
        (Some(e4.as_str()), c4.as_str()),
    ];
    let first = api
        .invoke(rabbitmq_event(&batch, false), Duration::from_secs(20))
        .await;
    built::assert_acknowledged(&first, "the batch acknowledged, its poison parked");
    assert_eq!(ledger.balance(&a).await, Some(1));
    assert_eq!(ledger.balance(&b).await, Some(2));

    // The broker redelivers the batch: each credit a duplicate.
    let again = api
        .invoke(rabbitmq_event(&batch, true), Duration::from_secs(20))
        .await;
    built::assert_acknowledged(&again, "acknowledged");
    assert_eq!(ledger.balance(&a).await, Some(1));
    assert_eq!(ledger.balance(&b).await, Some(2), "not twice");
    assert_eq!(ledger.marks().await, 2);
    let parked = built::parked(&parking).await;
    let mut reasons: Vec<String> = parked
        .iter()
        .map(|p| p.get("dedup-reason").cloned().unwrap_or_default())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "body_not_json",
            "body_not_json",
            "identity_missing",
            "identity_missing"
        ],
        "both poison messages parked, once per batch that reached them: {parked:?}"
    );
    function.stop().await;
}
