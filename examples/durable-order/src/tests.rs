//! The workflow on the SDK's local runner, its marks and stock on the local DynamoDB (the
//! kit's), its payments API played by the fake provider (which honours `Idempotency-Key` and
//! counts what it applied): a crash between a step's effect and its checkpoint applies the
//! effect once; the dispatcher starts one execution per order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_durable_execution_sdk::test_util::LocalRunner;
use lambda_dedup_fake_provider::Provider;
use lambda_dedup_runtime::durable::{StartFuture, Started, Starter};
use lambda_dedup_runtime::events::SqsEvent;
use lambda_dedup_runtime::store::Items;
use lambda_dedup_runtime::{Env, SqsService};
use lambda_dedup_testkit::dynamodb::LocalDynamoDb;
use lambda_dedup_testkit::dynamodb::items;
use lambda_dedup_testkit::{events, with_outcomes};

use super::*;

fn env() -> Env {
    Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("STOCK_TABLE", "stock"),
    ])
}

/// The local DynamoDB with the mark table and the stock table.
async fn dynamodb() -> LocalDynamoDb {
    let dynamodb = LocalDynamoDb::start().expect("local DynamoDB");
    dynamodb.create_mark_table("marks").await.expect("marks");
    dynamodb.create_table("stock", "sku").await.expect("stock");
    dynamodb
}

fn on(dynamodb: &LocalDynamoDb, function: &str) -> Dedup {
    let dedup = Dedup::read(&env(), function).expect("settings");
    let items = Items::dynamodb(dynamodb.client(), dedup.settings());
    dedup.on(items)
}

async fn payments_api() -> (Provider, IdempotentClient) {
    let provider = Provider::new();
    let (url, _) = provider.serve().await.expect("payments API");
    let client =
        IdempotentClient::new(&format!("{url}/v1"), Duration::from_secs(2)).expect("client");
    (provider, client)
}

fn order() -> Order {
    Order {
        order_id: "o-1".into(),
        sku: "sku-7".into(),
        quantity: 3,
        cents: 1200,
    }
}

/// The stock item's `reserved`, as DynamoDB holds it.
async fn reserved(dynamodb: &LocalDynamoDb) -> Option<String> {
    let item = items::get(&dynamodb.client(), "stock", "sku", "sku-7")
        .await
        .expect("read")?;
    item.get("reserved")?.as_n().ok().cloned()
}

/// The workflow's checkpoints, in order: the stock step's start and outcome, the charge's
/// claim step's start and outcome, its call step's start and outcome.
const STOCK_OUTCOME: usize = 1;
const CHARGE_OUTCOME: usize = 5;

async fn run(runner: LocalRunner, workflow: Workflow) -> Placed {
    let workflow = Arc::new(workflow);
    let result = runner
        .run(
            move |order: Order, ctx| {
                let workflow = workflow.clone();
                async move { workflow.run(order, ctx).await }
            },
            order(),
        )
        .await;
    assert!(result.is_success(), "{:?}", result.error_message());
    result.into_output().expect("placed")
}

#[tokio::test]
async fn a_crash_between_the_reservation_and_its_checkpoint_reserves_once() {
    let dynamodb = dynamodb().await;
    let (provider, payments) = payments_api().await;
    let workflow = Workflow::new(on(&dynamodb, "durable-order"), "stock".into(), payments);
    let runner = LocalRunner::new().fail_checkpoints_after_retryable(STOCK_OUTCOME, 1);
    let placed = run(runner, workflow.expect("workflow")).await;
    assert_eq!(placed.reserved, 3);
    assert_eq!(reserved(&dynamodb).await, Some("3".to_owned()));
    assert_eq!(provider.total_effects(), 1);
}

#[tokio::test]
async fn a_crash_between_the_charge_and_its_checkpoint_charges_once_without_calling_again() {
    let dynamodb = dynamodb().await;
    let (provider, payments) = payments_api().await;
    let workflow = Workflow::new(on(&dynamodb, "durable-order"), "stock".into(), payments);
    let runner = LocalRunner::new().fail_checkpoints_after_retryable(CHARGE_OUTCOME, 1);
    let placed = run(runner, workflow.expect("workflow")).await;
    assert!(placed.payment_id.is_some(), "{placed:?}");
    assert_eq!(provider.total_effects(), 1);
    // The replay found the completed mark: no second request, not even one the provider
    // would have answered from its own idempotency store.
    assert_eq!(provider.requests(), 1);
    assert_eq!(reserved(&dynamodb).await, Some("3".to_owned()));
}

/// The local runner as Lambda: a start under a name it has not seen runs the workflow to its
/// end; a name it has is the existing execution.
#[derive(Debug)]
struct LocalLambda {
    workflow: Arc<Workflow>,
    names: Mutex<Vec<String>>,
}

impl Starter for LocalLambda {
    fn start<'a>(&'a self, name: &'a str, payload: &'a [u8]) -> StartFuture<'a> {
        Box::pin(async move {
            if self.names.lock().expect("lock").iter().any(|n| n == name) {
                return Ok(Started::New {
                    execution_arn: None,
                });
            }
            self.names.lock().expect("lock").push(name.to_owned());
            let order: Order = serde_json::from_slice(payload).expect("an order");
            let workflow = self.workflow.clone();
            let result = LocalRunner::new()
                .run(
                    move |order: Order, ctx| {
                        let workflow = workflow.clone();
                        async move { workflow.run(order, ctx).await }
                    },
                    order,
                )
                .await;
            assert!(result.is_success(), "{:?}", result.error_message());
            Ok(Started::New {
                execution_arn: None,
            })
        })
    }
}

fn dispatcher_on(dynamodb: &LocalDynamoDb, lambda: LocalLambda) -> SqsService {
    dispatcher(on(dynamodb, "order-dispatcher"), lambda).expect("dispatcher")
}

#[tokio::test]
async fn an_order_delivered_three_times_and_sent_again_runs_once() {
    let dynamodb = dynamodb().await;
    let (provider, payments) = payments_api().await;
    let workflow = Workflow::new(on(&dynamodb, "durable-order"), "stock".into(), payments);
    let lambda = Arc::new(workflow.expect("workflow"));
    let body = serde_json::to_string(&order()).expect("json");
    let mut labels = Vec::new();
    // SQS delivers m1 three times; the producer sends the order again as m2.
    for id in ["m1", "m1", "m1", "m2"] {
        let service = dispatcher_on(
            &dynamodb,
            LocalLambda {
                workflow: lambda.clone(),
                names: Mutex::default(),
            },
        );
        let mut event = SqsEvent::default();
        event.records = vec![events::sqs_record(id, &body)];
        let (answer, outcomes) = with_outcomes(service.call_with(event)).await;
        let answer = answer.expect("answer");
        assert!(answer.batch_item_failures.is_empty(), "{outcomes:?}");
        labels.extend(outcomes.iter().map(|(_, o)| o.label()));
    }
    assert_eq!(labels, ["applied", "duplicate", "duplicate", "duplicate"]);
    assert_eq!(reserved(&dynamodb).await, Some("3".to_owned()));
    assert_eq!(provider.total_effects(), 1);
}
