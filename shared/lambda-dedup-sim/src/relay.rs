//! The relay lane: the runtime's real relay (`RelayService::handle` — the walk in shard order,
//! the strongly consistent read, the action, settle or park, the tally — and its sweep), built
//! by the runtime's builder, on the intents table of the simulated store and its stream
//! ([`crate::relay_store`]). The action is a call to the simulated provider with the intent's
//! key as its idempotency key (slow at times, applies then answers 500, refuses some intents
//! for good). The stream is retried from the record the response names, a record is skipped
//! after its attempts (the on-failure destination: the sweep re-drives what it left waiting),
//! and an invocation may crash at any store-call boundary.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::items::text;
use lambda_dedup::{Clock, Item};
use lambda_dedup_config::{Env, RelayVars};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::Dedup;
use lambda_dedup_runtime::aws_lambda_events::event::dynamodb::{Event, EventRecord};
use lambda_dedup_runtime::relay::{
    Act, Attribute, Attributes, Failure, Layout, Metric, Read, RelayService, Repeats, StatusValue,
    Waiting,
};

use crate::clock::{EPOCH_SECS, SimClock};
use crate::invariants::Invariant;
use crate::provider::Answer;
use crate::relay_store::{
    Change, KEY, Relayed, SETTLED, SimItems, TABLE, Tables, dynamodb_json, relayed,
};
use crate::sqs;
use crate::world::{Shared, lock};

/// Attempts at one record before the stream skips it.
const ATTEMPTS: u32 = 4;
/// The sweep's schedule, in ms.
const SWEEP_EVERY_MS: u64 = 60_000;

/// The intents' layout, as `intent-relay`'s.
const LAYOUT: Layout = Layout {
    attributes: Attributes {
        key: Attribute::new(KEY),
        created: Attribute::new("created_at"),
        status: Attribute::new("status"),
        parked_at: Attribute::new("failed_at"),
    },
    waiting: Waiting::Holds(StatusValue::new("PENDING")),
    settled: StatusValue::new(SETTLED),
    parked: StatusValue::new("FAILED"),
    repeats: Repeats::Answered,
    settled_metric: Metric::new("Confirmed"),
    waiting_metric: Metric::new("PendingIntents"),
};

/// The action: one call to the provider with the intent's key as its idempotency key.
#[derive(Debug, Clone)]
pub struct ProviderCall {
    world: Shared,
    relayed: Arc<Mutex<Relayed>>,
}

/// What the action needs of an intent: its event and whether the provider refuses it.
#[derive(Debug, Clone)]
pub struct Intent {
    event: String,
    refused: bool,
}

impl ProviderCall {
    async fn latency(&self) {
        let ms = {
            let mut w = lock(&self.world);
            let incident = w.now_ms() < w.provider.incident_until;
            if incident || w.rng.chance(30) {
                w.rng.between(1_000, 4_000)
            } else {
                w.rng.between(5, 80)
            }
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

impl Act for ProviderCall {
    type Item = Intent;

    fn read(&self, record: &EventRecord) -> Read<Intent> {
        let image: Option<serde_json::Value> =
            lambda_dedup_runtime::relay::image_part(&record.change.new_image);
        let Some(image) = image else {
            return Read::NoImage;
        };
        let Some(key) = image[KEY].as_str().map(str::to_owned) else {
            return Read::NoImage;
        };
        if image["status"] != "PENDING" {
            return Read::Ignored;
        }
        let refused = image["refused"].as_bool().unwrap_or(false);
        Read::Act {
            item: Intent {
                event: key.clone(),
                refused,
            },
            key,
        }
    }

    async fn act(&self, key: &str, intent: &Intent) -> Result<Item, Failure> {
        self.latency().await;
        let answer = {
            let mut w = lock(&self.world);
            let now = w.now_ms();
            let incident = now < w.provider.incident_until;
            if intent.refused {
                Err(Failure::Permanent("refused_422".into()))
            } else if w.rng.chance(if incident { 500 } else { 40 }) {
                Err(Failure::Transient("503".into()))
            } else {
                let fail = w.rng.chance(60);
                match w.provider.call(key, &intent.event, now, fail) {
                    Answer::Done(result) => Ok(result),
                    Answer::AppliedThenFailed => Err(Failure::Transient("500".into())),
                }
            }
        };
        if answer.is_ok() {
            relayed(&self.relayed).answered.insert(key.to_owned());
        }
        self.latency().await;
        answer.map(|receipt| Item::new().with("receipt", receipt.as_str()))
    }
}

/// A relay's table, its stream and each instance's relay (the intents' with [`ProviderCall`],
/// the inbox's forwarder with its own action).
#[derive(Debug)]
pub struct RelayLane<A: Act = ProviderCall> {
    /// The stream and what the action saw.
    pub relayed: Arc<Mutex<Relayed>>,
    services: Vec<RelayService<A>>,
    clocks: Vec<SimClock>,
    world: Shared,
    data: MemoryStore,
    table: &'static str,
    key: &'static str,
    layout: Layout,
    /// Producers still writing to the table: the lane is not quiet before they are done.
    pub producers: AtomicUsize,
}

impl RelayLane<ProviderCall> {
    /// A lane on `data` (its `intents` table created here), one relay per instance, each
    /// built by the runtime's builder from the function's variables.
    pub fn new(data: &MemoryStore, clocks: &[SimClock], world: &Shared) -> Self {
        data.create_table(TABLE, KEY);
        let relayed = Arc::new(Mutex::new(Relayed::default()));
        let vars = lambda_dedup_config::relay_vars!("INTENTS_TABLE", "INTENTS", 3_000);
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "sim"),
            ("INTENTS_TABLE", TABLE),
            ("INTENTS_REDRIVE_AFTER_SECONDS", "30"),
        ]);
        let services = clocks
            .iter()
            .map(|c| {
                let tables = Tables {
                    data: data.clone(),
                    items: Arc::new(SimItems::new(data, world, *c, &relayed)),
                };
                let act = ProviderCall {
                    world: world.clone(),
                    relayed: relayed.clone(),
                };
                built(&env, "intent-relay", tables, &vars, LAYOUT, act)
            })
            .collect();
        Self::of(services, relayed, data, clocks, world, TABLE, KEY, LAYOUT)
    }

    /// Records `n` intents, pending (one in six refused for good by the provider), each on the
    /// stream as an insert.
    pub fn produce(&self, n: u64) {
        let mut w = lock(&self.world);
        let created = EPOCH_SECS * 1_000 + w.now_ms();
        for i in 0..n {
            let id = format!("intent-{i}");
            w.ledger.event(&id);
            let item = Item::new()
                .with(KEY, id.as_str())
                .with("status", "PENDING")
                .with("created_at", created)
                .with("refused", w.rng.chance(160));
            if let Err(e) = self.data.put_item(TABLE, item.clone()) {
                panic!("an intent: {e}");
            }
            relayed(&self.relayed).stream.append(item, true);
        }
    }

    /// The provider's applications per intent: at most once each.
    pub fn check_effects(&self) {
        let mut w = lock(&self.world);
        for item in self.data.items(TABLE) {
            let Some(id) = text(&item, KEY) else { continue };
            let n = w.provider.applied(id);
            w.ledger.effects_seen(id, n);
        }
    }

    /// At the end: each intent settled is acknowledged, each parked is dead; the stream's
    /// records not passed are left.
    pub fn finish(&self) -> Vec<String> {
        self.check_effects();
        let mut w = lock(&self.world);
        for item in self.data.items(TABLE) {
            let Some(id) = text(&item, KEY) else { continue };
            match text(&item, "status") {
                Some(SETTLED) => w.ledger.event(id).acked = true,
                Some("FAILED") => w.ledger.event(id).dead = true,
                _ => {}
            }
        }
        drop(w);
        self.left()
    }
}

/// One instance's relay as `function`'s main builds it: the runtime's builder reading `env`, on
/// the items of `tables`, relaying with `vars`, `layout` and `act`. A setting it refuses is the
/// simulation's own mistake.
pub(crate) fn built<A: Act>(
    env: &Env,
    function: &str,
    tables: Tables,
    vars: &RelayVars,
    layout: Layout,
    act: A,
) -> RelayService<A> {
    Dedup::read(env, function)
        .map_err(|e| e.to_string())
        .and_then(|d| {
            RelayService::new(d.on(tables.into_items()), vars, layout, act)
                .map_err(|e| e.to_string())
        })
        .unwrap_or_else(|e| panic!("{function}'s settings: {e}"))
}

impl<A: Act> RelayLane<A> {
    /// The stream's records not passed by its checkpoint.
    pub fn left(&self) -> Vec<String> {
        relayed(&self.relayed)
            .stream
            .batch(usize::MAX)
            .iter()
            .map(|c| format!("{} record {}", self.table, c.seq_no))
            .collect()
    }

    /// A lane of `services` (one per instance) over `table` of `data`, keyed by `key`, its
    /// items laid out as `layout`, its stream `relayed`.
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        services: Vec<RelayService<A>>,
        relayed: Arc<Mutex<Relayed>>,
        data: &MemoryStore,
        clocks: &[SimClock],
        world: &Shared,
        table: &'static str,
        key: &'static str,
        layout: Layout,
    ) -> Self {
        Self {
            relayed,
            services,
            clocks: clocks.to_vec(),
            world: world.clone(),
            data: data.clone(),
            table,
            key,
            layout,
            producers: AtomicUsize::new(0),
        }
    }

    fn waiting(&self) -> usize {
        self.data
            .items(self.table)
            .iter()
            .filter(|i| self.layout.waits(i))
            .count()
    }

    fn quiet(&self) -> bool {
        self.producers.load(Ordering::SeqCst) == 0
            && relayed(&self.relayed).stream.batch(1).is_empty()
            && self.waiting() == 0
    }

    /// The stream's poller: one invocation at a time, until nothing waits.
    pub async fn poll(self: Rc<Self>, end_ms: u64) {
        loop {
            if self.quiet() || lock(&self.world).now_ms() > end_ms {
                return;
            }
            let batch = relayed(&self.relayed).stream.batch(5);
            let (inst, crash_ms, gap) = self.draw();
            if !batch.is_empty() {
                self.invoke(inst, batch, crash_ms).await;
            }
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
    }

    /// The schedule's sweep, every minute, until a sweep finds nothing waiting.
    pub async fn sweep(self: Rc<Self>, end_ms: u64) {
        let mut first = true;
        loop {
            tokio::time::sleep(Duration::from_millis(SWEEP_EVERY_MS)).await;
            if (self.quiet() && !first) || lock(&self.world).now_ms() > end_ms {
                return;
            }
            first = false;
            let (inst, crash_ms, _) = self.draw();
            let now = self.clocks[inst].now();
            let sweep = self.services[inst].sweep(now);
            let line = match tokio::time::timeout(Duration::from_millis(crash_ms), sweep).await {
                Ok(Ok(s)) => format!(
                    "i{inst} sweep {}: {} pending, {} redriven",
                    self.table, s.pending, s.redriven
                ),
                Ok(Err(e)) => format!("i{inst} sweep stopped: {e}"),
                Err(_) => format!("i{inst} sweep crashed at {crash_ms} ms"),
            };
            lambda_dedup_runtime::emf::take_captured();
            lock(&self.world).log(line);
        }
    }

    /// An instance, a crash moment (or the timeout) and the gap before the next poll.
    fn draw(&self) -> (usize, u64, u64) {
        let mut w = lock(&self.world);
        let inst = sqs::instance(&mut w.rng, self.clocks.len());
        let crash = sqs::stop_ms(&mut w.rng);
        (inst, crash, w.rng.between(50, 1_000))
    }

    async fn invoke(&self, inst: usize, batch: Vec<Change>, crash_ms: u64) {
        let records: Vec<serde_json::Value> = batch.iter().map(|c| record(c, self.key)).collect();
        let event: Event = match serde_json::from_value(serde_json::json!({ "Records": records })) {
            Ok(e) => e,
            Err(e) => panic!("a stream event: {e}"),
        };
        let handle = self.services[inst].handle(&event, None);
        let handled = tokio::time::timeout(Duration::from_millis(crash_ms), handle).await;
        lambda_dedup_runtime::emf::take_captured();
        let first = batch.first().map_or(0, |c| c.seq_no);
        let last = batch.last().map_or(0, |c| c.seq_no);
        let retry_from = match handled {
            Err(_) => {
                lock(&self.world).log(format!("i{inst} {} crashed at {crash_ms} ms", self.table));
                Some(first)
            }
            Ok(h) => {
                let t = h.tally;
                let mut w = lock(&self.world);
                w.log(format!(
                    "i{inst} relay {} {first}..{last}: {} settled, {} parked, {} already, {} ignored, {} transient, {} deferred",
                    self.table, t.settled, t.parked, t.already_settled, t.ignored, t.transient, t.deferred
                ));
                if !t.closes() {
                    w.violate(Invariant::Account, format!("i{inst} relay tally {t:?}"));
                }
                h.response
                    .batch_item_failures
                    .first()
                    .and_then(|f| f.item_identifier.as_deref())
                    .and_then(|id| id.parse::<u64>().ok())
            }
        };
        self.retry_from(retry_from, last);
    }

    /// Moves the checkpoint to `retry_from` (`None`: past `last`); the record retried from
    /// failed once more, and is skipped after its attempts.
    fn retry_from(&self, retry_from: Option<u64>, last: u64) {
        let mut r = relayed(&self.relayed);
        let s = &mut r.stream;
        let Some(seq_no) = retry_from else {
            s.checkpoint = s.checkpoint.max(usize::try_from(last).unwrap_or(0));
            return;
        };
        s.checkpoint = s
            .checkpoint
            .max(usize::try_from(seq_no.saturating_sub(1)).unwrap_or(0));
        let i = s.checkpoint;
        let Some(c) = s.changes.get_mut(i) else {
            return;
        };
        c.attempts += 1;
        if c.attempts >= ATTEMPTS {
            s.checkpoint += 1;
            let key = text(&c.image, self.key).unwrap_or_default().to_owned();
            drop(r);
            lock(&self.world).log(format!("relay stream skipped a record of {key}"));
        }
    }
}

/// A stream record of `change`, as Lambda delivers it.
fn record(change: &Change, key_attr: &str) -> serde_json::Value {
    let key = text(&change.image, key_attr).unwrap_or_default();
    serde_json::json!({
        "eventID": format!("r{}", change.seq_no), "eventName": change.name,
        "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": { key_attr: { "S": key } },
            "NewImage": dynamodb_json(&change.image),
            "SequenceNumber": change.seq_no.to_string(),
            "SizeBytes": 40, "StreamViewType": "NEW_IMAGE"
        }
    })
}
