//! Committing the mark with the effect in one transaction (S5).

use std::sync::Arc;

use dedup_tests::{
    balance, client, commit_with, effect_table, get_item, mark_table, retention, scope, unique,
};
use futures::StreamExt;
use lambda_dedup::{Commit, DedupKey, Effect, Item, Seen};
use lambda_dedup_dynamodb::DynamoStore;

fn credit(table: &str, account: &str, amount: i64) -> Effect {
    Effect::update(table, Item::new().with("account", account))
        .expression("ADD #balance :amount")
        .name("#balance", "balance")
        .value(":amount", amount)
}

/// S5: 1000 commits of one key (16 at a time), each with an `ADD balance :1` effect: exactly one
/// applies, every other one is a duplicate, and the balance ends at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s5_a_thousand_commits_of_one_key_add_the_balance_once() {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let store = Arc::new(DynamoStore::new(
        client.clone(),
        mark_table(&client).await,
        retention(),
    ));
    let key = DedupKey::new(&scope(), "t", &["credito-17", &unique("evt")]);
    let effect = credit(&balances, "credito-17", 1);

    let outcomes: Vec<Commit> = futures::stream::iter(0..1000)
        .map(|_| {
            let (store, key, effect) = (store.clone(), key.clone(), effect.clone());
            async move {
                commit_with(
                    store.as_ref(),
                    &key,
                    None,
                    std::slice::from_ref(&effect),
                    "commit",
                )
                .await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;

    let applied = outcomes.iter().filter(|o| **o == Commit::Applied).count();
    let duplicates = outcomes
        .iter()
        .filter(|o| matches!(o, Commit::Seen(Seen::Duplicate(_))))
        .count();
    assert_eq!(applied, 1, "exactly one commit applies");
    assert_eq!(duplicates, 999, "every other commit is a duplicate");
    assert_eq!(balance(&client, &balances, "credito-17").await, Some(1));
}

/// S5: an effect whose condition fails cancels the whole transaction: no mark is written, so the
/// event is not wrongly remembered as handled, and a later commit can still apply it.
#[tokio::test]
async fn s5_a_failed_effect_condition_leaves_no_mark() {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let marks = mark_table(&client).await;
    let store = DynamoStore::new(client.clone(), marks.clone(), retention());
    let key = DedupKey::new(&scope(), "t", &["debit", &unique("evt")]);

    // A debit that requires sufficient funds on an account that has none.
    let debit = credit(&balances, "acct-1", -5)
        .condition("#balance >= :need")
        .value(":need", 5);
    let keep = Effect::put(
        &balances,
        Item::new().with("account", "acct-2").with("note", "x"),
    );
    let out = commit_with(&store, &key, None, &[keep.clone(), debit], "commit").await;
    assert_eq!(
        out,
        Commit::EffectRejected { index: 1 },
        "the second effect failed"
    );
    assert!(
        store.get(&key).await.expect("get").is_none(),
        "no mark (library view)"
    );
    assert!(
        get_item(&client, &marks, "pk", key.as_str())
            .await
            .is_none(),
        "no mark (raw table)"
    );
    assert!(
        get_item(&client, &balances, "account", "acct-2")
            .await
            .is_none(),
        "the other effect in the transaction was not written either"
    );

    // Funds arrive; the same event now commits.
    let topped = credit(&balances, "acct-1", 10);
    assert_eq!(
        store
            .commit(lambda_dedup::CommitRequest {
                key: &DedupKey::new(&scope(), "t", &["topup", &unique("evt")]),
                fingerprint: None,
                result: None,
                effects: &[topped]
            })
            .await
            .expect("top up"),
        Commit::Applied
    );
    let debit = credit(&balances, "acct-1", -5)
        .condition("#balance >= :need")
        .value(":need", 5);
    assert_eq!(
        commit_with(&store, &key, None, &[debit], "retry").await,
        Commit::Applied
    );
    assert_eq!(balance(&client, &balances, "acct-1").await, Some(5));
}

/// A client, a fresh balance table (keyed `account`), a store on a fresh mark table, and a
/// fresh key of the event kind `kind`.
async fn fresh(kind: &str) -> (aws_sdk_dynamodb::Client, String, DynamoStore, DedupKey) {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let store = dedup_tests::fresh_store(&client).await;
    let key = DedupKey::new(&scope(), "t", &[kind, &unique("evt")]);
    (client, balances, store, key)
}

/// S5: when the mark already exists, the effect is not touched, even one that would overwrite.
#[tokio::test]
async fn s5_an_existing_mark_leaves_the_effect_untouched() {
    let (client, balances, store, key) = fresh("set").await;
    let set = |v: i64| {
        Effect::put(
            &balances,
            Item::new().with("account", "acct").with("balance", v),
        )
    };
    assert_eq!(
        store
            .commit(lambda_dedup::CommitRequest {
                key: &key,
                fingerprint: None,
                result: Some("first"),
                effects: &[set(1)]
            })
            .await
            .expect("first"),
        Commit::Applied
    );
    match store
        .commit(lambda_dedup::CommitRequest {
            key: &key,
            fingerprint: None,
            result: Some("second"),
            effects: &[set(100)],
        })
        .await
        .expect("second")
    {
        Commit::Seen(Seen::Duplicate(mark)) => {
            assert_eq!(
                mark.result.as_deref(),
                Some("first"),
                "S8: the first result is kept"
            )
        }
        other => panic!("expected duplicate, got {other:?}"),
    }
    assert_eq!(balance(&client, &balances, "acct").await, Some(1));
}

/// S5: a commit with several effects over several tables writes all of them with the mark.
#[tokio::test]
async fn s5_all_effects_commit_with_the_mark() {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let journal = effect_table(&client, "entry").await;
    let marks = mark_table(&client).await;
    let store = DynamoStore::new(client.clone(), marks.clone(), retention());
    let key = DedupKey::new(&scope(), "t", &["transfer", &unique("evt")]);
    let effects = [
        credit(&balances, "from", -3),
        credit(&balances, "to", 3),
        Effect::put(
            &journal,
            Item::new().with("entry", key.as_str()).with("amount", 3),
        )
        .condition("attribute_not_exists(entry)"),
    ];
    assert_eq!(
        commit_with(&store, &key, None, &effects, "commit").await,
        Commit::Applied
    );
    assert_eq!(balance(&client, &balances, "from").await, Some(-3));
    assert_eq!(balance(&client, &balances, "to").await, Some(3));
    assert!(
        get_item(&client, &journal, "entry", key.as_str())
            .await
            .is_some()
    );
    let mark = get_item(&client, &marks, "pk", key.as_str())
        .await
        .expect("mark");
    assert_eq!(
        mark["status"].as_s().ok().map(String::as_str),
        Some("COMPLETED")
    );
}

/// Too many effects for one transaction is refused before anything is sent.
#[tokio::test]
async fn s5_more_effects_than_one_transaction_holds_is_refused() {
    let (_, balances, store, key) = fresh("big").await;
    let effects: Vec<Effect> = (0..100)
        .map(|i| credit(&balances, &format!("a{i}"), 1))
        .collect();
    let err = store
        .commit(lambda_dedup::CommitRequest {
            key: &key,
            fingerprint: None,
            result: None,
            effects: &effects,
        })
        .await
        .expect_err("refused");
    assert!(
        matches!(err, lambda_dedup_dynamodb::Error::Invalid(_)),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert!(store.get(&key).await.expect("get").is_none());
}
