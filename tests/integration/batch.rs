//! The batch runner and the two flows against the local DynamoDB (S5, S6, S8, S12–S14).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use dedup_tests::{
    balance, client, cloudevents_spec, credit, credit_plan, effect_table, retention, unique,
    unreachable_client,
};
use lambda_dedup::Message;
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_engine::{Account, Deduplicator, HandlerError, Outcome, run_batch};
use serde_json::json;

/// The leased flow on `m`, its provider call one that only counts itself in `calls`.
async fn leased_counting(
    dedup: &lambda_dedup_engine::LeasedDeduplicator,
    m: &Message,
    calls: &AtomicUsize,
) -> Outcome {
    dedup
        .leased(m, None, |_e, _l| async move {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(None)
        })
        .await
}

/// S5, S8, S14: the same batch (which itself holds duplicates) run twice concurrently, plus a
/// producer retry with new message ids, leaves the balances of a single pass; every delivery is
/// counted once and the accounts close.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s5_s14_replayed_and_interleaved_batches_equal_one_pass() {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let dedup = Arc::new(dedup_tests::fresh_dedup(&client, "batch").await);
    let run = unique("run");
    let acct = |i: usize| format!("{run}-acct-{i}");
    // Five events, each delivered twice within the batch: 10 deliveries.
    let batch: Vec<Message> = (0..10)
        .map(|i| {
            credit(
                &format!("m{i}"),
                &format!("{run}-evt-{}", i % 5),
                &acct(i % 5),
                10,
            )
        })
        .collect();
    let retry: Vec<Message> = (0..5)
        .map(|i| {
            credit(
                &format!("retry-{i}"),
                &format!("{run}-evt-{i}"),
                &acct(i),
                10,
            )
        })
        .collect();

    let go = |batch: Vec<Message>| {
        let dedup = dedup.clone();
        let balances = balances.clone();
        async move {
            run_batch(batch, 4, |m| {
                let dedup = dedup.clone();
                let balances = balances.clone();
                async move { dedup.transactional(&m, credit_plan(&balances)).await }
            })
            .await
        }
    };
    let (a, b, c) = tokio::join!(go(batch.clone()), go(batch), go(retry));
    let mut total = Account::default();
    for report in [&a, &b, &c] {
        assert!(report.account.closes(), "{:?}", report.account);
        assert!(
            report.failures().is_empty(),
            "commits never leave a retry here: {:?}",
            report.failures()
        );
        total.add(&report.account);
    }
    assert_eq!(total.received, 25);
    assert_eq!(total.applied, 5, "each event applied once");
    assert_eq!(total.duplicate, 20);
    for i in 0..5 {
        assert_eq!(balance(&client, &balances, &acct(i)).await, Some(10));
    }
}

/// S2, S11, S12: a malformed message, one without identity, and a payload conflict are reported
/// as failures (so the redrive policy dead-letters them), never acknowledged; the rest apply.
#[tokio::test]
async fn s2_s11_bad_messages_are_failures_and_counted() {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let dedup = dedup_tests::fresh_dedup(&client, "batch").await;
    let run = unique("run");
    let mut no_id = credit("no-id", "x", "a", 1);
    no_id.body =
        br#"{"specversion":"1.0","type":"credit","source":"/bank","tenantid":"acme"}"#.to_vec();
    let batch = vec![
        credit("ok", &format!("{run}-1"), &format!("{run}-a"), 5),
        Message {
            message_id: "garbage".into(),
            body: b"{not json".to_vec(),
            ..Message::default()
        },
        no_id,
        credit("conflict", &format!("{run}-1"), &format!("{run}-a"), 500),
        credit("no-amount", &format!("{run}-2"), &format!("{run}-a"), 0),
    ];
    let mut batch = batch;
    batch[4].body = serde_json::to_vec(&json!({"specversion": "1.0", "type": "credit",
        "source": "/bank", "id": format!("{run}-2"), "tenantid": "acme", "data": {"account": "x"}}))
    .expect("json");
    // Process sequentially so "ok" is committed before its conflicting twin arrives.
    let report = run_batch(batch, 1, |m| {
        let (dedup, balances) = (&dedup, &balances);
        async move { dedup.transactional(&m, credit_plan(balances)).await }
    })
    .await;
    assert_eq!(
        report.failures(),
        ["garbage", "no-id", "conflict", "no-amount"]
    );
    let outcomes: Vec<&str> = report.outcomes().iter().map(|(_, o)| o.label()).collect();
    assert_eq!(
        outcomes,
        ["applied", "rejected", "rejected", "conflict", "rejected"]
    );
    assert!(report.account.closes());
    assert_eq!(
        balance(&client, &balances, &format!("{run}-a")).await,
        Some(5),
        "the conflicting payload was not applied"
    );
}

/// S6, S8: eight concurrent deliveries of one event through the leased flow make exactly one
/// external call; the others are retries (in progress) and, once it completed, duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s6_leased_flow_calls_out_once_for_concurrent_duplicates() {
    let client = client();
    let dedup = dedup_tests::fresh_dedup(&client, "batch")
        .await
        .with_provider_key_retention(std::time::Duration::from_secs(86_400));
    let calls = AtomicUsize::new(0);
    let id = unique("pay");
    let batch: Vec<Message> = (0..8)
        .map(|i| credit(&format!("m{i}"), &id, "a", 1))
        .collect();
    let report = run_batch(batch.clone(), 8, |m| {
        let (dedup, calls) = (&dedup, &calls);
        async move {
            dedup
                .leased(&m, None, |_event, lease| async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Ok(Some(format!("receipt for {}", lease.idempotency_key())))
                })
                .await
        }
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one external call");
    assert_eq!(report.account.applied, 1);
    assert_eq!(
        report.account.applied + report.account.retry + report.account.duplicate,
        8
    );
    assert!(report.account.closes());

    // Redelivery of the retried ones: duplicates now, still one call.
    let again: Vec<Message> = batch
        .into_iter()
        .filter(|m| report.failures().contains(&m.message_id.as_str()))
        .collect();
    let n = again.len() as u64;
    let report = run_batch(again, 8, |m| {
        let (dedup, calls) = (&dedup, &calls);
        async move { leased_counting(dedup, &m, calls).await }
    })
    .await;
    assert_eq!(report.account.duplicate, n);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// S6: a failed call releases the claim, and the retry calls again with the same idempotency key.
#[tokio::test]
async fn s6_a_failed_call_is_released_and_retried_with_the_same_idempotency_key() {
    let client = client();
    let dedup = dedup_tests::fresh_dedup(&client, "batch")
        .await
        .with_provider_key_retention(std::time::Duration::from_secs(86_400));
    let keys = Mutex::new(Vec::new());
    let m = credit("m1", &unique("pay"), "a", 1);
    for attempt in 0..2 {
        let outcome = dedup
            .leased(&m, None, |_e, lease| {
                let keys = &keys;
                async move {
                    keys.lock().expect("lock").push(lease.idempotency_key());
                    if attempt == 0 {
                        Err(HandlerError::transient("provider 503"))
                    } else {
                        Ok(Some("receipt".into()))
                    }
                }
            })
            .await;
        let expected = if attempt == 0 { "retry" } else { "applied" };
        assert_eq!(outcome.label(), expected);
    }
    let keys = keys.into_inner().expect("lock");
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1]);
}

/// S13: with the store unreachable, nothing is acknowledged and no external call is made.
#[tokio::test]
async fn s13_store_outage_fails_closed() {
    let dead = unreachable_client();
    let dedup = Deduplicator::new(
        cloudevents_spec("batch"),
        DynamoStore::new(dead, "marks", retention()),
    )
    .with_provider_key_retention(std::time::Duration::from_secs(86_400));
    let calls = AtomicUsize::new(0);
    let batch: Vec<Message> = (0..5)
        .map(|i| credit(&format!("m{i}"), &format!("evt-{i}"), "a", 1))
        .collect();
    let report = run_batch(batch.clone(), 5, |m| {
        let (dedup, calls) = (&dedup, &calls);
        async move {
            if m.message_id.ends_with(['0', '1', '2']) {
                dedup.transactional(&m, credit_plan("balances")).await
            } else {
                leased_counting(dedup, &m, calls).await
            }
        }
    })
    .await;
    assert_eq!(
        report.failures().len(),
        5,
        "every message is left for redelivery"
    );
    assert_eq!(report.account.retry, 5);
    assert!(report.account.closes());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no external call without a claim"
    );
    assert!(
        report
            .outcomes()
            .iter()
            .all(|(_, o)| matches!(o, Outcome::Retry { .. }))
    );
}
