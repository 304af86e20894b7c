//! The DynamoDB store's ownership paths beyond the conformance suite: the cases mutation
//! testing (`cargo xtask mutants dynamodb`, docs/RELIABILITY.md) found no test failing on —
//! what a claim that meets a live lease sends, the commit's bound on effects, how the batch
//! commit cuts its rounds (items, estimated bytes, one write per item, the bound on rounds in
//! flight, a round refused as a whole), and `get_many`. On the same local DynamoDB as the
//! suite (`local::client`), counted where it matters through the metering proxy.

use std::time::Duration;

use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Effect, Item, MarkStore, Retention, Seen, StoreError,
};
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

/// `n` credits of one, each to its own item of `table` (`{prefix}{i}`).
fn credits(table: &str, prefix: &str, n: usize) -> Vec<Effect> {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}{i}");
            Effect::add(table, Item::new().with("id", id.as_str()), "balance", 1)
        })
        .collect()
}

/// A store and a fresh effect table (key `id`), both through a metering proxy that holds each
/// request `delay`.
async fn metered(delay: Duration) -> (Meter, DynamoStore, String) {
    let meter = Meter::start(&local::endpoint(), delay).expect("the meter");
    let client = local::client_at(&meter.endpoint());
    let store = store(client.clone()).await;
    let table = lambda_dedup_conformance::unique("effects");
    provision::create_table(&client, &table, "id", false)
        .await
        .expect("an effect table");
    (meter, store, table)
}

/// The `TransactWriteItems` the meter has counted.
fn transactions(meter: &Meter) -> u64 {
    let usage = meter.usage();
    usage
        .by_operation
        .get("TransactWriteItems")
        .copied()
        .unwrap_or(0)
}

/// `keys[i]` with `effects[i]`.
fn requests<'a>(keys: &'a [DedupKey], effects: &'a [Vec<Effect>]) -> Vec<CommitRequest<'a>> {
    keys.iter()
        .zip(effects)
        .map(|(k, e)| request(k, None, None, e))
        .collect()
}

/// Commits `keys[i]` with `effects[i]` as one batch, asserts each request was applied, and
/// answers how many `TransactWriteItems` the batch took.
async fn transactions_to_apply_all(
    meter: &Meter,
    store: &DynamoStore,
    keys: &[DedupKey],
    effects: &[Vec<Effect>],
) -> u64 {
    let before = transactions(meter);
    let results = store.commit_batch(&requests(keys, effects)).await;
    assert!(
        results.iter().all(|r| matches!(r, Ok(Commit::Applied))),
        "{results:?}"
    );
    transactions(meter) - before
}

#[tokio::test]
async fn a_batch_fills_one_transaction_to_exactly_its_hundred_items() {
    // Requests of distinct items share a transaction while their items fit DynamoDB's 100
    // (and the estimated bytes): 10 + 45 + 45 items are one `TransactWriteItems`.
    let (meter, store, table) = metered(Duration::ZERO).await;
    let keys: Vec<DedupKey> = (0..3).map(|i| key(&format!("fill{i}"))).collect();
    let effects: Vec<Vec<Effect>> = [9, 44, 44]
        .iter()
        .enumerate()
        .map(|(i, n)| credits(&table, &format!("r{i}-"), *n))
        .collect();
    assert_eq!(
        transactions_to_apply_all(&meter, &store, &keys, &effects).await,
        1,
        "one transaction of 100 items"
    );
}

#[tokio::test]
async fn a_batch_holding_one_key_twice_commits_it_once_in_two_transactions() {
    // Two writes of one mark never share a transaction (DynamoDB refuses that as a whole): the
    // second waits for a later round and finds the first's mark.
    let (meter, store, table) = metered(Duration::ZERO).await;
    let k = key("twice");
    let keys = [k.clone(), k];
    let effects = [credits(&table, "twice", 1), credits(&table, "twice", 1)];
    let before = transactions(&meter);
    let results = store.commit_batch(&requests(&keys, &effects)).await;
    assert!(matches!(results[0], Ok(Commit::Applied)), "{results:?}");
    assert!(
        matches!(results[1], Ok(Commit::Seen(Seen::Duplicate(_)))),
        "{results:?}"
    );
    assert_eq!(transactions(&meter) - before, 2, "one round each");
}

#[tokio::test]
async fn a_bounded_batch_keeps_no_more_rounds_in_flight_than_its_bound() {
    // 51 + 51 items need two rounds: one after the other under a bound of 1, together under 2
    // (through the store trait, as the engine calls it).
    let (meter, store, table) = metered(Duration::from_millis(300)).await;
    for bound in [1, 2] {
        let keys: Vec<DedupKey> = (0..2).map(|i| key(&format!("bound{bound}-{i}"))).collect();
        let effects: Vec<Vec<Effect>> = (0..2)
            .map(|i| credits(&table, &format!("b{bound}-{i}-"), 50))
            .collect();
        let batch = requests(&keys, &effects);
        meter.reset();
        let results = MarkStore::commit_batch_bounded(&store, &batch, bound).await;
        assert!(
            results.iter().all(|r| matches!(r, Ok(Commit::Applied))),
            "{results:?}"
        );
        let usage = meter.usage();
        assert_eq!(
            usage.by_operation.get("TransactWriteItems"),
            Some(&2),
            "{bound}"
        );
        assert_eq!(
            usage.peak_in_flight, bound as u64,
            "in flight under {bound}"
        );
    }
}

#[tokio::test]
async fn a_round_refused_as_a_whole_is_halved_until_the_culprit_stands_alone() {
    // A malformed expression is refused for the whole transaction, naming no position: the
    // round is split until the request to blame is refused alone, and the others commit.
    let (meter, store, table) = metered(Duration::ZERO).await;
    let keys: Vec<DedupKey> = (0..4).map(|i| key(&format!("whole{i}"))).collect();
    let mut effects: Vec<Vec<Effect>> = (0..4)
        .map(|i| credits(&table, &format!("w{i}-"), 1))
        .collect();
    effects[2] = vec![Effect::update(&table, Item::new().with("id", "w2")).expression("SET")];
    let before = transactions(&meter);
    let results = store.commit_batch(&requests(&keys, &effects)).await;
    for i in [0, 1, 3] {
        assert!(
            matches!(results[i], Ok(Commit::Applied)),
            "{i}: {results:?}"
        );
    }
    assert!(
        matches!(results[2], Err(StoreError::Refused { .. })),
        "{results:?}"
    );
    // The four together, then halves [0, 1] and [2, 3], then [2] and [3] alone.
    assert_eq!(transactions(&meter) - before, 5);
}

#[tokio::test]
async fn a_batch_splits_its_rounds_by_their_estimated_bytes() {
    // Three requests of five 300 KB items each: 16 items, but 4.5 MB, over what a transaction
    // may carry (4 MB). The estimate puts two in one round (3 MB) and the third in the next.
    let (meter, store, table) = metered(Duration::ZERO).await;
    let blob = "x".repeat(300_000);
    let keys: Vec<DedupKey> = (0..3).map(|i| key(&format!("bytes{i}"))).collect();
    let effects: Vec<Vec<Effect>> = (0..3)
        .map(|i| {
            (0..5)
                .map(|j| {
                    let id = format!("big{i}-{j}");
                    let item = Item::new()
                        .with("id", id.as_str())
                        .with("blob", blob.as_str());
                    Effect::put(&table, item)
                })
                .collect()
        })
        .collect();
    assert_eq!(
        transactions_to_apply_all(&meter, &store, &keys, &effects).await,
        2,
        "3 MB, then 1.5 MB"
    );
}

#[tokio::test]
async fn get_many_answers_each_key_in_order_with_its_live_mark() {
    // The duplicate pre-filter's read (`BatchGetItem`): one answer per key, in order, a key
    // asked twice answered twice; inherent and through the store trait.
    let store = store(local::client()).await;
    let (a, absent, b) = (key("many-a"), key("many-absent"), key("many-b"));
    for k in [&a, &b] {
        let out = store.commit(request(k, None, None, &[])).await;
        assert_eq!(out.expect("commit"), Commit::Applied);
    }
    let keys = [&a, &absent, &b, &a];
    let inherent = store.get_many(&keys).await.expect("get_many");
    let via_trait = MarkStore::get_many(&store, &keys).await.expect("get_many");
    for found in [inherent, via_trait] {
        let names: Vec<Option<&str>> = found
            .iter()
            .map(|m| m.as_ref().map(|m| m.key.as_str()))
            .collect();
        assert_eq!(
            names,
            [Some(a.as_str()), None, Some(b.as_str()), Some(a.as_str())]
        );
    }
}
