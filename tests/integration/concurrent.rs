//! Lambda Managed Instances: one execution environment runs several invocations at once, all
//! sharing one handler (`lambda_runtime::run_concurrent`, `AWS_LAMBDA_MAX_CONCURRENCY`). The
//! built `ledger-projector` binary, unmodified, polls a runtime API that hands out many
//! invocations together ([`local_lambda::concurrent`]): the same event in several invocations
//! at once, different events, and the store frozen mid-way. Each event's effect happens once
//! (S4, S5), every invocation answers before its own deadline — not another's — with what is
//! unfinished reported for redelivery (S12), and each prints exactly one EMF line (S14).
//!
//! It needs the built functions (`DEDUP_FUNCTIONS_DIR`, which `cargo xtask test` sets); without
//! them it says so and is skipped. The DynamoDB is this test binary's own, behind a proxy the
//! test can freeze (connections accepted, nothing forwarded), so no other test is disturbed.

use std::time::Duration;

use lambda_dedup_conformance::gate::Gate;
use local_lambda::concurrent::{Answer, ConcurrentApi, Invocation};

/// The deadline margin the function is given: the cut before each invocation's deadline.
const MARGIN: Duration = Duration::from_millis(1000);

/// An SQS event of one credit record per `(message id, event id, account, amount)`, in the
/// shape of AWS's sample (`events/ledger-credit.json`).
fn sqs_event(credits: &[(&str, &str, &str, i64)]) -> serde_json::Value {
    let sample: serde_json::Value = serde_json::from_str(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../events/ledger-credit.json"
    )))
    .expect("the sample event");
    let records: Vec<serde_json::Value> = credits
        .iter()
        .map(|(message_id, id, account, amount)| {
            let mut record = sample["Records"][0].clone();
            record["messageId"] = (*message_id).into();
            record["body"] = serde_json::json!({"specversion": "1.0", "type": "credit",
                "source": "/bank", "id": id, "tenantid": "acme",
                "data": {"account": account, "amount": amount}})
            .to_string()
            .into();
            record
        })
        .collect();
    serde_json::json!({ "Records": records })
}

/// The record ids an invocation reported failed (none when it answered no response at all:
/// then every record of it counts as failed, as Lambda's poller counts them).
fn failed(invocation: &Invocation, event: &serde_json::Value) -> Vec<String> {
    match &invocation.answer {
        Answer::Response(r) => r["batchItemFailures"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_owned))
            })
            .into_iter()
            .flatten()
            .collect(),
        _ => event["Records"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["messageId"].as_str().map(str::to_owned))
            .collect(),
    }
}

/// Invokes every event at once, `timeouts[i]` for event `i`.
async fn all_at_once(
    api: &ConcurrentApi,
    events: &[serde_json::Value],
    timeouts: &[Duration],
) -> Vec<Invocation> {
    let calls = events
        .iter()
        .zip(timeouts)
        .map(|(e, t)| api.invoke(e.clone(), *t));
    futures::future::join_all(calls).await
}

/// Redelivers each event until its invocation reports nothing failed, as the queue would (at
/// most `rounds` times); returns the invocations made.
async fn until_done(api: &ConcurrentApi, events: &[serde_json::Value], rounds: usize) -> usize {
    let mut pending: Vec<serde_json::Value> = events.to_vec();
    let mut made = 0;
    for _ in 0..rounds {
        if pending.is_empty() {
            break;
        }
        let timeouts = vec![Duration::from_secs(10); pending.len()];
        let answers = all_at_once(api, &pending, &timeouts).await;
        made += answers.len();
        pending = pending
            .into_iter()
            .zip(&answers)
            .filter(|(e, a)| !failed(a, e).is_empty())
            .map(|(e, _)| e)
            .collect();
    }
    assert!(
        pending.is_empty(),
        "still failing after {rounds} deliveries: {pending:?}"
    );
    made
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_invocations_in_one_environment_apply_each_event_once_within_their_own_deadlines()
 {
    let Some(dir) = crate::built::functions_dir("concurrent invocations") else {
        return;
    };
    let ddb = local_dynamodb::shared();
    let upstream = ddb.endpoint().trim_start_matches("http://").to_owned();
    let gate = Gate::start(upstream).await.expect("gate");
    let ledger = crate::built::Ledger::tables(&ddb.endpoint()).await;
    let (api, function) = crate::built::Built::start(
        format!("{dir}/ledger-projector"),
        "ledger-projector",
        gate.endpoint(),
        ledger.vars("managed").into_iter().chain([
            ("AWS_LAMBDA_MAX_CONCURRENCY", "8".into()),
            ("DEDUP_DEADLINE_MARGIN_MS", MARGIN.as_millis().to_string()),
            // Longer than any deadline here: the deadline, not the SDK, ends a frozen call.
            ("DEDUP_SDK_OPERATION_TIMEOUT_MS", "60000".into()),
            ("DEDUP_SDK_ATTEMPT_TIMEOUT_MS", "60000".into()),
        ]),
    )
    .await;

    // The same event in four invocations at once, four other events beside them.
    let mut events: Vec<serde_json::Value> = (0..4)
        .map(|_| sqs_event(&[("m-1", "e-1", "a-1", 10)]))
        .collect();
    for n in 2..6i64 {
        let (m, e, a) = (format!("m-{n}"), format!("e-{n}"), format!("a-{n}"));
        events.push(sqs_event(&[(&m, &e, &a, n)]));
    }
    let first = all_at_once(&api, &events, &[Duration::from_secs(10); 8]).await;
    for i in &first {
        assert!(i.answered_in_time(), "{i:?}");
        assert!(matches!(i.answer, Answer::Response(_)), "{i:?}");
    }
    assert!(
        api.most_in_flight() > 1,
        "the environment ran the invocations at once (most in flight: {})",
        api.most_in_flight()
    );
    let mut invocations = first.len();
    // What a concurrent duplicate reported failed comes back, as the queue redelivers it.
    let retried: Vec<serde_json::Value> = events
        .iter()
        .zip(&first)
        .filter(|(e, i)| !failed(i, e).is_empty())
        .map(|(e, _)| e.clone())
        .collect();
    invocations += until_done(&api, &retried, 5).await;

    // The store frozen mid-way: four invocations, each with its own deadline, all at once.
    gate.freeze(true);
    let frozen: Vec<serde_json::Value> = (6..10i64)
        .map(|n| {
            let (m, e, a) = (format!("m-{n}"), format!("e-{n}"), format!("a-{n}"));
            sqs_event(&[(&m, &e, &a, n)])
        })
        .collect();
    let timeouts: Vec<Duration> = (0..4u64).map(|k| Duration::from_secs(3 + k)).collect();
    let cut = all_at_once(&api, &frozen, &timeouts).await;
    gate.freeze(false);
    invocations += cut.len();
    for (i, e) in cut.iter().zip(&frozen) {
        assert!(
            i.answered_in_time(),
            "answered after its own deadline: {i:?}"
        );
        let answered = i.answered_at.expect("answered");
        let early = i.deadline.duration_since(answered).unwrap_or_default();
        assert!(
            early <= MARGIN + Duration::from_millis(300),
            "an invocation cut at its own deadline, not another's ({early:?} before it): {i:?}"
        );
        assert_eq!(
            failed(i, e).len(),
            1,
            "the unfinished record reported: {i:?}"
        );
    }
    invocations += until_done(&api, &frozen, 5).await;

    // One effect per event, and a mark per event.
    assert_eq!(ledger.balance("acme/a-1").await, Some(10));
    for n in 2..10i64 {
        let account = format!("acme/a-{n}");
        assert_eq!(ledger.balance(&account).await, Some(n), "{account}");
    }
    assert_eq!(ledger.marks().await, 9);

    // One EMF line per invocation.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let emf = function.stop().await.len();
    assert_eq!(emf, invocations, "one EMF line per invocation");
}
