//! End to end, a store that hangs for longer than the functions' deadline (issue 19): the local
//! DynamoDB is frozen (SIGSTOP: connections are accepted, nothing is answered) while the SQS
//! functions (`ledger-projector`, `payment-dispatcher`), the Kinesis one (`ledger-stream`) and
//! the webhook door (`webhook-receiver`) have work. The local runtime ends an invocation at its
//! function's `Timeout` by killing the instance, as Lambda does (`tests/local-lambda/src/runtime_api.rs`), so
//! an invocation that hangs shows up as a timeout there.
//!
//! The test freezes the store every other test uses, so `cargo xtask test` runs the tests named
//! `e2e_alone_*` on their own, after the others.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use local_dynamodb::kinesis::Kinesis;
use serde_json::json;

use crate::e2e::{ce, env, eventually, keys, ledger_credit, provider_effects, send, stack_is_up};
use crate::e2e_doors::{Delivery, SENDER, header, ledger, now_secs, sender_credit};
use dedup_tests::unique;

/// Longer than every function's timeout (`infra/template.yaml`: 30 s, the webhook's 10 s).
const FREEZE: Duration = Duration::from_secs(36);
/// The webhook receiver's `Timeout`.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Timed-out invocations per function, as the local runtime counts them.
async fn timeouts() -> BTreeMap<String, u64> {
    let url = format!("{}/__timeouts", env("DEDUP_RUNTIME_API"));
    let v = crate::e2e::get_json(&url, "the local runtime API").await;
    serde_json::from_value(v).unwrap_or_default()
}

/// Freezes (`STOP`) or thaws (`CONT`) the local DynamoDB.
fn signal_store(signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(env("DEDUP_DYNAMODB_PID"))
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal} of the local DynamoDB");
}

/// Thaws the store even when an assertion fails while it is frozen.
struct Thaw;

impl Drop for Thaw {
    fn drop(&mut self) {
        signal_store("CONT");
    }
}

/// Issue 19: with the store hung past the deadline, every invocation answers before its deadline
/// (SQS and Kinesis: their records reported for redelivery; the webhook: 503 with
/// `retry-after`), none is ended by the runtime, and once the store is back each event is applied
/// once: balances, event counts and the provider's effect counts.
#[tokio::test]
async fn e2e_alone_a_store_hung_past_the_deadline_is_answered_in_time_and_applied_once() {
    if !stack_is_up() {
        return;
    }
    let watched = [
        "ledger-projector",
        "payment-dispatcher",
        "ledger-stream",
        "webhook-receiver",
    ];
    let before = timeouts().await;

    let account = unique("hung-sqs");
    let credits: Vec<String> = (1..=4)
        .map(|i| ledger_credit("/e2e", &unique("hung-c"), &account, i))
        .collect();
    let payments: Vec<String> = (0..2)
        .map(|_| {
            ce(
                "payment.requested",
                "/e2e",
                &unique("hung-pay"),
                "shop",
                json!({"amount_cents": 700, "currency": "EUR", "customer_ref": "c-9"}),
            )
        })
        .collect();
    let stream_account = unique("hung-kin");
    let records: Vec<String> = (1..=3)
        .map(|i| ledger_credit("/kinesis", &unique("hung-k"), &stream_account, 10 * i))
        .collect();
    let hook_account = unique("hung-wh");
    let hook_id = unique("hung-wh-e");
    let hook_body = sender_credit("/acme-pay", SENDER, &hook_id, &hook_account, 9);

    signal_store("STOP");
    let thaw = Thaw;
    let frozen_at = Instant::now();
    send("DEDUP_QUEUE_LEDGER_PROJECTOR", &credits).await;
    send("DEDUP_QUEUE_PAYMENT_DISPATCHER", &payments).await;
    let kinesis = Kinesis::new(&env("DEDUP_SQS_ENDPOINT"));
    let stream = env("DEDUP_KINESIS_STREAM");
    let mut puts = Vec::new();
    for r in &records {
        let put = kinesis
            .put(&stream, &stream_account, r.as_bytes())
            .await
            .expect("a Kinesis put");
        puts.push(put);
    }
    // The webhook: answered 503 with retry-after before the function's deadline.
    let asked = Instant::now();
    let delivery = Delivery::standard(
        &hook_id,
        &hook_body,
        now_secs(),
        &[&env("DEDUP_WEBHOOK_SECRET")],
    );
    let resp = delivery.response().await;
    let took = asked.elapsed();
    let status = resp.status().as_u16();
    let retry_after = header(&resp, "retry-after");
    assert_eq!(
        (status, retry_after.is_some()),
        (503, true),
        "the webhook while the store hangs, after {took:?}: {}",
        resp.text().await.unwrap_or_default()
    );
    assert!(took < WEBHOOK_TIMEOUT, "answered after {took:?}");

    // The store stays frozen past every deadline; meanwhile the functions keep answering.
    if let Some(left) = FREEZE.checked_sub(frozen_at.elapsed()) {
        tokio::time::sleep(left).await;
    }
    drop(thaw);

    // Back: each event applied once.
    let credited: i64 = (1..=4).sum();
    let (balance, events) = eventually(
        "the SQS credits applied",
        Duration::from_secs(120),
        || async { ledger("t1", &account).await.filter(|(b, _)| *b >= credited) },
    )
    .await;
    assert_eq!((balance, events), (credited, 4), "each credit once");
    let pay_keys = keys("payment-dispatcher", &payments);
    let effects = eventually("the payments made", Duration::from_secs(120), || async {
        let effects = provider_effects().await;
        pay_keys
            .iter()
            .all(|k| effects.contains_key(&k.idempotency_key()))
            .then_some(effects)
    })
    .await;
    for k in &pay_keys {
        assert_eq!(
            effects.get(&k.idempotency_key()),
            Some(&1),
            "one payment per event"
        );
    }
    // The sender's retry after the 503: recorded now, and forwarded to the ledger once.
    let (status, _, answer) =
        eventually("the webhook retried", Duration::from_secs(60), || async {
            let d = Delivery::standard(
                &hook_id,
                &hook_body,
                now_secs(),
                &[&env("DEDUP_WEBHOOK_SECRET")],
            );
            Some(d.post().await).filter(|(s, _, _)| *s == 200)
        })
        .await;
    assert_eq!(status, 200, "{answer}");
    let hooked = eventually(
        "the webhook's credit applied",
        Duration::from_secs(120),
        || async { ledger(SENDER, &hook_account).await },
    )
    .await;
    assert_eq!(hooked, (9, 1), "the webhook's event once");

    // Kinesis: every record applied once. Stream triggers retry a transient fault until the
    // record's maximum age, never by a count, so no good record is handed on (S12, S15).
    let got = eventually(
        "the Kinesis records applied",
        Duration::from_secs(120),
        || async {
            ledger("t1", &stream_account)
                .await
                .filter(|(b, _)| *b >= 60)
        },
    )
    .await;
    assert_eq!(got, (60, 3), "each Kinesis record once (10 + 20 + 30)");
    assert_eq!(puts.len(), 3);

    // No invocation was ended by the runtime at its deadline.
    let after = timeouts().await;
    for f in watched {
        assert_eq!(
            after.get(f).copied().unwrap_or(0),
            before.get(f).copied().unwrap_or(0),
            "{f}: invocations timed out (killed at their deadline) while the store hung: {after:?}"
        );
    }
}
