//! The Kinesis lane: one shard of ordered records per aggregate, the real sequence-mode flow
//! (`SequencedDeduplicator::sequenced`) through `run_batch` grouped by aggregate, a checkpoint
//! moved by the partial batch response (to the first record not acknowledged), and a record
//! parked (on-failure destination) after its attempts.

use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

use lambda_dedup::{Clock, Message, SequenceSource};
use lambda_dedup_batch::{Outcome, Reason, SequencedDeduplicator, run_batch};
use lambda_dedup_memory::MemoryStore;

use crate::broker::{Record, Shard};
use crate::clock::SimClock;
use crate::events;
use crate::sqs::{LEASE, TIMEOUT_MS};
use crate::store::SimStore;
use crate::world::{Shared, lock};

/// Attempts before a record is parked.
const ATTEMPTS: u32 = 4;

/// The shard and each instance's sequenced deduplicator.
#[derive(Debug)]
pub struct KinesisLane {
    /// The shard.
    pub shard: Mutex<Shard>,
    dedups: Vec<SequencedDeduplicator>,
    clocks: Vec<SimClock>,
    world: Shared,
    data: MemoryStore,
}

impl KinesisLane {
    /// A lane on `data` (with an `aggs` table keyed by `agg`).
    pub fn new(data: &MemoryStore, clocks: &[SimClock], world: &Shared) -> Self {
        let dedups = clocks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                SequencedDeduplicator::new(
                    events::spec("stream"),
                    SimStore::new(data, world, i, *c, LEASE),
                )
            })
            .collect();
        Self {
            shard: Mutex::default(),
            dedups,
            clocks: clocks.to_vec(),
            world: world.clone(),
            data: data.clone(),
        }
    }

    fn shard(&self) -> std::sync::MutexGuard<'_, Shard> {
        self.shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `aggregates` aggregates of up to `per` events each, interleaved, in order per
    /// aggregate, some put twice (a producer retry).
    pub fn produce(&self, aggregates: u64, per: u64) {
        let mut w = lock(&self.world);
        let mut next: Vec<u64> = (0..aggregates).map(|_| 1).collect();
        let last: Vec<u64> = (0..aggregates).map(|_| w.rng.between(2, per)).collect();
        let mut shard = self.shard();
        while next.iter().zip(&last).any(|(n, l)| n <= l) {
            let a = usize::try_from(w.rng.between(0, aggregates - 1)).unwrap_or(0);
            if next[a] > last[a] {
                continue;
            }
            let (aggregate, seq) = (format!("agg{a}"), next[a]);
            let event = format!("stream-{aggregate}-{seq}");
            w.ledger.event(&event);
            let copies = if w.rng.chance(150) { 2 } else { 1 };
            for _ in 0..copies {
                let seq_no = shard.records.len() as u64 + 1;
                let body = events::body(&event, 1, Some((&aggregate, seq)));
                shard.records.push(Record {
                    seq_no,
                    aggregate: aggregate.clone(),
                    seq,
                    event: event.clone(),
                    body,
                    attempts: 0,
                });
            }
            next[a] += 1;
        }
    }

    /// Reads each record's effect on its aggregate's item and checks it happened at most once.
    pub fn check_effects(&self) {
        let mut w = lock(&self.world);
        for (event, n) in events::sequence_effects(&self.data, "stream") {
            w.ledger.effects_seen(&event, n);
        }
    }

    /// Records not yet passed by the checkpoint.
    pub fn left(&self) -> Vec<String> {
        self.shard()
            .batch(usize::MAX)
            .into_iter()
            .map(|r| r.event)
            .collect()
    }

    /// The shard's poller: one invocation at a time, on an instance the seed picks.
    pub async fn poll(self: Rc<Self>, end_ms: u64) {
        loop {
            let batch = self.shard().batch(5);
            if batch.is_empty() || lock(&self.world).now_ms() > end_ms {
                return;
            }
            let (inst, crash_ms, gap) = {
                let mut w = lock(&self.world);
                let inst =
                    usize::try_from(w.rng.between(0, self.dedups.len() as u64 - 1)).unwrap_or(0);
                let crash = if w.rng.chance(150) {
                    w.rng.between(1, TIMEOUT_MS)
                } else {
                    TIMEOUT_MS
                };
                (inst, crash, w.rng.between(10, 1_000))
            };
            self.invoke(inst, batch, crash_ms).await;
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
    }

    async fn invoke(&self, inst: usize, batch: Vec<Record>, crash_ms: u64) {
        let messages: Vec<Message> = batch
            .iter()
            .map(|r| Message {
                message_id: r.seq_no.to_string(),
                body: r.body.clone(),
                group_id: Some(r.aggregate.clone()),
                ..Message::default()
            })
            .collect();
        let _deadline = self.clocks[inst].now() + Duration::from_millis(TIMEOUT_MS);
        let dedup = &self.dedups[inst];
        let source = SequenceSource::pointer("/data/seq");
        let run = run_batch(messages, 4, |m| {
            let source = source.clone();
            async move { dedup.sequenced(&m, &source, events::sequence_effect).await }
        });
        let report = match tokio::time::timeout(Duration::from_millis(crash_ms), run).await {
            Ok(r) => r,
            Err(_) => {
                lock(&self.world).log(format!("i{inst} stream crashed at {crash_ms} ms"));
                self.failed_first();
                return;
            }
        };
        let mut passed = 0;
        let mut stopped = false;
        for (r, (_, o)) in batch.iter().zip(report.outcomes()) {
            self.record(inst, r, o);
            if !stopped && o.acknowledged() {
                passed += 1;
            } else {
                stopped = true;
            }
        }
        self.shard().checkpoint += passed;
        self.check_effects();
        if stopped {
            self.failed_first();
        }
    }

    /// The record at the checkpoint failed once more; parked after its attempts.
    fn failed_first(&self) {
        let mut shard = self.shard();
        let i = shard.checkpoint;
        let Some(r) = shard.records.get_mut(i) else {
            return;
        };
        r.attempts += 1;
        if r.attempts >= ATTEMPTS {
            let (event, aggregate) = (r.event.clone(), r.aggregate.clone());
            shard.checkpoint += 1;
            let mut w = lock(&self.world);
            w.log(format!("parked {event}"));
            w.ledger.event(&event).dead = true;
            w.ledger.sequence_parked(&aggregate);
        }
    }

    fn record(&self, inst: usize, r: &Record, o: &Outcome) {
        let mut w = lock(&self.world);
        w.log(format!(
            "i{inst} stream {} {} {}",
            r.seq_no,
            r.event,
            o.label()
        ));
        match o {
            Outcome::Applied => {
                w.ledger.applied(&r.event);
                w.ledger.sequence_applied(&r.aggregate, r.seq);
            }
            Outcome::Duplicate { .. } => w.ledger.sequence_acked(&r.aggregate, r.seq),
            Outcome::Rejected {
                code: Reason::SequenceGap,
                ..
            } => w.ledger.sequence_gap(&r.aggregate, r.seq),
            _ => {}
        }
        if o.acknowledged() {
            w.ledger.event(&r.event).acked = true;
        }
    }
}
