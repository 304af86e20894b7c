//! Batch-transaction mode and the warm cache against the local DynamoDB: the same guarantees as
//! per-message commits (S5, S8, S11, S12), with fewer DynamoDB calls.

use dedup_tests::{
    Metered, balance, client, cloudevents_spec, credit, credit_or_refused_plan, credits,
    effect_table, mark_table, retention, unique,
};
use lambda_dedup::Message;
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_engine::{Deduplicator, Outcome, run_batch_transactional};

/// The test's store and the proxy that counts its requests.
struct Counted {
    store: DynamoStore,
    meter: Metered,
}

impl Counted {
    /// DynamoDB requests the store has sent.
    fn calls(&self) -> u64 {
        self.meter.calls()
    }
}

async fn setup() -> (aws_sdk_dynamodb::Client, String, Deduplicator, Counted) {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let meter = Metered::start();
    let store = DynamoStore::new(meter.client(), mark_table(&client).await, retention());
    let dedup = Deduplicator::new(cloudevents_spec("batch-mode"), store.clone());
    (client, balances, dedup, Counted { store, meter })
}

/// The balances of the run's accounts `accounts` (each `<run>-<account>`), in that order.
async fn balances_of(
    client: &aws_sdk_dynamodb::Client,
    balances: &str,
    run: &str,
    accounts: &[&str],
) -> Vec<Option<i64>> {
    let mut found = Vec::new();
    for account in accounts {
        found.push(balance(client, balances, &format!("{run}-{account}")).await);
    }
    found
}

fn labels(outcomes: &[(String, Outcome)]) -> Vec<&'static str> {
    outcomes.iter().map(|(_, o)| o.label()).collect()
}

/// S5: ten new events touching ten items commit in one `TransactWriteItems`.
#[tokio::test]
async fn s5_a_batch_of_new_events_commits_in_one_transaction() {
    let (client, balances, dedup, store) = setup().await;
    let run = unique("b1");
    let batch = credits(&run, 10, |i| format!("{run}-a{i}"), |i| 1 + i);
    let report =
        run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(
        report.account.applied,
        10,
        "{:?}",
        labels(report.outcomes())
    );
    assert_eq!(store.calls(), 1, "one DynamoDB call for the whole batch");
    for i in 0..10 {
        assert_eq!(
            balance(&client, &balances, &format!("{run}-a{i}")).await,
            Some(1 + i)
        );
    }
}

/// S5, S8: events that touch one item (five credits to one account, one event twice) cannot
/// share a transaction; they go in rounds, and every event still applies exactly once.
#[tokio::test]
async fn s5_events_touching_one_item_are_split_into_rounds() {
    let (client, balances, dedup, store) = setup().await;
    let run = unique("b2");
    let mut batch: Vec<Message> = (0..8)
        .map(|i| {
            credit(
                &format!("m{i}"),
                &format!("{run}-{i}"),
                &format!("{run}-{}", if i < 5 { "A" } else { "B" }),
                10,
            )
        })
        .collect();
    batch.push(credit(
        "again-0",
        &format!("{run}-0"),
        &format!("{run}-A"),
        10,
    ));
    batch.push(credit(
        "again-7",
        &format!("{run}-7"),
        &format!("{run}-B"),
        10,
    ));
    let report =
        run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(report.account.applied, 8, "{:?}", labels(report.outcomes()));
    assert_eq!(report.account.duplicate, 2);
    assert!(report.failures().is_empty());
    // Six operations on account A need six rounds; the duplicate cancels one more. Still fewer
    // calls than messages.
    assert!(
        store.calls() < 10,
        "rounds, not one call per message: {}",
        store.calls()
    );
    assert_eq!(
        balances_of(&client, &balances, &run, &["A", "B"]).await,
        [Some(50), Some(30)]
    );
}

/// S5, S8, S11: in one batch, a duplicate, a conflict and an event whose effect condition fails
/// are split off by their positional cancellation reasons; the others still commit, and the
/// failed event leaves no mark.
#[tokio::test]
async fn s5_s8_s11_a_mixed_batch_splits_off_what_cannot_commit() {
    let (client, balances, dedup, store) = setup().await;
    let run = unique("b3");
    let first = vec![credit("m0", &format!("{run}-x"), &format!("{run}-x"), 7)];
    run_batch_transactional(first, 10, &dedup, credit_or_refused_plan(&balances)).await;
    let before = store.calls();
    let mut batch = vec![
        credit("dup", &format!("{run}-x"), &format!("{run}-x"), 7),
        credit("conflict", &format!("{run}-x"), &format!("{run}-x"), 700),
        credit("no-funds", &format!("{run}-y"), &format!("{run}-y"), 0),
    ];
    batch.extend((0..5).map(|i| {
        credit(
            &format!("n{i}"),
            &format!("{run}-n{i}"),
            &format!("{run}-n{i}"),
            1,
        )
    }));
    let report =
        run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(
        labels(report.outcomes()),
        [
            "duplicate",
            "conflict",
            "retry",
            "applied",
            "applied",
            "applied",
            "applied",
            "applied"
        ]
    );
    assert_eq!(report.failures(), ["conflict", "no-funds"]);
    assert!(
        store.calls() - before <= 3,
        "{} calls",
        store.calls() - before
    );
    assert_eq!(
        balances_of(&client, &balances, &run, &["x", "y"]).await,
        [Some(7), None]
    );
    for i in 0..5 {
        assert_eq!(
            balance(&client, &balances, &format!("{run}-n{i}")).await,
            Some(1)
        );
    }
}

/// S5, S14: the same batch committed three times concurrently in batch mode equals one pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s5_s14_concurrent_replays_in_batch_mode_equal_one_pass() {
    let (client, balances, dedup, _store) = setup().await;
    let run = unique("b4");
    let batch = credits(&run, 10, |i| format!("{run}-a{}", i % 3), |_| 5);
    let p = credit_or_refused_plan(&balances);
    let (a, b, c) = tokio::join!(
        run_batch_transactional(batch.clone(), 10, &dedup, &p),
        run_batch_transactional(batch.clone(), 10, &dedup, &p),
        run_batch_transactional(batch, 10, &dedup, &p),
    );
    let applied = a.account.applied + b.account.applied + c.account.applied;
    let settled = applied + a.account.duplicate + b.account.duplicate + c.account.duplicate;
    assert_eq!(applied, 10, "each event applied once");
    for r in [&a, &b, &c] {
        assert!(r.account.closes());
    }
    // Anything not settled was a retry (a transient conflict between the concurrent
    // transactions), left for redelivery: never applied twice.
    assert_eq!(
        settled + a.account.retry + b.account.retry + c.account.retry,
        30
    );
    for (acct, n) in [(0, 4), (1, 3), (2, 3)] {
        assert_eq!(
            balance(&client, &balances, &format!("{run}-a{acct}")).await,
            Some(5 * n)
        );
    }
}

/// The warm cache answers duplicates it has seen complete with no DynamoDB call; a different
/// payload under a cached key is still a conflict (S11).
#[tokio::test]
async fn warm_cache_answers_known_duplicates_without_dynamodb() {
    let (_client, balances, _dedup, store) = setup().await;
    let dedup =
        Deduplicator::new(cloudevents_spec("batch-mode"), store.store.clone()).with_cache(1000);
    let run = unique("b5");
    let batch = credits(&run, 10, |i| format!("{run}-a{i}"), |_| 1);
    let first =
        run_batch_transactional(batch.clone(), 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(first.account.applied, 10);
    let calls = store.calls();
    let again = run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(again.account.duplicate, 10);
    assert_eq!(
        store.calls(),
        calls,
        "no DynamoDB call for cached duplicates"
    );
    let conflict = vec![credit("c", &format!("{run}-0"), &format!("{run}-a0"), 999)];
    let report =
        run_batch_transactional(conflict, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(labels(report.outcomes()), ["conflict"]);
}

/// S9: the warm cache judges a mark's TTL by the store's clock: once the retention has passed,
/// a cached event counts as absent (a redelivery beyond the horizon is a new event), as the
/// table says.
#[tokio::test]
async fn s9_the_warm_cache_forgets_marks_whose_retention_has_passed() {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let clock = std::sync::Arc::new(lambda_dedup::ManualClock::new(std::time::SystemTime::now()));
    let store = dedup_tests::fresh_store(&client)
        .await
        .with_clock(clock.clone());
    let dedup = Deduplicator::new(cloudevents_spec("batch-mode"), store.clone()).with_cache(100);
    let run = unique("b7");
    let batch = vec![credit("m", &format!("{run}-e"), &format!("{run}-a"), 1)];
    let first =
        run_batch_transactional(batch.clone(), 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(labels(first.outcomes()), ["applied"]);
    let again =
        run_batch_transactional(batch.clone(), 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(labels(again.outcomes()), ["duplicate"], "within retention");
    clock.advance(std::time::Duration::from_secs(3601));
    let late = run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(
        labels(late.outcomes()),
        ["applied"],
        "past retention the cache must not answer duplicate"
    );
}

/// S12: FIFO batches keep per-group order in batch mode: after a group's first failure, its
/// later messages are not processed.
#[tokio::test]
async fn s12_fifo_order_is_kept_in_batch_mode() {
    let (client, balances, dedup, _store) = setup().await;
    let run = unique("b6");
    let mut batch: Vec<Message> = vec![
        credit("a1", &format!("{run}-a1"), &format!("{run}-A"), 1),
        credit("a2", &format!("{run}-a2"), &format!("{run}-A"), 0), // condition fails: retry
        credit("a3", &format!("{run}-a3"), &format!("{run}-A"), 1),
        credit("b1", &format!("{run}-b1"), &format!("{run}-B"), 1),
    ];
    for m in &mut batch {
        m.group_id = Some(m.message_id[..1].to_owned());
    }
    let report =
        run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    assert_eq!(report.failures(), ["a2", "a3"]);
    assert_eq!(
        balances_of(&client, &balances, &run, &["A", "B"]).await,
        [Some(1), Some(1)]
    );
}
