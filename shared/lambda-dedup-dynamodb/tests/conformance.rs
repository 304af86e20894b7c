//! The conformance suite (`lambda-dedup-conformance`) on the DynamoDB store, in the store's own
//! crate, so that a change to the store (a mutant of `cargo xtask mutants dynamodb`, say) is
//! judged by rebuilding this crate's tests alone, on the DynamoDB of `local` (a local DynamoDB
//! started in the test binary, unless `DEDUP_DYNAMODB_ENDPOINT` names one). Each case gets a
//! fresh mark table; effect tables are written with `write_effects` and read back with
//! `GetItem` (`DynamoItems`), not through the store.

use std::sync::Arc;

use lambda_dedup::{Effect, Item, ItemStore};
use lambda_dedup_conformance::{BoxFuture, EffectTables, Harness, ItemEffects, Setup, World};
use lambda_dedup_dynamodb::{DynamoItems, DynamoStore, provision, write_effects};

/// Each case on a fresh mark table of the DynamoDB.
struct DynamoDb;

/// The effect tables of the DynamoDB, through the SDK.
struct Tables(aws_sdk_dynamodb::Client);

mod local;

impl Harness for DynamoDb {
    type Effects = ItemEffects;
    type Store = DynamoStore;

    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<Effect, DynamoStore>>> {
        Box::pin(async move {
            let client = local::client();
            let marks = local::mark_table(&client).await;
            let store = DynamoStore::new(client.clone(), marks, setup.retention)
                .with_clock(setup.clock)
                .with_lease(setup.lease);
            lambda_dedup_conformance::world(Arc::new(store), Tables(client))
        })
    }
}

impl EffectTables for Tables {
    fn table<'a>(&'a self, key_attr: &'a str) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let name = lambda_dedup_conformance::unique("effects");
            provision::create_table(&self.0, &name, key_attr, false)
                .await
                .expect("create an effect table");
            name
        })
    }
    fn put<'a>(&'a self, table: &'a str, item: Item) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let written = write_effects(&self.0, &[Effect::put(table, item)]).await;
            assert!(
                written.expect("put_item"),
                "an unconditional put is written"
            );
        })
    }
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> BoxFuture<'a, Option<Item>> {
        Box::pin(async move {
            let items = DynamoItems::new(&self.0);
            items.read(table, key).await.expect("get_item")
        })
    }
}

lambda_dedup_conformance::suite!(DynamoDb, capabilities: [sequence, create_once, latest]);
