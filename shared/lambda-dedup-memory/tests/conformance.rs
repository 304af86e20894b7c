//! The memory store passes the conformance suite (`lambda-dedup-conformance`), the same cases
//! the DynamoDB store passes on the local DynamoDB.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{Item, ManualClock, MarkStore, Retention};
use lambda_dedup_conformance::{BoxFuture, Harness, ItemEffects, World};
use lambda_dedup_memory::MemoryStore;

/// Each case on a fresh memory store.
struct Memory;

struct Store {
    memory: MemoryStore,
    lease: Duration,
}

impl Harness for Memory {
    type Effects = ItemEffects;

    fn world(
        &self,
        retention: Retention,
        lease: Duration,
        clock: Arc<ManualClock>,
    ) -> BoxFuture<'_, Box<dyn World>> {
        let memory = MemoryStore::new(retention).with_clock(clock);
        Box::pin(async move { Box::new(Store { memory, lease }) as Box<dyn World> })
    }
}

impl World for Store {
    fn store(&self) -> Arc<dyn MarkStore> {
        Arc::new(self.memory.clone().with_lease(self.lease))
    }
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = format!(
            "effects-{}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.memory.create_table(&name, key_attr);
        Box::pin(async move { name })
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        let written = self.memory.put_item(table, item);
        Box::pin(async move { written.expect("put_item") })
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        let item = self.memory.item(table, key);
        Box::pin(async move { item })
    }
}

lambda_dedup_conformance::suite!(Memory);
