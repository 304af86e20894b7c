//! The relay's side of the simulated store: its items table seen by one instance (the memory
//! store through the instance's clock, a seeded latency before and after each call, throttling
//! and answers lost after the write), the table's DynamoDB stream (every write that changes an
//! item appends its new image, as DynamoDB Streams does), and the check that no intent is
//! settled before the provider answered its call.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use lambda_dedup::items::{Filter, ItemStoreImpl, text};
use lambda_dedup::{Effect, Item, StoreError, Value};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::store::Items;

use crate::clock::SimClock;
use crate::invariants::Invariant;
use crate::world::{Shared, lock, store_pause};

/// The relay's table: its items and their key attribute.
pub const TABLE: &str = "intents";
/// The key attribute of an intent.
pub const KEY: &str = "id";
/// The status of a settled intent.
pub const SETTLED: &str = "CONFIRMED";

/// The store a relay's builder is given (the intents' relay and the inbox's forwarder): the
/// marks on the memory store, the items through one instance's [`SimItems`].
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    /// The marks.
    pub(crate) data: MemoryStore,
    /// The items, as this instance sees them.
    pub(crate) items: Arc<SimItems>,
}

impl Tables {
    /// The builder's store: every mode on the memory store, the items through [`SimItems`].
    pub(crate) fn into_items(self) -> Items {
        Items::with_tables(self.data, self.items)
    }
}

/// One record of the table's stream: the item's new image after a write.
#[derive(Debug, Clone)]
pub struct Change {
    /// Its sequence number in the shard.
    pub seq_no: u64,
    /// `INSERT` or `MODIFY`.
    pub name: &'static str,
    /// The item's new image.
    pub image: Item,
    /// Invocations that failed at it so far.
    pub attempts: u32,
}

/// The table's stream (one shard) and its checkpoint.
#[derive(Debug, Default)]
pub struct Stream {
    /// Every change, in order.
    pub changes: Vec<Change>,
    /// The first change not yet passed.
    pub checkpoint: usize,
}

impl Stream {
    /// Appends the new image of an item (`INSERT` when it is new).
    pub fn append(&mut self, image: Item, new: bool) {
        let seq_no = self.changes.len() as u64 + 1;
        self.changes.push(Change {
            seq_no,
            name: if new { "INSERT" } else { "MODIFY" },
            image,
            attempts: 0,
        });
    }

    /// Up to `max` changes from the checkpoint.
    pub fn batch(&self, max: usize) -> Vec<Change> {
        self.changes
            .iter()
            .skip(self.checkpoint)
            .take(max)
            .cloned()
            .collect()
    }
}

/// What the relay lane's parts share: the stream, and the intents whose call the provider
/// answered with success (by key).
#[derive(Debug, Default)]
pub struct Relayed {
    /// The table's stream.
    pub stream: Stream,
    /// Keys of the intents the provider answered with success.
    pub answered: BTreeSet<String>,
}

/// Locks the shared part (a poisoned lock still holds it).
pub fn relayed(r: &Mutex<Relayed>) -> MutexGuard<'_, Relayed> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

/// One instance's handle on a relay's table.
#[derive(Debug, Clone)]
pub struct SimItems {
    table: &'static str,
    key: &'static str,
    inner: MemoryStore,
    truth: MemoryStore,
    world: Shared,
    relayed: Arc<Mutex<Relayed>>,
}

impl SimItems {
    /// `data`'s tables, seen through `clock` under the world's faults; its writes appended to
    /// `relayed`'s stream.
    pub fn new(
        data: &MemoryStore,
        world: &Shared,
        clock: SimClock,
        relayed: &Arc<Mutex<Relayed>>,
    ) -> Self {
        let hook = crate::store::world_faults(world);
        Self {
            table: TABLE,
            key: KEY,
            inner: data
                .clone()
                .with_clock(Arc::new(clock))
                .with_fault_hook(hook),
            truth: data.clone(),
            world: world.clone(),
            relayed: relayed.clone(),
        }
    }

    /// The same handle on the relay table `table`, keyed by `key` (the inbox's forwarder's).
    pub fn on_table(mut self, table: &'static str, key: &'static str) -> Self {
        self.table = table;
        self.key = key;
        self
    }

    fn key_of(&self, effect: &Effect) -> Option<Item> {
        let key = effect.item().0.get(self.key)?.clone();
        Some(Item::new().with(self.key, key))
    }

    /// After a write (applied or not, answered or not): each item it changed goes on the
    /// stream, and an intent settled whose call the provider has not answered with success
    /// breaks the invariant.
    fn changed(&self, before: Vec<(Item, Option<Item>)>) {
        for (key, old) in before {
            let new = self.truth.item(self.table, &key);
            let Some(new) = new.filter(|n| Some(n) != old.as_ref()) else {
                continue;
            };
            let id = text(&new, self.key).unwrap_or_default().to_owned();
            let settled = self.table == TABLE && text(&new, "status") == Some(SETTLED);
            let mut r = relayed(&self.relayed);
            if settled && !r.answered.contains(&id) {
                lock(&self.world).violate(
                    Invariant::SettledBeforeCall,
                    format!("{id}: settled before the provider answered"),
                );
            }
            r.stream.append(new, old.is_none());
        }
    }
}

impl ItemStoreImpl for SimItems {
    async fn write(&self, effects: &[Effect]) -> Result<bool, StoreError> {
        store_pause(&self.world).await;
        let before = effects
            .iter()
            .filter(|e| e.table() == self.table)
            .filter_map(|e| self.key_of(e))
            .map(|k| {
                let old = self.truth.item(self.table, &k);
                (k, old)
            })
            .collect();
        let r = self.inner.write(effects).await;
        self.changed(before);
        store_pause(&self.world).await;
        r
    }

    async fn read(&self, table: &str, key: &Item) -> Result<Option<Item>, StoreError> {
        store_pause(&self.world).await;
        let r = self.inner.read(table, key).await;
        store_pause(&self.world).await;
        r
    }

    async fn scan(&self, table: &str, filter: &Filter) -> Result<Vec<Item>, StoreError> {
        store_pause(&self.world).await;
        let r = self.inner.scan(table, filter).await;
        store_pause(&self.world).await;
        r
    }
}

/// An item as DynamoDB JSON (a stream record's image).
pub fn dynamodb_json(item: &Item) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (name, v) in &item.0 {
        let typed = match v {
            Value::S(s) => serde_json::json!({ "S": s }),
            Value::N(n) => serde_json::json!({ "N": n }),
            Value::Bool(b) => serde_json::json!({ "BOOL": b }),
            _ => serde_json::json!({ "NULL": true }),
        };
        out.insert(name.clone(), typed);
    }
    serde_json::Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants::Ledger;
    use crate::provider::Provider;
    use crate::rng::Rng;
    use crate::trace::Trace;
    use crate::world::World;
    use lambda_dedup::Retention;
    use tokio::time::Instant;

    fn settle(key: &str) -> Effect {
        Effect::update(TABLE, Item::new().with(KEY, key))
            .expression("SET #s = :s")
            .name("#s", "status")
            .value(":s", SETTLED)
    }

    #[test]
    fn a_write_settling_an_intent_goes_on_the_stream_and_before_the_answer_breaks_the_invariant() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let start = Instant::now();
            let world: Shared = Arc::new(Mutex::new(World {
                rng: Rng::new(1),
                trace: Trace::default(),
                ledger: Ledger::default(),
                provider: Provider::new(1_000),
                start,
                store_faults: 0,
                max_skew_ms: 0,
                handler_panics: 0,
                poison: None,
            }));
            let data = MemoryStore::new(
                Retention::unchecked(std::time::Duration::from_secs(3_600)).expect("a retention"),
            );
            data.create_table(TABLE, KEY);
            for id in ["a", "b"] {
                data.put_item(TABLE, Item::new().with(KEY, id).with("status", "PENDING"))
                    .expect("an intent");
            }
            let shared = Arc::new(Mutex::new(Relayed::default()));
            let items = SimItems::new(&data, &world, SimClock::new(start, 0), &shared);
            relayed(&shared).answered.insert("a".into());
            assert!(items.write(&[settle("a")]).await.expect("written"));
            assert!(lock(&world).ledger.violations().is_empty());
            assert!(items.write(&[settle("b")]).await.expect("written"));
            let broken: Vec<Invariant> = lock(&world)
                .ledger
                .violations()
                .iter()
                .map(|v| v.invariant)
                .collect();
            assert_eq!(
                broken,
                [Invariant::SettledBeforeCall],
                "b was never answered"
            );
            let batch = relayed(&shared).stream.batch(5);
            let names: Vec<&str> = batch.iter().map(|c| c.name).collect();
            assert_eq!(names, ["MODIFY", "MODIFY"], "both changes on the stream");
        });
    }
}
