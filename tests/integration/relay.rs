//! The functions' DynamoDB-backed checks (their own unit tests run on the memory store): the
//! `ItemStore` seam the relays and `fine-notices` read and settle through, on both stores;
//! `intent-relay` as `main` builds it on the local DynamoDB; and `ledger-projector`'s duplicate
//! pre-filter, which only the metered local DynamoDB can show.

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use dedup_tests::{client, unique};
use lambda_dedup::items::{Filter, text};
use lambda_dedup::{Effect, Item, ItemStore};
use lambda_dedup_dynamodb::DynamoItems;
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::{Dedup, Env, store::Items};
use lambda_runtime::LambdaEvent;
use lambda_runtime::tower::ServiceExt;
use serde_json::json;

/// The promises of `ItemStore` (`lambda_dedup::items`), on `store` with an empty table `table`
/// keyed by `id`: a write all or nothing, a failed condition an answer (`Ok(false)`, nothing
/// written), reads and scans that see what was written.
async fn item_store_keeps_its_promises(store: &dyn ItemStore, table: &str) {
    let put = |id: &str, status: Option<&str>| {
        let mut item = Item::new().with("id", id).with("n", 7);
        if let Some(s) = status {
            item = item.with("status", s);
        }
        Effect::put(table, item).condition("attribute_not_exists(id)")
    };
    assert!(
        store
            .write(&[put("a", Some("PENDING")), put("b", None)])
            .await
            .expect("write")
    );
    // One failed condition: neither write happens.
    let again = [put("c", Some("PENDING")), put("a", None)];
    assert!(!store.write(&again).await.expect("an answer"));
    let key = |id: &str| Item::new().with("id", id);
    assert!(store.read(table, &key("c")).await.expect("read").is_none());
    let a = store
        .read(table, &key("a"))
        .await
        .expect("read")
        .expect("a");
    assert_eq!(text(&a, "status"), Some("PENDING"));
    assert_eq!(lambda_dedup::items::number(&a, "n"), Some(7));
    let settle = Effect::update(table, key("a"))
        .expression("SET #s = :done")
        .condition("#s = :pending")
        .name("#s", "status")
        .value(":done", "DONE")
        .value(":pending", "PENDING");
    assert!(
        store
            .write(std::slice::from_ref(&settle))
            .await
            .expect("settle")
    );
    assert!(!store.write(&[settle]).await.expect("a repeat is a no-op"));
    let ids = |items: Vec<Item>| {
        let mut ids: Vec<String> = items
            .iter()
            .filter_map(|i| text(i, "id").map(str::to_owned))
            .collect();
        ids.sort();
        ids
    };
    let done = Filter::Equals("status".into(), "DONE".into());
    assert_eq!(ids(store.scan(table, &done).await.expect("scan")), ["a"]);
    let unsettled = Filter::Missing("status".into());
    assert_eq!(
        ids(store.scan(table, &unsettled).await.expect("scan")),
        ["b"]
    );
}

#[tokio::test]
async fn the_item_store_keeps_its_promises_on_dynamodb() {
    let client = client();
    let table = dedup_tests::effect_table(&client, "id").await;
    item_store_keeps_its_promises(&DynamoItems::new(client), &table).await;
}

#[tokio::test]
async fn the_item_store_keeps_its_promises_in_memory() {
    let store = MemoryStore::new(dedup_tests::retention());
    store.create_table("items", "id");
    item_store_keeps_its_promises(&store, "items").await;
}

/// S7, S15 on DynamoDB: `intent-relay` as `main` builds it (`intent_relay::service` on the
/// builder's DynamoDB store, its intents through `DynamoItems`), called as Lambda calls it: a refused intent is parked `FAILED` with its
/// reason, the others confirmed once; a replay posts nothing; the sweep finds nothing pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_intent_relay_on_dynamodb_confirms_parks_and_posts_nothing_twice() {
    let client = client();
    let intents = dedup_tests::effect_table(&client, "intent_id").await;
    let provider = lambda_dedup_fake_provider::Provider::new();
    let (url, _server) = provider.serve().await.expect("fake provider");
    let run = unique("relay");
    let ids: Vec<String> = (0..3).map(|i| format!("{run}-{i}")).collect();
    let items = DynamoItems::new(client.clone());
    for id in &ids {
        let intent = Item::new()
            .with("intent_id", id.as_str())
            .with("fine_id", format!("fine-{id}"))
            .with("amount_cents", 10_000)
            .with("status", "PENDING");
        assert!(
            items
                .write(&[Effect::put(&intents, intent)])
                .await
                .expect("put")
        );
    }
    // The middle intent's key was used for another payload: the provider answers 422.
    lambda_dedup_http::IdempotentClient::new(&url, Duration::from_secs(5))
        .expect("client")
        .call("/v1/collections", &ids[1], &json!({"other": "payload"}))
        .await
        .expect("first use of the key");
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "test".to_owned()),
        ("COLLECTIONS_API_URL", url),
        ("INTENTS_TABLE", intents.clone()),
    ]);
    // As `main` builds it: the builder's DynamoDB store (here on the local DynamoDB's client),
    // whose item tables the relay reads and settles.
    let dedup = Dedup::read(&env, intent_relay::FUNCTION).expect("settings");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    let relay = intent_relay::service(dedup.on(store)).expect("relay");
    let records: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            json!({
                "eventID": format!("e{i}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {"Keys": {"intent_id": {"S": id}},
                    "NewImage": {"intent_id": {"S": id}, "fine_id": {"S": format!("fine-{id}")},
                                 "amount_cents": {"N": "10000"}, "status": {"S": "PENDING"}},
                    "SequenceNumber": format!("{:021}", 100 + i), "SizeBytes": 10,
                    "StreamViewType": "NEW_AND_OLD_IMAGES"}
            })
        })
        .collect();
    let stream = json!({ "Records": records });
    let invoke = |payload: serde_json::Value| {
        let relay = relay.clone();
        async move {
            relay
                .oneshot(LambdaEvent::new(
                    payload,
                    lambda_runtime::Context::default(),
                ))
                .await
                .expect("answer")
        }
    };
    assert_eq!(
        invoke(stream.clone()).await,
        json!({"batchItemFailures": []})
    );
    let state = |id: String| {
        let client = client.clone();
        let intents = intents.clone();
        async move {
            let item = dedup_tests::get_item(&client, &intents, "intent_id", &id)
                .await
                .expect("intent");
            let s = |n: &str| item.get(n).and_then(|v| v.as_s().ok()).cloned();
            (s("status"), s("failure_reason"))
        }
    };
    assert_eq!(state(ids[0].clone()).await.0.as_deref(), Some("CONFIRMED"));
    assert_eq!(
        state(ids[1].clone()).await,
        (Some("FAILED".into()), Some("provider_rejected_422".into()))
    );
    assert_eq!(state(ids[2].clone()).await.0.as_deref(), Some("CONFIRMED"));
    let requests = provider.requests();
    assert_eq!(invoke(stream).await, json!({"batchItemFailures": []}));
    assert_eq!(provider.requests(), requests, "no post on replay");
    let swept = invoke(json!({"source": "aws.events"})).await;
    assert_eq!(swept["pending"], 0, "{swept}");
}

/// `DEDUP_PREFILTER_DUPLICATES=true`, through `ledger-projector`'s `service` on the local
/// DynamoDB (metered): the sample batch again is answered from one strongly consistent
/// `BatchGetItem` of its marks, with no transaction (none cancelled); without the setting, the
/// same batch costs a cancelled transaction. The warm cache is off, as in a new container.
/// Either way the balance moves once per event and nothing is reported failed.
#[tokio::test]
async fn the_duplicate_prefilter_setting_keeps_known_duplicates_out_of_transactions() {
    use local_dynamodb::meter::Meter;
    let meter = Meter::start(&dedup_tests::endpoint(), Duration::ZERO).expect("meter");
    let metered = dedup_tests::client_at(&meter.endpoint());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/ledger-credit.json");
    let sample: SqsEvent =
        serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("event");
    for on in ["true", "false"] {
        let client = client();
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "test".to_owned()),
            ("DEDUP_MARK_TABLE", dedup_tests::mark_table(&client).await),
            (
                "BALANCES_TABLE",
                dedup_tests::effect_table(&client, "account").await,
            ),
            ("DEDUP_PREFILTER_DUPLICATES", on.to_owned()),
            // A fresh container: the warm cache would answer the duplicates itself.
            ("DEDUP_CACHE_SIZE", "0".to_owned()),
        ]);
        let dedup = Dedup::read(&env, ledger_projector::FUNCTION).expect("settings");
        let balances = dedup.env().required("BALANCES_TABLE").expect("set");
        let store = Items::dynamodb(metered.clone(), dedup.settings());
        let service = ledger_projector::service(dedup.on(store)).expect("service");
        let invoke = |event: SqsEvent| {
            let service = service.clone();
            async move {
                let event = LambdaEvent::new(event, lambda_runtime::Context::default());
                let answer = service.oneshot(event).await.expect("handled");
                lambda_dedup_runtime::testing::failed_ids(answer)
            }
        };
        assert!(invoke(sample.clone()).await.is_empty());
        meter.reset();
        assert!(invoke(sample.clone()).await.is_empty());
        let u = meter.usage();
        let account = lambda_dedup::tenant_scoped("bank-a", "credito-17");
        let balance = dedup_tests::balance(&client, &balances, &account).await;
        assert_eq!(balance, Some(7), "{on}");
        let transactions = u.by_operation.get("TransactWriteItems").copied();
        if on == "true" {
            assert_eq!(transactions, None, "{u:?}");
            assert!(u.read_units > 0.0, "the read is billed: {u:?}");
        } else {
            assert!(
                transactions.is_some_and(|n| n == u.cancelled_transactions),
                "{u:?}"
            );
        }
        let reads = u.by_operation.get("BatchGetItem").copied().unwrap_or(0);
        assert_eq!(reads, u64::from(on == "true"), "prefilter {on}: {u:?}");
    }
}
