//! The SQS lanes: one queue feeding one real flow of the library (transactional, leased with
//! fencing, create-once) on every instance, through `run_batch`, each invocation bounded by
//! its timeout or cut short by a crash (its future dropped).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

use lambda_dedup::{Clock, Effect, Item, Message, SequenceSource, Value};
use lambda_dedup_engine::{
    Account, CreateOnceDeduplicator, Deduplicator, HandlerError, LeasedDeduplicator, Outcome, Plan,
    Reason, SequencedDeduplicator, run_batch, run_batch_transactional,
};
use lambda_dedup_memory::MemoryStore;

use crate::broker::{Msg, Queue};
use crate::clock::SimClock;
use crate::events;
use crate::invariants::Invariant;
use crate::panics;
use crate::provider::Answer;
use crate::rng::Rng;
use crate::store::SimStore;
use crate::world::{Shared, lock};

/// Which flow a lane runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// `Deduplicator::transactional`: the mark and an `ADD` on the event's item (S5).
    Transactional,
    /// `run_batch_transactional`: the whole batch's marks and effects in as few transactions
    /// as possible (batch-transaction mode).
    BatchTransactional,
    /// `LeasedDeduplicator::leased`: claim, the provider's call, complete (S6).
    Leased,
    /// `CreateOnceDeduplicator::create_once`: one conditional put (S5, create-once mode).
    CreateOnce,
    /// `SequencedDeduplicator::sequenced` on a FIFO queue, one message group per aggregate
    /// (sequence mode: the high-water in the effect item).
    FifoSequence,
}

impl Flow {
    fn name(self) -> &'static str {
        match self {
            Flow::Transactional => "tx",
            Flow::BatchTransactional => "batch",
            Flow::Leased => "calls",
            Flow::CreateOnce => "once",
            Flow::FifoSequence => "fifo",
        }
    }
}

#[derive(Debug)]
enum Dedup {
    Tx(Deduplicator),
    Leased(LeasedDeduplicator),
    Once(CreateOnceDeduplicator),
    Seq(SequencedDeduplicator),
}

/// One SQS lane: its queue, its data and each instance's deduplicator.
#[derive(Debug)]
pub struct SqsLane {
    flow: Flow,
    /// The queue.
    pub queue: Mutex<Queue>,
    data: MemoryStore,
    dedups: Vec<Dedup>,
    clocks: Vec<SimClock>,
    world: Shared,
    /// Events whose replay (and, as `redrive <event>`, whose redrive) is already scheduled.
    replayed: Mutex<BTreeMap<String, ()>>,
}

/// The transactional flows' effect: an `ADD` on the event's own item, within its tenant (S1:
/// `tx-3` of `acme`, `tx-3@globex` of another tenant).
fn credit(e: &lambda_dedup::Derived) -> Result<Plan, HandlerError> {
    let mut ev = HandlerError::data(e)?["ev"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if e.tenant != "acme" {
        ev = format!("{ev}@{}", e.tenant);
    }
    let add = Effect::update("effects", Item::new().with("ev", ev.as_str()))
        .expression("ADD applied :one")
        .value(":one", 1);
    Ok(Plan {
        effects: vec![add],
        result: None,
    })
}

/// Timing of the invocations, in ms.
pub const TIMEOUT_MS: u64 = 5_000;

/// One of `n` instances, drawn.
pub(crate) fn instance(rng: &mut Rng, n: usize) -> usize {
    usize::try_from(rng.between(0, n as u64 - 1)).unwrap_or(0)
}

/// When an invocation stops: 150 times in a thousand it crashes at a moment drawn within its
/// timeout, otherwise it has the whole timeout.
pub(crate) fn stop_ms(rng: &mut Rng) -> u64 {
    if rng.chance(150) {
        rng.between(1, TIMEOUT_MS)
    } else {
        TIMEOUT_MS
    }
}
/// The store's lease.
pub const LEASE: Duration = Duration::from_secs(2);

impl SqsLane {
    /// A lane of `flow` on `data`, one deduplicator per instance clock.
    pub fn new(
        flow: Flow,
        data: MemoryStore,
        clocks: &[SimClock],
        world: &Shared,
        provider_retention: Duration,
    ) -> Self {
        let dedups = clocks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let store = SimStore::new(&data, world, i, *c, LEASE);
                let spec = events::spec(flow.name());
                match flow {
                    Flow::Transactional | Flow::BatchTransactional => {
                        // Each instance's warm cache and the duplicate pre-filter, as the
                        // seed says.
                        let mut w = lock(world);
                        let mut d = Deduplicator::new(spec, store);
                        if w.rng.chance(500) {
                            d = d.with_cache(64);
                        }
                        Dedup::Tx(d.with_duplicate_prefilter(w.rng.chance(500)))
                    }
                    Flow::Leased => Dedup::Leased(
                        Deduplicator::new(spec, store)
                            .with_provider_key_retention(provider_retention),
                    ),
                    Flow::CreateOnce => Dedup::Once(CreateOnceDeduplicator::new(spec, store)),
                    Flow::FifoSequence => Dedup::Seq(SequencedDeduplicator::new(spec, store)),
                }
            })
            .collect();
        let mut queue = Queue::new(10_000, 4);
        queue.fifo = flow == Flow::FifoSequence;
        Self {
            flow,
            queue: Mutex::new(queue),
            data,
            dedups,
            clocks: clocks.to_vec(),
            world: world.clone(),
            replayed: Mutex::default(),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `n` events, with copies, producer retries and conflicting payloads as the seed
    /// says; on a FIFO lane, `n` events over two groups, in order per group.
    pub fn produce(&self, n: u64) {
        if self.flow == Flow::FifoSequence {
            let mut w = lock(&self.world);
            let mut next = [1u64, 1];
            // Now and then one event's work panics until a fix a day later: dead-lettered,
            // the later ones of its group gaps, redriven after the fix.
            let poison = w
                .rng
                .chance(400)
                .then(|| w.rng.between(0, n.saturating_sub(1)));
            for k in 0..n {
                let g = usize::from(w.rng.chance(500));
                let (group, seq) = (format!("fagg{g}"), next[g]);
                next[g] += 1;
                let ev = format!("fifo-{group}-{seq}");
                if poison == Some(k) {
                    w.log(format!("poison {ev} until a fix in 24 h"));
                    w.poison = Some((ev.clone(), 24 * 3_600_000));
                }
                w.ledger.event(&ev);
                let body = events::body(&ev, 1, Some((&group, seq)));
                self.queue().send_in_group(&ev, body, &group, seq, k);
            }
            return;
        }
        for k in 0..n {
            let ev = format!("{}-{k}", self.flow.name());
            let mut w = lock(&self.world);
            let at = w.rng.between(0, 3_000);
            let id = self
                .queue()
                .send(&ev, events::body(&ev, 10, None), false, at);
            w.ledger.event(&ev);
            // Copies of one message in one batch: more often on the leased lane, where two
            // deliveries at once are what a stale owner's complete or release meets.
            let copies = if self.flow == Flow::Leased { 400 } else { 150 };
            if w.rng.chance(copies) {
                self.queue().duplicate(&id);
            }
            if w.rng
                .chance(if self.flow == Flow::Leased { 500 } else { 200 })
            {
                let at = w.rng.between(0, 8_000);
                self.queue()
                    .send(&ev, events::body(&ev, 10, None), false, at);
            }
            if w.rng.chance(100) {
                let at = w.rng.between(0, 20_000);
                self.queue()
                    .send(&ev, events::body(&ev, 99, None), true, at);
            }
            // Another tenant's event under the same CloudEvents id (S1), on the flows with a
            // warm cache.
            let cached = matches!(self.flow, Flow::Transactional | Flow::BatchTransactional);
            if cached && w.rng.chance(300) {
                let other = format!("{ev}@globex");
                let at = w.rng.between(0, 20_000);
                w.ledger.event(&other);
                let body = events::body_of("globex", &ev, &ev, 10, None);
                self.queue().send(&other, body, false, at);
            }
        }
    }

    async fn process(&self, inst: usize, m: Message, deadline: std::time::SystemTime) -> Outcome {
        let world = &self.world;
        let lane = self.flow.name();
        match &self.dedups[inst] {
            Dedup::Tx(d) => {
                d.transactional(&m, |e| {
                    panics::maybe(world, inst, lane);
                    credit(e)
                })
                .await
            }
            Dedup::Seq(d) => {
                d.sequenced(&m, &SequenceSource::pointer("/data/seq"), |e| {
                    panics::maybe(world, inst, lane);
                    if let Ok(data) = HandlerError::data(e) {
                        panics::poisoned(world, inst, data["ev"].as_str().unwrap_or_default());
                    }
                    events::sequence_effect(e)
                })
                .await
            }
            Dedup::Once(d) => {
                d.create_once(&m, |e| {
                    panics::maybe(world, inst, lane);
                    let ev = HandlerError::data(e)?["ev"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    Ok(Plan::from(vec![Effect::put(
                        "orders",
                        Item::new().with("order", ev.as_str()),
                    )]))
                })
                .await
            }
            Dedup::Leased(d) => {
                let world = self.world.clone();
                d.leased(&m, Some(deadline), |e, lease| async move {
                    let ev = HandlerError::data(&e)?["ev"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let (slow, fail) = {
                        let mut w = lock(&world);
                        // An incident: for 20 s every call is slow, and often answers 500 in
                        // the end (the provider's own timeout); outside one, some calls are.
                        let now = w.now_ms();
                        if now >= w.provider.incident_until && w.rng.chance(40) {
                            w.provider.incident_until = now + 20_000;
                        }
                        if now < w.provider.incident_until || w.rng.chance(120) {
                            (w.rng.between(2_500, 4_500), w.rng.chance(500))
                        } else {
                            (w.rng.between(5, 200), w.rng.chance(60))
                        }
                    };
                    tokio::time::sleep(Duration::from_millis(slow)).await;
                    panics::maybe(&world, inst, "calls before the call");
                    let answer = {
                        let mut w = lock(&world);
                        let now = w.now_ms();
                        let a = w.provider.call(&lease.idempotency_key(), &ev, now, fail);
                        w.log(format!("provider {ev} {a:?}"));
                        a
                    };
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    panics::maybe(&world, inst, "calls after the call");
                    match answer {
                        Answer::Done(r) => Ok(Some(r)),
                        Answer::AppliedThenFailed => {
                            Err(HandlerError::transient("provider answered 500"))
                        }
                    }
                })
                .await
            }
        }
    }

    fn record(&self, inst: usize, msg: &Msg, o: &Outcome) {
        let mut w = lock(&self.world);
        let c = if msg.conflicting { "*" } else { "" };
        w.log(format!(
            "i{inst} {} {} {}{c} {}",
            self.flow.name(),
            msg.id,
            msg.event,
            o.label()
        ));
        let acked = o.acknowledged();
        match o {
            Outcome::Applied => {
                w.ledger.applied(&msg.event);
                if let Some((group, seq)) = &msg.order {
                    w.ledger.sequence_applied(group, *seq);
                }
            }
            Outcome::Duplicate { .. } if msg.order.is_some() => {
                if let Some((group, seq)) = &msg.order {
                    w.ledger.sequence_acked(group, *seq);
                }
            }
            Outcome::Rejected {
                code: Reason::SequenceGap,
                ..
            } => {
                if let Some((group, seq)) = &msg.order {
                    w.ledger.sequence_gap(group, *seq);
                }
            }
            Outcome::Rejected {
                code: Reason::ProviderKeyExpired,
                ..
            } => w.ledger.event(&msg.event).reconciled = true,
            _ => {}
        }
        if !acked {
            return;
        }
        w.ledger.acked(&msg.event, msg.conflicting);
        let mut replayed = self.replayed.lock().unwrap_or_else(|e| e.into_inner());
        // On the FIFO lane more often: an old sequence redelivered in its group after newer
        // ones were applied must be judged a duplicate, never applied over the newer state.
        let replays = if msg.order.is_some() { 400 } else { 150 };
        if !replayed.contains_key(&msg.event) && w.rng.chance(replays) {
            replayed.insert(msg.event.clone(), ());
            let at = w.now_ms() + w.rng.between(3_600_000, 36 * 3_600_000);
            let group = self.resend(msg, msg.conflicting, at);
            w.log(format!("replay of {}{group} scheduled at {at}", msg.event));
        }
    }

    /// Sends `msg`'s event again, visible at `at`: in its FIFO group with its sequence, if it
    /// has one (then the trace's words for it, ` in group <g> at <seq>`).
    fn resend(&self, msg: &Msg, conflicting: bool, at: u64) -> String {
        let mut q = self.queue();
        match &msg.order {
            Some((group, seq)) => {
                q.send_in_group(&msg.event, msg.body.clone(), group, *seq, at);
                format!(" in group {group} at {seq}")
            }
            None => {
                q.send(&msg.event, msg.body.clone(), conflicting, at);
                String::new()
            }
        }
    }

    /// Reads the effects where they landed and checks each happened at most once.
    pub fn check_effects(&self) {
        let mut w = lock(&self.world);
        let counts: Vec<(String, u32)> = match self.flow {
            Flow::Transactional | Flow::BatchTransactional => self
                .data
                .items("effects")
                .into_iter()
                .filter_map(|i| match (i.0.get("ev"), i.0.get("applied")) {
                    (Some(Value::S(ev)), Some(Value::N(n))) => {
                        Some((ev.clone(), n.parse().unwrap_or(u32::MAX)))
                    }
                    _ => None,
                })
                .collect(),
            Flow::FifoSequence => events::sequence_effects(&self.data, "fifo"),
            Flow::Leased => w
                .provider
                .all()
                .filter(|(e, _)| e.starts_with("calls-"))
                .map(|(e, n)| (e.clone(), *n))
                .collect(),
            Flow::CreateOnce => self
                .data
                .items("orders")
                .into_iter()
                .filter_map(|i| match i.0.get("order") {
                    Some(Value::S(ev)) => Some((ev.clone(), 1)),
                    _ => None,
                })
                .collect(),
        };
        for (ev, n) in counts {
            w.ledger.effects_seen(&ev, n);
        }
    }

    /// One instance's poller: receives, runs invocations (up to `slots` at once), acknowledges.
    pub async fn poll(self: Rc<Self>, inst: usize, slots: usize, end_ms: u64) {
        let busy = Rc::new(Cell::new(0usize));
        loop {
            let now = lock(&self.world).now_ms();
            if now > end_ms {
                return;
            }
            if busy.get() >= slots {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let (got, dead) = self.queue().receive(now, 5);
            for d in dead {
                let mut w = lock(&self.world);
                w.log(format!("dlq {} {}", d.id, d.event));
                w.ledger.event(&d.event).dead = true;
                if let Some((group, _)) = &d.order {
                    w.ledger.sequence_parked(group);
                }
                // An operator redrives some of the DLQ days later: the event must then end
                // once like any other. A sequenced one comes back in its group after newer
                // ones: applied if it is next, else judged a gap (or a duplicate), never
                // applied over the newer state.
                let mut replayed = self.replayed.lock().unwrap_or_else(|e| e.into_inner());
                let once = format!("redrive {}", d.event);
                let redrives = if d.order.is_some() { 800 } else { 300 };
                if !d.conflicting && !replayed.contains_key(&once) && w.rng.chance(redrives) {
                    replayed.insert(once, ());
                    let at = now + w.rng.between(24 * 3_600_000, 48 * 3_600_000);
                    let group = self.resend(&d, false, at);
                    w.ledger.event(&d.event).dead = false;
                    w.log(format!("redrive of {}{group} scheduled at {at}", d.event));
                }
            }
            if got.is_empty() {
                let next = self.queue().next_visible();
                let Some(next) = next else {
                    if busy.get() == 0 {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let jitter = lock(&self.world).rng.between(1, 300);
                tokio::time::sleep(Duration::from_millis(next.saturating_sub(now) + jitter)).await;
                continue;
            }
            busy.set(busy.get() + 1);
            let (lane, busy2) = (self.clone(), busy.clone());
            tokio::task::spawn_local(async move {
                lane.invoke(inst, got).await;
                busy2.set(busy2.get() - 1);
            });
            let gap = lock(&self.world).rng.between(1, 100);
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
    }

    async fn invoke(self: Rc<Self>, inst: usize, got: Vec<Msg>) {
        let crash_ms = {
            let mut w = lock(&self.world);
            w.log(format!(
                "i{inst} {} invoke {}",
                self.flow.name(),
                got.iter()
                    .map(|m| m.id.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
            stop_ms(&mut w.rng)
        };
        let deadline = self.clocks[inst].now() + Duration::from_millis(TIMEOUT_MS);
        let messages: Vec<Message> = got
            .iter()
            .map(|m| Message {
                message_id: m.id.clone(),
                body: m.body.clone(),
                group_id: m.order.as_ref().map(|(g, _)| g.clone()),
                ..Message::default()
            })
            .collect();
        let lane = self.clone();
        let run = async {
            match (&self.dedups[inst], self.flow) {
                (Dedup::Tx(d), Flow::BatchTransactional) => {
                    let world = &self.world;
                    run_batch_transactional(messages, 4, d, |e| {
                        panics::maybe(world, inst, "batch");
                        credit(e)
                    })
                    .await
                }
                _ => {
                    run_batch(messages, 4, |m| {
                        let lane = lane.clone();
                        async move { lane.process(inst, m, deadline).await }
                    })
                    .await
                }
            }
        };
        match tokio::time::timeout(Duration::from_millis(crash_ms), run).await {
            Err(_) => lock(&self.world).log(format!(
                "i{inst} {} crashed at {crash_ms} ms",
                self.flow.name()
            )),
            Ok(report) => {
                let mut account = Account::default();
                for (id, o) in report.outcomes() {
                    account.record(o);
                    if let Some(m) = got.iter().find(|m| &m.id == id) {
                        self.record(inst, m, o);
                        if o.acknowledged() {
                            self.queue().delete(id);
                        }
                    }
                }
                if !account.closes() || account.received != got.len() as u64 {
                    lock(&self.world).violate(Invariant::Account, format!("i{inst} {account:?}"));
                }
            }
        }
        self.check_effects();
    }
}
