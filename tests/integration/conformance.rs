//! The conformance suite (`lambda-dedup-conformance`, the one a third-party store runs) on the
//! DynamoDB store, on the local DynamoDB: the same cases the memory store passes in its own
//! crate's tests, so a behaviour shown on the memory store in a fast test is the behaviour the
//! DynamoDB store has. Effect items are read back through DynamoDB's own API, not the store.

use dedup_tests::{StoreKind, Stores};
use lambda_dedup::{Effect, Item};
use lambda_dedup_conformance::{BoxFuture, EffectTables, Harness, ItemEffects, Setup, World};
use lambda_dedup_dynamodb::DynamoStore;

/// Each case on a fresh mark table of the local DynamoDB.
struct DynamoDb;

/// The effect tables of the local DynamoDB, through the SDK.
struct Tables(Stores);

impl Harness for DynamoDb {
    type Effects = ItemEffects;
    type Store = DynamoStore;

    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<Effect, DynamoStore>>> {
        Box::pin(async move {
            let stores =
                Stores::on_clock(StoreKind::DynamoDb, setup.retention, setup.clock.clone()).await;
            let store =
                DynamoStore::new(dedup_tests::client(), stores.mark_table(), setup.retention)
                    .with_clock(setup.clock)
                    .with_lease(setup.lease);
            lambda_dedup_conformance::world(std::sync::Arc::new(store), Tables(stores))
        })
    }
}

impl EffectTables for Tables {
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        Box::pin(self.0.table(key_attr))
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        Box::pin(self.0.put(table, item))
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        Box::pin(self.0.read(table, key))
    }
}

mod dynamodb {
    lambda_dedup_conformance::suite!(super::DynamoDb, capabilities: [sequence, create_once, latest]);
}
