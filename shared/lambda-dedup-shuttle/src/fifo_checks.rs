//! FIFO order under concurrency: [`run_batch`] with two message groups, up to two groups at
//! once, each delivery's flow a shuttle task of its own (as a handler's I/O runs elsewhere),
//! every store call a point where the scheduler may switch ([`Yielding`]).

use lambda_dedup::DedupKey;
use lambda_dedup_engine::{Deduplicator, run_batch};
use shuttle::future::{block_on, spawn};

use crate::world::{World, credit, key, message, spec};
use crate::yielding::Yielding;

/// The batch: group A's second message fails; group B's all succeed. Interleaved, as SQS
/// hands a FIFO batch over.
const BATCH: [(&str, &str, bool); 6] = [
    ("a1", "A", false),
    ("b1", "B", false),
    ("a2", "A", true),
    ("b2", "B", false),
    ("a3", "A", false),
    ("b3", "B", false),
];

/// S12: within a group the credits land in batch order, and a group stops at its first
/// failure: A lands a1 only (a2 failed, a3 not processed and reported failed); B lands all
/// three in order. The report lists exactly a2 and a3.
pub fn groups_keep_order_and_stop_at_a_failure() {
    let world = World::new();
    let store = Yielding::new(&world.store);
    let dedup = Deduplicator::new(spec(), store.clone());
    let messages = BATCH
        .iter()
        .map(|&(id, group, fail)| message("acme", id, Some(group), fail))
        .collect();
    let report = block_on(run_batch(messages, 2, |m| {
        let dedup = dedup.clone();
        async move {
            spawn(async move { dedup.transactional(&m, credit).await })
                .await
                .expect("delivery")
        }
    }));
    let landed = store.landed();
    let of_group = |group: &str| -> Vec<DedupKey> {
        landed
            .iter()
            .filter(|k| {
                BATCH
                    .iter()
                    .any(|&(id, g, _)| g == group && **k == key("acme", id))
            })
            .cloned()
            .collect()
    };
    assert_eq!(of_group("A"), [key("acme", "a1")], "group A lands a1 only");
    assert_eq!(
        of_group("B"),
        [key("acme", "b1"), key("acme", "b2"), key("acme", "b3")],
        "group B in order"
    );
    assert_eq!(report.failures(), ["acme/a2", "acme/a3"]);
    assert!(report.account.closes());
}
