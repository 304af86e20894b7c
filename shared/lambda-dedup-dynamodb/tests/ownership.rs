//! The DynamoDB store's ownership paths beyond the conformance suite: the cases mutation
//! testing (`cargo xtask mutants dynamodb`, docs/RELIABILITY.md) found no test failing on —
//! what a claim that meets a live lease sends, and the commit's bound on effects. On the same
//! local DynamoDB as the suite (`local::client`).

use std::time::Duration;

use lambda_dedup::{Claim, Commit, DedupKey, Effect, Item, Retention, Seen, StoreError};
use lambda_dedup_conformance::request;
use lambda_dedup_dynamodb::{DynamoStore, MAX_EFFECTS, provision};
use local_dynamodb::meter::Meter;

mod local;

/// A store on a fresh mark table, through `client`.
async fn store(client: aws_sdk_dynamodb::Client) -> DynamoStore {
    let marks = local::mark_table(&client).await;
    let retention = Retention::unchecked(Duration::from_secs(3_600)).expect("retention");
    DynamoStore::new(client, marks, retention)
}

fn key(name: &str) -> DedupKey {
    DedupKey::from_stored(lambda_dedup_conformance::unique(&format!(
        "ownership#{name}"
    )))
}

#[tokio::test]
async fn a_claim_that_meets_a_live_lease_sends_one_write() {
    // The takeover write is for a lease that has ended: a claim that meets one still running
    // learns so from the first write's answer, and sends nothing more (one write unit, not two).
    let meter = Meter::start(&local::endpoint(), Duration::ZERO).expect("the meter");
    let store = store(local::client_at(&meter.endpoint())).await;
    let k = key("live");
    let first = store.claim(&k, None, None).await.expect("claim");
    assert!(matches!(first, Claim::Claimed(_)), "{first:?}");
    let before = meter.usage().requests;
    let second = store.claim(&k, None, None).await.expect("claim");
    assert!(
        matches!(second, Claim::Seen(Seen::InProgress { .. })),
        "{second:?}"
    );
    assert_eq!(meter.usage().requests - before, 1, "one UpdateItem");
}

#[tokio::test]
async fn a_commit_holds_the_mark_and_exactly_max_effects_not_one_more() {
    let client = local::client();
    let store = store(client.clone()).await;
    let table = lambda_dedup_conformance::unique("effects");
    provision::create_table(&client, &table, "id", false)
        .await
        .expect("an effect table");
    let effects: Vec<Effect> = (0..=MAX_EFFECTS)
        .map(|i| Effect::put(&table, Item::new().with("id", format!("i{i}").as_str())))
        .collect();
    let full = key("full");
    let applied = store
        .commit(request(&full, None, None, &effects[..MAX_EFFECTS]))
        .await;
    assert_eq!(
        applied.expect("a commit of MAX_EFFECTS effects"),
        Commit::Applied
    );
    let over = key("over");
    let refused = store.commit(request(&over, None, None, &effects)).await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );
    assert!(
        store.get(&over).await.expect("get").is_none(),
        "nothing written"
    );
}
