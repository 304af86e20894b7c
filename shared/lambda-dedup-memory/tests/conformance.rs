//! The memory store passes the conformance suite (`lambda-dedup-conformance`), the same cases
//! the DynamoDB store passes on the local DynamoDB, sequence and create-once modes included.

use std::sync::Arc;

use lambda_dedup::{Effect, Item};
use lambda_dedup_conformance::{BoxFuture, EffectTables, Harness, ItemEffects, Setup, World};
use lambda_dedup_memory::MemoryStore;

/// Each case on a fresh memory store.
struct Memory;

/// The effect tables of the memory store, kept with its marks.
struct Tables(MemoryStore);

impl Harness for Memory {
    type Effects = ItemEffects;
    type Store = MemoryStore;

    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<Effect, MemoryStore>>> {
        let memory = MemoryStore::new(setup.retention).with_clock(setup.clock);
        let store = Arc::new(memory.clone().with_lease(setup.lease));
        Box::pin(async move { lambda_dedup_conformance::world(store, Tables(memory)) })
    }
}

impl EffectTables for Tables {
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        let name = lambda_dedup_conformance::unique("effects");
        self.0.create_table(&name, key_attr);
        Box::pin(async move { name })
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        let written = self.0.put_item(table, item);
        Box::pin(async move { written.expect("put_item") })
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        let item = self.0.item(table, key);
        Box::pin(async move { item })
    }
}

lambda_dedup_conformance::suite!(Memory, capabilities: [sequence, create_once, latest]);
