//! The Kinesis lane: 2–4 shards, each aggregate's records on one shard (its partition key) in
//! order, the real sequence-mode flow (`SequencedDeduplicator::sequenced`) through `run_batch`
//! grouped by aggregate, each shard's checkpoint moved as the library's
//! `BatchReport::passage` says (past what is acknowledged or parked, to the first retry: the
//! partial batch response), a shard's batches one at a time and the shards at once, and a
//! record parked (on-failure destination) after its attempts.

use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

use lambda_dedup::{Clock, Message, SequenceSource};
use lambda_dedup_engine::{Outcome, Pass, Reason, SequencedDeduplicator, run_batch};
use lambda_dedup_memory::MemoryStore;

use crate::broker::{Record, Shard};
use crate::clock::SimClock;
use crate::events;
use crate::invariants::Invariant;
use crate::sqs::{self, LEASE, TIMEOUT_MS};
use crate::store::SimStore;
use crate::world::{Shared, lock};

/// Attempts before a record is parked.
const ATTEMPTS: u32 = 4;

/// The shards and each instance's sequenced deduplicator.
#[derive(Debug)]
pub struct KinesisLane {
    /// The shards.
    pub shards: Vec<Mutex<Shard>>,
    dedups: Vec<SequencedDeduplicator>,
    clocks: Vec<SimClock>,
    world: Shared,
    data: MemoryStore,
}

impl KinesisLane {
    /// A lane of `shards` shards on `data` (with an `aggs` table keyed by `agg`).
    pub fn new(shards: usize, data: &MemoryStore, clocks: &[SimClock], world: &Shared) -> Self {
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
            shards: (0..shards.max(1)).map(|_| Mutex::default()).collect(),
            dedups,
            clocks: clocks.to_vec(),
            world: world.clone(),
            data: data.clone(),
        }
    }

    fn shard(&self, s: usize) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[s].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shard of `aggregate` (index `a`): its partition key's, so always the same.
    fn shard_of(&self, a: usize) -> usize {
        a % self.shards.len()
    }

    /// Puts `aggregates` aggregates of up to `per` events each, interleaved, in order per
    /// aggregate, each on its shard, some put twice (a producer retry).
    pub fn produce(&self, aggregates: u64, per: u64) {
        let mut w = lock(&self.world);
        let mut next: Vec<u64> = (0..aggregates).map(|_| 1).collect();
        let last: Vec<u64> = (0..aggregates).map(|_| w.rng.between(2, per)).collect();
        while next.iter().zip(&last).any(|(n, l)| n <= l) {
            let a = usize::try_from(w.rng.between(0, aggregates - 1)).unwrap_or(0);
            if next[a] > last[a] {
                continue;
            }
            let (aggregate, seq) = (format!("agg{a}"), next[a]);
            let event = format!("stream-{aggregate}-{seq}");
            w.ledger.event(&event);
            let copies = if w.rng.chance(150) { 2 } else { 1 };
            let mut shard = self.shard(self.shard_of(a));
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

    /// Records not yet passed by any shard's checkpoint.
    pub fn left(&self) -> Vec<String> {
        (0..self.shards.len())
            .flat_map(|s| self.shard(s).batch(usize::MAX))
            .map(|r| r.event)
            .collect()
    }

    /// Shard `s`'s poller: one invocation at a time, on an instance the seed picks.
    pub async fn poll(self: Rc<Self>, s: usize, end_ms: u64) {
        loop {
            let batch = self.shard(s).batch(5);
            if batch.is_empty() || lock(&self.world).now_ms() > end_ms {
                return;
            }
            let (inst, crash_ms, gap) = {
                let mut w = lock(&self.world);
                let inst = sqs::instance(&mut w.rng, self.dedups.len());
                let crash = sqs::stop_ms(&mut w.rng);
                (inst, crash, w.rng.between(10, 1_000))
            };
            self.invoke(s, inst, batch, crash_ms).await;
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
    }

    async fn invoke(&self, s: usize, inst: usize, batch: Vec<Record>, crash_ms: u64) {
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
                lock(&self.world).log(format!("i{inst} shard {s} crashed at {crash_ms} ms"));
                self.failed_first(s);
                return;
            }
        };
        for (r, (_, o)) in batch.iter().zip(report.outcomes()) {
            self.record(s, inst, r, o);
        }
        // The library's rule decides what the checkpoint passes; parking may fail (the
        // parking queue throttles), and the checkpoint then stops at that record.
        let passage = report.passage();
        let mut checkpoint = passage.checkpoint.and_then(|id| id.parse::<u64>().ok());
        for (id, pass) in &passage.passed {
            let Some(r) = batch.iter().find(|r| r.seq_no.to_string() == *id) else {
                continue;
            };
            if let Pass::Park(code) = pass {
                if lock(&self.world).rng.chance(50) {
                    lock(&self.world).log(format!("shard {s}: parking {} failed", r.event));
                    checkpoint = Some(r.seq_no);
                    break;
                }
                self.park(s, r, code);
            }
        }
        let last = batch.last().map_or(0, |r| r.seq_no);
        let unsettled = self.shard(s).advance(checkpoint, last);
        for event in unsettled {
            lock(&self.world).violate(
                Invariant::Checkpoint,
                format!("shard {s}: the checkpoint passed {event}"),
            );
        }
        self.check_effects();
        if checkpoint.is_some() {
            self.failed_first(s);
        }
    }

    /// Parks record `r` of shard `s` (the library's parking, with `code`): settled, passed.
    fn park(&self, s: usize, r: &Record, code: &str) {
        self.shard(s).settled.insert(r.seq_no);
        let mut w = lock(&self.world);
        w.log(format!("shard {s}: parked {} ({code})", r.event));
        w.ledger.event(&r.event).dead = true;
        w.ledger.sequence_parked(&r.aggregate);
    }

    /// The record at shard `s`'s checkpoint failed once more; parked after its attempts (the
    /// event source mapping's on-failure destination).
    fn failed_first(&self, s: usize) {
        let mut shard = self.shard(s);
        let i = shard.checkpoint;
        let Some(r) = shard.records.get_mut(i) else {
            return;
        };
        r.attempts += 1;
        if r.attempts >= ATTEMPTS {
            let (event, aggregate, seq_no) = (r.event.clone(), r.aggregate.clone(), r.seq_no);
            shard.settled.insert(seq_no);
            shard.checkpoint += 1;
            let mut w = lock(&self.world);
            w.log(format!(
                "shard {s}: parked {event} after {ATTEMPTS} attempts"
            ));
            w.ledger.event(&event).dead = true;
            w.ledger.sequence_parked(&aggregate);
        }
    }

    fn record(&self, s: usize, inst: usize, r: &Record, o: &Outcome) {
        if o.acknowledged() {
            self.shard(s).settled.insert(r.seq_no);
        }
        let mut w = lock(&self.world);
        w.log(format!(
            "i{inst} shard {s} {} {} {}",
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
