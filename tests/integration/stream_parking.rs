//! S15 on DynamoDB Streams through the builder (`source::DynamoDbStream`), with a real parking
//! queue (the SQS emulator `cargo xtask test` starts): a record that can never apply is parked
//! whole and then passed by the checkpoint, so the item's later records are not held up.

use aws_lambda_events::event::dynamodb::Event;
use lambda_dedup::{Effect, Item, Value};
use lambda_dedup_runtime::Parking;
use lambda_dedup_runtime::Queue;
use lambda_dedup_runtime::events::Change;
use lambda_dedup_runtime::source::DynamoDbStream;
use lambda_dedup_runtime::testing::{on_memory, parked_in};
use lambda_dedup_runtime::{Dedup, Env, HandlerError};
use serde_json::json;

use crate::e2e::{sqs, stack_is_up};

#[derive(Debug, serde::Deserialize)]
struct Order {
    customer: String,
    total: String,
}

fn credit(e: lambda_dedup_runtime::Event<Change<Order>>) -> Result<Effect, HandlerError> {
    let order = e
        .payload
        .new_image
        .ok_or_else(|| HandlerError::invalid("no new image"))?;
    let total: i64 = order
        .total
        .parse()
        .map_err(|_| HandlerError::invalid("total is not an integer"))?;
    Ok(Effect::add(
        "totals",
        ("customer", order.customer),
        "total",
        total,
    ))
}

fn record(seq: u64, order: &str, total: &str) -> serde_json::Value {
    let key = json!({"order_id": {"S": order}});
    let image = json!({"order_id": {"S": order}, "customer": {"S": "c-1"}, "total": {"S": total}});
    lambda_dedup_runtime::testing::events::insert_record(seq, key, image)
}

#[tokio::test]
async fn s15_a_stream_record_that_cannot_apply_is_parked_whole_then_passed() {
    if !stack_is_up() {
        return;
    }
    let sqs = sqs();
    let url = sqs
        .create_queue()
        .queue_name(dedup_tests::unique("stream-parking"))
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("url");
    let env = Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "marks")]);
    let (dedup, store) = on_memory(Dedup::read(&env, "orders").expect("settings"));
    store.create_table("totals", "customer");
    let parking = Parking::new(Queue::with_client(url.clone(), sqs.clone()));
    let service = parked_in(dedup.identity("/newImage/order_id"), parking)
        .door(DynamoDbStream, credit)
        .expect("service");
    let stream: Event = serde_json::from_value(json!({"Records": [
        record(1, "o-1", "5"), record(2, "o-2", "five"), record(3, "o-3", "7"),
    ]}))
    .expect("a stream event");
    let answer = service.call_with(stream).await.expect("handled");
    assert!(
        answer.batch_item_failures.is_empty(),
        "parked, so passed: {answer:?}"
    );
    let total = store
        .item("totals", &Item::new().with("customer", "c-1"))
        .and_then(|i| i.0.get("total").cloned());
    assert_eq!(total, Some(Value::N("12".into())));

    let got = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receive");
    let messages = got.messages.unwrap_or_default();
    assert_eq!(messages.len(), 1, "the one record that cannot apply");
    let m = &messages[0];
    let body: serde_json::Value =
        serde_json::from_str(m.body.as_deref().unwrap_or("")).expect("json");
    assert_eq!(body["function"], "orders");
    assert_eq!(body["code"], lambda_dedup::Reason::InvalidPayload.code());
    assert_eq!(
        body["record"]["dynamodb"]["NewImage"]["total"]["S"], "five",
        "the whole record, as delivered"
    );
    let attribute = |name: &str| {
        m.message_attributes
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value.clone())
    };
    assert_eq!(
        attribute("dedup-sequence-number"),
        Some(format!("{:021}", 2))
    );
    assert_eq!(
        attribute("dedup-reason"),
        Some(lambda_dedup::Reason::InvalidPayload.code().to_owned())
    );
}
