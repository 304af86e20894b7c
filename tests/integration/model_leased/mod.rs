//! Model-based schedules for the leased flow (S6, S8, S9, S12–S16): proptest generates schedules of
//! payment requests handled by `LeasedDeduplicator::leased` through `run_batch`, as `payment-dispatcher`
//! does — new sends, SQS redeliveries of the same message, producer retries under a new message
//! id, concurrent duplicates within a batch and across two batches at once — with faults:
//!
//! - crash after claim: the process dies holding the claim, before it calls the provider (its
//!   handlers never resolve and the batch is cut, as a `kill -9` would); its answer is lost;
//! - crash after the call: the provider applied the payment, the process dies before `complete`;
//! - crash during complete: the complete's `UpdateItem` either never reaches DynamoDB or is
//!   written and its answer dropped (an SDK interceptor on a second client of the same table);
//! - provider faults: a 503 (a handler error: the claim is released) or a payment applied whose
//!   answer arrives after the client's timeout;
//! - lease expiry: the store's `ManualClock` moves past the lease, so a redelivery takes over the
//!   dead owner's claim; before that, a delivery of the held event must come back as a retry;
//! - TTL expiry: once the queue is drained, the clock moves past the retention; the marks stay in
//!   the table but count as absent (S9), and a redelivery is a new event: a new "epoch".
//!
//! And with permanent faults and faults outliving the invocation:
//!
//! - a provider that refuses one event's key for good (422, in half the schedules, from the
//!   start): `lambda-dedup-http` classifies it as permanent (`HandlerError::Invalid`), so the leased flow
//!   releases the claim and rejects the delivery (`invalid_payload`): dead-lettered, never
//!   applied, never retried in a loop;
//! - a provider slower than the invocation's deadline allows: the call is still out when the
//!   deadline comes (5 s of the manual clock, 100 ms of real time; the provider answers after
//!   250 ms, within the client's timeout), so the process is killed there, like a crash, holding a
//!   claim whose lease ended at the deadline; the provider applies the payment after the process
//!   is gone, and a later takeover gets its replay (or a 409 while it is still in flight);
//! - a provider that forgets keys (in half the schedules) `PROVIDER_KEYS` after storing them, with
//!   `Deduplicator::with_provider_key_retention(PROVIDER_KEYS)`; a provider-key-expiry step stops
//!   deliveries (an outage, or a DLQ redrive later) while the clock moves past that retention. A
//!   takeover of an event first attempted longer ago is `Rejected { provider_key_expired }` and
//!   must not call the provider: it goes to reconciliation, its claim is kept, and the event is
//!   never applied twice.
//!
//! Everything runs against the local DynamoDB (or the memory store, or PostgreSQL when
//! `DEDUP_POSTGRES_URL` is set: a fresh marks table per schedule; there a crash during complete
//! is a wrapper of a second store on the same table that fails `complete` before beginning it,
//! or commits it and drops the answer, `faults::FaultyCompletes`; or Valkey when
//! `DEDUP_VALKEY_URL` is set: a fresh mark prefix per schedule, the same wrapper) and the in-process fake
//! provider (`lambda_dedup_fake_provider`), called with the real `IdempotentClient`. After the schedule, whatever is unacknowledged is
//! redelivered (the clock moving past the lease each round, as SQS visibility would) until
//! nothing is left, and the run is checked against a reference model:
//!
//! - the provider applied each event exactly once overall: one effect per idempotency key, which
//!   is derived from the dedup key and so is the same in every epoch (with a forgetful provider,
//!   which has forgotten every key by the next epoch: exactly once per epoch); never the refused
//!   event; an event sent to reconciliation at most once in its epoch;
//! - each (event, epoch) in which the event was delivered was applied exactly once (an `Applied`
//!   outcome, or a complete written whose answer was lost), except the refused event and events
//!   sent to reconciliation: never;
//! - a delivery whose call the provider refused is `Rejected { invalid_payload }`, and only those
//!   are; `Rejected { provider_key_expired }` comes exactly for a takeover of an event first
//!   attempted longer ago than the provider keeps keys, which never calls the provider; no other
//!   rejection or conflict occurs; the model's dead-letter queue holds the refused event only;
//! - a good event is applied (or, past the provider's key retention, sent to reconciliation) at
//!   its first receive in a step with no fault: no crash, no provider fault queued, no slow call
//!   still in flight, its mark absent or its lease over. (Stronger than "within two receives of
//!   the first delivery"; a delivery that meets a live lease of a dead owner is not such a
//!   receive, as the fault that left the lease behind hit it.);
//! - nothing was acknowledged (applied or duplicate) whose payment the provider had not applied;
//! - after every step each event's mark is what the model says (absent, held — with the lease
//!   ending where the model says and the chain's first-attempt time —, completed); a delivery of a completed event is a duplicate, one of an event held under a live lease is a
//!   retry that never reaches the provider, and the provider always gets the event's key;
//! - every batch's account closes (S14); at the end each event's live mark is `COMPLETED` (the
//!   refused event's: its released claim; an event sent to reconciliation: its kept claim).
//!
//! These schedules found two gaps, both fixed in the store: a release deleted the mark, and with
//! it the first attempt's time, so a delivery after the provider forgot the key called it again
//! (a release now only ends the lease; `a_released_ambiguous_call_*` below pins it); and a
//! takeover wrote the inherited time back in a second request, which a store fault could lose
//! (a claim is now one `UpdateItem` keeping `first_seen_at` with `if_not_exists`).
//!
//! Stats go to `DEDUP_MODEL_STATS_LEASED` for `cargo xtask soak`. Failing seeds are kept by
//! proptest under `proptest-regressions/`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use dedup_tests::{StoreKind, Stores, cloudevents_spec, unique};
use lambda_dedup::{
    Clock, DedupKey, Derived, FaultKind, ManualClock, MarkStatus, Message, Retention, StoreError,
};
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_engine::{Deduplicator, HandlerError, LeasedDeduplicator, Outcome, run_batch};
use lambda_dedup_fake_provider::{Fault, Provider};
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_memory::{Injected, Op};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

mod faults;
mod model;
mod world;

use faults::{CompleteFault, CompleteFaults, CompleteInterceptor, FaultyCompletes};
use model::Model;
use world::{Backing, BatchRun, Delivery, Event, Mark, World};

use crate::model_postgres::PgWorld;
use crate::model_server::ServerWorld;
use crate::model_valkey::ValkeyWorld;

const EVENTS: u8 = 6;
/// The longest lease a claim takes.
const LEASE: Duration = Duration::from_secs(10);
/// How long marks are kept. Within an epoch the clock moves at most (15 lease-expiry or
/// slow-provider steps + 10 drain rounds) × `VISIBILITY` = 275 s, plus two provider-key-expiry
/// steps of 401 s, so no mark expires outside a TTL-expiry step.
const RETENTION: Duration = Duration::from_secs(1800);
/// One SQS visibility timeout, longer than the lease: a redelivery after it finds the lease over.
const VISIBILITY: Duration = Duration::from_secs(11);
/// Past every mark's TTL (which is rounded up to the next second).
const PAST_RETENTION: Duration = Duration::from_secs(1805);
/// How long a forgetful provider keeps idempotency keys (and what the deduplicator is told):
/// longer than the clock moves within an epoch without a provider-key-expiry step.
const PROVIDER_KEYS: Duration = Duration::from_secs(400);
/// A provider-key-expiry step moves the clock this far.
const PAST_PROVIDER_KEYS: Duration = Duration::from_secs(401);
/// Provider-key-expiry steps taken per epoch; more are skipped (the retention budget above).
const KEY_EXPIRIES_PER_EPOCH: u32 = 2;
const DRAIN_ROUNDS: usize = 10;
/// The payments client gives up after this…
const PROVIDER_TIMEOUT: Duration = Duration::from_millis(300);
/// …and an apply-then-timeout fault answers after this.
const PROVIDER_LATE: Duration = Duration::from_millis(1500);
/// A slow-provider fault answers after this (within the client's timeout)…
const PROVIDER_SLOW: Duration = Duration::from_millis(250);
/// …but its invocation's deadline comes this long (real time) after the call starts.
const DEADLINE_LEFT: Duration = Duration::from_millis(100);
/// A slow-provider batch's deadline on the manual clock (its lease ends there too).
const SHORT_DEADLINE: Duration = Duration::from_secs(5);
/// What the refused key gets from the provider.
const REFUSED: u16 = 422;
/// A batch that takes longer than this (real time) is hung: a bug, not a fault.
const HUNG: Duration = Duration::from_secs(60);

/// Where the next batch's process dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crash {
    /// Holding the claim, before calling the provider.
    AfterClaim,
    /// After the provider's answer, before `complete` (or `release`).
    AfterCall,
    /// In `complete`: it never reaches DynamoDB, or it is written and the answer is lost.
    DuringComplete { answer_lost: bool },
}

#[derive(Debug, Clone)]
enum Step {
    /// A batch of deliveries: (event, SQS delivers the event's last message again, same id).
    /// Otherwise the producer sends it (again: a producer retry under a new message id).
    Batch {
        items: Vec<(u8, bool)>,
        short_deadline: bool,
    },
    /// The next batch's process crashes.
    Crash(Crash),
    /// The clock moves past the lease (one SQS visibility timeout).
    LeaseExpiry,
    /// The queue drains, then the clock moves past the retention: a new epoch.
    TtlExpiry,
    /// The provider answers the next n calls of the next batch with 503.
    Provider5xx(u32),
    /// The provider applies the next call of the next batch but answers after the client's timeout.
    ProviderTimeout,
    /// The next batch step's provider answers one call after that call's invocation deadline.
    SlowProvider,
    /// Deliveries stop (an outage, or messages parked in the DLQ and redriven later) while the
    /// clock moves past the provider's key retention.
    ProviderKeyExpiry,
    /// The next two batches run at the same time (the first one takes any crash).
    Concurrent,
    /// Everything not acknowledged so far is delivered again, at once.
    Redeliver,
}

/// A generated schedule.
#[derive(Debug, Clone)]
struct Schedule {
    steps: Vec<Step>,
    /// The event whose key the provider refuses for good.
    refused: Option<u8>,
    /// The provider forgets keys after `PROVIDER_KEYS` (and the deduplicator knows it).
    forgetful: bool,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (prop::collection::vec((0..EVENTS, prop::bool::weighted(0.2)), 1..6), prop::bool::weighted(0.3))
            .prop_map(|(items, short_deadline)| Step::Batch { items, short_deadline }),
        1 => Just(Step::Crash(Crash::AfterClaim)),
        1 => Just(Step::Crash(Crash::AfterCall)),
        1 => any::<bool>().prop_map(|answer_lost| Step::Crash(Crash::DuringComplete { answer_lost })),
        1 => Just(Step::LeaseExpiry),
        1 => Just(Step::TtlExpiry),
        1 => (1..=3u32).prop_map(Step::Provider5xx),
        1 => Just(Step::ProviderTimeout),
        1 => Just(Step::SlowProvider),
        1 => Just(Step::ProviderKeyExpiry),
        1 => Just(Step::Concurrent),
        1 => Just(Step::Redeliver),
    ]
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (
        prop::collection::vec(step(), 1..16),
        prop::option::weighted(0.5, 0..EVENTS),
        any::<bool>(),
    )
        .prop_map(|(steps, refused, forgetful)| Schedule {
            steps,
            refused,
            forgetful,
        })
}

/// What the schedules tried, summed over the run (for `cargo xtask soak`).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
struct Stats {
    schedules: u64,
    batches: u64,
    deliveries: u64,
    crashes_after_claim: u64,
    crashes_after_call: u64,
    crashes_during_complete: u64,
    lease_expiries: u64,
    ttl_expiries: u64,
    provider_5xx: u64,
    provider_timeouts: u64,
    concurrent_pairs: u64,
    redeliveries: u64,
    /// Schedules whose provider refuses one event's key (422) for good.
    refused_keys: u64,
    /// Calls the provider refused (each a `Rejected { invalid_payload }`).
    provider_rejections: u64,
    /// Messages the model's dead-letter queue received.
    dead_lettered: u64,
    /// Calls still out at their invocation's deadline (the process killed there).
    slow_provider_calls: u64,
    /// Schedules whose provider forgets keys.
    forgetful_providers: u64,
    /// Provider-key-expiry steps taken (the clock moved past the provider's key retention).
    provider_key_expiries: u64,
    /// Keys the provider forgot and was asked for again.
    forgotten_keys: u64,
    /// Takeovers past the provider's key retention: `provider_key_expired`, for reconciliation.
    provider_key_expired: u64,
    double_effects: u64,
    lost_messages: u64,
}

static STATS: std::sync::LazyLock<Mutex<Stats>> = std::sync::LazyLock::new(Mutex::default);

/// Adds one schedule's counters to the run's, and writes them where `cargo xtask soak` reads them.
fn tally(s: &Stats) {
    let mut t = lock(&*STATS);
    t.schedules += s.schedules;
    t.batches += s.batches;
    t.deliveries += s.deliveries;
    t.crashes_after_claim += s.crashes_after_claim;
    t.crashes_after_call += s.crashes_after_call;
    t.crashes_during_complete += s.crashes_during_complete;
    t.lease_expiries += s.lease_expiries;
    t.ttl_expiries += s.ttl_expiries;
    t.provider_5xx += s.provider_5xx;
    t.provider_timeouts += s.provider_timeouts;
    t.concurrent_pairs += s.concurrent_pairs;
    t.redeliveries += s.redeliveries;
    t.refused_keys += s.refused_keys;
    t.provider_rejections += s.provider_rejections;
    t.dead_lettered += s.dead_lettered;
    t.slow_provider_calls += s.slow_provider_calls;
    t.forgetful_providers += s.forgetful_providers;
    t.provider_key_expiries += s.provider_key_expiries;
    t.forgotten_keys += s.forgotten_keys;
    t.provider_key_expired += s.provider_key_expired;
    t.double_effects += s.double_effects;
    t.lost_messages += s.lost_messages;
    if let Ok(path) = std::env::var("DEDUP_MODEL_STATS_LEASED") {
        let _ = std::fs::write(path, serde_json::to_string(&*t).unwrap_or_default());
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs one step: the batches of `queued` at the same time, the first with `crash`; with `slow`,
/// the provider answers one call after its invocation's deadline.
async fn step_batches<E: 'static>(
    world: &World<E>,
    model: &mut Model,
    queued: Vec<(Vec<Delivery>, bool)>,
    crash: Option<Crash>,
    slow: bool,
) {
    let faulty = crash.is_some()
        || slow
        || world.provider.pending_faults() > 0
        || world.provider.in_flight() > 0;
    *lock(&world.faults.mode) = match crash {
        Some(Crash::DuringComplete { answer_lost: true }) => Some(CompleteFault::AnswerLost),
        Some(Crash::DuringComplete { answer_lost: false }) => Some(CompleteFault::NeverSent),
        _ => None,
    };
    if slow {
        world
            .provider
            .inject(Fault::slow(1, PROVIDER_SLOW).for_resource("payments"));
    }
    if queued.len() > 1 {
        model.stats.concurrent_pairs += 1;
    }
    let runs =
        futures::future::join_all(queued.into_iter().enumerate().map(|(i, (b, short))| {
            world.execute(b, if i == 0 { crash } else { None }, short, slow)
        }))
        .await;
    *lock(&world.faults.mode) = None;
    world.provider.clear_faults();
    let unsent = std::mem::take(&mut *lock(&world.faults.unsent));
    let mut answer_lost = std::mem::take(&mut *lock(&world.faults.lost));
    answer_lost.extend(world.lost_on_memory());
    let deadline_passed = runs.iter().any(|r| r.log.slow_calls > 0);
    if let Some(first) = runs.first() {
        let parked = !first.log.parked.is_empty();
        match crash {
            Some(Crash::AfterClaim) if parked => model.stats.crashes_after_claim += 1,
            Some(Crash::AfterCall) if parked => model.stats.crashes_after_call += 1,
            Some(Crash::DuringComplete { .. }) if !unsent.is_empty() || !answer_lost.is_empty() => {
                model.stats.crashes_during_complete += 1;
            }
            _ => {}
        }
    }
    model.settle(world, runs, &unsent, &answer_lost, faulty);
    if deadline_passed {
        // The invocation ran to its deadline (and its leases with it) before it was stopped.
        world.advance(SHORT_DEADLINE + Duration::from_secs(1));
    }
    model.check_marks(world).await;
}

/// Delivers everything pending again, in batches of ten, with no faults.
async fn redeliver<E: 'static>(world: &World<E>, model: &mut Model) {
    model.stats.redeliveries += 1;
    let batch = std::mem::take(&mut model.pending);
    for chunk in batch.chunks(10) {
        step_batches(world, model, vec![(chunk.to_vec(), false)], None, false).await;
    }
}

/// Redelivers until nothing is pending, each round one visibility timeout later (so past every
/// lease, and after the provider has finished any call still in flight), as SQS would. Returns
/// how many deliveries are still pending after the last round.
async fn drain<E: 'static>(world: &World<E>, model: &mut Model) -> usize {
    for _ in 0..DRAIN_ROUNDS {
        if model.pending.is_empty() {
            break;
        }
        world.settle_provider().await;
        world.advance(VISIBILITY);
        model.stats.lease_expiries += 1;
        redeliver(world, model).await;
    }
    model.pending.len()
}

/// The store a schedule runs on.
#[derive(Debug, Clone)]
enum On {
    /// The local DynamoDB or the memory store.
    Stores(StoreKind),
    /// The PostgreSQL server at this URL.
    Postgres(String),
    /// The Valkey server at this URL.
    Valkey(String),
}

async fn run_schedule(on: On, schedule: Schedule) {
    let provider = Provider::new();
    let (base_url, server) = provider.serve().await.expect("fake provider");
    let forgetful = schedule.forgetful;
    match on {
        On::Stores(kind) => {
            let world = World::new(kind, provider, &base_url, forgetful).await;
            run_in(world, schedule).await;
        }
        On::Postgres(url) => {
            let world =
                World::on_server(&url, Backing::Postgres, provider, &base_url, forgetful).await;
            run_in(world, schedule).await;
        }
        On::Valkey(url) => {
            let world =
                World::on_server(&url, Backing::Valkey, provider, &base_url, forgetful).await;
            run_in(world, schedule).await;
        }
    }
    server.abort();
}

async fn run_in<E: 'static>(world: World<E>, schedule: Schedule) {
    let Schedule {
        steps,
        refused,
        forgetful,
    } = schedule;
    let mut model = Model::new(world.clock.now(), refused, forgetful);
    let mut crash: Option<Crash> = None;
    let mut slow = false;
    let mut concurrent = false;
    let mut queued: Vec<(Vec<Delivery>, bool)> = Vec::new();
    let mut lost_messages = 0;

    for s in steps {
        match s {
            Step::Crash(c) => crash = Some(c),
            Step::Concurrent => concurrent = true,
            Step::SlowProvider => slow = true,
            Step::Provider5xx(n) => world.provider.inject(Fault::error_5xx(n)),
            Step::ProviderTimeout => world
                .provider
                .inject(Fault::apply_then_timeout(1, PROVIDER_LATE)),
            Step::LeaseExpiry => {
                world.advance(VISIBILITY);
                model.stats.lease_expiries += 1;
            }
            Step::ProviderKeyExpiry => {
                if model.key_expiries >= KEY_EXPIRIES_PER_EPOCH {
                    continue;
                }
                world.settle_provider().await;
                world.advance(PAST_PROVIDER_KEYS);
                model.key_expiries += 1;
                model.stats.provider_key_expiries += 1;
            }
            Step::Redeliver => redeliver(&world, &mut model).await,
            Step::TtlExpiry => {
                // Retention exceeds the redelivery horizon (S9): SQS has delivered everything
                // by the time a mark expires.
                for (b, short) in std::mem::take(&mut queued) {
                    step_batches(&world, &mut model, vec![(b, short)], None, false).await;
                }
                lost_messages += drain(&world, &mut model).await;
                if lost_messages > 0 {
                    break;
                }
                model.close_epoch(&world).await;
                world.advance(PAST_RETENTION);
                model.stats.ttl_expiries += 1;
                let stored: Vec<u8> = std::mem::take(&mut model.marks)
                    .into_iter()
                    .filter_map(|(e, m)| {
                        match m {
                            Mark::Completed => {}
                            Mark::Held { .. } => assert!(
                                model.reconciled.contains(&(e, model.epoch))
                                    || model.refused == Some(e),
                                "event {e} held after a drain, not sent to reconciliation"
                            ),
                            Mark::Absent => assert_eq!(
                                Some(e),
                                model.refused,
                                "event {e} unfinished after a drain"
                            ),
                        }
                        (m != Mark::Absent).then_some(e)
                    })
                    .collect();
                model.first_attempt.clear();
                model.key_expiries = 0;
                model.epoch += 1;
                model.epoch_start = world.clock.now();
                // S9: past the TTL every mark counts as absent, though still in the table.
                model.check_marks(&world).await;
                for e in stored {
                    assert!(
                        world.stored_mark(&model.events[&e].key).await,
                        "the expired mark is still stored (DynamoDB deletes late)"
                    );
                }
            }
            Step::Batch {
                items,
                short_deadline,
            } => {
                let mut taken = BTreeSet::new();
                let batch: Vec<Delivery> = items
                    .iter()
                    .map(|(e, again)| {
                        let d = model.deliver(&world, *e, *again, &taken);
                        taken.insert(d.message.message_id.clone());
                        d
                    })
                    .collect();
                queued.push((batch, short_deadline));
                if concurrent && queued.len() < 2 {
                    continue;
                }
                concurrent = false;
                let q = std::mem::take(&mut queued);
                step_batches(
                    &world,
                    &mut model,
                    q,
                    crash.take(),
                    std::mem::take(&mut slow),
                )
                .await;
            }
        }
    }
    world.provider.clear_faults();
    if lost_messages == 0 {
        for (b, short) in std::mem::take(&mut queued) {
            step_batches(&world, &mut model, vec![(b, short)], None, false).await;
        }
        lost_messages = drain(&world, &mut model).await;
    }
    model.close_epoch(&world).await;

    // The reference model.
    let effects = world.provider.effects();
    let key_of = |e: &u8| model.events[e].idempotency_key.clone();
    let mut double = 0;
    let delivered_events: BTreeSet<u8> = model.delivered.iter().map(|(e, _)| *e).collect();
    for e in &delivered_events {
        if forgetful {
            double += model
                .epoch_effects
                .iter()
                .filter(|d| d.get(&key_of(e)).is_some_and(|n| *n > 1))
                .count();
        } else if effects.get(&key_of(e)).is_some_and(|n| *n > 1) {
            double += 1;
        }
    }
    for pair in &model.delivered {
        if model.applied.get(pair).is_some_and(|n| *n > 1) {
            double += 1;
        }
    }
    model.stats.double_effects = double as u64;
    model.stats.lost_messages = lost_messages as u64;
    model.stats.forgotten_keys = world.provider.forgotten_keys();
    tally(&model.stats);
    assert_eq!(
        lost_messages, 0,
        "messages still unacknowledged after {DRAIN_ROUNDS} redeliveries"
    );
    let good = |pair: &(u8, u32)| model.refused != Some(pair.0) && !model.reconciled.contains(pair);
    if forgetful {
        // The provider has forgotten every key by the next epoch: each epoch applies again.
        for (epoch, delta) in model.epoch_effects.iter().enumerate() {
            let epoch = u32::try_from(epoch).expect("epoch");
            for (e, ev) in &model.events {
                let pair = (*e, epoch);
                let n = delta.get(&ev.idempotency_key).copied().unwrap_or(0);
                let want = if !model.delivered.contains(&pair) || model.refused == Some(*e) {
                    0..=0
                } else if model.reconciled.contains(&pair) {
                    0..=1
                } else {
                    1..=1
                };
                assert!(
                    want.contains(&n),
                    "S6/S9: in epoch {epoch} the provider applied event {e} {n} times"
                );
            }
        }
    } else {
        assert!(
            model.reconciled.is_empty(),
            "no key retention, no reconciliation"
        );
        let want: BTreeMap<String, u64> = delivered_events
            .iter()
            .filter(|e| model.refused != Some(**e))
            .map(|e| (key_of(e), 1))
            .collect();
        assert_eq!(
            effects, want,
            "S6: the provider applied each event exactly once, under its idempotency key"
        );
    }
    for pair in &model.delivered {
        let n = model.applied.get(pair).copied().unwrap_or(0);
        if good(pair) {
            assert_eq!(n, 1, "(event, epoch) {pair:?} applied once");
        } else {
            assert_eq!(
                n, 0,
                "(event, epoch) {pair:?} refused or for reconciliation, applied"
            );
        }
    }
    let extra: Vec<_> = model
        .applied
        .keys()
        .filter(|p| !model.delivered.contains(p))
        .collect();
    assert!(extra.is_empty(), "applied without a delivery: {extra:?}");
    for (id, e, o) in &model.dlq {
        assert!(
            model.refused == Some(*e)
                && matches!(
                    o,
                    Outcome::Rejected {
                        code: lambda_dedup_engine::Reason::InvalidPayload,
                        ..
                    }
                ),
            "S12/S15: message {id} of event {e} dead-lettered ({o:?}); only the refused event \
             may be"
        );
    }
    for (e, ev) in &model.events {
        let mark = world.store.get(&ev.key).await.expect("get mark");
        let pair = (*e, model.epoch);
        let got = mark.map(|m| m.status);
        if model.reconciled.contains(&pair) {
            assert_eq!(
                got,
                Some(MarkStatus::InProgress),
                "event {e}: sent to reconciliation, its claim kept"
            );
        } else if model.refused == Some(*e) && model.delivered.contains(&pair) {
            assert_eq!(
                got,
                Some(MarkStatus::InProgress),
                "event {e}: refused, its claim released (its lease ended, the mark kept)"
            );
        } else if model.delivered.contains(&pair) {
            assert_eq!(got, Some(MarkStatus::Completed), "event {e}: final mark");
        } else {
            assert!(got.is_none(), "event {e}: its mark is past its TTL");
        }
    }
}

proptest! {
    // 16 schedules in `cargo xtask test` (on Valkey each under a fresh mark prefix of the
    // server); `cargo xtask soak` sets DEDUP_MODEL_CASES much higher.
    #![proptest_config(dedup_tests::model_config(16))]

    /// S6, S8, S9, S12–S16 for the leased flow under generated schedules with faults: see the
    /// module docs.
    #[test]
    fn leased_schedules_with_crashes_and_expiry_apply_each_event_once(schedule in schedule()) {
        dedup_tests::block_on(run_schedule(On::Stores(StoreKind::DynamoDb), schedule));
    }

    /// The same schedules on the memory store (`cargo xtask soak` runs many more of these).
    #[test]
    fn on_the_memory_store_leased_schedules_apply_each_event_once(schedule in schedule()) {
        dedup_tests::block_on(run_schedule(On::Stores(StoreKind::Memory), schedule));
    }

    /// The same schedules on the Valkey store (`DEDUP_VALKEY_URL`; skipped without it); a
    /// crash during complete fails the store's `complete` (never sent, or its script run and
    /// its answer dropped).
    #[test]
    fn on_valkey_leased_schedules_apply_each_event_once(schedule in schedule()) {
        if let Some(url) = crate::model_valkey::url("the Valkey leased model schedules") {
            dedup_tests::block_on(run_schedule(On::Valkey(url), schedule));
        }
    }
}

proptest! {
    // 8 schedules in `cargo xtask test` (each on a fresh marks table of the server); `cargo
    // xtask soak` sets DEDUP_MODEL_CASES higher.
    #![proptest_config(dedup_tests::model_config(8))]

    /// The same schedules on the PostgreSQL store (`DEDUP_POSTGRES_URL`; skipped without it);
    /// a crash during complete fails the store's `complete` (never begun, or committed and its
    /// answer dropped).
    #[test]
    fn on_postgres_leased_schedules_apply_each_event_once(schedule in schedule()) {
        if let Some(url) = crate::model_postgres::url("the PostgreSQL leased model schedules") {
            dedup_tests::block_on(run_schedule(On::Postgres(url), schedule));
        }
    }
}

/// S16, found by these schedules: a payment the provider applied but answered after the
/// client's timeout; the claim is released; deliveries stop while the provider's key retention
/// passes; then a redelivery. When a release deleted the mark, the redelivery claimed afresh and
/// called the provider, which had forgotten the key: a second payment. A release now only ends
/// the lease, the mark keeps the first attempt's time, and the redelivery goes to
/// reconciliation (`provider_key_expired`) without calling.
#[test]
fn a_released_ambiguous_call_is_not_repeated_after_the_provider_forgets_the_key() {
    dedup_tests::block_on(run_schedule(
        On::Stores(StoreKind::DynamoDb),
        Schedule {
            steps: vec![
                Step::ProviderTimeout,
                Step::Batch {
                    items: vec![(0, false)],
                    short_deadline: false,
                },
                Step::ProviderKeyExpiry,
                Step::Redeliver,
            ],
            refused: None,
            forgetful: true,
        },
    ));
}
