//! Model-based schedules (S4, S5, S8, S10–S15): proptest generates schedules of batches —
//! duplicates, producer retries, payload conflicts, lost answers (a crash after processing,
//! before acknowledgement), store outages, concurrent batches, per-message or batch-transaction
//! mode — with permanent faults mixed in:
//!
//! - poison messages: credits to an account whose `balance` holds a string (seeded before the
//!   schedule), so DynamoDB refuses their `ADD` for good, in batches with good messages;
//! - DLQ redrives days later: the queue drains, the clock moves on by a day or more (within the
//!   retention, or past it), and every message in the model's dead-letter queue is sent again.
//!   Every event carries its CloudEvents `time` (kept by producer retries and redrives), so past
//!   the retention a redriven or retried message is late (S10).
//!
//! Each schedule runs through the batch runner against the local DynamoDB, the memory store, or
//! PostgreSQL (`DEDUP_POSTGRES_URL`, skipped with a message without it: a fresh marks table per
//! schedule; the credit a `SqlEffect` upsert of a `bigint` balance in a table of the test's own;
//! the poisons' account seeded at the largest `bigint`, so every credit to it overflows, SQLSTATE
//! 22003, refused for good; the store that is down a `PgStore` on a closed port, so every
//! connection is refused), or Valkey (`DEDUP_VALKEY_URL`, skipped with a message without it: a
//! fresh key prefix per schedule; the credit a `ValkeyEffect` `HINCRBY` of a balance hash per
//! account, run in the mark's script; the poisons' account holds a string in its balance field,
//! so the script refuses every credit to it for good, `NOT_AN_INTEGER`, before it writes; the
//! store that is down a `ValkeyStore` on a closed loopback port). The same steps and the same
//! reference model on each (see [`Ledger`]).
//! It redelivers whatever was not acknowledged until nothing is left, and is checked against a
//! reference model:
//!
//! - every good event is applied exactly once (one `Applied` outcome, its amount in the balance),
//!   including across redrives days later; a poison is never applied, leaves no mark and leaves
//!   its account as it was;
//! - nothing is acknowledged unprocessed: every acknowledged message's event has been applied;
//! - a conflict is only ever reported for a payload other than the one applied;
//! - each poison delivery is counted: `Rejected { effect_refused }`, or a retry only when its batch
//!   met a transient store fault (S15) — so never retried in a loop;
//! - a delivery is `Rejected { late_event }` exactly when its event's `time` is older than the
//!   retention (S10); such a delivery is never applied and goes to reconciliation;
//! - the model's dead-letter queue holds only poisons (`effect_refused`) and payload conflicts
//!   (S11, a payload other than the applied one): no good event is ever dead-lettered (S12);
//! - a good event is applied by the end of its first receive in a batch the store answered: no
//!   good delivery is a retry unless its batch met a transient store fault. (Stronger than "within
//!   two receives": a poison, a conflict or a duplicate in the same batch or transaction never
//!   holds a good event back; the only transient faults here, outages and lost answers, are
//!   exempt or do not stop the commit, and so is a transaction conflict between two batches run at
//!   once, S13: PostgreSQL's deadlock detector aborts one of two batch transactions that lock the
//!   same balances in opposite orders, SQLSTATE 40P01, and the store reports it as a transient
//!   `TransactionConflict`; the local DynamoDB runs transactions one at a time, and Valkey commits
//!   a batch one script per event, atomically, so there it never happens);
//! - every batch's account closes.
//!
//! Marks expire only at a redrive past the retention, after the queue has drained (the retention
//! covers the queue's redelivery horizon, S9). The leased flow — external calls, crashes between
//! claim and complete, lease and TTL expiry, provider rejections — has its own schedules in
//! `model_leased.rs`. `cargo xtask soak` runs many more of both (these write their stats to
//! `DEDUP_MODEL_STATS`). Failing seeds are kept by proptest under `proptest-regressions/`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use dedup_tests::{StoreKind, Stores, cloudevents_spec, credit_data, credit_effect, unique};
use lambda_dedup::{
    Clock, DedupKey, Derived, Effect, FaultKind, Item, ManualClock, MarkStore, Message, Retention,
    StoreError, Value,
};
use lambda_dedup_engine::{
    BatchReport, Deduplicator, HandlerError, Outcome, Plan, run_batch, run_batch_transactional,
};
use lambda_dedup_postgres::SqlEffect;
use lambda_dedup_valkey::ValkeyEffect;
use proptest::prelude::*;
use redis::AsyncCommands;
use serde_json::json;

use crate::model_postgres::{PgWorld, table_name};
use crate::model_server::ServerWorld;
use crate::model_valkey::ValkeyWorld;

/// Good events are `0..EVENTS`.
const EVENTS: u8 = 6;
/// Poisons are `EVENTS..EVENTS + POISONS`: credits to the account whose balance is a string.
const POISONS: u8 = 2;
/// How long marks are kept (and how old an event may be before it is late, S10).
const RETENTION: Duration = Duration::from_secs(4 * 86_400);
/// A redrive within the retention comes this much later: a day and an hour.
const WITHIN_RETENTION: Duration = Duration::from_secs(25 * 3600);
/// A redrive past the retention comes this much later. Neither jump makes an event's age equal
/// to the retention, so no delivery sits on the boundary.
const PAST_RETENTION: Duration = Duration::from_secs(4 * 86_400 + 25 * 3600);
/// What the poisons' account holds instead of a number.
const NOT_A_NUMBER: &str = "not-a-number";
const DRAIN_ROUNDS: usize = 20;

#[derive(Debug, Clone)]
enum Step {
    /// A batch of (event, conflicting payload?) deliveries.
    Batch {
        items: Vec<(u8, bool)>,
        batch_mode: bool,
    },
    /// The next batch is processed, but its answer is lost: all of it comes back.
    Crash,
    /// The next batch finds the store unreachable.
    Outage,
    /// The next two batches run at the same time.
    Concurrent,
    /// Everything not acknowledged so far is delivered again.
    Redeliver,
    /// The queue drains; days pass (past the retention or not); the dead-letter queue is
    /// redriven: each of its messages is sent again.
    Redrive {
        past_retention: bool,
        batch_mode: bool,
    },
}

fn event() -> impl Strategy<Value = u8> {
    prop_oneof![7 => 0..EVENTS, 1 => EVENTS..EVENTS + POISONS]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (prop::collection::vec((event(), prop::bool::weighted(0.1)), 1..6), any::<bool>())
            .prop_map(|(items, batch_mode)| Step::Batch { items, batch_mode }),
        1 => Just(Step::Crash),
        1 => Just(Step::Outage),
        1 => Just(Step::Concurrent),
        1 => Just(Step::Redeliver),
        1 => (any::<bool>(), any::<bool>())
            .prop_map(|(past_retention, batch_mode)| Step::Redrive { past_retention, batch_mode }),
    ]
}

fn is_poison(event: u8) -> bool {
    event >= EVENTS
}

#[derive(Debug, Clone)]
struct Delivery {
    message: Message,
    event: u8,
    amount: i64,
    /// The event's CloudEvents `time`, as sent (milliseconds).
    time: SystemTime,
}

fn account(event: u8) -> String {
    if is_poison(event) {
        "poison".into()
    } else {
        format!("acct-{}", event % 3)
    }
}

/// A delivery of `event` produced at `time` (a producer retry keeps the event's first time).
fn deliver(run: &str, event: u8, conflict: bool, time: SystemTime, n: &mut u32) -> Delivery {
    *n += 1;
    let amount = if conflict {
        1000 + i64::from(event)
    } else {
        1 + i64::from(event)
    };
    let stamp = chrono::DateTime::<chrono::Utc>::from(time)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let body = json!({"specversion": "1.0", "type": "credit", "source": "/model", "id": format!("{run}-{event}"),
                      "tenantid": "t", "time": stamp,
                      "data": {"account": format!("{run}-{}", account(event)), "amount": amount}});
    Delivery {
        message: Message {
            message_id: format!("m{n}"),
            body: body.to_string().into_bytes(),
            ..Message::default()
        },
        event,
        amount,
        time,
    }
}

/// A backend the schedules run on: a mark store and the balances table on one manual clock, the
/// credit as the store's own effect type, and reads of balances and marks through the backend's
/// own access path, not through the `MarkStore` under test.
trait Ledger {
    type Effect: 'static;
    /// Where the marks are.
    type Marks: Marks<Self::Effect>;
    fn marks(&self) -> &Self::Marks;
    /// Adds `amount` to the balance of `account`.
    fn credit(&self, account: &str, amount: i64) -> Self::Effect;
    /// Seeds `account` with a balance every credit is refused on for good.
    async fn seed_poison(&self, account: &str);
    async fn balance(&self, account: &str) -> Option<i64>;
    /// Whether `account` still holds what [`seed_poison`](Self::seed_poison) wrote.
    async fn poison_untouched(&self, account: &str) -> bool;
}

/// A backend's mark store on one manual clock, and reads of its marks through the backend's own
/// access path.
trait Marks<E> {
    fn clock(&self) -> Arc<ManualClock>;
    fn store(&self) -> Arc<dyn MarkStore<E>>;
    /// A store that cannot be reached (S13).
    fn unreachable(&self) -> Arc<dyn MarkStore<E>>;
    /// Whether a mark of `key` is stored at all, live or past its TTL.
    async fn stored_mark(&self, key: &DedupKey) -> bool;
}

/// The local DynamoDB or the memory store.
impl Marks<Effect> for Stores {
    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }
    fn store(&self) -> Arc<dyn MarkStore> {
        Stores::store(self, lambda_dedup::store::DEFAULT_LEASE)
    }
    fn unreachable(&self) -> Arc<dyn MarkStore> {
        Stores::unreachable(self)
    }
    async fn stored_mark(&self, key: &DedupKey) -> bool {
        Stores::stored_mark(self, key).await
    }
}

/// The PostgreSQL or the Valkey server.
impl<W: ServerWorld> Marks<W::Effect> for W {
    fn clock(&self) -> Arc<ManualClock> {
        ServerWorld::clock(self)
    }
    fn store(&self) -> Arc<dyn MarkStore<W::Effect>> {
        Arc::new(ServerWorld::store(self, lambda_dedup::store::DEFAULT_LEASE))
    }
    fn unreachable(&self) -> Arc<dyn MarkStore<W::Effect>> {
        Arc::new(ServerWorld::unreachable(self))
    }
    async fn stored_mark(&self, key: &DedupKey) -> bool {
        ServerWorld::stored_mark(self, key).await
    }
}

/// The local DynamoDB or the memory store: credits are `ADD`s; the poisons' account holds a
/// string, so DynamoDB refuses their `ADD` for good.
struct OnStores {
    stores: Stores,
    balances: String,
}

impl OnStores {
    async fn new(kind: StoreKind) -> Self {
        let stores = Stores::new(kind, Retention::unchecked(RETENTION).expect("retention")).await;
        let balances = stores.table("account").await;
        Self { stores, balances }
    }
}

impl Ledger for OnStores {
    type Effect = Effect;
    type Marks = Stores;
    fn marks(&self) -> &Stores {
        &self.stores
    }
    fn credit(&self, account: &str, amount: i64) -> Effect {
        credit_effect(&self.balances, account, amount)
    }
    async fn seed_poison(&self, account: &str) {
        let item = Item::new()
            .with("account", account)
            .with("balance", NOT_A_NUMBER);
        self.stores.put(&self.balances, item).await;
    }
    async fn balance(&self, account: &str) -> Option<i64> {
        self.stores
            .number(&self.balances, "account", account, "balance")
            .await
    }
    async fn poison_untouched(&self, account: &str) -> bool {
        let item = self
            .stores
            .read(&self.balances, &Item::new().with("account", account))
            .await
            .expect("the poisons' account");
        item.0.get("balance") == Some(&Value::S(NOT_A_NUMBER.into()))
    }
}

/// The PostgreSQL store on the server of `DEDUP_POSTGRES_URL`: credits are upserts into a
/// `bigint` balance in the user's own table ([`SqlEffect`]); the poisons' account is seeded at
/// the largest `bigint`, so every credit to it overflows (SQLSTATE 22003, a data exception) and
/// PostgreSQL refuses it for good. The store that is down is one on a closed port.
struct OnPostgres {
    pg: PgWorld,
    balances: String,
}

impl OnPostgres {
    async fn new(url: &str) -> Self {
        let retention = Retention::unchecked(RETENTION).expect("retention");
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let pg = PgWorld::new(url, retention, clock).await;
        let balances = table_name("balances");
        pg.create(
            &balances,
            "account text PRIMARY KEY, balance bigint NOT NULL",
        )
        .await;
        Self { pg, balances }
    }
}

impl Ledger for OnPostgres {
    type Effect = SqlEffect;
    type Marks = PgWorld;
    fn marks(&self) -> &PgWorld {
        &self.pg
    }
    fn credit(&self, account: &str, amount: i64) -> SqlEffect {
        let t = &self.balances;
        SqlEffect::new(format!(
            "INSERT INTO \"{t}\" (account, balance) VALUES ($1, $2) \
             ON CONFLICT (account) DO UPDATE SET balance = \"{t}\".balance + EXCLUDED.balance"
        ))
        .bind(account)
        .bind(amount)
    }
    async fn seed_poison(&self, account: &str) {
        let sql = format!(
            "INSERT INTO \"{}\" (account, balance) VALUES ($1, $2)",
            self.balances
        );
        self.pg
            .client
            .execute(&sql, &[&account, &i64::MAX])
            .await
            .expect("seed the poisons' account");
    }
    async fn balance(&self, account: &str) -> Option<i64> {
        let sql = format!(
            "SELECT balance FROM \"{}\" WHERE account = $1",
            self.balances
        );
        let rows = self.pg.client.query(&sql, &[&account]).await.expect("read");
        rows.first().map(|r| r.get(0))
    }
    async fn poison_untouched(&self, account: &str) -> bool {
        self.balance(account).await == Some(i64::MAX)
    }
}

/// The Valkey store on the server of `DEDUP_VALKEY_URL`: credits are `HINCRBY`s of the `balance`
/// field of a hash per account ([`ValkeyEffect`], run in the mark's script); the poisons'
/// account holds a string in that field, so the script refuses every credit to it for good
/// (`NOT_AN_INTEGER`) before it writes anything. The store that is down is one on a closed port.
struct OnValkey {
    valkey: ValkeyWorld,
}

impl OnValkey {
    async fn new(url: &str) -> Self {
        let retention = Retention::unchecked(RETENTION).expect("retention");
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        Self {
            valkey: ValkeyWorld::new(url, retention, clock).await,
        }
    }

    /// The hash of `account`'s balance.
    fn account(&self, account: &str) -> String {
        self.valkey.key(&format!("balances:{account}"))
    }

    async fn field(&self, account: &str) -> Option<String> {
        let mut conn = self.valkey.conn.clone();
        conn.hget(self.account(account), "balance")
            .await
            .expect("read a balance")
    }
}

impl Ledger for OnValkey {
    type Effect = ValkeyEffect;
    type Marks = ValkeyWorld;
    fn marks(&self) -> &ValkeyWorld {
        &self.valkey
    }
    fn credit(&self, account: &str, amount: i64) -> ValkeyEffect {
        ValkeyEffect::hincr_by(self.account(account), "balance", amount)
    }
    async fn seed_poison(&self, account: &str) {
        let mut conn = self.valkey.conn.clone();
        let _: () = conn
            .hset(self.account(account), "balance", NOT_A_NUMBER)
            .await
            .expect("seed the poisons' account");
    }
    async fn balance(&self, account: &str) -> Option<i64> {
        self.field(account)
            .await
            .map(|b| b.parse().expect("an integer balance"))
    }
    async fn poison_untouched(&self, account: &str) -> bool {
        self.field(account).await.as_deref() == Some(NOT_A_NUMBER)
    }
}

/// The credit plan on `ledger`: one credit of `data.amount` to `data.account`.
fn credit_plan<L: Ledger>(
    ledger: &L,
) -> impl Fn(&Derived) -> Result<Plan<L::Effect>, HandlerError> + '_ {
    move |event| {
        let (account, amount) = credit_data(event)?;
        Ok(Plan {
            effects: vec![ledger.credit(account, amount)],
            result: None,
        })
    }
}

async fn process<L: Ledger>(
    dedup: &Deduplicator<L::Effect>,
    ledger: &L,
    batch: Vec<Message>,
    batch_mode: bool,
) -> BatchReport {
    if batch_mode {
        run_batch_transactional(batch, 10, dedup, credit_plan(ledger)).await
    } else {
        let p = credit_plan(ledger);
        run_batch(batch, 10, |m| {
            let p = &p;
            async move { dedup.transactional(&m, p).await }
        })
        .await
    }
}

/// What the schedules tried, summed over the run (for `cargo xtask soak`).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
struct Stats {
    schedules: u64,
    batches: u64,
    deliveries: u64,
    lost_answers: u64,
    store_outages: u64,
    concurrent_pairs: u64,
    redeliveries: u64,
    conflicting_payloads: u64,
    /// Deliveries of poison events (before redeliveries).
    poison_messages: u64,
    /// Deliveries rejected as `effect_refused` (with redeliveries and redrives).
    poison_rejections: u64,
    /// Messages the model's dead-letter queue received (conflicts and poisons).
    dead_lettered: u64,
    /// Redrive steps, and those of them past the retention.
    dlq_redrives: u64,
    dlq_redrives_past_retention: u64,
    /// Messages sent again out of the dead-letter queue.
    redriven_messages: u64,
    /// Deliveries rejected as `late_event` (for reconciliation).
    late_events: u64,
    /// Deliveries retried for a transaction conflict between two batches at once.
    transaction_conflicts: u64,
    double_effects: u64,
    lost_messages: u64,
}

static STATS: std::sync::LazyLock<Mutex<Stats>> = std::sync::LazyLock::new(Mutex::default);

fn tally(f: impl FnOnce(&mut Stats)) {
    let mut s = STATS.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut s);
    if let Ok(path) = std::env::var("DEDUP_MODEL_STATS") {
        let _ = std::fs::write(path, serde_json::to_string(&*s).unwrap_or_default());
    }
}

/// One delivery's end.
#[derive(Debug, Clone)]
struct Record {
    /// Batches run at the same time share a step.
    step: u32,
    event: u8,
    amount: i64,
    /// Its batch met a transient store fault: the store was unreachable, or (two batches at
    /// once) a transaction conflict between them retried this delivery.
    down: bool,
    /// Its event's `time` was older than the retention when it was processed.
    late: bool,
    outcome: Outcome,
}

#[derive(Default)]
struct Model {
    seen: Vec<Record>,
    /// The dead-letter queue now (redrives empty it).
    dlq: Vec<Delivery>,
    /// Everything ever dead-lettered, with the outcome that sent it there.
    dead_lettered: Vec<(Delivery, Outcome)>,
}

fn is_code(o: &Outcome, want: lambda_dedup_engine::Reason) -> bool {
    matches!(o, Outcome::Rejected { code, .. } if *code == want)
}

async fn run_schedule<L: Ledger>(ledger: L, steps: Vec<Step>) {
    let clock = ledger.marks().clock();
    let dedup = Deduplicator::with_store(cloudevents_spec("model"), ledger.marks().store());
    let dead = Deduplicator::with_store(cloudevents_spec("model"), ledger.marks().unreachable());
    let run = unique("model");
    let poison_account = format!("{run}-{}", account(EVENTS));
    ledger.seed_poison(&poison_account).await;
    let model = Mutex::new(Model::default());
    let mut pending: Vec<Delivery> = Vec::new();
    let mut n = 0u32;
    let mut step_no = 0u32;
    // Each event's CloudEvents `time`: when it was first produced.
    let mut times: BTreeMap<u8, SystemTime> = BTreeMap::new();
    let (mut crash, mut outage, mut concurrent) = (false, false, false);
    let mut queued: Vec<(Vec<Delivery>, bool)> = Vec::new();

    // A retry for a transaction conflict, as the flows word it.
    let conflict = StoreError::store(FaultKind::TransactionConflict, "").to_string();
    let conflict = conflict.as_str();
    // Runs one batch (`together`: with another at the same time), records outcomes,
    // dead-letters what the redrive policy would, and returns what must be delivered again.
    let execute = |batch: Vec<Delivery>,
                   batch_mode: bool,
                   lose: bool,
                   down: bool,
                   step: u32,
                   together: bool| {
        let (dedup, dead, ledger, model, clock) = (&dedup, &dead, &ledger, &model, &clock);
        async move {
            let now = clock.now();
            let messages: Vec<Message> = batch.iter().map(|d| d.message.clone()).collect();
            let report = process(
                if down { dead } else { dedup },
                ledger,
                messages,
                batch_mode,
            )
            .await;
            assert!(report.account.closes(), "S14: {:?}", report.account);
            let mut again = Vec::new();
            let mut model = model.lock().expect("lock");
            for (d, (_, outcome)) in batch.into_iter().zip(report.outcomes()) {
                let ack = outcome.acknowledged();
                // Late events go to reconciliation, and are acknowledged once there (S10).
                let reconciled = is_code(outcome, lambda_dedup_engine::Reason::LateEvent);
                let dead_lettered =
                    !reconciled && matches!(outcome, Outcome::Conflict | Outcome::Rejected { .. });
                model.seen.push(Record {
                    step,
                    event: d.event,
                    amount: d.amount,
                    down: down
                        || (together
                            && matches!(outcome, Outcome::Retry { reason, .. } if reason.contains(conflict))),
                    late: now.duration_since(d.time).unwrap_or_default() >= RETENTION,
                    outcome: outcome.clone(),
                });
                if lose || (!ack && !dead_lettered && !reconciled) {
                    again.push(d);
                } else if dead_lettered {
                    model.dlq.push(d.clone());
                    model.dead_lettered.push((d, outcome.clone()));
                }
            }
            again
        }
    };

    // Runs what is queued, then redelivers what comes back until the queue is empty, as SQS
    // would, or DRAIN_ROUNDS have passed (what is still pending then is lost).
    let drain = async |queued: &mut Vec<(Vec<Delivery>, bool)>,
                       pending: &mut Vec<Delivery>,
                       step_no: &mut u32| {
        for (b, m) in std::mem::take(queued) {
            *step_no += 1;
            pending.extend(execute(b, m, false, false, *step_no, false).await);
        }
        for _ in 0..DRAIN_ROUNDS {
            if pending.is_empty() {
                break;
            }
            for chunk in std::mem::take(pending).chunks(10) {
                *step_no += 1;
                pending.extend(execute(chunk.to_vec(), false, false, false, *step_no, false).await);
            }
        }
    };

    tally(|t| {
        t.schedules += 1;
        for s in &steps {
            match s {
                Step::Crash => t.lost_answers += 1,
                Step::Outage => t.store_outages += 1,
                Step::Concurrent => t.concurrent_pairs += 1,
                Step::Redeliver => t.redeliveries += 1,
                Step::Redrive { past_retention, .. } => {
                    t.dlq_redrives += 1;
                    t.dlq_redrives_past_retention += u64::from(*past_retention);
                }
                Step::Batch { items, .. } => {
                    t.batches += 1;
                    t.deliveries += items.len() as u64;
                    t.conflicting_payloads += items.iter().filter(|(_, c)| *c).count() as u64;
                    t.poison_messages += items.iter().filter(|(e, _)| is_poison(*e)).count() as u64;
                }
            }
        }
    });
    let mut lost_messages = 0;
    for s in steps {
        match s {
            Step::Crash => crash = true,
            Step::Outage => outage = true,
            Step::Concurrent => concurrent = true,
            Step::Redeliver => {
                let batch = std::mem::take(&mut pending);
                for chunk in batch.chunks(10) {
                    step_no += 1;
                    pending
                        .extend(execute(chunk.to_vec(), true, false, false, step_no, false).await);
                }
            }
            Step::Redrive {
                past_retention,
                batch_mode,
            } => {
                // The retention covers the queue's redelivery horizon (S9): by the time days
                // have passed, SQS has delivered everything that was in it.
                drain(&mut queued, &mut pending, &mut step_no).await;
                if !pending.is_empty() {
                    lost_messages = pending.len();
                    break;
                }
                clock.advance(if past_retention {
                    PAST_RETENTION
                } else {
                    WITHIN_RETENTION
                });
                let redriven = std::mem::take(&mut model.lock().expect("lock").dlq);
                tally(|t| t.redriven_messages += redriven.len() as u64);
                for chunk in redriven.chunks(10) {
                    step_no += 1;
                    pending.extend(
                        execute(chunk.to_vec(), batch_mode, false, false, step_no, false).await,
                    );
                }
            }
            Step::Batch { items, batch_mode } => {
                let now = lambda_dedup::clock::from_epoch_millis(
                    lambda_dedup::clock::epoch_millis(clock.now()),
                );
                let batch: Vec<Delivery> = items
                    .iter()
                    .map(|(e, c)| {
                        let time = *times.entry(*e).or_insert(now);
                        deliver(&run, *e, *c, time, &mut n)
                    })
                    .collect();
                queued.push((batch, batch_mode));
                if concurrent && queued.len() < 2 {
                    continue;
                }
                let (lose, down) = (std::mem::take(&mut crash), std::mem::take(&mut outage));
                let together = queued.len() > 1;
                concurrent = false;
                step_no += 1;
                let runs: Vec<_> = std::mem::take(&mut queued)
                    .into_iter()
                    .map(|(b, m)| execute(b, m, lose, down, step_no, together))
                    .collect();
                for again in futures::future::join_all(runs).await {
                    pending.extend(again);
                }
            }
        }
    }
    if lost_messages == 0 {
        drain(&mut queued, &mut pending, &mut step_no).await;
        lost_messages = pending.len();
    }
    let model = model.into_inner().expect("lock");
    tally(|t| {
        t.lost_messages += lost_messages as u64;
        t.dead_lettered += model.dead_lettered.len() as u64;
        t.poison_rejections += model
            .seen
            .iter()
            .filter(|r| is_code(&r.outcome, lambda_dedup_engine::Reason::EffectRefused))
            .count() as u64;
        t.late_events += model
            .seen
            .iter()
            .filter(|r| is_code(&r.outcome, lambda_dedup_engine::Reason::LateEvent))
            .count() as u64;
        t.transaction_conflicts += model
            .seen
            .iter()
            .filter(
                |r| matches!(&r.outcome, Outcome::Retry { reason, .. } if reason.contains(conflict)),
            )
            .count() as u64;
    });
    assert_eq!(
        lost_messages, 0,
        "messages still undelivered after {DRAIN_ROUNDS} redeliveries"
    );

    // The reference model.
    let seen = model.seen;
    let mut applied: BTreeMap<u8, Vec<i64>> = BTreeMap::new();
    let mut applied_at: BTreeMap<u8, u32> = BTreeMap::new();
    for r in &seen {
        if r.outcome == Outcome::Applied {
            applied.entry(r.event).or_default().push(r.amount);
            applied_at.entry(r.event).or_insert(r.step);
        }
    }
    let double = applied.values().filter(|a| a.len() > 1).count();
    if double > 0 {
        tally(|t| t.double_effects += double as u64);
    }
    let delivered: BTreeSet<u8> = seen.iter().map(|r| r.event).collect();
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for e in &delivered {
        let amounts = applied.get(e).cloned().unwrap_or_default();
        if is_poison(*e) {
            assert!(amounts.is_empty(), "S15: poison {e} applied: {amounts:?}");
            continue;
        }
        assert_eq!(
            amounts.len(),
            1,
            "event {e} applied {} times",
            amounts.len()
        );
        *expected.entry(account(*e)).or_default() += amounts[0];
    }
    for r in &seen {
        let (e, o) = (r.event, &r.outcome);
        assert_eq!(
            is_code(o, lambda_dedup_engine::Reason::LateEvent),
            r.late,
            "S10: event {e} (late: {}) got {o:?}",
            r.late
        );
        match o {
            Outcome::Duplicate { .. } | Outcome::Applied => {
                assert!(
                    applied.contains_key(&e),
                    "event {e} acknowledged but never applied"
                )
            }
            Outcome::Conflict => assert_ne!(
                applied[&e][0], r.amount,
                "conflict reported for the applied payload of {e}"
            ),
            _ => {}
        }
        if r.late || r.down {
            continue;
        }
        // The store answered and the event is within the retention.
        if is_poison(e) {
            assert!(
                is_code(o, lambda_dedup_engine::Reason::EffectRefused),
                "S15: a delivery of poison {e} got {o:?}, not a rejection (effect_refused)"
            );
        } else {
            assert!(
                matches!(
                    o,
                    Outcome::Applied | Outcome::Duplicate { .. } | Outcome::Conflict
                ),
                "S12: a delivery of good event {e} in a batch the store answered got {o:?}"
            );
        }
    }
    // A good event is applied by the end of its first receive the store answered.
    for e in delivered.iter().filter(|e| !is_poison(**e)) {
        let first = seen
            .iter()
            .filter(|r| r.event == *e && !r.down && !r.late)
            .map(|r| r.step)
            .min();
        if let Some(first) = first {
            assert!(
                applied_at.get(e).is_some_and(|at| *at <= first),
                "S12: good event {e} not applied at its first receive the store answered (step \
                 {first}; applied at {:?})",
                applied_at.get(e)
            );
        }
    }
    // The dead-letter queue holds poisons and payload conflicts only.
    for (d, o) in &model.dead_lettered {
        let e = d.event;
        if is_poison(e) {
            assert!(
                is_code(o, lambda_dedup_engine::Reason::EffectRefused),
                "poison {e} dead-lettered as {o:?}"
            );
        } else {
            assert!(
                *o == Outcome::Conflict && applied.get(&e).is_some_and(|a| a[0] != d.amount),
                "S12: good event {e} (amount {}) dead-lettered as {o:?}",
                d.amount
            );
        }
    }
    for (acct, want) in expected {
        let got = ledger.balance(&format!("{run}-{acct}")).await;
        assert_eq!(got, Some(want), "balance of {acct}");
    }
    assert!(
        ledger.poison_untouched(&poison_account).await,
        "S15: a refused effect changed nothing"
    );
    for p in EVENTS..EVENTS + POISONS {
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/model",
                          "id": format!("{run}-{p}"), "tenantid": "t", "data": {}});
        let key = cloudevents_spec("model")
            .derive(&Message {
                body: body.to_string().into_bytes(),
                ..Message::default()
            })
            .expect("key")
            .key;
        assert!(
            !ledger.marks().stored_mark(&key).await,
            "S15: poison {p} left a mark"
        );
    }
}

/// A schedule: 1 to 15 steps.
fn schedule() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..16)
}

/// [`run_schedule`] of `steps` on the ledger `ledger` makes, to its end.
fn run<L: Ledger>(ledger: impl std::future::Future<Output = L>, steps: Vec<Step>) {
    dedup_tests::block_on(async { run_schedule(ledger.await, steps).await });
}

proptest! {
    // 32 schedules in `cargo xtask test` (on Valkey each under a fresh key prefix of the
    // server); `cargo xtask soak` sets DEDUP_MODEL_CASES much higher.
    #![proptest_config(dedup_tests::model_config(32))]

    /// S4, S5, S8, S10–S15 under generated schedules with transient and permanent faults: see
    /// the module docs.
    #[test]
    fn schedules_with_faults_apply_each_event_exactly_once(steps in schedule()) {
        run(OnStores::new(StoreKind::DynamoDb), steps);
    }

    /// The same schedules on the memory store (`cargo xtask soak` runs many more of these).
    #[test]
    fn on_the_memory_store_schedules_apply_each_event_exactly_once(steps in schedule()) {
        run(OnStores::new(StoreKind::Memory), steps);
    }

    /// The same schedules on the Valkey store (`DEDUP_VALKEY_URL`; skipped without it): credits
    /// are `HINCRBY`s run in the mark's script, poisons credit a balance that is not an integer.
    #[test]
    fn on_valkey_schedules_apply_each_event_exactly_once(steps in schedule()) {
        if let Some(url) = crate::model_valkey::url("the Valkey model schedules") {
            run(OnValkey::new(&url), steps);
        }
    }
}

proptest! {
    // 16 schedules in `cargo xtask test` (each on a fresh marks table of the server); `cargo
    // xtask soak` sets DEDUP_MODEL_CASES higher.
    #![proptest_config(dedup_tests::model_config(16))]

    /// The same schedules on the PostgreSQL store (`DEDUP_POSTGRES_URL`; skipped without it):
    /// credits are SQL upserts committed in the mark's transaction, poisons overflow a `bigint`.
    #[test]
    fn on_postgres_schedules_apply_each_event_exactly_once(steps in schedule()) {
        if let Some(url) = crate::model_postgres::url("the PostgreSQL model schedules") {
            run(OnPostgres::new(&url), steps);
        }
    }
}
