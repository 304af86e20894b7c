//! Model-based schedules for the leased flow (S6, S8, S9, S12–S16): proptest generates schedules of
//! payment requests handled by `Deduplicator::leased` through `run_batch`, as `payment-dispatcher`
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
//! Everything runs against the local DynamoDB and the in-process fake provider (`fake_provider`),
//! called with the real `IdempotentClient`. After the schedule, whatever is unacknowledged is
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
use fake_provider::{Fault, Provider};
use lambda_dedup::{Clock, DedupKey, Derived, ManualClock, MarkStatus, Message, Retention};
use lambda_dedup_batch::{Deduplicator, HandlerError, Outcome, PROVIDER_KEY_EXPIRED, run_batch};
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_memory::{Injected, Op};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

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

static STATS: Mutex<Stats> = Mutex::new(Stats {
    schedules: 0,
    batches: 0,
    deliveries: 0,
    crashes_after_claim: 0,
    crashes_after_call: 0,
    crashes_during_complete: 0,
    lease_expiries: 0,
    ttl_expiries: 0,
    provider_5xx: 0,
    provider_timeouts: 0,
    concurrent_pairs: 0,
    redeliveries: 0,
    refused_keys: 0,
    provider_rejections: 0,
    dead_lettered: 0,
    slow_provider_calls: 0,
    forgetful_providers: 0,
    provider_key_expiries: 0,
    forgotten_keys: 0,
    provider_key_expired: 0,
    double_effects: 0,
    lost_messages: 0,
});

/// Adds one schedule's counters to the run's, and writes them where `cargo xtask soak` reads them.
fn tally(s: &Stats) {
    let mut t = lock(&STATS);
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

// ---------------------------------------------------------------------------------------------
// Crash during complete: an interceptor on a second client of the same local DynamoDB table.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompleteFault {
    /// The `UpdateItem` never leaves the process.
    NeverSent,
    /// DynamoDB applies the `UpdateItem`; its answer is dropped.
    AnswerLost,
}

#[derive(Debug, Default)]
struct CompleteFaults {
    mode: Mutex<Option<CompleteFault>>,
    /// Marks (partition keys) whose complete (or write-back) never reached DynamoDB.
    unsent: Mutex<Vec<String>>,
    /// Marks whose complete DynamoDB wrote, with the answer lost on the way back.
    lost: Mutex<Vec<String>>,
}

#[derive(Debug, Clone)]
struct CompleteInterceptor(Arc<CompleteFaults>);

/// The partition key of a complete in flight, from before to after transmission.
#[derive(Debug, Clone)]
struct SentComplete(String);

impl Storable for SentComplete {
    type Storer = StoreReplace<Self>;
}

impl Intercept for CompleteInterceptor {
    fn name(&self) -> &'static str {
        "model-leased-complete-faults"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        // The store's `UpdateItem`s: `complete` (it sets `:done`); claims and releases are
        // `UpdateItem`s too, and are let through.
        if request.headers().get("x-amz-target") != Some("DynamoDB_20120810.UpdateItem") {
            return Ok(());
        }
        let body = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .unwrap_or_default();
        let pk = body["Key"]["pk"]["S"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let values = &body["ExpressionAttributeValues"];
        let complete = values.get(":done").is_some();
        let mode = *lock(&self.0.mode);
        match mode {
            None => Ok(()),
            Some(_) if !complete => Ok(()),
            Some(CompleteFault::NeverSent) => {
                lock(&self.0.unsent).push(pk);
                Err("injected: the process died before its complete reached DynamoDB".into())
            }
            Some(CompleteFault::AnswerLost) => {
                cfg.interceptor_state().store_put(SentComplete(pk));
                Ok(())
            }
        }
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(SentComplete(pk)) = cfg.load::<SentComplete>() else {
            return Ok(());
        };
        if context.response().status().is_success() {
            lock(&self.0.lost).push(pk.clone());
        }
        Err("injected: the complete's answer was lost".into())
    }
}

// ---------------------------------------------------------------------------------------------
// The world: the local DynamoDB, the fake provider, one clock.

#[derive(Debug, Clone)]
struct Delivery {
    message: Message,
    event: u8,
}

/// What the model knows of an event's mark in the current epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// No live mark (never claimed, released, or past its TTL).
    Absent,
    /// `IN_PROGRESS`, its owner dead or gone; the lease runs until `until`.
    Held {
        until: SystemTime,
    },
    Completed,
}

/// What one batch came to.
#[derive(Debug, Default)]
struct Log {
    /// (event, outcome, whether the provider refused this delivery's call) of every delivery
    /// that finished.
    outcomes: Vec<(u8, Outcome, bool)>,
    /// (event, idempotency key) of every call the flow made: one per claim.
    called: Vec<(u8, String)>,
    /// Events whose handler was parked by a crash, holding the claim.
    parked: Vec<u8>,
    provider_5xx: u64,
    provider_timeouts: u64,
    /// Calls still out at the invocation's deadline.
    slow_calls: u64,
}

#[derive(Debug)]
struct BatchRun {
    batch: Vec<Delivery>,
    log: Log,
    /// The process crashed: the batch response never reached SQS.
    lost: bool,
    /// Per delivery, in batch order, its outcome, when the batch response reached SQS.
    reported: Option<Vec<Outcome>>,
    /// When the leases this batch took end.
    lease_until: SystemTime,
}

#[derive(Debug)]
struct Event {
    key: DedupKey,
    idempotency_key: String,
    last: Message,
}

struct World {
    stores: Stores,
    clock: Arc<ManualClock>,
    store: Arc<dyn lambda_dedup::MarkStore>,
    dedup: Deduplicator,
    /// The same table and clock through a client whose completes can be made to fail.
    faulty: Deduplicator,
    faults: Arc<CompleteFaults>,
    provider: Provider,
    api: IdempotentClient,
    run: String,
}

impl World {
    async fn new(kind: StoreKind, provider: Provider, base_url: &str, forgetful: bool) -> Self {
        let retention = Retention::unchecked(RETENTION).expect("retention");
        let stores = Stores::new(kind, retention).await;
        let clock = stores.clock.clone();
        let store = stores.store(LEASE);
        let faults = Arc::new(CompleteFaults::default());
        let faulty_store: Arc<dyn lambda_dedup::MarkStore> = match stores.memory() {
            // The memory store asks a hook before each call; the hook fails completes only.
            Some(memory) => {
                let f = faults.clone();
                Arc::new(
                    memory
                        .with_fault_hook(Arc::new(move |op, key| {
                            let mode = (*lock(&f.mode))?;
                            if op != Op::Complete {
                                return None;
                            }
                            Some(match mode {
                                CompleteFault::NeverSent => {
                                    let pk = key.map(|k| k.as_str().to_owned()).unwrap_or_default();
                                    lock(&f.unsent).push(pk);
                                    Injected::Fail(lambda_dedup::FaultKind::Network)
                                }
                                CompleteFault::AnswerLost => {
                                    Injected::LoseAnswer(lambda_dedup::FaultKind::Timeout)
                                }
                            })
                        }))
                        .with_lease(LEASE),
                )
            }
            None => {
                let client = dedup_tests::client();
                let faulty_client = Client::from_conf(
                    client
                        .config()
                        .to_builder()
                        // One attempt: a lost answer stays lost (an SDK retry would find its own
                        // completion and succeed).
                        .retry_config(RetryConfig::disabled())
                        .interceptor(CompleteInterceptor(faults.clone()))
                        .build(),
                );
                Arc::new(
                    DynamoStore::new(faulty_client, stores.mark_table(), retention)
                        .with_lease(LEASE)
                        .with_clock(clock.clone()),
                )
            }
        };
        let dedup = |store: Arc<dyn lambda_dedup::MarkStore>| {
            let d = Deduplicator::with_store(cloudevents_spec("model-leased"), store);
            if forgetful {
                d.with_provider_key_retention(PROVIDER_KEYS)
            } else {
                d
            }
        };
        if forgetful {
            provider.set_key_retention(Some(PROVIDER_KEYS));
        }
        Self {
            dedup: dedup(store.clone()),
            faulty: dedup(faulty_store),
            stores,
            clock,
            store,
            faults,
            provider,
            api: IdempotentClient::new(base_url, PROVIDER_TIMEOUT).expect("payments client"),
            run: unique("pay"),
        }
    }

    /// The completes whose answer the memory store lost after applying them.
    fn lost_on_memory(&self) -> Vec<String> {
        self.stores
            .memory()
            .map(|m| {
                m.take_lost_answers()
                    .into_iter()
                    .filter(|(op, _)| *op == Op::Complete)
                    .filter_map(|(_, k)| k.map(|k| k.as_str().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Moves the store's clock and the provider's together.
    fn advance(&self, by: Duration) {
        self.clock.advance(by);
        self.provider.advance(by);
    }

    /// Waits (real time) for the provider to finish the calls it is still working on: a
    /// redelivery comes a visibility timeout later, long after a slow provider has answered.
    async fn settle_provider(&self) {
        let started = std::time::Instant::now();
        while self.provider.in_flight() > 0 {
            assert!(started.elapsed() < HUNG, "the provider hung");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs one batch through the leased flow, as `payment-dispatcher` does, and crashes it where
    /// `crash` says. With `slow`, its deadline is `SHORT_DEADLINE` away and comes `DEADLINE_LEFT`
    /// (real time) into any provider call: the process is killed there, holding the claim.
    async fn execute(
        &self,
        batch: Vec<Delivery>,
        crash: Option<Crash>,
        short: bool,
        slow: bool,
    ) -> BatchRun {
        let now = self.clock.now();
        let deadline = now
            + if short || slow {
                SHORT_DEADLINE
            } else {
                Duration::from_secs(60)
            };
        let lease_until = (now + LEASE).min(deadline);
        let dedup = match crash {
            Some(Crash::DuringComplete { .. }) => &self.faulty,
            _ => &self.dedup,
        };
        let events: HashMap<String, u8> = batch
            .iter()
            .map(|d| (d.message.message_id.clone(), d.event))
            .collect();
        let log = Mutex::new(Log::default());
        // Handlers that finished or are parked for good; the crash cuts the batch when all are.
        let stopped = AtomicUsize::new(0);
        let parked = AtomicUsize::new(0);
        let wake = Notify::new();
        let (log, stopped, parked, wake, api, events) =
            (&log, &stopped, &parked, &wake, &self.api, &events);
        let park = |event: u8| async move {
            lock(log).parked.push(event);
            parked.fetch_add(1, Ordering::SeqCst);
            stopped.fetch_add(1, Ordering::SeqCst);
            wake.notify_one();
            // The process is dead: this handler never goes on.
            std::future::pending::<()>().await;
        };
        let messages: Vec<Message> = batch.iter().map(|d| d.message.clone()).collect();
        let n = messages.len();
        let work = run_batch(messages, 10, |m| async move {
            let refused = AtomicBool::new(false);
            let refused = &refused;
            let outcome = dedup
                .leased(&m, Some(deadline), |e: Derived, lease| async move {
                    let (event, request) = payment(&e)?;
                    lock(log).called.push((event, lease.idempotency_key()));
                    if crash == Some(Crash::AfterClaim) {
                        park(event).await;
                    }
                    let key = lease.idempotency_key();
                    let call = api.post("/v1/payments", &key, &request);
                    let sent = if slow {
                        tokio::select! {
                            sent = call => sent,
                            () = tokio::time::sleep(DEADLINE_LEFT) => {
                                // The deadline: Lambda stops the process with the call still out.
                                lock(log).slow_calls += 1;
                                park(event).await;
                                unreachable!("a parked handler never goes on")
                            }
                        }
                    } else {
                        call.await
                    };
                    match &sent {
                        Err(HandlerError::Transient(reason)) => {
                            let mut log = lock(log);
                            if reason.contains("timed out") {
                                log.provider_timeouts += 1;
                            } else if reason.contains(": 503") {
                                log.provider_5xx += 1;
                            }
                        }
                        Err(HandlerError::Invalid(_)) => refused.store(true, Ordering::SeqCst),
                        Ok(_) => {}
                    }
                    if crash == Some(Crash::AfterCall) {
                        park(event).await;
                    }
                    Ok(Some(sent?.body))
                })
                .await;
            let event = events
                .get(&m.message_id)
                .copied()
                .expect("a message of the batch");
            lock(log)
                .outcomes
                .push((event, outcome.clone(), refused.load(Ordering::SeqCst)));
            stopped.fetch_add(1, Ordering::SeqCst);
            wake.notify_one();
            outcome
        });
        let crashes = matches!(crash, Some(Crash::AfterClaim | Crash::AfterCall));
        let finished = async {
            if crashes || slow {
                // `kill -9` (or the deadline) once every handler is parked or done: the batch
                // future is dropped. A slow batch dies only if a call outlived its deadline.
                let all_stopped = async {
                    loop {
                        let woken = wake.notified();
                        if stopped.load(Ordering::SeqCst) >= n
                            && (crashes || parked.load(Ordering::SeqCst) > 0)
                        {
                            break;
                        }
                        woken.await;
                    }
                };
                tokio::select! {
                    report = work => Some(report),
                    () = all_stopped => None,
                }
            } else {
                Some(work.await)
            }
        };
        let report = tokio::time::timeout(HUNG, finished)
            .await
            .expect("a batch hung");
        if let Some(report) = &report {
            assert!(report.account.closes(), "S14: {:?}", report.account);
            assert_eq!(
                report.account.received, n as u64,
                "S14: every delivery counted"
            );
            let failed: BTreeSet<&String> = report.failures.iter().collect();
            for (d, (id, o)) in batch.iter().zip(&report.outcomes) {
                assert_eq!(&d.message.message_id, id, "S12: outcomes in batch order");
                assert_eq!(
                    failed.contains(id),
                    !o.acknowledged(),
                    "S12: exactly the failures"
                );
            }
        }
        let lost = report.is_none();
        let reported = report.map(|r| r.outcomes.into_iter().map(|(_, o)| o).collect());
        let log = std::mem::take(&mut *lock(log));
        BatchRun {
            batch,
            log,
            lost,
            reported,
            lease_until,
        }
    }
}

/// The event number and the provider request of a payment: the same on every retry.
fn payment(e: &Derived) -> Result<(u8, Value), HandlerError> {
    let data = HandlerError::data(e)?;
    let event = data["event"]
        .as_u64()
        .and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| HandlerError::Invalid("event".into()))?;
    Ok((
        event,
        json!({"reference": data["reference"], "amount": data["amount"]}),
    ))
}

// ---------------------------------------------------------------------------------------------
// The reference model.

struct Model {
    epoch: u32,
    epoch_start: SystemTime,
    marks: BTreeMap<u8, Mark>,
    /// When each held event was first attempted: the claim that started its chain of takeovers
    /// (the store keeps that time across takeovers; a release or completion ends the chain).
    first_attempt: BTreeMap<u8, SystemTime>,
    /// Applications per (event, epoch): `Applied` outcomes plus completes whose answer was lost.
    applied: BTreeMap<(u8, u32), u32>,
    /// (event, epoch) pairs with at least one delivery.
    delivered: BTreeSet<(u8, u32)>,
    /// (event, epoch) pairs sent to reconciliation (`provider_key_expired`).
    reconciled: BTreeSet<(u8, u32)>,
    events: BTreeMap<u8, Event>,
    by_pk: HashMap<String, u8>,
    /// Sent and not acknowledged: SQS delivers these again.
    pending: Vec<Delivery>,
    /// The dead-letter queue: (message id, event, outcome).
    dlq: Vec<(String, u8, Outcome)>,
    next_id: u32,
    /// The event whose key the provider refuses.
    refused: Option<u8>,
    /// The provider forgets keys after `PROVIDER_KEYS`.
    forgetful: bool,
    /// Provider-key-expiry steps taken in this epoch.
    key_expiries: u32,
    /// The provider's effects when this epoch began.
    effects_at_epoch: BTreeMap<String, u64>,
    /// The provider's effects during each finished epoch.
    epoch_effects: Vec<BTreeMap<String, u64>>,
    stats: Stats,
}

impl Model {
    fn new(start: SystemTime, refused: Option<u8>, forgetful: bool) -> Self {
        Self {
            epoch: 0,
            epoch_start: start,
            marks: BTreeMap::new(),
            first_attempt: BTreeMap::new(),
            applied: BTreeMap::new(),
            delivered: BTreeSet::new(),
            reconciled: BTreeSet::new(),
            events: BTreeMap::new(),
            by_pk: HashMap::new(),
            pending: Vec::new(),
            dlq: Vec::new(),
            next_id: 0,
            refused,
            forgetful,
            key_expiries: 0,
            effects_at_epoch: BTreeMap::new(),
            epoch_effects: Vec::new(),
            stats: Stats {
                schedules: 1,
                refused_keys: u64::from(refused.is_some()),
                forgetful_providers: u64::from(forgetful),
                ..Stats::default()
            },
        }
    }

    /// A delivery of `event`: SQS delivering its last message again (`again`, same id), or the
    /// producer sending it (again: a new message id). `taken`: ids already in this batch.
    fn deliver(
        &mut self,
        world: &World,
        event: u8,
        again: bool,
        taken: &BTreeSet<String>,
    ) -> Delivery {
        if again
            && let Some(e) = self.events.get(&event)
            && !taken.contains(&e.last.message_id)
            // A dead-lettered message is in the DLQ: the queue cannot deliver it again.
            && !self.dlq.iter().any(|(id, _, _)| *id == e.last.message_id)
        {
            // In flight now; it comes back if this delivery is not acknowledged either.
            let id = &e.last.message_id;
            self.pending.retain(|d| &d.message.message_id != id);
            return Delivery {
                message: e.last.clone(),
                event,
            };
        }
        self.next_id += 1;
        let body = json!({"specversion": "1.0", "type": "payment", "source": "/model-leased",
                          "id": format!("{}-{event}", world.run), "tenantid": "t",
                          "data": {"event": event, "reference": format!("{}-{event}", world.run),
                                   "amount": 100 + u64::from(event)}});
        let message = Message {
            message_id: format!("m{}", self.next_id),
            body: body.to_string().into_bytes(),
            ..Message::default()
        };
        let key = cloudevents_spec("model-leased")
            .derive(&message)
            .expect("derive")
            .key;
        if self.refused == Some(event) && !self.events.contains_key(&event) {
            world.provider.reject_key(&key.idempotency_key(), REFUSED);
        }
        self.by_pk.insert(key.as_str().to_owned(), event);
        self.events.insert(
            event,
            Event {
                idempotency_key: key.idempotency_key(),
                key,
                last: message.clone(),
            },
        );
        Delivery { message, event }
    }

    fn event_of(&self, pk: &str) -> u8 {
        *self.by_pk.get(pk).expect("a mark of this schedule")
    }

    /// The provider's effects since this epoch began, per idempotency key.
    fn epoch_delta(&self, now: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        now.iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n - self.effects_at_epoch.get(k).copied().unwrap_or(0),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Checks one step's batches (run at the same time, from the same state) against the model,
    /// and moves the model on. `faulty`: a fault was armed for this step (a crash, a provider
    /// fault, a slow call, a call still in flight from before).
    fn settle(
        &mut self,
        world: &World,
        runs: Vec<BatchRun>,
        unsent: &[String],
        answer_lost: &[String],
        faulty: bool,
    ) {
        let now = world.clock.now();
        assert!(
            now.duration_since(self.epoch_start).unwrap_or_default() + VISIBILITY < RETENTION,
            "the schedule outran the retention within one epoch: no mark may expire outside a \
             TTL step"
        );
        let start = self.marks.clone();
        let state = |e: u8| start.get(&e).copied().unwrap_or(Mark::Absent);
        let live = |m: Mark| matches!(m, Mark::Held { until } if until > now);
        // A takeover of this event would find it first attempted longer ago than the provider
        // keeps keys.
        let key_expired = |e: u8| {
            self.forgetful
                && self
                    .first_attempt
                    .get(&e)
                    .is_some_and(|t| now.duration_since(*t).unwrap_or_default() > PROVIDER_KEYS)
        };
        let effects = world.provider.effects();
        let mut completed: BTreeMap<u8, u32> = BTreeMap::new();
        let mut held: BTreeMap<u8, SystemTime> = BTreeMap::new();
        let mut called: BTreeSet<u8> = BTreeSet::new();
        let mut expired: BTreeSet<u8> = BTreeSet::new();
        let mut received: BTreeSet<u8> = BTreeSet::new();
        for run in &runs {
            self.stats.batches += 1;
            self.stats.deliveries += run.batch.len() as u64;
            self.stats.provider_5xx += run.log.provider_5xx;
            self.stats.provider_timeouts += run.log.provider_timeouts;
            self.stats.slow_provider_calls += run.log.slow_calls;
            for d in &run.batch {
                self.delivered.insert((d.event, self.epoch));
                received.insert(d.event);
            }
            for (e, o, refused) in &run.log.outcomes {
                match o {
                    Outcome::Rejected {
                        code: "invalid_payload",
                        ..
                    } => {
                        assert!(
                            *refused && self.refused == Some(*e),
                            "S15: event {e} rejected ({o:?}) though the provider refused no call"
                        );
                        self.stats.provider_rejections += 1;
                    }
                    Outcome::Rejected { code, .. } if *code == PROVIDER_KEY_EXPIRED => {
                        assert!(
                            matches!(state(*e), Mark::Held { .. })
                                && !live(state(*e))
                                && key_expired(*e),
                            "S9/S16: event {e} got {o:?}, but a takeover of it is not past the \
                             provider's key retention ({:?}, first attempt {:?})",
                            state(*e),
                            self.first_attempt.get(e)
                        );
                        expired.insert(*e);
                        held.insert(*e, run.lease_until);
                        self.reconciled.insert((*e, self.epoch));
                        self.stats.provider_key_expired += 1;
                    }
                    Outcome::Conflict | Outcome::Rejected { .. } => {
                        panic!("event {e}: {o:?} (the payload never changes)")
                    }
                    _ => {}
                }
                assert!(
                    !*refused
                        || matches!(
                            o,
                            Outcome::Rejected {
                                code: "invalid_payload",
                                ..
                            }
                        ),
                    "S15: the provider refused event {e}'s call for good (4xx), and the delivery \
                     got {o:?}, not a rejection"
                );
                match state(*e) {
                    Mark::Completed => assert!(
                        matches!(o, Outcome::Duplicate { .. }),
                        "S8: event {e} was completed, a delivery got {o:?}"
                    ),
                    m if live(m) => assert!(
                        matches!(o, Outcome::Retry { .. }),
                        "S8: event {e} is held under a live lease, a delivery got {o:?}"
                    ),
                    _ => {}
                }
                if o.acknowledged() {
                    assert!(
                        effects.get(&self.events[e].idempotency_key).copied() >= Some(1),
                        "event {e} acknowledged ({o:?}) but the provider never applied it"
                    );
                }
                if *o == Outcome::Applied {
                    *completed.entry(*e).or_default() += 1;
                }
            }
            for (e, key) in &run.log.called {
                assert_eq!(
                    key, &self.events[e].idempotency_key,
                    "S6: event {e} called the provider with a key not derived from its dedup key"
                );
                assert!(
                    state(*e) != Mark::Completed && !live(state(*e)),
                    "S4/S6: event {e} was claimed while {:?}",
                    state(*e)
                );
                assert!(
                    !key_expired(*e),
                    "S9/S16: event {e} was taken over past the provider's key retention (first \
                     attempt {:?}) and the provider was called",
                    self.first_attempt.get(e)
                );
                called.insert(*e);
            }
            for e in &run.log.parked {
                held.insert(*e, run.lease_until);
            }
        }
        for e in &expired {
            assert!(
                !called.contains(e),
                "S4: event {e} claimed twice in one step"
            );
        }
        // The faulty client only ever serves the first batch of a step.
        let faulty_lease = runs.first().map(|r| r.lease_until);
        for pk in unsent {
            let e = self.event_of(pk);
            held.insert(e, faulty_lease.expect("a batch"));
        }
        for pk in answer_lost {
            *completed.entry(self.event_of(pk)).or_default() += 1;
        }
        let touched: BTreeSet<u8> = called
            .iter()
            .chain(completed.keys())
            .chain(held.keys())
            .copied()
            .collect();
        for e in &touched {
            let done = completed.get(e).copied().unwrap_or(0);
            assert!(
                done == 0 || !held.contains_key(e),
                "S4: event {e} completed and still held by a dead owner in one step: two owners"
            );
            let next = if done > 0 {
                *self.applied.entry((*e, self.epoch)).or_default() += done;
                Mark::Completed
            } else if let Some(until) = held.get(e) {
                Mark::Held { until: *until }
            } else {
                // Claimed, the call failed, the claim was released (S6): its lease ended, the
                // mark (and its first attempt's time) stays for the next delivery to take over.
                Mark::Held {
                    until: std::time::UNIX_EPOCH,
                }
            };
            match next {
                // A claim over no live mark starts a chain; a takeover inherits its start.
                Mark::Held { .. } if state(*e) == Mark::Absent => {
                    self.first_attempt.insert(*e, now);
                }
                Mark::Held { .. } => {}
                Mark::Absent | Mark::Completed => {
                    self.first_attempt.remove(e);
                }
            }
            self.marks.insert(*e, next);
        }
        // A good event is applied at its first receive in a step with no fault, if its mark let
        // it be claimed (absent, or a dead owner's lease over).
        if !faulty {
            for e in &received {
                let claimable = match state(*e) {
                    Mark::Absent => true,
                    m @ Mark::Held { .. } => !live(m),
                    Mark::Completed => false,
                };
                if claimable && self.refused != Some(*e) {
                    assert!(
                        self.marks.get(e) == Some(&Mark::Completed) || expired.contains(e),
                        "S12: event {e} was not applied at a receive with no fault (it is {:?})",
                        self.marks.get(e)
                    );
                }
            }
        }
        // SQS keeps one copy of a message: acknowledged by any delivery, it is gone; rejected,
        // the redrive policy dead-letters it; otherwise it comes back (once). A delivery sent to
        // reconciliation is acknowledged once it is there.
        let mut acked: BTreeSet<String> = BTreeSet::new();
        let mut dead: BTreeMap<String, (u8, Outcome)> = BTreeMap::new();
        let mut back: Vec<Delivery> = Vec::new();
        for run in runs {
            match run.reported {
                Some(outcomes) if !run.lost => {
                    for (d, o) in run.batch.into_iter().zip(outcomes) {
                        let id = d.message.message_id.clone();
                        if o.acknowledged()
                            || matches!(&o, Outcome::Rejected { code, .. } if *code == PROVIDER_KEY_EXPIRED)
                        {
                            acked.insert(id);
                        } else if matches!(o, Outcome::Rejected { .. } | Outcome::Conflict) {
                            dead.insert(id, (d.event, o));
                        } else {
                            back.push(d);
                        }
                    }
                }
                // The process died: none of the batch was acknowledged.
                _ => back.extend(run.batch),
            }
        }
        dead.retain(|id, _| !acked.contains(id));
        self.pending.retain(|d| {
            !acked.contains(&d.message.message_id) && !dead.contains_key(&d.message.message_id)
        });
        for (id, (e, o)) in dead {
            if !self.dlq.iter().any(|(i, _, _)| *i == id) {
                self.stats.dead_lettered += 1;
                self.dlq.push((id, e, o));
            }
        }
        for d in back {
            let id = &d.message.message_id;
            if !acked.contains(id)
                && !self.dlq.iter().any(|(i, _, _)| i == id)
                && !self.pending.iter().any(|p| &p.message.message_id == id)
            {
                self.pending.push(d);
            }
        }
    }

    /// The store agrees with the model about every event's mark.
    async fn check_marks(&self, world: &World) {
        for (e, ev) in &self.events {
            let mark = world.store.get(&ev.key).await.expect("get mark");
            let want = self.marks.get(e).copied().unwrap_or(Mark::Absent);
            let got = mark.as_ref().map(|m| m.status);
            match want {
                Mark::Absent => assert_eq!(got, None, "event {e}: the model has no live mark"),
                Mark::Held { until } => {
                    assert_eq!(
                        got,
                        Some(MarkStatus::InProgress),
                        "event {e}: held by a dead owner"
                    );
                    let mark = mark.as_ref().expect("a mark");
                    let ms = lambda_dedup::clock::epoch_millis;
                    assert_eq!(
                        mark.lease_expires_at.map(ms),
                        Some(ms(until)),
                        "S6: event {e}: its lease ends at the claim's deadline or lease"
                    );
                    assert_eq!(
                        Some(ms(mark.first_seen_at)),
                        self.first_attempt.get(e).copied().map(ms),
                        "S9/S16: event {e}: a takeover keeps the first attempt's time"
                    );
                }
                Mark::Completed => {
                    assert_eq!(got, Some(MarkStatus::Completed), "event {e}: completed")
                }
            }
        }
    }

    /// Ends the epoch's accounting of the provider's effects (once its calls have all landed).
    async fn close_epoch(&mut self, world: &World) {
        world.settle_provider().await;
        let effects = world.provider.effects();
        let delta = self.epoch_delta(&effects);
        self.epoch_effects.push(delta);
        self.effects_at_epoch = effects;
    }
}

/// Runs one step: the batches of `queued` at the same time, the first with `crash`; with `slow`,
/// the provider answers one call after its invocation's deadline.
async fn step_batches(
    world: &World,
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
async fn redeliver(world: &World, model: &mut Model) {
    model.stats.redeliveries += 1;
    let batch = std::mem::take(&mut model.pending);
    for chunk in batch.chunks(10) {
        step_batches(world, model, vec![(chunk.to_vec(), false)], None, false).await;
    }
}

/// Redelivers until nothing is pending, each round one visibility timeout later (so past every
/// lease, and after the provider has finished any call still in flight), as SQS would. Returns
/// how many deliveries are still pending after the last round.
async fn drain(world: &World, model: &mut Model) -> usize {
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

async fn run_schedule(kind: StoreKind, schedule: Schedule) {
    let Schedule {
        steps,
        refused,
        forgetful,
    } = schedule;
    let provider = Provider::new();
    let (addr, server) = fake_provider::spawn(provider.clone(), ([127, 0, 0, 1], 0).into())
        .await
        .expect("fake provider");
    let world = World::new(kind, provider, &format!("http://{addr}"), forgetful).await;
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
                        world.stores.stored_mark(&model.events[&e].key).await,
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
                        code: "invalid_payload",
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
    server.abort();
}

proptest! {
    // 16 schedules in `cargo xtask test`; `cargo xtask soak` sets DEDUP_MODEL_CASES much higher.
    #![proptest_config(ProptestConfig {
        cases: dedup_tests::model_cases(16),
        ..ProptestConfig::default()
    })]

    /// S6, S8, S9, S12–S16 for the leased flow under generated schedules with faults: see the
    /// module docs.
    #[test]
    fn leased_schedules_with_crashes_and_expiry_apply_each_event_once(schedule in schedule()) {
        dedup_tests::block_on(run_schedule(StoreKind::DynamoDb, schedule));
    }

    /// The same schedules on the memory store (`cargo xtask soak` runs many more of these).
    #[test]
    fn on_the_memory_store_leased_schedules_apply_each_event_once(schedule in schedule()) {
        dedup_tests::block_on(run_schedule(StoreKind::Memory, schedule));
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
        StoreKind::DynamoDb,
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
