//! The SQS door (`sqs-credit`'s configuration): credits committed with the event's mark, in a
//! transaction per message or per batch; and the single-write modes on it, whose effect item is
//! its own mark (issue 45).

use std::collections::BTreeMap;

use lambda_dedup_runtime::flow::{create_once, sequence, transact};
use lambda_dedup_runtime::testing::events::sqs_event;
use lambda_dedup_runtime::{Effect, Event, Item};

use super::{
    acknowledged, credit_in_sequence, credited, credits_door, delivered, metered, metered_tables,
    ops, ten_credits,
};

/// The SQS door on fresh tables behind `meter`'s client, in one transaction per message or per
/// batch, the duplicate pre-filter on or off.
async fn sqs_rounds(per_batch: bool, prefilter: bool) -> Vec<BTreeMap<String, u64>> {
    let (meter, client) = metered();
    let marks = dedup_tests::mark_table(&client).await;
    let balances = dedup_tests::effect_table(&client, "account").await;
    let dedup = credits_door(&client, &marks, prefilter);
    let work = credited(&balances);
    let service = match per_batch {
        true => dedup.sqs(transact(work).one_transaction_per_batch()),
        false => dedup.sqs(transact(work)),
    }
    .expect("service");
    acknowledged(&meter, &[&service, &service], &ten_credits()).await
}

/// SQS, 10 new messages, then the same 10 redelivered to the same container.
#[tokio::test]
async fn round_trips_of_the_sqs_door() {
    // A transaction per message; the redelivery answered by the warm cache.
    let per_message = sqs_rounds(false, false).await;
    assert_eq!(per_message, [ops(&[("TransactWriteItems", 10)]), ops(&[])]);
    // Batch-transaction mode: one transaction for the batch.
    let per_batch = sqs_rounds(true, false).await;
    assert_eq!(per_batch, [ops(&[("TransactWriteItems", 1)]), ops(&[])]);
    // With the duplicate pre-filter: the batch's marks read first.
    let prefiltered = sqs_rounds(true, true).await;
    let read_then_write = ops(&[("BatchGetItem", 1), ("TransactWriteItems", 1)]);
    assert_eq!(prefiltered, [read_then_write, ops(&[])]);
}

/// Create-once (`flow::create_once`) on the SQS door, each credit's entry its own mark: 10 new
/// credits, the 10 redelivered to the same container, then to another container.
#[tokio::test]
async fn round_trips_of_create_once() {
    let (meter, client, marks, entries) = metered_tables("account").await;
    let container = || {
        let entries = entries.clone();
        credits_door(&client, &marks, false)
            .sqs(create_once(move |e: Event<serde_json::Value>| {
                let account = e.payload["account"].as_str().unwrap_or_default();
                Effect::put(&entries, Item::new().with("account", account))
            }))
            .expect("service")
    };
    let (first, other) = (container(), container());
    let rounds = acknowledged(&meter, &[&first, &first, &other], &ten_credits()).await;
    let ten_puts = ops(&[("PutItem", 10)]);
    // The same container answers from its warm cache.
    assert_eq!(rounds, [ten_puts.clone(), ops(&[]), ten_puts]);
}

/// Sequence mode (`flow::sequence`, the producer's sequence at `/data/seq`) on the SQS door,
/// each credit one update of its account carrying the account's high-water: 10 new credits (the
/// first of 10 accounts), the 10 redelivered to the same container and to another; then an
/// older event of one account (another id, its sequence under the high-water), and one past a
/// gap.
#[tokio::test]
async fn round_trips_of_sequence_mode() {
    let (meter, client, marks, balances) = metered_tables("account").await;
    let container = || {
        credits_door(&client, &marks, false)
            .sqs(sequence("/data/seq", credited(&balances)))
            .expect("service")
    };
    let (first, other) = (container(), container());
    let rounds = acknowledged(&meter, &[&first, &first, &other], &ten_credits()).await;
    let ten_updates = ops(&[("UpdateItem", 10)]);
    assert_eq!(
        rounds,
        [ten_updates.clone(), ten_updates.clone(), ten_updates]
    );

    let account = dedup_tests::unique("a");
    let at = |seq: u64| credit_in_sequence(&dedup_tests::unique("e"), &account, seq);
    let [one, two, older, past_a_gap] = [1, 2, 1, 4].map(at);
    // Its first two, one after the other (the high-water 2), then the older event.
    for applied in [one, two] {
        acknowledged(&meter, &[&first], &sqs_event(&[&applied])).await;
    }
    let stale = acknowledged(&meter, &[&first], &sqs_event(&[&older])).await;
    assert_eq!(stale, [ops(&[("UpdateItem", 1)])]);
    let gap = delivered(&meter, &[&first], &sqs_event(&[&past_a_gap])).await;
    assert_eq!(
        gap[0].0.batch_item_failures.len(),
        1,
        "a gap is not applied"
    );
    assert_eq!(gap[0].1, ops(&[("UpdateItem", 1)]));
}
