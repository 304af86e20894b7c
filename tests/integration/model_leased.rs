//! Model-based schedules for the leased flow (S6, S8, S9, S12–S14): proptest generates schedules of
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
//! Everything runs against the local DynamoDB and the in-process fake provider (`fake_provider`),
//! called with the real `IdempotentClient`. After the schedule, whatever is unacknowledged is
//! redelivered (the clock moving past the lease each round, as SQS visibility would) until
//! nothing is left, and the run is checked against a reference model:
//!
//! - the provider applied each event exactly once overall: one effect per idempotency key, which
//!   is derived from the dedup key and so is the same in every epoch;
//! - each (event, epoch) in which the event was delivered was applied exactly once (an `Applied`
//!   outcome, or a complete written whose answer was lost);
//! - nothing was acknowledged (applied or duplicate) whose payment the provider had not applied;
//! - after every step each event's mark is what the model says (absent, held, completed); a
//!   delivery of a completed event is a duplicate, one of an event held under a live lease is a
//!   retry that never reaches the provider, and the provider always gets the event's key;
//! - every batch's account closes (S14); at the end each event's live mark is `COMPLETED`.
//!
//! Stats go to `DEDUP_MODEL_STATS_LEASED` for `cargo xtask soak`. Failing seeds are kept by
//! proptest under `proptest-regressions/`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
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
use dedup::{Clock, DedupKey, Derived, ManualClock, MarkStatus, Message, Retention};
use dedup_batch::{Deduplicator, HandlerError, Outcome, run_batch};
use dedup_dynamodb::MarkStore;
use dedup_http::IdempotentClient;
use dedup_tests::{client, cloudevents_spec, get_item, mark_table, unique};
use fake_provider::{Fault, Provider};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

const EVENTS: u8 = 6;
/// The longest lease a claim takes.
const LEASE: Duration = Duration::from_secs(10);
/// How long marks are kept. Within an epoch the clock moves at most (15 lease-expiry steps + 10
/// drain rounds) × `VISIBILITY` = 275 s, so no mark expires outside a TTL-expiry step.
const RETENTION: Duration = Duration::from_secs(600);
/// One SQS visibility timeout, longer than the lease: a redelivery after it finds the lease over.
const VISIBILITY: Duration = Duration::from_secs(11);
/// Past every mark's TTL (which is rounded up to the next second).
const PAST_RETENTION: Duration = Duration::from_secs(605);
const DRAIN_ROUNDS: usize = 10;
/// The payments client gives up after this…
const PROVIDER_TIMEOUT: Duration = Duration::from_millis(300);
/// …and an apply-then-timeout fault answers after this.
const PROVIDER_LATE: Duration = Duration::from_millis(1500);
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
    /// The next two batches run at the same time (the first one takes any crash).
    Concurrent,
    /// Everything not acknowledged so far is delivered again, at once.
    Redeliver,
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
        1 => Just(Step::Concurrent),
        1 => Just(Step::Redeliver),
    ]
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
    /// Marks (partition keys) whose complete never reached DynamoDB.
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
        // `MarkStore::complete` is the store's only `UpdateItem`.
        if request.headers().get("x-amz-target") != Some("DynamoDB_20120810.UpdateItem") {
            return Ok(());
        }
        let pk = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .and_then(|v| v["Key"]["pk"]["S"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let mode = *lock(&self.0.mode);
        match mode {
            None => Ok(()),
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
    /// (event, outcome) of every delivery that finished.
    outcomes: Vec<(u8, Outcome)>,
    /// (event, idempotency key) of every call the flow made: one per claim.
    called: Vec<(u8, String)>,
    /// Events whose handler was parked by a crash, holding the claim.
    parked: Vec<u8>,
    provider_5xx: u64,
    provider_timeouts: u64,
}

#[derive(Debug)]
struct BatchRun {
    batch: Vec<Delivery>,
    log: Log,
    /// The process crashed: the batch response never reached SQS.
    lost: bool,
    /// Per delivery, in batch order, whether the batch response acknowledged it.
    acked: Option<Vec<bool>>,
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
    client: Client,
    table: String,
    clock: Arc<ManualClock>,
    store: MarkStore,
    dedup: Deduplicator,
    /// The same table and clock through a client whose completes can be made to fail.
    faulty: Deduplicator,
    faults: Arc<CompleteFaults>,
    provider: Provider,
    api: IdempotentClient,
    run: String,
}

impl World {
    async fn new(provider: Provider, base_url: &str) -> Self {
        let client = client();
        let table = mark_table(&client).await;
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let retention = Retention::unchecked(RETENTION).expect("retention");
        let store = MarkStore::new(client.clone(), table.clone(), retention)
            .with_lease(LEASE)
            .with_clock(clock.clone());
        let faults = Arc::new(CompleteFaults::default());
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
        let faulty_store = MarkStore::new(faulty_client, table.clone(), retention)
            .with_lease(LEASE)
            .with_clock(clock.clone());
        Self {
            dedup: Deduplicator::new(cloudevents_spec("model-leased"), store.clone()),
            faulty: Deduplicator::new(cloudevents_spec("model-leased"), faulty_store),
            client,
            table,
            clock,
            store,
            faults,
            provider,
            api: IdempotentClient::new(base_url, PROVIDER_TIMEOUT).expect("payments client"),
            run: unique("pay"),
        }
    }

    /// Runs one batch through the leased flow, as `payment-dispatcher` does, and crashes it where
    /// `crash` says.
    async fn execute(&self, batch: Vec<Delivery>, crash: Option<Crash>, short: bool) -> BatchRun {
        let now = self.clock.now();
        let deadline = now + Duration::from_secs(if short { 5 } else { 60 });
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
        let wake = Notify::new();
        let (log, stopped, wake, api, events) = (&log, &stopped, &wake, &self.api, &events);
        let park = |event: u8| async move {
            lock(log).parked.push(event);
            stopped.fetch_add(1, Ordering::SeqCst);
            wake.notify_one();
            // The process is dead: this handler never goes on.
            std::future::pending::<()>().await;
        };
        let messages: Vec<Message> = batch.iter().map(|d| d.message.clone()).collect();
        let n = messages.len();
        let work = run_batch(messages, 10, |m| async move {
            let outcome = dedup
                .leased(&m, Some(deadline), |e: Derived, lease| async move {
                    let (event, request) = payment(&e)?;
                    lock(log).called.push((event, lease.idempotency_key()));
                    if crash == Some(Crash::AfterClaim) {
                        park(event).await;
                    }
                    let sent = api
                        .post("/v1/payments", &lease.idempotency_key(), &request)
                        .await;
                    if let Err(HandlerError::Transient(reason)) = &sent {
                        let mut log = lock(log);
                        if reason.contains("timed out") {
                            log.provider_timeouts += 1;
                        } else if reason.contains(": 503") {
                            log.provider_5xx += 1;
                        }
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
            lock(log).outcomes.push((event, outcome.clone()));
            stopped.fetch_add(1, Ordering::SeqCst);
            wake.notify_one();
            outcome
        });
        let lost = matches!(crash, Some(Crash::AfterClaim | Crash::AfterCall));
        let finished = async {
            if lost {
                // `kill -9` once every handler is parked or done: the batch future is dropped.
                let all_stopped = async {
                    loop {
                        let woken = wake.notified();
                        if stopped.load(Ordering::SeqCst) >= n {
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
        let acked = report.map(|r| r.outcomes.iter().map(|(_, o)| o.acknowledged()).collect());
        let log = std::mem::take(&mut *lock(log));
        BatchRun {
            batch,
            log,
            lost,
            acked,
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
    /// Applications per (event, epoch): `Applied` outcomes plus completes whose answer was lost.
    applied: BTreeMap<(u8, u32), u32>,
    /// (event, epoch) pairs with at least one delivery.
    delivered: BTreeSet<(u8, u32)>,
    events: BTreeMap<u8, Event>,
    by_pk: HashMap<String, u8>,
    /// Sent and not acknowledged: SQS delivers these again.
    pending: Vec<Delivery>,
    next_id: u32,
    stats: Stats,
}

impl Model {
    fn new(start: SystemTime) -> Self {
        Self {
            epoch: 0,
            epoch_start: start,
            marks: BTreeMap::new(),
            applied: BTreeMap::new(),
            delivered: BTreeSet::new(),
            events: BTreeMap::new(),
            by_pk: HashMap::new(),
            pending: Vec::new(),
            next_id: 0,
            stats: Stats {
                schedules: 1,
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

    /// Checks one step's batches (run at the same time, from the same state) against the model,
    /// and moves the model on.
    fn settle(
        &mut self,
        world: &World,
        runs: Vec<BatchRun>,
        unsent: &[String],
        answer_lost: &[String],
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
        let effects = world.provider.effects();
        let mut completed: BTreeMap<u8, u32> = BTreeMap::new();
        let mut held: BTreeMap<u8, SystemTime> = BTreeMap::new();
        let mut called: BTreeSet<u8> = BTreeSet::new();
        for run in &runs {
            self.stats.batches += 1;
            self.stats.deliveries += run.batch.len() as u64;
            self.stats.provider_5xx += run.log.provider_5xx;
            self.stats.provider_timeouts += run.log.provider_timeouts;
            for d in &run.batch {
                self.delivered.insert((d.event, self.epoch));
            }
            for (e, o) in &run.log.outcomes {
                assert!(
                    !matches!(o, Outcome::Conflict | Outcome::Rejected { .. }),
                    "event {e}: {o:?} (the payload never changes)"
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
                called.insert(*e);
            }
            for e in &run.log.parked {
                held.insert(*e, run.lease_until);
            }
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
                // Claimed, the call failed, the claim was released (S6).
                Mark::Absent
            };
            self.marks.insert(*e, next);
        }
        // SQS keeps one copy of a message: acknowledged by any delivery, it is gone; otherwise
        // it comes back (once).
        let mut acked: BTreeSet<String> = BTreeSet::new();
        let mut back: Vec<Delivery> = Vec::new();
        for run in runs {
            match run.acked {
                Some(acks) if !run.lost => {
                    for (d, ack) in run.batch.into_iter().zip(acks) {
                        if ack {
                            acked.insert(d.message.message_id.clone());
                        } else {
                            back.push(d);
                        }
                    }
                }
                // The process died: none of the batch was acknowledged.
                _ => back.extend(run.batch),
            }
        }
        self.pending
            .retain(|d| !acked.contains(&d.message.message_id));
        for d in back {
            let id = &d.message.message_id;
            if !acked.contains(id) && !self.pending.iter().any(|p| &p.message.message_id == id) {
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
                Mark::Held { .. } => assert_eq!(
                    got,
                    Some(MarkStatus::InProgress),
                    "event {e}: held by a dead owner"
                ),
                Mark::Completed => {
                    assert_eq!(got, Some(MarkStatus::Completed), "event {e}: completed")
                }
            }
        }
    }
}

/// Runs one step: the batches of `queued` at the same time, the first with `crash`.
async fn step_batches(
    world: &World,
    model: &mut Model,
    queued: Vec<(Vec<Delivery>, bool)>,
    crash: Option<Crash>,
) {
    if let Some(Crash::DuringComplete { answer_lost }) = crash {
        *lock(&world.faults.mode) = Some(if answer_lost {
            CompleteFault::AnswerLost
        } else {
            CompleteFault::NeverSent
        });
    }
    if queued.len() > 1 {
        model.stats.concurrent_pairs += 1;
    }
    let runs = futures::future::join_all(
        queued
            .into_iter()
            .enumerate()
            .map(|(i, (b, short))| world.execute(b, if i == 0 { crash } else { None }, short)),
    )
    .await;
    *lock(&world.faults.mode) = None;
    world.provider.clear_faults();
    let unsent = std::mem::take(&mut *lock(&world.faults.unsent));
    let answer_lost = std::mem::take(&mut *lock(&world.faults.lost));
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
    model.settle(world, runs, &unsent, &answer_lost);
    model.check_marks(world).await;
}

/// Delivers everything pending again, in batches of ten, with no faults.
async fn redeliver(world: &World, model: &mut Model) {
    model.stats.redeliveries += 1;
    let batch = std::mem::take(&mut model.pending);
    for chunk in batch.chunks(10) {
        step_batches(world, model, vec![(chunk.to_vec(), false)], None).await;
    }
}

/// Redelivers until nothing is pending, each round one visibility timeout later (so past every
/// lease), as SQS would. Returns how many deliveries are still pending after the last round.
async fn drain(world: &World, model: &mut Model) -> usize {
    for _ in 0..DRAIN_ROUNDS {
        if model.pending.is_empty() {
            break;
        }
        world.clock.advance(VISIBILITY);
        model.stats.lease_expiries += 1;
        redeliver(world, model).await;
    }
    model.pending.len()
}

async fn run_schedule(steps: Vec<Step>) {
    let provider = Provider::new();
    let (addr, server) = fake_provider::spawn(provider.clone(), ([127, 0, 0, 1], 0).into())
        .await
        .expect("fake provider");
    let world = World::new(provider, &format!("http://{addr}")).await;
    let mut model = Model::new(world.clock.now());
    let mut crash: Option<Crash> = None;
    let mut concurrent = false;
    let mut queued: Vec<(Vec<Delivery>, bool)> = Vec::new();
    let mut lost_messages = 0;

    for s in steps {
        match s {
            Step::Crash(c) => crash = Some(c),
            Step::Concurrent => concurrent = true,
            Step::Provider5xx(n) => world.provider.inject(Fault::error_5xx(n)),
            Step::ProviderTimeout => world
                .provider
                .inject(Fault::apply_then_timeout(1, PROVIDER_LATE)),
            Step::LeaseExpiry => {
                world.clock.advance(VISIBILITY);
                model.stats.lease_expiries += 1;
            }
            Step::Redeliver => redeliver(&world, &mut model).await,
            Step::TtlExpiry => {
                // Retention exceeds the redelivery horizon (S9): SQS has delivered everything
                // by the time a mark expires.
                for (b, short) in std::mem::take(&mut queued) {
                    step_batches(&world, &mut model, vec![(b, short)], None).await;
                }
                lost_messages += drain(&world, &mut model).await;
                if lost_messages > 0 {
                    break;
                }
                world.clock.advance(PAST_RETENTION);
                model.stats.ttl_expiries += 1;
                model.epoch += 1;
                model.epoch_start = world.clock.now();
                for (e, m) in std::mem::take(&mut model.marks) {
                    assert_eq!(m, Mark::Completed, "event {e} unfinished after a drain");
                }
                // S9: past the TTL every mark counts as absent, though still in the table.
                model.check_marks(&world).await;
                for ev in model.events.values() {
                    assert!(
                        get_item(&world.client, &world.table, "pk", ev.key.as_str())
                            .await
                            .is_some(),
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
                step_batches(&world, &mut model, q, crash.take()).await;
            }
        }
    }
    world.provider.clear_faults();
    if lost_messages == 0 {
        for (b, short) in std::mem::take(&mut queued) {
            step_batches(&world, &mut model, vec![(b, short)], None).await;
        }
        lost_messages = drain(&world, &mut model).await;
    }

    // The reference model.
    let effects = world.provider.effects();
    let mut double = 0;
    let delivered_events: BTreeSet<u8> = model.delivered.iter().map(|(e, _)| *e).collect();
    for e in &delivered_events {
        if effects
            .get(&model.events[e].idempotency_key)
            .is_some_and(|n| *n > 1)
        {
            double += 1;
        }
    }
    for pair in &model.delivered {
        if model.applied.get(pair).is_some_and(|n| *n > 1) {
            double += 1;
        }
    }
    model.stats.double_effects = double;
    model.stats.lost_messages = lost_messages as u64;
    tally(&model.stats);
    assert_eq!(
        lost_messages, 0,
        "messages still unacknowledged after {DRAIN_ROUNDS} redeliveries"
    );
    let want: BTreeMap<String, u64> = delivered_events
        .iter()
        .map(|e| (model.events[e].idempotency_key.clone(), 1))
        .collect();
    assert_eq!(
        effects, want,
        "S6: the provider applied each event exactly once, under its idempotency key"
    );
    for pair in &model.delivered {
        assert_eq!(
            model.applied.get(pair).copied().unwrap_or(0),
            1,
            "(event, epoch) {pair:?} applied once"
        );
    }
    let extra: Vec<_> = model
        .applied
        .keys()
        .filter(|p| !model.delivered.contains(p))
        .collect();
    assert!(extra.is_empty(), "applied without a delivery: {extra:?}");
    for (e, ev) in &model.events {
        let mark = world.store.get(&ev.key).await.expect("get mark");
        if model.delivered.contains(&(*e, model.epoch)) {
            assert_eq!(
                mark.map(|m| m.status),
                Some(MarkStatus::Completed),
                "event {e}: final mark"
            );
        } else {
            assert!(mark.is_none(), "event {e}: its mark is past its TTL");
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

    /// S6, S8, S9, S12–S14 for the leased flow under generated schedules with faults: see the
    /// module docs.
    #[test]
    fn leased_schedules_with_crashes_and_expiry_apply_each_event_once(steps in prop::collection::vec(step(), 1..16)) {
        dedup_tests::block_on(run_schedule(steps));
    }
}
