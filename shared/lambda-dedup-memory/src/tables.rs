//! The effect tables and their evaluation, as DynamoDB judges writes: tables with their key
//! schema, an effect planned against its table (its key and parsed expressions) and refused
//! where DynamoDB refuses it before reading any item, a commit's effects judged together on the
//! items as they were, the single-item conditional write of sequence and create-once modes, and
//! the core's [`ItemStore`](lambda_dedup::ItemStore) on these tables.

use std::collections::BTreeMap;
use std::future::{Future, ready};

use lambda_dedup::effect::EffectKind;
use lambda_dedup::items::{Filter, ItemStoreImpl};
use lambda_dedup::store::MAX_EFFECTS;
use lambda_dedup::{CommitRequest, DedupKey, Effect, FaultKind, Item, StoreError, Value};

use crate::expr::{self, ExprError, Placeholders};
use crate::{MemoryStore, Op, State};

/// DynamoDB's limit on one item, in bytes.
const MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on one transaction, in bytes.
const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Default)]
pub(crate) struct Table {
    /// The partition key and, if any, the sort key.
    key: Vec<String>,
    items: BTreeMap<String, BTreeMap<String, Value>>,
}

impl MemoryStore {
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

    /// One effect, a `Put` or an `Update`, as a single-item conditional write, as DynamoDB's
    /// `PutItem` and `UpdateItem` with the old item returned on a failed condition: what
    /// sequence and create-once modes send. `None`: written; `Some(old)`: the condition failed
    /// on `old` (`None`: no item).
    pub(crate) fn write_one(
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
}

/// A refusal of `r`'s own writes, as DynamoDB gives it.
pub(crate) fn refused(r: &CommitRequest<'_>, code: &str, position: Option<usize>) -> StoreError {
    StoreError::Refused {
        key: r.key.clone(),
        code: code.to_owned(),
        position,
    }
}

/// The effects' plans, or what DynamoDB refuses before it looks at any item: malformed or
/// unused placeholders, missing tables or key attributes, one item twice, a transaction over
/// 4 MB.
pub(crate) fn planned(state: &State, r: &CommitRequest<'_>) -> Result<Vec<Plan>, StoreError> {
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
pub(crate) type Write = (String, String, Option<BTreeMap<String, Value>>);

/// Makes `written` (judged by [`judged`]: every table exists) the items of their tables.
pub(crate) fn write_all(state: &mut State, written: Vec<Write>) {
    for (table, key, after) in written {
        let t = state.tables.get_mut(&table).expect("checked above");
        match after {
            Some(a) => t.items.insert(key, a),
            None => t.items.remove(&key),
        };
    }
}

/// What the effects come to, each judged on the items as they were before the transaction.
pub(crate) enum Judged {
    /// Every condition holds: the writes.
    Writes(Vec<Write>),
    /// The first effect whose condition failed.
    FailedCondition(usize),
    /// The first effect refused as it is (1-based, as DynamoDB reports it).
    Refused(usize),
}

pub(crate) fn judged(
    state: &State,
    effects: &[Effect],
    plans: &[Plan],
) -> Result<Judged, StoreError> {
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
impl ItemStoreImpl for MemoryStore {
    fn write(&self, effects: &[Effect]) -> impl Future<Output = Result<bool, StoreError>> + Send {
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
            write_all(state, written);
            Ok(true)
        });
        ready(out)
    }

    fn read(
        &self,
        table: &str,
        key: &Item,
    ) -> impl Future<Output = Result<Option<Item>, StoreError>> + Send {
        let out = self.read_table(table, |t| {
            let k = item_key(t, &key.0)
                .map_err(|_| StoreError::store(FaultKind::Refused, "ValidationException"))?;
            Ok(t.items.get(&k).map(|m| Item(m.clone())))
        });
        ready(out)
    }

    fn scan(
        &self,
        table: &str,
        filter: &Filter,
    ) -> impl Future<Output = Result<Vec<Item>, StoreError>> + Send {
        let out = self.read_table(table, |t| {
            let items = t.items.values().map(|m| Item(m.clone()));
            Ok(items.filter(|i| filter.keeps(i)).collect())
        });
        ready(out)
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

pub(crate) fn missing_table(table: &str) -> StoreError {
    StoreError::store(
        FaultKind::Refused,
        format!("memory store: no table {table:?} (create it with MemoryStore::create_table)"),
    )
}

/// An effect checked against its table: the item's key and its parsed expressions.
pub(crate) struct Plan {
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

pub(crate) fn item_size(m: &BTreeMap<String, Value>) -> usize {
    m.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}
