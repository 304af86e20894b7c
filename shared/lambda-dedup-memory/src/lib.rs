//! An in-memory [`MarkStore`](lambda_dedup::MarkStore): the DynamoDB store's semantics — TTL, leases, fencing,
//! fingerprints, all-or-nothing commits of a mark with its effects — with no network and no
//! emulator, for fast tests of flows, handlers and model schedules.
//!
//! It passes the same conformance suite as `lambda-dedup-dynamodb`'s store
//! (`lambda-dedup-conformance`, run in each store's `tests/conformance.rs`). Effects are
//! evaluated by a subset of DynamoDB's expression language (see [`MemoryStore::create_table`] and the `expr` module): what it does
//! not evaluate is refused with [`StoreError::Invalid`](lambda_dedup::StoreError::Invalid) naming the feature, never guessed at.
//!
//! # Layout
//! Marks and tables sit in one `State` under one lock (this file: the store and its options;
//! the lock is `sync`'s: std's, or shuttle's under `--cfg shuttle` for the exploring scheduler).
//! `marks` holds the mark semantics (claims, leases, fencing, commits, sequence and create-once
//! modes) and the core's store traits on them; `tables` the effect tables and their evaluation
//! as DynamoDB judges writes (plans, refusals, a commit's effects judged together, the
//! single-item conditional write) and the core's [`ItemStore`](lambda_dedup::ItemStore) on them; `expr` the expression
//! language; `faults` the faults a call meets ([`MemoryStore::inject`], [`FaultHook`],
//! [`MemoryStore::unreachable`]) and the one path every call takes through them.
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
mod faults;
mod marks;
mod recording;
mod sync;
mod tables;

pub use faults::{FaultHook, Injected, Op};
pub use marks::HIGH_WATER_TABLE;
pub use recording::Recording;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use lambda_dedup::store::StoreOptions;
use lambda_dedup::{DedupKey, Mark, Retention};

use faults::Hook;
use sync::{Mutex, MutexGuard};
use tables::Table;

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

    lambda_dedup::store_options_builders!(options);

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
