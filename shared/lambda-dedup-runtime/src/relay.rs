//! The recorded-intent and inbox pattern (S7), written once (feature `dynamodb-streams`): a
//! DynamoDB stream of a table whose items carry their own settle status, one action per new
//! item, and a scheduled sweep. `intent-relay` (an HTTP call to the collections provider with
//! the intent's idempotency key) and the inbox's forwarder ([`crate::inbox`]: an SQS send) are
//! each an [`Act`] — how to read a record, what to do with the item — on this walk:
//!
//! - records in shard order ([`in_order::walk`]); the first that fails transiently is the
//!   checkpoint the stream retries from, and a record is started only with the time one record
//!   needs (`per_record`) left before the invocation's deadline (S12, S13);
//! - an item that can never succeed as it is — unreadable, or refused for good by the other
//!   side — is **parked** on the item (its status, `failure_reason` and the time), counted
//!   (`Parked`, alarmed on), and the shard moves on (S15, S16);
//! - an action that succeeds **settles** the item: its status and what the action returned, in
//!   one conditional update;
//! - a record without a new image is a stream misconfiguration: retried, never guessed around;
//! - every record ends in exactly one count of the [`Tally`], printed as one EMF line (S14);
//! - the sweep ([`RelayService::sweep`], any event without `Records`): every item still
//!   waiting longer than `redrive_after` (or of unknown age) is stamped `redrive_requested_at`,
//!   conditioned on it still waiting; the stamp comes back on the stream as a modification and
//!   the item is acted on then. The oldest waiting item's age is emitted as
//!   `OldestPendingSeconds`, alarmed on.
//!
//! How the other side takes a repeat of the action decides the rest ([`Repeats`]). The items are
//! read and written through the core's [`ItemStore`]: DynamoDB in Lambda, the memory store in
//! tests, with the same wiring.
//!
//! A relay is built in `main` from its settings — [`Relay::new`] with its function, table,
//! [`Layout`] and [`Act`], [`Relay::per_record`] and [`Relay::redrive_after`] — and given its
//! store by [`Relay::service`]; the [`RelayService`] takes both the stream's and the schedule's
//! events, and `lambda_runtime::run` takes it directly.
//!
//! Why not a `Dedup` service: the item is its own mark (its settle status), so none of the
//! mark table's settings (namespace, table, retention horizon, lease, key spec) apply, and a
//! relay's role grants no mark table.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_dedup::items::{Filter, text};
use lambda_dedup::{Effect, Item, ItemStore, StoreError, Value};
use lambda_runtime::LambdaEvent;

use crate::in_order::{self, Swept};

/// The attribute the sweep stamps on an item it re-drives (epoch milliseconds).
pub const REDRIVE: &str = "redrive_requested_at";

/// The attribute naming why an item was parked (a code, never a value from the payload).
pub const FAILURE_REASON: &str = "failure_reason";

/// How the other side takes a repeat of the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeats {
    /// A repeat is answered as a replay: the other side deduplicates by the item's key, sent as
    /// its idempotency key (`intent-relay`'s provider, S6). The item is read strongly
    /// consistently before acting (an item settled since its record was written is not acted on
    /// again: `AlreadySettled`), every write is conditioned on it still waiting (a lost
    /// condition is `AlreadySettled` too), and a settle write that fails is retried: the
    /// action again, answered as a replay.
    Answered,
    /// A repeat is a second effect (a message sent again to a standard queue). Once the action
    /// is done nothing is retried (S16): a settle write that fails is logged, not retried, and
    /// the writes are conditioned only on the item existing. Delivery is at least once: a retry
    /// from an earlier checkpoint acts again.
    Effected,
}

/// How a relay's items look in their table, and the names of its metrics.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The item's key attribute (a string): it names the item in every write.
    pub key: &'static str,
    /// When the item was written (epoch milliseconds): the sweep's age; an item without it
    /// counts as old.
    pub created: &'static str,
    /// The attribute that says whether the item is settled.
    pub status: &'static str,
    /// What `status` holds while the item waits; `None`: it is absent.
    pub waiting: Option<&'static str>,
    /// `status` once the action is done.
    pub settled: &'static str,
    /// `status` once parked (with [`FAILURE_REASON`] and the time in `parked_at`).
    pub parked: &'static str,
    /// When the item was parked (epoch milliseconds).
    pub parked_at: &'static str,
    /// How the other side takes a repeat.
    pub repeats: Repeats,
    /// The metric of the items settled now (`Confirmed`, `Forwarded`).
    pub settled_metric: &'static str,
    /// The sweep's metric of the items still waiting (`PendingIntents`, `Pending`).
    pub waiting_metric: &'static str,
}

impl Layout {
    /// Whether `item` (an image or a stored item) still waits.
    pub fn waits(&self, item: &Item) -> bool {
        match self.waiting {
            Some(value) => text(item, self.status) == Some(value),
            None => !item.0.contains_key(self.status),
        }
    }
}

/// What a stream record is to a relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read<T> {
    /// Not for the relay: its own settle updates, TTL or manual deletions. Nothing to do.
    Ignored,
    /// An item whose image is already settled: nothing to do (`AlreadySettled`).
    Settled,
    /// No new image naming the item: the stream's view type carries no new images. A
    /// configuration fault, so retried, never guessed around.
    NoImage,
    /// An item that no retry could act on as it is (S16): parked with this reason code.
    Park {
        /// The item's key.
        key: String,
        /// Why (a code).
        reason: &'static str,
    },
    /// An item to act on.
    Act {
        /// The item's key.
        key: String,
        /// What the action needs of it.
        item: T,
    },
}

/// Why an action did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It may succeed later (5xx, 429, timeouts, a queue down): the stream retries from this
    /// record. The reason is for the log.
    Transient(String),
    /// It never will, as the item is (a 4xx, a message the queue refuses): the item is parked
    /// with this code (S15).
    Permanent(String),
}

/// The per-relay part: how to read a record, and the action on one item.
pub trait Act: Send + Sync + 'static {
    /// What the action needs of an item, read from its stream image.
    type Item: Send + Sync;

    /// What `record` is to the relay.
    fn read(&self, record: &EventRecord) -> Read<Self::Item>;

    /// The action on the item `key`: the attributes to settle it with (besides its status), or
    /// why not.
    fn act(
        &self,
        key: &str,
        item: &Self::Item,
    ) -> impl Future<Output = Result<Item, Failure>> + Send;
}

/// How one record ended, when it did not fail transiently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Settled,
    Parked,
    AlreadySettled,
    Ignored,
}

/// The account of one invocation: every record ends in exactly one of these counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Records in the batch.
    pub records: u64,
    /// Items acted on and settled now.
    pub settled: u64,
    /// Items parked (never actionable, or refused for good): alarmed on.
    pub parked: u64,
    /// Items not acted on because they were already settled ([`Repeats::Answered`] only).
    pub already_settled: u64,
    /// Records that are not for the relay.
    pub ignored: u64,
    /// The record that failed transiently (0 or 1): the stream retries from it.
    pub transient: u64,
    /// Records not attempted: behind a transient failure, or not reached before the deadline.
    pub deferred: u64,
}

impl Tally {
    /// Whether every record has exactly one ending.
    pub fn closes(&self) -> bool {
        self.records
            == self.settled
                + self.parked
                + self.already_settled
                + self.ignored
                + self.transient
                + self.deferred
    }

    /// One CloudWatch EMF record of this tally for `function` (namespace `lambda-dedup`,
    /// dimension `Function`), the settled count named as `layout` says; `AlreadySettled` only
    /// where repeats are answered. Its names are not the SQS functions' outcomes, so `cargo
    /// xtask audit` leaves it alone.
    pub fn emf_line(&self, function: &str, layout: &Layout) -> String {
        let mut metrics = vec![
            ("Records", "Count", self.records),
            (layout.settled_metric, "Count", self.settled),
            ("Parked", "Count", self.parked),
        ];
        if layout.repeats == Repeats::Answered {
            metrics.push(("AlreadySettled", "Count", self.already_settled));
        }
        metrics.extend([
            ("Ignored", "Count", self.ignored),
            ("Transient", "Count", self.transient),
            ("Deferred", "Count", self.deferred),
        ]);
        crate::emf::line(function, &metrics)
    }
}

/// What one stream invocation answers and counted.
#[derive(Debug)]
pub struct Handled {
    /// The partial batch response: empty, or the one record the stream retries from.
    pub response: DynamoDbEventResponse,
    /// The account, also printed as an EMF line.
    pub tally: Tally,
}

/// A relay, built in `main` from its settings: the function, its table, how its items look and
/// its action; [`Relay::service`] gives it its store.
#[derive(Debug)]
pub struct Relay<A> {
    function: String,
    table: String,
    layout: Layout,
    act: A,
    per_record: Duration,
    margin: Duration,
    redrive_after: Duration,
}

impl<A: Act> Relay<A> {
    /// The relay of `function` over the items of `table`, laid out as `layout`, acting with
    /// `act`; by default a record needs 3 s left to be started and the sweep re-drives items
    /// waiting over an hour.
    pub fn new(function: &str, table: String, layout: Layout, act: A) -> Self {
        Self {
            function: function.to_owned(),
            table,
            layout,
            act,
            per_record: Duration::from_millis(3_000),
            margin: crate::bound::DEFAULT_MARGIN,
            redrive_after: Duration::from_secs(3_600),
        }
    }

    /// The time kept before the invocation's deadline to answer: a record still not done then
    /// is abandoned and retried (`DEDUP_DEADLINE_MARGIN_MS`, [`crate::settings::deadline_margin_in`];
    /// default [`crate::bound::DEFAULT_MARGIN`]).
    pub fn deadline_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// A record is started only with `per_record` left before the invocation's deadline (one
    /// action, bounded, and the writes around it).
    pub fn per_record(mut self, per_record: Duration) -> Self {
        self.per_record = per_record;
        self
    }

    /// The sweep re-drives items waiting longer than `redrive_after`.
    pub fn redrive_after(mut self, redrive_after: Duration) -> Self {
        self.redrive_after = redrive_after;
        self
    }

    /// The service, its items in `items` (`DynamoItems` in Lambda, a `MemoryStore` in tests):
    /// stream events and schedule events in, answers out. Give it to `lambda_runtime::run`.
    pub fn service(self, items: impl ItemStore + 'static) -> RelayService<A> {
        RelayService {
            relay: Arc::new(Running {
                relay: self,
                items: Arc::new(items),
            }),
        }
    }
}

#[derive(Debug)]
struct Running<A> {
    relay: Relay<A>,
    items: Arc<dyn ItemStore>,
}

/// A relay's service: a stream event (with `Records`) is handled in order, any other event
/// (the schedule's) runs the sweep. Cheap to clone.
#[derive(Debug)]
pub struct RelayService<A> {
    relay: Arc<Running<A>>,
}

impl<A> Clone for RelayService<A> {
    fn clone(&self) -> Self {
        Self {
            relay: self.relay.clone(),
        }
    }
}

impl<A: Act> RelayService<A> {
    /// The time left before the deadline that a record needs to be started.
    pub fn per_record(&self) -> Duration {
        self.relay.relay.per_record
    }

    /// How long an item may wait before the sweep re-drives it.
    pub fn redrive_after(&self) -> Duration {
        self.relay.relay.redrive_after
    }

    /// Handles one stream batch in order (see the module's rules) before `deadline` (the
    /// invocation's; `None` for no limit), prints the tally as one EMF line, and answers with
    /// the record the stream must retry from, if any.
    pub async fn handle(&self, event: &Event, deadline: Option<SystemTime>) -> Handled {
        let r = &self.relay;
        let (per_record, margin) = (r.relay.per_record, r.relay.margin);
        let walk = in_order::walk(&event.records, per_record, margin, deadline, |record| {
            r.step(record)
        })
        .await;
        let mut tally = Tally {
            records: event.records.len() as u64,
            transient: walk.transient,
            deferred: walk.deferred,
            ..Tally::default()
        };
        for ending in walk.done {
            match ending {
                Ending::Settled => tally.settled += 1,
                Ending::Parked => tally.parked += 1,
                Ending::AlreadySettled => tally.already_settled += 1,
                Ending::Ignored => tally.ignored += 1,
            }
        }
        // EMF must be a bare JSON line on stdout for CloudWatch to extract it, hence not `tracing`.
        println!("{}", tally.emf_line(&r.relay.function, &r.relay.layout));
        tracing::info!(
            function = %r.relay.function,
            tally = ?tally,
            closes = tally.closes(),
            "stream batch done"
        );
        Handled {
            response: walk.response,
            tally,
        }
    }

    /// The sweep (see the module's rules), at `now`: prints its result as one EMF line and
    /// returns it. A store error stops it (the next scheduled run starts over; stamps are
    /// idempotent).
    pub async fn sweep(&self, now: SystemTime) -> Result<Swept, StoreError> {
        let r = &self.relay;
        let (layout, table) = (&r.relay.layout, &r.relay.table);
        let filter = match layout.waiting {
            Some(value) => Filter::Equals(layout.status.to_owned(), value.to_owned()),
            None => Filter::Missing(layout.status.to_owned()),
        };
        let waiting = r.items.scan(table, &filter).await?;
        let now_ms = lambda_dedup::clock::epoch_millis(now);
        let mut swept = Swept {
            pending: waiting.len() as u64,
            ..Swept::default()
        };
        for item in waiting {
            let Some(key) = text(&item, layout.key) else {
                continue;
            };
            let age = millis(&item, layout.created)
                .map(|c| Duration::from_millis(now_ms.saturating_sub(c)));
            if let Some(age) = age {
                swept.oldest_pending = swept.oldest_pending.max(age);
            }
            if age.is_some_and(|a| a <= r.relay.redrive_after) {
                continue;
            }
            let stamp = r
                .update(key, "SET #redrive = :now", true)
                .name("#redrive", REDRIVE)
                .value(":now", now_ms);
            if r.items.write(&[stamp]).await? {
                swept.redriven += 1;
            }
        }
        tracing::info!(
            function = %r.relay.function,
            pending = swept.pending,
            redriven = swept.redriven,
            oldest_pending_s = swept.oldest_pending.as_secs(),
            "sweep done"
        );
        println!(
            "{}",
            swept.emf_line(&r.relay.function, layout.waiting_metric)
        );
        Ok(swept)
    }

    /// One invocation: a stream batch (the payload has `Records`) or the sweep (any other).
    async fn invoke(
        self,
        event: LambdaEvent<serde_json::Value>,
    ) -> Result<serde_json::Value, lambda_runtime::Error> {
        if event.payload.get("Records").is_some() {
            let deadline = crate::deadline(&event.context);
            let stream: Event = serde_json::from_value(event.payload)?;
            let handled = self.handle(&stream, deadline).await;
            Ok(serde_json::to_value(handled.response)?)
        } else {
            Ok(self.sweep(SystemTime::now()).await?.answer())
        }
    }
}

/// The number attribute `name` of `item` (stored as a number or its text).
fn millis(item: &Item, name: &str) -> Option<u64> {
    match item.0.get(name) {
        Some(Value::N(n) | Value::S(n)) => n.parse().ok(),
        _ => None,
    }
}

impl<A: Act> Running<A> {
    /// One record: `Err` is a transient failure (the stream retries from this record).
    async fn step(&self, record: &EventRecord) -> Result<Ending, String> {
        let layout = &self.relay.layout;
        let (key, item) = match self.relay.act.read(record) {
            Read::Ignored => return Ok(Ending::Ignored),
            Read::Settled => return Ok(Ending::AlreadySettled),
            Read::NoImage => {
                return Err(format!(
                    "the record has no new image with an {}: the stream must carry new \
                     images (NEW_IMAGE or NEW_AND_OLD_IMAGES)",
                    layout.key
                ));
            }
            Read::Park { key, reason } => return self.park(&key, reason).await,
            Read::Act { key, item } => (key, item),
        };
        // The stream replays records (a retried or bisected batch, an invocation that died
        // after settling): the image says waiting, the table may not. Checked strongly
        // consistently before acting, so a settled or parked item is never acted on again.
        if layout.repeats == Repeats::Answered && !self.still_waiting(&key).await? {
            tracing::info!(key = %key, "already settled; not acted on");
            return Ok(Ending::AlreadySettled);
        }
        match self.relay.act.act(&key, &item).await {
            Ok(settle) => self.settle(&key, settle).await,
            Err(Failure::Permanent(code)) => self.park(&key, &code).await,
            Err(Failure::Transient(reason)) => Err(reason),
        }
    }

    /// Whether the item `key` still waits, read strongly consistently.
    async fn still_waiting(&self, key: &str) -> Result<bool, String> {
        let layout = &self.relay.layout;
        let item = self
            .items
            .read(&self.relay.table, &Item::new().with(layout.key, key))
            .await
            .map_err(|e| format!("reading the item: {e}"))?;
        Ok(item.is_some_and(|i| layout.waits(&i)))
    }

    /// An update of the item `key` by `expression`, conditioned on the item existing and, when
    /// `waiting` (or repeats are answered), on it still waiting.
    fn update(&self, key: &str, expression: &str, waiting: bool) -> Effect {
        let layout = &self.relay.layout;
        let update = Effect::update(&self.relay.table, Item::new().with(layout.key, key))
            .expression(expression)
            .name("#key", layout.key);
        if !(waiting || layout.repeats == Repeats::Answered) {
            return update.condition("attribute_exists(#key)");
        }
        let update = update.name("#status", layout.status);
        match layout.waiting {
            Some(value) => update
                .condition("attribute_exists(#key) AND #status = :waiting")
                .value(":waiting", value),
            None => update.condition("attribute_exists(#key) AND attribute_not_exists(#status)"),
        }
    }

    /// Settles the item `key`: its status and the action's attributes `settle`. Bookkeeping
    /// only: the action is done; the condition makes a repeat a no-op.
    async fn settle(&self, key: &str, settle: Item) -> Result<Ending, String> {
        let layout = &self.relay.layout;
        let mut set = vec!["#status = :settled".to_owned()];
        set.extend((0..settle.0.len()).map(|i| format!("#a{i} = :a{i}")));
        let mut update = self
            .update(key, &format!("SET {}", set.join(", ")), false)
            .name("#status", layout.status)
            .value(":settled", layout.settled);
        for (i, (name, value)) in settle.0.into_iter().enumerate() {
            update = update
                .name(&format!("#a{i}"), &name)
                .value(&format!(":a{i}"), value);
        }
        let answered = layout.repeats == Repeats::Answered;
        match self.items.write(&[update]).await {
            Ok(true) => {
                tracing::info!(key, "settled");
                Ok(Ending::Settled)
            }
            Ok(false) if answered => Ok(Ending::AlreadySettled),
            Ok(false) => Ok(Ending::Settled),
            Err(e) if answered => Err(format!("settling the item: {e}")),
            // S16: nothing may fail after the effect. The status is for people and sweeps; a
            // failure to write it is logged, not retried (a retry would act again).
            Err(e) => {
                tracing::warn!(key, error = %e, "acted on, but the item's status was not written");
                Ok(Ending::Settled)
            }
        }
    }

    /// Parks the item `key` with `reason` (a code, never a value from the payload or an
    /// answer).
    async fn park(&self, key: &str, reason: &str) -> Result<Ending, String> {
        let layout = &self.relay.layout;
        let now = lambda_dedup::clock::epoch_millis(SystemTime::now());
        let park = self
            .update(
                key,
                "SET #status = :parked, #reason = :reason, #parked_at = :now",
                false,
            )
            .name("#status", layout.status)
            .name("#reason", FAILURE_REASON)
            .name("#parked_at", layout.parked_at)
            .value(":parked", layout.parked)
            .value(":reason", reason)
            .value(":now", now);
        match self.items.write(&[park]).await {
            Ok(true) => {
                tracing::warn!(key, reason, "refused for good; parked");
                Ok(Ending::Parked)
            }
            Ok(false) if layout.repeats == Repeats::Answered => Ok(Ending::AlreadySettled),
            Ok(false) => Ok(Ending::Parked),
            Err(e) => Err(format!("parking the item: {e}")),
        }
    }
}

impl<A: Act> lambda_runtime::Service<LambdaEvent<serde_json::Value>> for RelayService<A> {
    type Response = serde_json::Value;
    type Error = lambda_runtime::Error;
    type Future = Pin<Box<dyn Future<Output = Result<serde_json::Value, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, event: LambdaEvent<serde_json::Value>) -> Self::Future {
        // Boxed here, so the deep future of the walk is one pointer to the runtime.
        Box::pin(self.clone().invoke(event))
    }
}

#[cfg(test)]
mod tests {
    //! The shared walk on the memory store, with a scripted action: each record's new image
    //! names its item (`key`) and what the action meets (`script`).

    use super::*;
    use lambda_dedup::FaultKind;
    use lambda_dedup_memory::{Injected, MemoryStore, Op};
    use serde_json::json;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const ANSWERED: Layout = Layout {
        key: "key",
        created: "created_at",
        status: "status",
        waiting: Some("PENDING"),
        settled: "DONE",
        parked: "FAILED",
        parked_at: "failed_at",
        repeats: Repeats::Answered,
        settled_metric: "Done",
        waiting_metric: "Waiting",
    };

    const EFFECTED: Layout = Layout {
        waiting: None,
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
            Relay::new("test-relay", "items".into(), layout, self.act.clone())
                .per_record(per_record)
                .service(self.store.clone())
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
    async fn items_are_settled_after_acting_parked_for_good_and_a_transient_one_is_the_checkpoint()
    {
        for layout in [ANSWERED, EFFECTED] {
            let w = World::new();
            let waiting = layout.waiting;
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
                assert_eq!(text(&item, FAILURE_REASON), Some(reason));
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
            w.put("a", layout.waiting);
            // Every item call but the consistent read before the action fails once.
            let seen = Arc::new(AtomicUsize::new(0));
            let reads_first = usize::from(layout.repeats == Repeats::Answered);
            let store = w.store.with_fault_hook(Arc::new(move |op, _| {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                (op == Op::Items && n == reads_first)
                    .then_some(Injected::Fail(FaultKind::Throttled))
            }));
            let relay = Relay::new("test-relay", "items".into(), layout, w.act.clone())
                .per_record(Duration::from_millis(100))
                .service(store);
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
            put("old", layout.waiting, Some(7_200));
            put("unknown", layout.waiting, None);
            put("recent", layout.waiting, Some(60));
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
            let stamped = |key: &str| w.item(key).0.contains_key(REDRIVE);
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
            let v: serde_json::Value =
                serde_json::from_str(&t.emf_line("f", &layout)).expect("json");
            assert_eq!(v["Done"], 1);
            assert_eq!(v.get("AlreadySettled").is_some(), expected, "{layout:?}");
        }
    }
}
