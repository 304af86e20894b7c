//! Claiming: S4 (exactly one of N concurrent claims wins), S8 (what the losers see), S11.

use std::sync::Arc;

use dedup_tests::{client, commit_with, mark_table, retention, scope, unique};
use lambda_dedup::{Claim, DedupKey, Fingerprint, MarkStatus, Seen};
use lambda_dedup_dynamodb::DynamoStore;
use tokio::sync::Barrier;

/// S4: 64 concurrent claims of one key, 20 rounds: exactly one is claimed per round, and every
/// other one sees the winner's live lease (S8: in progress, not a duplicate).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s4_exactly_one_of_64_concurrent_claims_wins_in_each_of_20_rounds() {
    let client = client();
    let store = Arc::new(DynamoStore::new(
        client.clone(),
        mark_table(&client).await,
        retention(),
    ));
    for round in 0..20 {
        let key = DedupKey::new(&scope(), "tenant-a", &["round", &unique("event")]);
        let barrier = Arc::new(Barrier::new(64));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (store, key, barrier) = (store.clone(), key.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.claim(&key, None, None).await
                })
            })
            .collect();
        let mut claimed = Vec::new();
        let mut in_progress = 0;
        for t in tasks {
            match t.await.expect("task").expect("claim") {
                Claim::Claimed(lease) => claimed.push(lease),
                Claim::Seen(Seen::InProgress { .. }) => in_progress += 1,
                other => panic!("round {round}: unexpected {other:?}"),
            }
        }
        assert_eq!(claimed.len(), 1, "round {round}: exactly one claim wins");
        assert_eq!(
            in_progress, 63,
            "round {round}: the others see it in progress"
        );
        let mark = store.get(&key).await.expect("get").expect("mark stored");
        assert_eq!(mark.status, MarkStatus::InProgress);
        assert_eq!(
            mark.owner.as_ref(),
            Some(&claimed[0].owner),
            "the winner owns the mark"
        );
    }
}

/// S8: after completion, a claim is a duplicate that carries the stored result, at no extra
/// read (the result comes back with the failed conditional write).
#[tokio::test]
async fn s8_claim_after_completion_is_a_duplicate_with_the_stored_result() {
    let client = client();
    let store = dedup_tests::fresh_store(&client).await;
    let key = DedupKey::new(&scope(), "t", &["e", &unique("id")]);
    let Claim::Claimed(lease) = store.claim(&key, None, None).await.expect("claim") else {
        panic!("first claim must win");
    };
    store
        .complete(&lease, Some(r#"{"receipt":"r-1"}"#))
        .await
        .expect("complete");
    match store.claim(&key, None, None).await.expect("second claim") {
        Claim::Seen(Seen::Duplicate(mark)) => {
            assert_eq!(mark.status, MarkStatus::Completed);
            assert_eq!(mark.result.as_deref(), Some(r#"{"receipt":"r-1"}"#));
            assert!(mark.completed_at.is_some());
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
}

/// S11: same key, different fingerprint is a conflict, whether the mark is completed or in
/// progress; the same fingerprint stays a duplicate / in progress.
#[tokio::test]
async fn s11_same_key_different_fingerprint_is_a_conflict() {
    let client = client();
    let store = dedup_tests::fresh_store(&client).await;
    let fp_a = Fingerprint::of_json(&serde_json::json!({"amount": 10}));
    let fp_b = Fingerprint::of_json(&serde_json::json!({"amount": 99}));

    // In progress, other payload: conflict takes precedence over "in progress".
    let key = DedupKey::new(&scope(), "t", &["e", &unique("id")]);
    assert!(matches!(
        store.claim(&key, Some(&fp_a), None).await.expect("claim"),
        Claim::Claimed(_)
    ));
    match store.claim(&key, Some(&fp_b), None).await.expect("claim b") {
        Claim::Seen(Seen::Conflict {
            stored, offered, ..
        }) => {
            assert_eq!(stored, fp_a);
            assert_eq!(offered, fp_b);
        }
        other => panic!("expected conflict, got {other:?}"),
    }
    assert!(matches!(
        store
            .claim(&key, Some(&fp_a), None)
            .await
            .expect("claim a again"),
        Claim::Seen(Seen::InProgress { .. })
    ));

    // Completed, other payload: conflict, not a duplicate.
    let key = DedupKey::new(&scope(), "t", &["e", &unique("id")]);
    let out = commit_with(&store, &key, Some(&fp_a), &[], "commit").await;
    assert_eq!(out, lambda_dedup::Commit::Applied);
    assert!(matches!(
        commit_with(&store, &key, Some(&fp_b), &[], "commit b").await,
        lambda_dedup::Commit::Seen(Seen::Conflict { .. })
    ));
    assert!(matches!(
        store.claim(&key, Some(&fp_b), None).await.expect("claim b"),
        Claim::Seen(Seen::Conflict { .. })
    ));
    assert!(matches!(
        commit_with(&store, &key, Some(&fp_a), &[], "commit a").await,
        lambda_dedup::Commit::Seen(Seen::Duplicate(_))
    ));
}

/// S1: the consumer and the tenant are part of the key: two consumers each handle an event once,
/// and one tenant's event never suppresses another's with the same id.
#[tokio::test]
async fn s1_consumers_and_tenants_do_not_suppress_each_other() {
    let client = client();
    let store = dedup_tests::fresh_store(&client).await;
    let id = unique("id");
    let billing = lambda_dedup::Scope::new("test", "billing").expect("scope");
    let shipping = lambda_dedup::Scope::new("test", "shipping").expect("scope");
    let keys = [
        DedupKey::new(&billing, "tenant-a", &["e", &id]),
        DedupKey::new(&shipping, "tenant-a", &["e", &id]),
        DedupKey::new(&billing, "tenant-b", &["e", &id]),
    ];
    for key in &keys {
        assert_eq!(
            commit_with(&store, key, None, &[], "commit").await,
            lambda_dedup::Commit::Applied,
            "{key} is its own event"
        );
    }
    for key in &keys {
        assert!(matches!(
            commit_with(&store, key, None, &[], "commit").await,
            lambda_dedup::Commit::Seen(Seen::Duplicate(_))
        ));
    }
}
