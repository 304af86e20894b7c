//! One seed's run: the world it draws (instances and their skews, fault rates, retention,
//! events), the lanes on one current-thread runtime with paused time, and the checks at the end.

use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::{RedeliveryHorizon, Retention};
use lambda_dedup_memory::MemoryStore;
use tokio::time::Instant;

use crate::clock::SimClock;
use crate::dispatcher::DispatchLane;
use crate::durable_steps::StepsLane;
use crate::inbox::InboxLane;
use crate::invariants::{Ledger, Violation};
use crate::kinesis::KinesisLane;
use crate::provider::Provider;
use crate::relay::RelayLane;
use crate::rng::Rng;
use crate::sqs::{Flow, SqsLane};
use crate::trace::Trace;
use crate::world::{World, lock};

/// What a seed's run found.
#[derive(Debug)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// The trace's digest.
    pub digest: String,
    /// The broken invariants.
    pub violations: Vec<Violation>,
    /// The whole trace.
    pub trace: Vec<String>,
}

const HOUR_MS: u64 = 3_600_000;

/// The redelivery horizon of every lane's queue.
fn horizon() -> RedeliveryHorizon {
    RedeliveryHorizon {
        queue_retention: Duration::from_secs(86_400),
        max_receive_count: 4,
        visibility_timeout: Duration::from_secs(10),
        dlq_retention: Duration::from_secs(2 * 86_400),
        replay_window: Duration::from_secs(2 * 86_400),
    }
}

/// Runs `seed`.
pub fn run_seed(seed: u64) -> SeedReport {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("a current-thread runtime: {e}"),
    };
    // The relay's EMF lines are kept on this thread, not printed among the simulator's.
    lambda_dedup_runtime::emf::capture();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, simulate(seed))
}

/// Runs `seed` with the planted bug `bug` switched on (this thread only).
#[cfg(feature = "simulation-planted")]
pub fn run_seed_planted(seed: u64, bug: lambda_dedup::planted::Planted) -> SeedReport {
    lambda_dedup::planted::set(Some(bug));
    let report = run_seed(seed);
    lambda_dedup::planted::set(None);
    report
}

async fn simulate(seed: u64) -> SeedReport {
    let start = Instant::now();
    let mut rng = Rng::new(seed);
    let instances = rng.between(2, 3);
    let wide = rng.chance(300);
    let skews: Vec<i64> = (0..instances)
        .map(|_| {
            let s = i64::try_from(rng.between(0, if wide { 2_500 } else { 250 })).unwrap_or(0);
            if rng.chance(500) { -s } else { s }
        })
        .collect();
    let store_faults = rng.between(0, 40);
    let handler_panics = if rng.chance(500) {
        rng.between(5, 60)
    } else {
        0
    };
    let max_skew_ms = skews.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0);
    let world = Arc::new(Mutex::new(World {
        rng,
        trace: Trace::default(),
        ledger: Ledger::default(),
        provider: Provider::new(24 * HOUR_MS),
        start,
        store_faults,
        max_skew_ms,
        handler_panics,
        poison: None,
    }));
    let clocks: Vec<SimClock> = skews.iter().map(|s| SimClock::new(start, *s)).collect();
    // The operator's retention: a short one must be refused (S9) and is then raised to cover
    // the horizon.
    let retention = {
        let mut w = lock(&world);
        let configured = if w.rng.chance(500) {
            Duration::from_secs(6 * 3_600)
        } else {
            Duration::from_secs(7 * 86_400)
        };
        let chosen = Retention::covering(configured, &horizon()).or_else(|_| {
            Retention::covering(horizon().total() + Duration::from_secs(86_400), &horizon())
        });
        w.log(format!("seed {seed}: {instances} instances, skews {skews:?} ms, store faults {store_faults}/1000, handler panics {handler_panics}/1000, retention {configured:?} asked, {:?} kept", chosen.as_ref().map(|r| r.duration())));
        match chosen {
            Ok(r) => r,
            Err(e) => panic!("a retention covering the horizon: {e}"),
        }
    };
    let end_ms = 4 * 24 * HOUR_MS;
    let provider_retention = Duration::from_secs(24 * 3_600);
    let mut lanes = Vec::new();
    for flow in [
        Flow::Transactional,
        Flow::BatchTransactional,
        Flow::Leased,
        Flow::CreateOnce,
        Flow::FifoSequence,
    ] {
        let data = MemoryStore::new(retention);
        data.create_table("effects", "ev");
        data.create_table("orders", "order");
        data.create_table("aggs", "agg");
        let lane = Rc::new(SqsLane::new(
            flow,
            data,
            &clocks,
            &world,
            provider_retention,
        ));
        let n = lock(&world).rng.between(3, 7);
        lane.produce(n);
        lanes.push(lane);
    }
    let stream_data = MemoryStore::new(retention);
    stream_data.create_table("aggs", "agg");
    let (shards, aggregates) = {
        let mut w = lock(&world);
        let shards = w.rng.between(2, 4);
        let aggregates = shards + w.rng.between(0, 2);
        w.log(format!("stream: {shards} shards, {aggregates} aggregates"));
        (shards, aggregates)
    };
    let stream = Rc::new(KinesisLane::new(
        usize::try_from(shards).unwrap_or(2),
        &stream_data,
        &clocks,
        &world,
    ));
    stream.produce(aggregates, 4);
    let relay_data = MemoryStore::new(retention);
    let relay = Rc::new(RelayLane::new(&relay_data, &clocks, &world));
    let intents = lock(&world).rng.between(3, 7);
    relay.produce(intents);
    let inbox_data = MemoryStore::new(retention);
    let inbox = Rc::new(InboxLane::new(&inbox_data, &clocks, &world));
    let webhooks = lock(&world).rng.between(2, 5);

    let mut tasks = Vec::new();
    for lane in &lanes {
        for inst in 0..clocks.len() {
            let slots = usize::try_from(lock(&world).rng.between(1, 3)).unwrap_or(1);
            tasks.push(tokio::task::spawn_local(
                lane.clone().poll(inst, slots, end_ms),
            ));
        }
    }
    tasks.push(tokio::task::spawn_local(relay.clone().poll(end_ms)));
    inbox.forwarder.producers.store(
        usize::try_from(webhooks).unwrap_or(0),
        std::sync::atomic::Ordering::SeqCst,
    );
    for k in 0..webhooks {
        tasks.push(tokio::task::spawn_local(inbox.clone().send(k)));
    }
    tasks.push(tokio::task::spawn_local(
        inbox.forwarder.clone().poll(end_ms),
    ));
    tasks.push(tokio::task::spawn_local(
        inbox.forwarder.clone().sweep(end_ms),
    ));
    tasks.push(tokio::task::spawn_local(relay.clone().sweep(end_ms)));
    for s in 0..stream.shards.len() {
        tasks.push(tokio::task::spawn_local(stream.clone().poll(s, end_ms)));
    }
    let steps = Rc::new(StepsLane::new(seed, retention, start, &world));
    let dispatch = Rc::new(DispatchLane::new(seed, retention, start, &world));
    for e in 0..steps.between(1, 3) {
        let n = steps.between(2, 4);
        tasks.push(tokio::task::spawn_local(steps.clone().execute(e, n)));
    }
    for k in 0..dispatch.between(2, 4) {
        tasks.extend(dispatch.produce(k));
    }
    for t in tasks {
        if let Err(e) = t.await {
            lock(&world).log(format!("a task ended by {e}"));
        }
    }
    // Let invocations still running (spawned by pollers) finish.
    tokio::time::sleep(Duration::from_millis(2 * crate::sqs::TIMEOUT_MS)).await;
    let mut left: Vec<String> = lanes
        .iter()
        .flat_map(|l| l.queue.lock().map(|q| q.left()).unwrap_or_default())
        .collect();
    left.extend(stream.left());
    left.extend(relay.finish());
    left.extend(inbox.finish());
    for lane in &lanes {
        lane.check_effects();
    }
    stream.check_effects();
    dispatch.finish();
    let mut w = lock(&world);
    w.ledger.finish(&left);
    let found = w.ledger.violations().len();
    w.log(format!("end: {found} violations"));
    SeedReport {
        seed,
        digest: w.trace.digest(),
        violations: w.ledger.violations().to_vec(),
        trace: w.trace.lines().to_vec(),
    }
}
