//! Batch-transaction mode with its rounds in flight at once, against the local DynamoDB behind
//! the metering proxy (which holds every request 30 ms, so rounds overlap, and watches which
//! items the writes in flight hold): the rounds of a wave share no item, the bound is kept, and
//! every event is still all or nothing (S5, S12).

use std::time::Duration;

use dedup_tests::{
    balance, client, client_at, cloudevents_spec, credit, credit_or_refused_plan, effect_table,
    endpoint, mark_table, retention, unique,
};
use lambda_dedup::Message;
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_engine::{Deduplicator, Outcome, run_batch_transactional};
use local_dynamodb::meter::Meter;

/// A deduplicator whose marks and effects go through a fresh proxy holding each request 30 ms.
async fn setup() -> (Meter, aws_sdk_dynamodb::Client, String, Deduplicator) {
    let meter = Meter::start(&endpoint(), Duration::from_millis(30)).expect("meter");
    let metered = client_at(&meter.endpoint());
    // Tables created through the proxy, so it knows their keys.
    let balances = effect_table(&metered, "account").await;
    let store = DynamoStore::new(metered.clone(), mark_table(&metered).await, retention());
    let dedup = Deduplicator::new(cloudevents_spec("batch-concurrent"), store);
    (meter, client(), balances, dedup)
}

fn labels(outcomes: &[(String, Outcome)]) -> Vec<&'static str> {
    outcomes.iter().map(|(_, o)| o.label()).collect()
}

/// 100 events on 60 accounts (40 accounts credited twice): 200 items, more than one
/// transaction holds. The rounds go at once, up to the bound, and no two writes in flight
/// together hold one item; every event applies exactly once.
#[tokio::test]
async fn concurrent_rounds_share_no_item_and_keep_the_bound() {
    for bound in [10, 2] {
        let (meter, client, balances, dedup) = setup().await;
        let run = unique("cc");
        let batch: Vec<Message> = (0..100)
            .map(|i| {
                let account = format!("{run}-a{}", i % 60);
                credit(&format!("m{i}"), &format!("{run}-{i}"), &account, 1)
            })
            .collect();
        meter.reset();
        let report =
            run_batch_transactional(batch, bound, &dedup, credit_or_refused_plan(&balances)).await;
        assert_eq!(
            report.account.applied,
            100,
            "{:?}",
            labels(report.outcomes())
        );
        assert!(report.failures().is_empty());
        let u = meter.usage();
        assert!(u.peak_in_flight >= 2, "rounds in flight at once: {u:?}");
        assert!(u.peak_in_flight <= bound as u64, "bound {bound}: {u:?}");
        assert_eq!(
            u.shared_in_flight, 0,
            "no item in two writes in flight: {u:?}"
        );
        assert_eq!(u.cancelled_transactions, 0, "{u:?}");
        for a in 0..60 {
            let expected = if a < 40 { 2 } else { 1 };
            let account = format!("{run}-a{a}");
            assert_eq!(balance(&client, &balances, &account).await, Some(expected));
        }
    }
}

/// S5, S12 with rounds in flight together: an event whose effect's condition fails in one
/// round writes neither its mark nor its effect, a duplicate in the other round moves nothing,
/// and every other event of both rounds commits once, mark and effect.
#[tokio::test]
async fn a_failure_in_one_concurrent_round_is_its_own_event_alone() {
    let (meter, client, balances, dedup) = setup().await;
    let run = unique("cf");
    let event = |i: usize, amount: i64| {
        credit(
            &format!("m{i}"),
            &format!("{run}-{i}"),
            &format!("{run}-a{i}"),
            amount,
        )
    };
    // Event 3 was applied before: a duplicate in the first round.
    let before = run_batch_transactional(
        vec![event(3, 5)],
        10,
        &dedup,
        credit_or_refused_plan(&balances),
    )
    .await;
    assert_eq!(before.account.applied, 1);
    // 100 events, 200 items: two rounds; event 80's debit fails in the second.
    let batch: Vec<Message> = (0..100)
        .map(|i| event(i, if i == 80 { 0 } else { 5 }))
        .collect();
    let failing = batch[80].clone();
    meter.reset();
    let report =
        run_batch_transactional(batch, 10, &dedup, credit_or_refused_plan(&balances)).await;
    let u = meter.usage();
    assert!(u.peak_in_flight >= 2, "rounds in flight at once: {u:?}");
    assert_eq!(u.shared_in_flight, 0, "{u:?}");
    assert_eq!(
        report.account.applied,
        98,
        "{:?}",
        labels(report.outcomes())
    );
    assert_eq!(report.account.duplicate, 1);
    assert_eq!(report.failures(), ["m80"]);
    for i in 0..100 {
        let expected = if i == 80 { None } else { Some(5) };
        let account = format!("{run}-a{i}");
        assert_eq!(balance(&client, &balances, &account).await, expected, "{i}");
    }
    let key = dedup.spec().derive(&failing).expect("key").key;
    let mark = dedup.store().get(&key).await.expect("read");
    assert!(mark.is_none(), "no mark without its effect (S5)");
}
