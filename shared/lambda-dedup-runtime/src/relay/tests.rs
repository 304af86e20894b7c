//! The shared walk on the memory store, with a scripted action: each record's new image names
//! its item (`key`) and what the action meets (`script`).

use super::layout::FAILURE_REASON;
use super::*;
use crate::in_order;
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use lambda_dedup::items::text;
use lambda_dedup::{FaultKind, Item};
use lambda_dedup_memory::{Injected, MemoryStore, Op};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The layout of the relays under test: items that wait `PENDING`, keyed by `key`.
pub(crate) const ANSWERED: Layout = Layout {
    attributes: Attributes {
        key: Attribute::new("key"),
        created: Attribute::new("created_at"),
        status: Attribute::new("status"),
        parked_at: Attribute::new("failed_at"),
    },
    waiting: Waiting::Holds(StatusValue::new("PENDING")),
    settled: StatusValue::new("DONE"),
    parked: StatusValue::new("FAILED"),
    repeats: Repeats::Answered,
    settled_metric: Metric::new("Done"),
    waiting_metric: Metric::new("Waiting"),
};

/// The status value an item waits with under `waiting`, if any.
fn held(waiting: Waiting) -> Option<&'static str> {
    match waiting {
        Waiting::Holds(value) => Some(value.value()),
        Waiting::Absent => None,
    }
}

const EFFECTED: Layout = Layout {
    waiting: Waiting::Absent,
    repeats: Repeats::Effected,
    ..ANSWERED
};

/// Acts as each record's `script` says: `ok`, `refused` (permanent), `down` (transient),
/// `slow` (300 ms, then ok); records every call.
#[derive(Debug, Default)]
struct Scripted {
    calls: Mutex<Vec<String>>,
}

impl Scripted {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("lock").clone()
    }
}

#[derive(serde::Deserialize)]
struct Part {
    key: String,
    script: String,
}

impl Act for Arc<Scripted> {
    type Item = String;

    fn read(&self, record: &EventRecord) -> Read<String> {
        if record.event_name != "INSERT" {
            return Read::Ignored;
        }
        match in_order::image_part::<Part>(&record.change.new_image) {
            Some(Part { key, script }) if script == "unreadable" => Read::Park {
                key,
                reason: "unreadable",
            },
            Some(Part { key, script }) => Read::Act { key, item: script },
            None => Read::NoImage,
        }
    }

    async fn act(&self, key: &str, script: &String) -> Result<Item, Failure> {
        self.calls.lock().expect("lock").push(key.to_owned());
        match script.as_str() {
            "refused" => Err(Failure::Permanent("refused_422".into())),
            "down" => Err(Failure::Transient("503".into())),
            "slow" => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(Item::new().with("receipt", "r"))
            }
            _ => Ok(Item::new().with("receipt", "r")),
        }
    }
}

/// The relay of `act` over the table `items` of `store`, a record started only with
/// `per_record` left, the default deadline margin, items re-driven after an hour.
fn relay_on(
    store: Arc<dyn lambda_dedup::ItemStore>,
    layout: Layout,
    act: Arc<Scripted>,
    per_record: Duration,
) -> RelayService<Arc<Scripted>> {
    Relay {
        function: "test-relay".into(),
        table: "items".into(),
        layout,
        act,
        per_record,
        margin: lambda_dedup_config::DeadlineMargin::DEFAULT.get(),
        redrive_after: Duration::from_secs(3_600),
    }
    .service(store)
}

struct World {
    store: MemoryStore,
    act: Arc<Scripted>,
}

impl World {
    fn new() -> Self {
        let store = MemoryStore::new(
            lambda_dedup::Retention::unchecked(Duration::from_secs(3_600)).expect("r"),
        );
        store.create_table("items", "key");
        Self {
            store,
            act: Arc::default(),
        }
    }

    fn relay(&self, layout: Layout, per_record: Duration) -> RelayService<Arc<Scripted>> {
        relay_on(
            Arc::new(self.store.clone()),
            layout,
            self.act.clone(),
            per_record,
        )
    }

    fn put(&self, key: &str, status: Option<&str>) {
        let mut item = Item::new().with("key", key);
        if let Some(s) = status {
            item = item.with("status", s);
        }
        self.store.put_item("items", item).expect("seed");
    }

    fn item(&self, key: &str) -> Item {
        self.store
            .item("items", &Item::new().with("key", key))
            .expect("item")
    }

    fn status(&self, key: &str) -> Option<String> {
        text(&self.item(key), "status").map(str::to_owned)
    }
}

fn event(records: &[(&str, &str)]) -> Event {
    let records: Vec<_> = records
        .iter()
        .enumerate()
        .map(|(i, (key, script))| {
            json!({
                "eventID": format!("e{i}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {"Keys": {"key": {"S": key}},
                             "NewImage": {"key": {"S": key}, "script": {"S": script}},
                             "SequenceNumber": format!("{i:03}"), "SizeBytes": 10,
                             "StreamViewType": "NEW_AND_OLD_IMAGES"}
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("event")
}

fn failures(handled: &Handled) -> Vec<String> {
    handled
        .response
        .batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.clone())
        .collect()
}

fn in_30s() -> Option<SystemTime> {
    Some(SystemTime::now() + Duration::from_secs(30))
}

/// S12, S15, S16: in shard order, each item is acted on and then settled with what the
/// action returned; one refused for good, or unreadable, is parked with its reason and the
/// walk goes on; the first transient failure is the checkpoint, left waiting, and nothing
/// behind it is attempted. The tally closes.
#[tokio::test]
async fn items_are_settled_after_acting_parked_for_good_and_a_transient_one_is_the_checkpoint() {
    for layout in [ANSWERED, EFFECTED] {
        let w = World::new();
        let waiting = held(layout.waiting);
        for key in ["a", "b", "c", "u", "d", "e"] {
            w.put(key, waiting);
        }
        let relay = w.relay(layout, Duration::from_millis(100));
        let handled = relay
            .handle(
                &event(&[
                    ("a", "ok"),
                    ("b", "refused"),
                    ("c", "ok"),
                    ("u", "unreadable"),
                    ("d", "down"),
                    ("e", "ok"),
                ]),
                in_30s(),
            )
            .await;
        assert_eq!(w.act.calls(), ["a", "b", "c", "d"], "{layout:?}");
        assert_eq!(failures(&handled), ["004"]);
        for key in ["a", "c"] {
            assert_eq!(w.status(key).as_deref(), Some("DONE"), "{key}");
            assert_eq!(text(&w.item(key), "receipt"), Some("r"));
        }
        for (key, reason) in [("b", "refused_422"), ("u", "unreadable")] {
            let item = w.item(key);
            assert_eq!(text(&item, "status"), Some("FAILED"), "{key}");
            assert_eq!(text(&item, FAILURE_REASON.name()), Some(reason));
            assert!(item.0.contains_key("failed_at"));
        }
        for key in ["d", "e"] {
            assert_eq!(w.status(key).as_deref(), waiting, "{key} still waits");
        }
        let t = handled.tally;
        assert_eq!(
            (t.settled, t.parked, t.transient, t.deferred),
            (2, 2, 1, 1),
            "{t:?}"
        );
        assert!(t.closes(), "{t:?}");
    }
}

/// S7 where repeats are answered: an item settled since its record was written (the stream
/// replays) is read strongly consistently before acting and not acted on again; a record
/// without a new image is a retry, never guessed around.
#[tokio::test]
async fn an_item_settled_since_its_record_is_not_acted_on_again() {
    let w = World::new();
    w.put("a", Some("DONE"));
    w.put("b", Some("FAILED"));
    w.put("c", Some("PENDING"));
    let relay = w.relay(ANSWERED, Duration::from_millis(100));
    let handled = relay
        .handle(&event(&[("a", "ok"), ("b", "ok"), ("c", "ok")]), in_30s())
        .await;
    assert_eq!(w.act.calls(), ["c"]);
    assert_eq!(
        (handled.tally.already_settled, handled.tally.settled),
        (2, 1)
    );
    assert_eq!(w.status("b").as_deref(), Some("FAILED"), "left alone");
    let mut no_image = event(&[("x", "ok")]);
    no_image.records[0].change.new_image = Default::default();
    let handled = relay.handle(&no_image, in_30s()).await;
    assert_eq!(failures(&handled), ["000"]);
    assert_eq!(handled.tally.transient, 1);
}

/// A record is started only with `per_record` left before the deadline: 300 ms per action,
/// 500 ms needed, 1 s left — two records are done, the third is the first not reached,
/// reported and not acted on; the invocation answers before its deadline.
#[tokio::test]
async fn a_record_is_not_started_without_the_time_one_needs() {
    let w = World::new();
    for key in ["a", "b", "c", "d"] {
        w.put(key, Some("PENDING"));
    }
    let relay = w.relay(ANSWERED, Duration::from_millis(500));
    let started = std::time::Instant::now();
    let handled = relay
        .handle(
            &event(&[("a", "slow"), ("b", "slow"), ("c", "slow"), ("d", "slow")]),
            Some(SystemTime::now() + Duration::from_secs(1)),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(w.act.calls(), ["a", "b"]);
    assert_eq!(failures(&handled), ["002"]);
    assert_eq!((handled.tally.deferred, handled.tally.transient), (2, 0));
    assert_eq!(w.status("c").as_deref(), Some("PENDING"));
}

/// S16, the two ways a settle write that fails after the action ends: where repeats are
/// answered it is a retry (the action again, the other side replays); where a repeat is a
/// second effect it is logged and the record counted settled, never retried.
#[tokio::test]
async fn a_settle_that_fails_after_the_action_is_retried_only_where_repeats_are_answered() {
    for layout in [ANSWERED, EFFECTED] {
        let w = World::new();
        w.put("a", held(layout.waiting));
        // Every item call but the consistent read before the action fails once.
        let seen = Arc::new(AtomicUsize::new(0));
        let reads_first = usize::from(layout.repeats == Repeats::Answered);
        let store = w.store.with_fault_hook(Arc::new(move |op, _| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            (op == Op::Items && n == reads_first).then_some(Injected::Fail(FaultKind::Throttled))
        }));
        let relay = relay_on(
            Arc::new(store),
            layout,
            w.act.clone(),
            Duration::from_millis(100),
        );
        let handled = relay.handle(&event(&[("a", "ok")]), in_30s()).await;
        if layout.repeats == Repeats::Answered {
            assert_eq!(failures(&handled), ["000"], "retried");
            assert_eq!(w.status("a").as_deref(), Some("PENDING"));
            let again = relay.handle(&event(&[("a", "ok")]), in_30s()).await;
            assert!(failures(&again).is_empty());
            assert_eq!(w.act.calls(), ["a", "a"], "acted again, under the same key");
            assert_eq!(w.status("a").as_deref(), Some("DONE"));
        } else {
            assert!(failures(&handled).is_empty(), "not retried");
            assert_eq!(handled.tally.settled, 1);
            assert_eq!(w.act.calls(), ["a"]);
            assert_eq!(w.status("a"), None, "its status was not written");
        }
    }
}

/// The sweep: every item still waiting is counted, those older than the bound (or of no
/// known age) stamped so they come back on the stream, a recent one and a settled one left
/// alone; the oldest's age is reported. Both ways of waiting (a value, an absent status).
#[tokio::test]
async fn the_sweep_stamps_the_items_waiting_past_the_bound() {
    for layout in [ANSWERED, EFFECTED] {
        let w = World::new();
        let now = SystemTime::now();
        let at = |ago: u64| lambda_dedup::clock::epoch_millis(now - Duration::from_secs(ago));
        let put = |key: &str, status: Option<&str>, age: Option<u64>| {
            let mut item = Item::new().with("key", key);
            if let Some(s) = status {
                item = item.with("status", s);
            }
            if let Some(a) = age {
                item = item.with("created_at", at(a));
            }
            w.store.put_item("items", item).expect("seed");
        };
        put("old", held(layout.waiting), Some(7_200));
        put("unknown", held(layout.waiting), None);
        put("recent", held(layout.waiting), Some(60));
        put("done", Some("DONE"), Some(9_000));
        let swept = w
            .relay(layout, Duration::from_millis(100))
            .sweep(now)
            .await
            .expect("sweep");
        assert_eq!((swept.pending, swept.redriven), (3, 2), "{layout:?}");
        assert!(swept.oldest_pending >= Duration::from_secs(7_200));
        assert!(
            swept.oldest_pending < Duration::from_secs(9_000),
            "not the settled one"
        );
        let stamped = |key: &str| w.item(key).0.contains_key(REDRIVE.name());
        assert!(stamped("old") && stamped("unknown"));
        assert!(!stamped("recent") && !stamped("done"));
    }
}

/// S14: the EMF line names the settled count as the layout says, and `AlreadySettled`
/// only where repeats are answered.
#[test]
fn the_tally_is_printed_with_the_layouts_names() {
    let t = Tally {
        records: 3,
        settled: 1,
        already_settled: 1,
        ignored: 1,
        ..Tally::default()
    };
    assert!(t.closes());
    for (layout, expected) in [(ANSWERED, true), (EFFECTED, false)] {
        let v: serde_json::Value = serde_json::from_str(&t.emf_line("f", &layout)).expect("json");
        assert_eq!(v["Done"], 1);
        assert_eq!(v.get("AlreadySettled").is_some(), expected, "{layout:?}");
    }
}
