//! An in-memory [`MarkStore`]: the DynamoDB store's semantics — TTL, leases, fencing,
//! fingerprints, all-or-nothing commits of a mark with its effects — with no network and no
//! emulator, for fast tests of flows, handlers and model schedules.
//!
//! It passes the same conformance suite as `lambda-dedup-dynamodb`'s store
//! (`tests/integration/conformance.rs`). Effects are evaluated by a subset of DynamoDB's
//! expression language (see [`MemoryStore::create_table`] and the `expr` module): what it does
//! not evaluate is refused with [`StoreError::Invalid`] naming the feature, never guessed at.
//!
//! ```
//! use std::time::Duration;
//! use lambda_dedup::{CommitRequest, Commit, DedupKey, Effect, Item, MarkStore, Retention, Scope};
//! use lambda_dedup_memory::MemoryStore;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).unwrap());
//! store.create_table("balances", "account");
//! let key = DedupKey::new(&Scope::new("bank", "ledger").unwrap(), "acme", &["evt-1"]);
//! let credit = [Effect::update("balances", Item::new().with("account", "a-1"))
//!     .expression("ADD balance :amount")
//!     .value(":amount", 10)];
//! let request = CommitRequest { key: &key, fingerprint: None, result: None, effects: &credit };
//! assert_eq!(store.commit(request).await.unwrap(), Commit::Applied);
//! assert!(matches!(store.commit(request).await.unwrap(), Commit::Seen(_)));
//! let balance = store.item("balances", &Item::new().with("account", "a-1")).unwrap();
//! assert_eq!(balance.0["balance"], lambda_dedup::Value::N("10".into()));
//! # });
//! ```

#![warn(missing_docs)]

mod expr;
mod recording;

pub use recording::Recording;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use lambda_dedup::clock::{epoch_millis, epoch_secs, from_epoch_millis};
use lambda_dedup::create_once::{self, CreateOnce};
use lambda_dedup::effect::EffectKind;
use lambda_dedup::items::{Filter, ItemFuture};
use lambda_dedup::sequence::{SequenceOutcome, SequencedWrite};
use lambda_dedup::store::{
    BatchFuture, CreateOnceStore, MAX_EFFECTS, SequenceStore, StoreFuture, StoreOptions,
};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Effect, FaultKind, Fingerprint, Item, ItemStore, Lease,
    Mark, MarkStatus, MarkStore, OwnerToken, Retention, StoreError, Value,
};

use expr::{ExprError, Placeholders};

/// DynamoDB's limit on one item, in bytes.
const MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on one transaction, in bytes.
const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// A fault the next store call meets (see [`MemoryStore::inject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    /// The call fails with this fault and changes nothing (an outage, throttling).
    Fail(FaultKind),
    /// The call is applied, then its answer is lost: the caller gets this fault (a timeout after
    /// the write reached the table).
    LoseAnswer(FaultKind),
}

/// A store operation, as a fault hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// [`MarkStore::claim`].
    Claim,
    /// [`MarkStore::commit`].
    Commit,
    /// [`MarkStore::commit_batch`].
    CommitBatch,
    /// [`MarkStore::complete`].
    Complete,
    /// [`MarkStore::release`].
    Release,
    /// [`MarkStore::get`].
    Get,
    /// [`SequenceStore::apply_in_sequence`].
    Sequence,
    /// [`CreateOnceStore::create_once`].
    CreateOnce,
    /// [`ItemStore::write`], [`ItemStore::read`] or [`ItemStore::scan`].
    Items,
}

/// Decides, per call, whether it meets a fault: the operation and the key it is about (none for
/// a batch commit). See [`MemoryStore::with_fault_hook`].
pub type FaultHook = Arc<dyn Fn(Op, Option<&DedupKey>) -> Option<Injected> + Send + Sync>;

#[derive(Debug, Default)]
struct Table {
    /// The partition key and, if any, the sort key.
    key: Vec<String>,
    items: BTreeMap<String, BTreeMap<String, Value>>,
}

#[derive(Debug, Default)]
struct State {
    marks: HashMap<String, Mark>,
    tables: HashMap<String, Table>,
    faults: VecDeque<Injected>,
    /// Calls that were applied and whose answer was then lost.
    lost: Vec<(Op, Option<DedupKey>)>,
}

/// Marks and effect tables in memory. Cheap to clone; clones share the same data.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    options: StoreOptions,
    unreachable: bool,
    hook: Option<Hook>,
    calls: Arc<AtomicU64>,
}

/// A [`FaultHook`] in a store handle.
#[derive(Clone)]
struct Hook(FaultHook);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultHook")
    }
}

impl MemoryStore {
    /// An empty store keeping marks for `retention` (S9), on the system clock.
    pub fn new(retention: Retention) -> Self {
        Self {
            state: Arc::default(),
            options: StoreOptions::new(retention),
            unreachable: false,
            hook: None,
            calls: Arc::default(),
        }
    }

    /// A handle on the same data whose calls ask `hook` first: for faults aimed at one
    /// operation (a complete whose answer is lost, say) while other calls go through.
    pub fn with_fault_hook(&self, hook: FaultHook) -> Self {
        Self {
            hook: Some(Hook(hook)),
            ..self.clone()
        }
    }

    /// The calls applied whose answer was then lost (an [`Injected::LoseAnswer`] that met a call
    /// that succeeded), since the last time this was asked.
    pub fn take_lost_answers(&self) -> Vec<(Op, Option<DedupKey>)> {
        std::mem::take(&mut self.lock().lost)
    }

    lambda_dedup::store_options_builders!(options);

    /// A handle on the same data whose every call fails with [`FaultKind::Network`]: a store
    /// that cannot be reached.
    pub fn unreachable(&self) -> Self {
        Self {
            unreachable: true,
            ..self.clone()
        }
    }

    /// Queues a fault for the next call on this store's data (any handle), in order.
    pub fn inject(&self, fault: Injected) {
        self.lock().faults.push_back(fault);
    }

    /// Store calls made through this store and its clones (one per operation; a batch commit
    /// counts one).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Creates an effect table whose partition key is `key` (no sort key). Effects on a table
    /// that was not created are refused, as DynamoDB refuses a missing table.
    pub fn create_table(&self, name: &str, key: &str) {
        self.create_table_with_sort_key(name, key, None);
    }

    /// Creates an effect table with a partition key and an optional sort key.
    pub fn create_table_with_sort_key(&self, name: &str, key: &str, sort: Option<&str>) {
        let mut key = vec![key.to_owned()];
        key.extend(sort.map(str::to_owned));
        self.lock()
            .tables
            .entry(name.to_owned())
            .or_insert_with(|| Table {
                key,
                items: BTreeMap::new(),
            });
    }

    /// The item at `key` in `table`, or `None`.
    pub fn item(&self, table: &str, key: &Item) -> Option<Item> {
        let state = self.lock();
        let t = state.tables.get(table)?;
        let k = item_key(t, &key.0).ok()?;
        t.items.get(&k).map(|m| Item(m.clone()))
    }

    /// Every item of `table`.
    pub fn items(&self, table: &str) -> Vec<Item> {
        self.lock()
            .tables
            .get(table)
            .map(|t| t.items.values().map(|m| Item(m.clone())).collect())
            .unwrap_or_default()
    }

    /// Writes `item` to `table` with no mark and no condition (seeding test data).
    pub fn put_item(&self, table: &str, item: Item) -> Result<(), StoreError> {
        let mut state = self.lock();
        let t = state
            .tables
            .get_mut(table)
            .ok_or_else(|| missing_table(table))?;
        let k = item_key(t, &item.0).map_err(|e| StoreError::Invalid(e.to_string()))?;
        t.items.insert(k, item.0);
        Ok(())
    }

    /// Every mark stored, live or past its TTL (the TTL sweep has not run), for audits in tests.
    pub fn marks(&self) -> Vec<Mark> {
        self.lock().marks.values().cloned().collect()
    }

    /// Deletes the marks whose TTL has passed, as DynamoDB's TTL sweep does some time after
    /// it; returns how many. Until it runs, such marks still count as absent (S9).
    pub fn purge_expired(&self) -> usize {
        let now = self.options.now();
        let mut state = self.lock();
        let before = state.marks.len();
        state.marks.retain(|_, m| m.is_live(now));
        before - state.marks.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one call: counts it, meets an injected fault, or applies `f` under the lock.
    fn call<T>(
        &self,
        op: Op,
        key: Option<&DedupKey>,
        f: impl FnOnce(&mut State, SystemTime) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.unreachable {
            return Err(StoreError::store(
                FaultKind::Network,
                "memory store: unreachable",
            ));
        }
        let hooked = self.hook.as_ref().and_then(|h| (h.0)(op, key));
        let mut state = self.lock();
        let now = self.options.now();
        match hooked.or_else(|| state.faults.pop_front()) {
            Some(Injected::Fail(kind)) => {
                Err(StoreError::store(kind, "memory store: injected fault"))
            }
            Some(Injected::LoseAnswer(kind)) => {
                if f(&mut state, now).is_ok() {
                    state.lost.push((op, key.cloned()));
                }
                Err(StoreError::store(kind, "memory store: answer lost"))
            }
            None => f(&mut state, now),
        }
    }

    /// The TTL a mark written at `now` gets: rounded up to whole seconds, as stored.
    fn ttl(&self, now: SystemTime) -> SystemTime {
        lambda_dedup::clock::from_epoch_secs(epoch_secs(self.options.expires_at(now)))
    }

    fn claim_now(
        &self,
        state: &mut State,
        now: SystemTime,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        let lease_end = self.options.lease_end(now, deadline)?;
        let now = ms(now);
        let first_attempt_at = match state.marks.get(key.as_str()) {
            None => now,
            Some(m) if !m.is_live(now) => now,
            Some(m) if lease_over(m, now) && fp_allows(m, fp) => m.first_seen_at,
            Some(m) => return explain(key, m, fp, now).map(Claim::Seen),
        };
        let owner = OwnerToken::random();
        let lease_end = ms(lease_end);
        state.marks.insert(
            key.as_str().to_owned(),
            Mark {
                key: key.clone(),
                status: MarkStatus::InProgress,
                owner: Some(owner.clone()),
                lease_expires_at: Some(lease_end),
                expires_at: self.ttl(now),
                fingerprint: fp.cloned(),
                result: None,
                first_seen_at: first_attempt_at,
                completed_at: None,
            },
        );
        Ok(Claim::Claimed(Lease {
            key: key.clone(),
            owner,
            expires_at: lease_end,
            fingerprint: fp.cloned(),
            first_attempt_at,
        }))
    }

    /// One commit, all or nothing, with DynamoDB's order of verdicts (see
    /// `DynamoStore::verdict`): the mark's condition, an effect's condition, then a refusal of
    /// the event's own writes.
    fn commit_now(
        &self,
        state: &mut State,
        now: SystemTime,
        r: &CommitRequest<'_>,
    ) -> Result<Commit, StoreError> {
        if r.effects.len() > MAX_EFFECTS {
            return Err(StoreError::Invalid(format!(
                "{} effects; one transaction holds the mark and at most {MAX_EFFECTS}",
                r.effects.len()
            )));
        }
        self.options.check_result(r.result)?;
        let now = ms(now);
        let plans = planned(state, r)?;
        // The mark: written only where a claim could be taken.
        if let Some(m) = state.marks.get(r.key.as_str())
            && m.is_live(now)
            && !(lease_over(m, now) && fp_allows(m, r.fingerprint))
        {
            return explain(r.key, m, r.fingerprint, now).map(Commit::Seen);
        }
        let written = match judged(state, r.effects, &plans)? {
            Judged::Writes(w) => w,
            Judged::FailedCondition(index) => return Ok(Commit::EffectRejected { index }),
            Judged::Refused(position) => {
                return Err(refused(r, "ValidationError", Some(position)));
            }
        };
        for (table, key, after) in written {
            let t = state.tables.get_mut(&table).expect("checked above");
            match after {
                Some(a) => {
                    t.items.insert(key, a);
                }
                None => {
                    t.items.remove(&key);
                }
            }
        }
        state.marks.insert(
            r.key.as_str().to_owned(),
            Mark {
                key: r.key.clone(),
                status: MarkStatus::Completed,
                owner: None,
                lease_expires_at: None,
                expires_at: self.ttl(now),
                fingerprint: r.fingerprint.cloned(),
                result: r.result.map(str::to_owned),
                first_seen_at: now,
                completed_at: Some(now),
            },
        );
        Ok(Commit::Applied)
    }

    fn complete_now(
        &self,
        state: &mut State,
        now: SystemTime,
        lease: &Lease,
        result: Option<&str>,
    ) -> Result<(), StoreError> {
        self.options.check_result(result)?;
        let Some(m) = state.marks.get_mut(lease.key.as_str()) else {
            return Err(fenced(lease, None));
        };
        let ours = m.owner.as_ref() == Some(&lease.owner);
        match m.status {
            MarkStatus::InProgress if ours => {
                m.status = MarkStatus::Completed;
                m.completed_at = Some(ms(now));
                if let Some(r) = result {
                    m.result = Some(r.to_owned());
                }
                m.lease_expires_at = None;
                Ok(())
            }
            // Our own earlier completion (a retry after a lost answer).
            MarkStatus::Completed if ours => Ok(()),
            _ => Err(fenced(lease, Some(m.clone()))),
        }
    }

    /// Sequence mode: the effect with its high-water, judged like the DynamoDB store's
    /// conditional update.
    fn sequence_now(
        &self,
        state: &mut State,
        w: &SequencedWrite<'_>,
    ) -> Result<SequenceOutcome, StoreError> {
        let effect = w.effect_to_send()?;
        match Self::write_one(state, &effect, w.key)? {
            None => Ok(SequenceOutcome::Applied),
            Some(old) => Ok(w.judge_failed(old.as_ref())),
        }
    }

    /// One effect, a `Put` or an `Update`, as a single-item conditional write, as DynamoDB's
    /// `PutItem` and `UpdateItem` with the old item returned on a failed condition: what
    /// sequence and create-once modes send. `None`: written; `Some(old)`: the condition failed
    /// on `old` (`None`: no item).
    fn write_one(
        state: &mut State,
        effect: &Effect,
        key: &DedupKey,
    ) -> Result<Option<Option<Item>>, StoreError> {
        let refused = || StoreError::Refused {
            key: key.clone(),
            code: "ValidationException".into(),
            position: None,
        };
        let unsupported = |what| StoreError::Invalid(format!("memory store: {what}"));
        let t = state
            .tables
            .get_mut(effect.table())
            .ok_or_else(|| missing_table(effect.table()))?;
        let p = plan(t, effect).map_err(|err| match err {
            ExprError::Unsupported(what) => unsupported(what),
            _ => refused(),
        })?;
        let current = t.items.get(&p.key).cloned();
        let attrs = current.clone().unwrap_or_default();
        let holds = match p.condition.as_ref().map(|c| expr::holds(c, &attrs)) {
            Some(Err(_)) => return Err(refused()),
            Some(Ok(h)) => h,
            None => true,
        };
        if !holds {
            return Ok(Some(current.map(Item)));
        }
        let next = match &p.update {
            None => effect.item().0.clone(),
            Some(u) => {
                let mut next = current.unwrap_or_else(|| effect.item().0.clone());
                match expr::apply(u, &mut next) {
                    Ok(()) => next,
                    Err(ExprError::Unsupported(what)) => return Err(unsupported(what)),
                    Err(_) => return Err(refused()),
                }
            }
        };
        if item_size(&next) > MAX_ITEM_BYTES {
            return Err(refused());
        }
        t.items.insert(p.key, next);
        Ok(None)
    }

    fn create_once_now(
        &self,
        state: &mut State,
        now: SystemTime,
        w: &CreateOnce<'_>,
    ) -> Result<Commit, StoreError> {
        self.options.check_result(w.result)?;
        let effect = w.effect_to_send(ms(now))?;
        match Self::write_one(state, &effect, w.key)? {
            None => Ok(Commit::Applied),
            Some(old) => Ok(create_once::judge(old.as_ref(), w.key, w.fingerprint)),
        }
    }

    fn release_now(&self, state: &mut State, lease: &Lease) -> Result<(), StoreError> {
        let released = OwnerToken::from_stored(format!("released-{}", lease.owner.as_str()));
        let Some(m) = state.marks.get_mut(lease.key.as_str()) else {
            return Ok(());
        };
        let ours = m.owner.as_ref() == Some(&lease.owner) || m.owner.as_ref() == Some(&released);
        if ours && m.status == MarkStatus::InProgress {
            m.lease_expires_at = Some(std::time::UNIX_EPOCH);
            m.owner = Some(released);
            Ok(())
        } else {
            Err(fenced(lease, Some(m.clone())))
        }
    }
}

/// A refusal of `r`'s own writes, as DynamoDB gives it.
fn refused(r: &CommitRequest<'_>, code: &str, position: Option<usize>) -> StoreError {
    StoreError::Refused {
        key: r.key.clone(),
        code: code.to_owned(),
        position,
    }
}

/// The effects' plans, or what DynamoDB refuses before it looks at any item: malformed or
/// unused placeholders, missing tables or key attributes, one item twice, a transaction over
/// 4 MB.
fn planned(state: &State, r: &CommitRequest<'_>) -> Result<Vec<Plan>, StoreError> {
    let bytes = r.result.map_or(0, str::len) + 200;
    plans_of(state, r.effects, bytes, || {
        refused(r, "ValidationException", None)
    })
}

/// [`planned`] for `effects` alone, `bytes` already taken, a refusal made by `refused`.
fn plans_of(
    state: &State,
    effects: &[Effect],
    mut bytes: usize,
    refused: impl Fn() -> StoreError,
) -> Result<Vec<Plan>, StoreError> {
    let mut plans = Vec::with_capacity(effects.len());
    let mut seen_items = std::collections::HashSet::new();
    for e in effects {
        let t = state
            .tables
            .get(e.table())
            .ok_or_else(|| missing_table(e.table()))?;
        let plan = plan(t, e).map_err(|err| match err {
            ExprError::Unsupported(what) => StoreError::Invalid(format!("memory store: {what}")),
            _ => refused(),
        })?;
        if !seen_items.insert((e.table().to_owned(), plan.key.clone())) {
            return Err(refused());
        }
        bytes += item_size(&e.item().0) + 100;
        plans.push(plan);
    }
    if bytes > MAX_TRANSACTION_BYTES {
        return Err(refused());
    }
    Ok(plans)
}

/// One write of a commit: the table, the item's key, and the item after it (none: deleted).
type Write = (String, String, Option<BTreeMap<String, Value>>);

/// What the effects come to, each judged on the items as they were before the transaction.
enum Judged {
    /// Every condition holds: the writes.
    Writes(Vec<Write>),
    /// The first effect whose condition failed.
    FailedCondition(usize),
    /// The first effect refused as it is (1-based, as DynamoDB reports it).
    Refused(usize),
}

fn judged(state: &State, effects: &[Effect], plans: &[Plan]) -> Result<Judged, StoreError> {
    let mut written = Vec::with_capacity(plans.len());
    let mut failed_condition = None;
    let mut refusal = None;
    for (i, (e, p)) in effects.iter().zip(plans).enumerate() {
        let current = state.tables[e.table()].items.get(&p.key);
        let empty = BTreeMap::new();
        match p
            .condition
            .as_ref()
            .map(|c| expr::holds(c, current.unwrap_or(&empty)))
            .transpose()
        {
            Ok(Some(false)) => {
                failed_condition.get_or_insert(i);
                continue;
            }
            Err(_) => {
                refusal.get_or_insert(i + 1);
                continue;
            }
            Ok(_) => {}
        }
        let after = match e.kind() {
            EffectKind::Put => Some(e.item().0.clone()),
            EffectKind::Delete => None,
            EffectKind::ConditionCheck => continue,
            EffectKind::Update => match updated(e, p, current)? {
                Some(next) => Some(next),
                None => {
                    refusal.get_or_insert(i + 1);
                    continue;
                }
            },
        };
        if after
            .as_ref()
            .is_some_and(|a| item_size(a) > MAX_ITEM_BYTES)
        {
            refusal.get_or_insert(i + 1);
            continue;
        }
        written.push((e.table().to_owned(), p.key.clone(), after));
    }
    Ok(match (failed_condition, refusal) {
        (Some(index), _) => Judged::FailedCondition(index),
        (None, Some(position)) => Judged::Refused(position),
        (None, None) => Judged::Writes(written),
    })
}

/// The item after update `e` (planned as `p`) of `current`; `None` if DynamoDB would refuse it
/// (a bad expression, or a change to the key).
fn updated(
    e: &Effect,
    p: &Plan,
    current: Option<&BTreeMap<String, Value>>,
) -> Result<Option<BTreeMap<String, Value>>, StoreError> {
    let mut next = current.cloned().unwrap_or_else(|| e.item().0.clone());
    match p.update.as_ref().map(|u| expr::apply(u, &mut next)) {
        Some(Err(ExprError::Unsupported(what))) => {
            return Err(StoreError::Invalid(format!("memory store: {what}")));
        }
        Some(Err(_)) => return Ok(None),
        _ => {}
    }
    if p.key_attrs.iter().any(|k| next.get(k) != e.item().0.get(k)) {
        // An update may not change the key.
        return Ok(None);
    }
    Ok(Some(next))
}

/// A function's own tables, in the same tables effects write: effects with no mark all or
/// nothing (DynamoDB's order of verdicts: a failed condition is `Ok(false)`, a refusal an
/// error), reads and scans of what is stored (consistent: one lock).
impl ItemStore for MemoryStore {
    fn write<'a>(&'a self, effects: &'a [Effect]) -> ItemFuture<'a, bool> {
        let out = self.call(Op::Items, None, |state, _| {
            if effects.is_empty() || effects.len() > MAX_EFFECTS + 1 {
                return Err(StoreError::Invalid(format!(
                    "{} effects; a transaction holds 1 to 100",
                    effects.len()
                )));
            }
            let refused = || StoreError::store(FaultKind::Refused, "ValidationException");
            let plans = plans_of(state, effects, 0, refused)?;
            let written = match judged(state, effects, &plans)? {
                Judged::Writes(w) => w,
                Judged::FailedCondition(_) => return Ok(false),
                Judged::Refused(_) => return Err(refused()),
            };
            for (table, key, after) in written {
                let t = state.tables.get_mut(&table).expect("checked above");
                match after {
                    Some(a) => t.items.insert(key, a),
                    None => t.items.remove(&key),
                };
            }
            Ok(true)
        });
        Box::pin(async move { out })
    }

    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> ItemFuture<'a, Option<Item>> {
        let out = self.read_table(table, |t| {
            let k = item_key(t, &key.0)
                .map_err(|_| StoreError::store(FaultKind::Refused, "ValidationException"))?;
            Ok(t.items.get(&k).map(|m| Item(m.clone())))
        });
        Box::pin(async move { out })
    }

    fn scan<'a>(&'a self, table: &'a str, filter: &'a Filter) -> ItemFuture<'a, Vec<Item>> {
        let out = self.read_table(table, |t| {
            let items = t.items.values().map(|m| Item(m.clone()));
            Ok(items.filter(|i| filter.keeps(i)).collect())
        });
        Box::pin(async move { out })
    }
}

impl MemoryStore {
    /// One item call that reads `table` (refused as DynamoDB refuses a missing table).
    fn read_table<T>(
        &self,
        table: &str,
        read: impl FnOnce(&Table) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.call(Op::Items, None, |state, _| {
            read(
                state
                    .tables
                    .get(table)
                    .ok_or_else(|| missing_table(table))?,
            )
        })
    }
}

impl MarkStore for MemoryStore {
    fn claim<'a>(
        &'a self,
        key: &'a DedupKey,
        fp: Option<&'a Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> StoreFuture<'a, Claim> {
        let out = self.call(Op::Claim, Some(key), |s, now| {
            self.claim_now(s, now, key, fp, deadline)
        });
        Box::pin(async move { out })
    }

    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> StoreFuture<'a, Commit> {
        let out = self.call(Op::Commit, Some(request.key), |s, now| {
            self.commit_now(s, now, &request)
        });
        Box::pin(async move { out })
    }

    fn commit_batch<'a>(&'a self, requests: &'a [CommitRequest<'a>]) -> BatchFuture<'a> {
        // One call for the batch; each request all or nothing, as in DynamoDB's rounds.
        let out = match self.call(Op::CommitBatch, None, |s, now| {
            Ok(requests
                .iter()
                .map(|r| self.commit_now(s, now, r))
                .collect::<Vec<_>>())
        }) {
            Ok(results) => results,
            Err(e) => requests.iter().map(|_| Err(copy_fault(&e))).collect(),
        };
        Box::pin(async move { out })
    }

    fn complete<'a>(&'a self, lease: &'a Lease, result: Option<&'a str>) -> StoreFuture<'a, ()> {
        let out = self.call(Op::Complete, Some(&lease.key), |s, now| {
            self.complete_now(s, now, lease, result)
        });
        Box::pin(async move { out })
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        let out = self.call(Op::Release, Some(&lease.key), |s, _| {
            self.release_now(s, lease)
        });
        Box::pin(async move { out })
    }

    fn get<'a>(&'a self, key: &'a DedupKey) -> StoreFuture<'a, Option<Mark>> {
        let out = self.call(Op::Get, Some(key), |s, now| {
            Ok(s.marks
                .get(key.as_str())
                .filter(|m| m.is_live(now))
                .cloned())
        });
        Box::pin(async move { out })
    }

    fn options(&self) -> &StoreOptions {
        &self.options
    }
}

impl SequenceStore for MemoryStore {
    fn apply_in_sequence<'a>(
        &'a self,
        write: SequencedWrite<'a>,
    ) -> StoreFuture<'a, SequenceOutcome> {
        let out = self.call(Op::Sequence, Some(write.key), |s, _| {
            self.sequence_now(s, &write)
        });
        Box::pin(async move { out })
    }
}

impl CreateOnceStore for MemoryStore {
    fn create_once<'a>(&'a self, write: CreateOnce<'a>) -> StoreFuture<'a, Commit> {
        let out = self.call(Op::CreateOnce, Some(write.key), |s, now| {
            self.create_once_now(s, now, &write)
        });
        Box::pin(async move { out })
    }
}

/// Time as the DynamoDB store keeps it: whole milliseconds.
fn ms(t: SystemTime) -> SystemTime {
    from_epoch_millis(epoch_millis(t))
}

/// An in-progress claim whose lease has ended (a missing lease never has).
fn lease_over(m: &Mark, now: SystemTime) -> bool {
    m.status == MarkStatus::InProgress
        && m.lease_expires_at
            .is_some_and(|l| epoch_millis(l) <= epoch_millis(now))
}

/// The takeover's fingerprint condition: none offered, none stored, or the same.
fn fp_allows(m: &Mark, fp: Option<&Fingerprint>) -> bool {
    match (fp, &m.fingerprint) {
        (Some(offered), Some(stored)) => offered == stored,
        _ => true,
    }
}

fn explain(
    key: &DedupKey,
    m: &Mark,
    fp: Option<&Fingerprint>,
    now: SystemTime,
) -> Result<lambda_dedup::Seen, StoreError> {
    m.clone()
        .classify(fp, now)
        .ok_or_else(|| StoreError::Contended(key.clone()))
}

fn fenced(lease: &Lease, current: Option<Mark>) -> StoreError {
    StoreError::Fenced {
        key: lease.key.clone(),
        current: current.map(Box::new),
    }
}

fn missing_table(table: &str) -> StoreError {
    StoreError::store(
        FaultKind::Refused,
        format!("memory store: no table {table:?} (create it with MemoryStore::create_table)"),
    )
}

/// The same fault for every request of a batch call that failed as a whole.
fn copy_fault(e: &StoreError) -> StoreError {
    match e {
        StoreError::Store { kind, message } => StoreError::store(*kind, message.clone()),
        other => StoreError::Invalid(other.to_string()),
    }
}

/// An effect checked against its table: the item's key and its parsed expressions.
struct Plan {
    key: String,
    key_attrs: Vec<String>,
    condition: Option<expr::Cond>,
    update: Option<expr::Update>,
}

fn plan(t: &Table, e: &Effect) -> Result<Plan, ExprError> {
    let attrs = &e.item().0;
    let key = item_key(t, attrs)?;
    if e.kind() != EffectKind::Put && attrs.len() != t.key.len() {
        return Err(ExprError::Syntax(
            "the key must name exactly the key attributes".into(),
        ));
    }
    let mut ph = Placeholders::new(e.names(), e.values());
    let condition = e
        .condition_expression()
        .map(|c| expr::condition(c, &mut ph))
        .transpose()?;
    let update = match (e.kind(), e.update_expression()) {
        (EffectKind::Update, Some(u)) => Some(expr::update(u, &mut ph)?),
        (EffectKind::Update, None) => None,
        (_, Some(_)) => {
            return Err(ExprError::Syntax(
                "an update expression on a non-update".into(),
            ));
        }
        (_, None) => None,
    };
    ph.check_all_used()?;
    Ok(Plan {
        key,
        key_attrs: t.key.clone(),
        condition,
        update,
    })
}

fn item_key(t: &Table, attrs: &BTreeMap<String, Value>) -> Result<String, ExprError> {
    let mut parts = Vec::with_capacity(t.key.len());
    for k in &t.key {
        match attrs.get(k) {
            Some(v @ (Value::S(_) | Value::N(_) | Value::B(_))) => parts.push(format!("{v:?}")),
            Some(_) => {
                return Err(ExprError::Syntax(format!(
                    "key attribute {k} has the wrong type"
                )));
            }
            None => return Err(ExprError::Syntax(format!("key attribute {k} is missing"))),
        }
    }
    Ok(parts.join("\u{0}"))
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExprError::Syntax(s) | ExprError::Unsupported(s) | ExprError::Type(s) => f.write_str(s),
        }
    }
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::S(s) => s.len(),
        Value::N(n) => n.len() + 1,
        Value::B(b) => b.len(),
        Value::Bool(_) | Value::Null => 1,
        Value::L(l) => 3 + l.iter().map(|x| value_size(x) + 1).sum::<usize>(),
        Value::M(m) => 3 + item_size(m) + m.len(),
    }
}

fn item_size(m: &BTreeMap<String, Value>) -> usize {
    m.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}
