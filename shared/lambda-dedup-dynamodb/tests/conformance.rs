//! The conformance suite (`lambda-dedup-conformance`) on the DynamoDB store, in the store's own
//! crate, so that a change to the store (a mutant of `cargo xtask mutants dynamodb`, say) is
//! judged by rebuilding this crate's tests alone. The DynamoDB is the one named in
//! `DEDUP_DYNAMODB_ENDPOINT` (`cargo xtask test` sets it), else a local DynamoDB (Dynoxide,
//! crate `local-dynamodb`) started in this test binary on first use, so plain `cargo test`
//! needs nothing set up. Each case gets a fresh mark table; effect tables are written with
//! `write_effects` and read back with `GetItem` (`DynamoItems`), not through the store.

use std::sync::Arc;

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use lambda_dedup::{Effect, Item, ItemStore};
use lambda_dedup_conformance::{BoxFuture, EffectTables, Harness, ItemEffects, Setup, World};
use lambda_dedup_dynamodb::{DynamoItems, DynamoStore, provision, write_effects};

/// Each case on a fresh mark table of the DynamoDB.
struct DynamoDb;

/// The effect tables of the DynamoDB, through the SDK.
struct Tables(aws_sdk_dynamodb::Client);

/// A client of the DynamoDB the suite runs against.
fn client() -> aws_sdk_dynamodb::Client {
    let endpoint = std::env::var("DEDUP_DYNAMODB_ENDPOINT")
        .unwrap_or_else(|_| local_dynamodb::shared().endpoint());
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

impl Harness for DynamoDb {
    type Effects = ItemEffects;
    type Store = DynamoStore;

    fn world(&self, setup: Setup) -> BoxFuture<'_, Box<dyn World<Effect, DynamoStore>>> {
        Box::pin(async move {
            let client = client();
            let marks = lambda_dedup_conformance::unique("marks");
            provision::create_mark_table(&client, &marks, false)
                .await
                .expect("create the mark table");
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
