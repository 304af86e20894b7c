//! The modelled bed's tests: the bound's arithmetic on hand-built draws, the store's mapping of
//! calls to DynamoDB requests against the latency model's own stream, and a whole run applying
//! every event once. Time is paused: holds pass at once.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::store::{CreateOnceStore, SequenceStore};
use lambda_dedup::{
    Commit, CommitRequest, CreateOnce, DedupKey, Effect, Item, MarkStore, Retention, Scope,
    SequencedWrite,
};
use lambda_dedup_memory::MemoryStore;
use local_dynamodb::latency::{Delays, Latency};

use super::bound;
use super::draws::{Draw, Recorder};
use super::store::ModelledStore;
use crate::modes::Mode;
use crate::place::Place;

const SEED: u64 = 7;

fn draw(batch: usize, lane: u64, call: u64, stage: usize, ms: u64) -> Draw {
    Draw {
        place: Place { batch, lane },
        call,
        stage,
        operation: "PutItem",
        items: 1,
        held: Duration::from_millis(ms),
    }
}

/// Lanes of a batch in flight together (the longest), a lane's calls added, a call's steps
/// added and the requests of one step the longest; batches added.
#[test]
fn the_bound_is_each_batchs_critical_path() {
    let draws = [
        // Batch 0: three lanes at once; the third has two calls one after another (3 + 4).
        draw(0, 1, 0, 0, 5),
        draw(0, 2, 1, 0, 8),
        draw(0, 3, 2, 0, 3),
        draw(0, 3, 3, 0, 4),
        // Batch 1: one lane: a read (2), then a commit of two waves, the first of two rounds
        // in flight together (10, 12), the second of one (6).
        draw(1, 0, 4, 0, 2),
        draw(1, 0, 5, 0, 10),
        draw(1, 0, 5, 0, 12),
        draw(1, 0, 5, 1, 6),
    ];
    assert_eq!(bound::of(&draws), Duration::from_millis(8 + (2 + 12 + 6)));
    assert_eq!(bound::of(&[]), Duration::ZERO);
}

/// Powertools' bound: 3 draws per new event, 1 per duplicate, every workload in turn on one
/// stream, the untimed first pass of `all_duplicates` drawn but not counted.
#[test]
fn powertools_bound_sums_three_draws_per_new_event_and_one_per_duplicate() {
    let stream = Delays::new(Latency::Calibrated { seed: SEED });
    let next = |k: usize| -> Duration { (0..k).map(|_| stream.next("PutItem", 1)).sum() };
    let all_new = next(6); // events 0 and 1, new
    let repeated = next(3) + next(1); // event 0 new, then its duplicate
    let _first_pass = next(3);
    let all_duplicates = next(1);
    let workloads = [
        ("all_new", vec![0, 1]),
        ("half_duplicates", vec![0, 0]),
        ("all_duplicates", vec![5]),
    ];
    let got = bound::powertools(
        &Delays::new(Latency::Calibrated { seed: SEED }),
        &workloads,
        "all_duplicates",
    );
    assert_eq!(got, vec![all_new, repeated, all_duplicates]);
}

fn retention() -> Retention {
    Retention::unchecked(Duration::from_secs(86_400)).expect("retention")
}

fn store() -> ModelledStore {
    let memory = MemoryStore::new(retention());
    memory.create_table("balances", "account");
    memory.create_table("entries", "entry");
    let delays = Arc::new(Delays::new(Latency::Calibrated { seed: SEED }));
    // Tokio's timer alone: these tests run on its paused clock, which a blocking thread's
    // sleep would not advance.
    ModelledStore::new(memory, Recorder::new(delays)).on_tokio_timer()
}

fn key(id: &str) -> DedupKey {
    DedupKey::new(&Scope::new("bank", "ledger").expect("scope"), "acme", &[id])
}

fn credit(account: &str) -> Effect {
    Effect::update("balances", Item::new().with("account", account))
        .expression("ADD balance :a")
        .value(":a", 1)
}

/// Each call draws what the DynamoDB store's request would: a commit of a mark and 3 effects
/// one `TransactWriteItems` of 4 items, a create-once `PutItem`, a sequenced `UpdateItem`, a
/// read of 3 marks one `BatchGetItem` of 3 keys — the very draws of the model's stream, in
/// order, each held in (paused) time before the call is executed.
#[tokio::test(start_paused = true)]
async fn each_call_draws_the_operation_the_dynamodb_store_sends() {
    let store = store();
    let k = key("evt-1");
    let effects = [credit("a"), credit("b"), credit("c")];
    let began = tokio::time::Instant::now();
    let request = CommitRequest {
        key: &k,
        fingerprint: None,
        result: None,
        effects: &effects,
    };
    assert_eq!(
        store.commit(request).await.expect("commit"),
        Commit::Applied
    );
    let after_commit = began.elapsed();
    let entry = Effect::put("entries", Item::new().with("entry", "e-1"));
    let k2 = key("evt-2");
    let once = CreateOnce {
        key: &k2,
        effect: &entry,
        fingerprint: None,
        result: None,
    };
    assert_eq!(store.create_once(once).await.expect("put"), Commit::Applied);
    let update = credit("a");
    let k3 = key("evt-3");
    let write = SequencedWrite {
        key: &k3,
        effect: &update,
        sequence: 1,
        first: 1,
        fingerprint: None,
    };
    store.apply_in_sequence(write).await.expect("update");
    let (k4, k5) = (key("evt-4"), key("evt-5"));
    let marks = store.get_many(&[&k, &k4, &k5]).await.expect("read");
    assert!(marks[0].is_some() && marks[1].is_none());
    let model = Delays::new(Latency::Calibrated { seed: SEED });
    let expected = [
        ("TransactWriteItems", 4),
        ("PutItem", 1),
        ("UpdateItem", 1),
        ("BatchGetItem", 3),
    ];
    let draws = store.take_draws();
    let got: Vec<(&str, usize, Duration)> = draws
        .iter()
        .map(|d| (d.operation, d.items, d.held))
        .collect();
    let want: Vec<(&str, usize, Duration)> = expected
        .iter()
        .map(|&(op, n)| (op, n, model.next(op, n)))
        .collect();
    assert_eq!(got, want);
    // A 4-item transaction's draw is not a `PutItem`'s of the same normal.
    let put = Delays::new(Latency::Calibrated { seed: SEED }).next("PutItem", 1);
    assert_ne!(draws[0].held, put);
    assert!(
        after_commit >= draws[0].held,
        "the commit was held for its draw"
    );
}

/// A batch commit is sent as `DynamoStore::commit_batch_bounded` sends it: 150 events of a mark
/// and one credit each (300 items) in one wave of 3 rounds of 100 items, in flight together;
/// with a duplicate in the first round, that round is cancelled, the duplicate settled by its
/// mark, and the other 49 sent again in a second wave of one round of 98 items.
#[tokio::test(start_paused = true)]
async fn a_batch_commit_is_sent_in_the_dynamodb_stores_rounds() {
    let store = store();
    let keys: Vec<DedupKey> = (0..150).map(|i| key(&format!("evt-{i}"))).collect();
    let effects: Vec<[Effect; 1]> = (0..150).map(|i| [credit(&format!("a-{i}"))]).collect();
    let requests: Vec<CommitRequest<'_>> = keys
        .iter()
        .zip(&effects)
        .map(|(k, e)| CommitRequest {
            key: k,
            fingerprint: None,
            result: None,
            effects: e,
        })
        .collect();
    let one = store.commit(requests[7]).await.expect("commit");
    assert_eq!(one, Commit::Applied);
    store.take_draws();
    let results = store.commit_batch_bounded(&requests, 100).await;
    let applied = results
        .iter()
        .filter(|r| matches!(r, Ok(Commit::Applied)))
        .count();
    assert_eq!(applied, 149);
    assert!(matches!(results[7], Ok(Commit::Seen(_))));
    let rounds: Vec<(usize, &str, usize)> = store
        .take_draws()
        .iter()
        .map(|d| (d.stage, d.operation, d.items))
        .collect();
    assert_eq!(
        rounds,
        [
            (0, "TransactWriteItems", 100),
            (0, "TransactWriteItems", 100),
            (0, "TransactWriteItems", 100),
            (1, "TransactWriteItems", 98),
        ]
    );
    assert_eq!(store.memory().items("balances").len(), 150);
}

/// A whole modelled run (every mode, every workload, batches of 10): each row applied every
/// distinct event exactly once — the balances sum to the number of distinct events, or one
/// entry each — and every row that sent a request has a bound.
#[tokio::test(start_paused = true)]
async fn the_modelled_bed_applies_every_distinct_event_once() {
    let rows = super::bed::run(40, 10, SEED, &Mode::ALL)
        .await
        .expect("every row applied every event once");
    let ours: Vec<_> = rows.iter().filter(|r| r["mode"] != "powertools").collect();
    assert_eq!(ours.len(), 4 * Mode::ALL.len());
    for r in &ours {
        let mut ids = crate::modes::workload_ids(r["workload"].as_str().unwrap_or(""), 40, 10);
        ids.sort_unstable();
        ids.dedup();
        let distinct = ids.len();
        assert!(
            distinct < 40 || r["workload"] != "mixed",
            "mixed repeats events"
        );
        assert_eq!(r["applied"], distinct, "{r}");
        assert_eq!(r["failures"], 0, "{r}");
        let cached =
            r["mode"] == "batch_transaction_warm_cache" && r["workload"] == "all_duplicates";
        assert_eq!(r["bound_seconds"].as_f64() == Some(0.0), cached, "{r}");
    }
    let powertools = rows.iter().filter(|r| r["mode"] == "powertools").count();
    assert_eq!(powertools, 4);
}

/// The check the run makes: a store whose effects were applied twice is caught.
#[test]
fn applied_counts_the_balances_credits() {
    let memory = MemoryStore::new(retention());
    memory.create_table("balances", "account");
    memory
        .put_item(
            "balances",
            Item::new().with("account", "a").with("balance", 2),
        )
        .expect("put");
    memory
        .put_item(
            "balances",
            Item::new().with("account", "b").with("balance", 1),
        )
        .expect("put");
    assert_eq!(super::bed::applied(&memory, "balances", Mode::Batch), 3);
    assert_eq!(
        super::bed::applied(&memory, "balances", Mode::CreateOnce),
        2
    );
}

/// The section goes before the emulator bed's targets the first time, replaces itself after,
/// and `section` finds it for `bench report` to keep.
#[test]
fn the_section_is_inserted_before_the_targets_then_replaced_in_place() {
    use super::section::{BEGIN, END, section, splice};
    let doc = "# Benchmarks\n\n## Calibrated\n\n## Against the targets\n\nrows\n";
    let first = splice(doc, &format!("{BEGIN}\nfirst\n{END}\n"));
    let at = |s: &str, x: &str| s.find(x).expect("present");
    assert!(at(&first, "first") < at(&first, "## Against the targets"));
    assert!(at(&first, "## Calibrated") < at(&first, "first"));
    let second = splice(&first, &format!("{BEGIN}\nsecond\n{END}\n"));
    assert!(second.contains("second") && !second.contains("first"));
    assert_eq!(second.matches(BEGIN).count(), 1);
    assert!(second.ends_with("## Against the targets\n\nrows\n"));
    assert_eq!(section(&second), format!("{BEGIN}\nsecond\n{END}"));
    assert_eq!(section(doc), "");
}

/// A hedged single write waits for the first of its two copies: its own draw when that is
/// under the delay (no copy sent), else the shorter of the draw and the delay plus the copy's
/// draw (from the copies' own stream); each copy counted, the first writes' stream untouched.
#[test]
fn a_hedged_write_takes_the_first_of_its_two_copies() {
    let (first, copies) = (
        Delays::new(Latency::Calibrated { seed: SEED }),
        Delays::new(Latency::Calibrated { seed: SEED + 1 }),
    );
    let recorder = Recorder::new(Arc::new(Delays::new(Latency::Calibrated { seed: SEED })));
    let hedging = Delays::new(Latency::Calibrated { seed: SEED + 1 });
    let after = Duration::from_millis(8);
    let mut hedges = 0;
    for call in 0..200 {
        let own = first.next("PutItem", 1);
        let expected = if own > after {
            hedges += 1;
            own.min(after + copies.next("PutItem", 1))
        } else {
            own
        };
        assert_eq!(
            recorder.draw_hedged(call, "PutItem", after, &hedging),
            expected
        );
    }
    assert!(hedges > 0 && hedges < 200, "{hedges} hedges");
    assert_eq!(recorder.take_hedges(), hedges);
    assert_eq!(recorder.take_hedges(), 0);
    let draws = recorder.take();
    assert_eq!(draws.len(), 200, "one draw recorded a call, hedged or not");
    assert_eq!(
        bound::per_batch(&draws).iter().sum::<Duration>(),
        bound::of(&draws)
    );
}
