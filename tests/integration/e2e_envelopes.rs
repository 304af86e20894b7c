//! SNS → SQS without raw message delivery, end to end against other people's code: a topic of
//! the local AWS emulator (moto, the stack's SQS endpoint) with an SQS subscription, the
//! producer's JSON published to it, and the real envelope moto delivers read back from the queue
//! and handed, as Lambda's poller hands it, to an SQS service built with
//! `.envelope(Envelope::Sns)`, its marks and orders in the local DynamoDB. The order applies
//! once; the producer's retry (a second publish: a new SNS `MessageId`) is a duplicate (S1,
//! S8); a `Message` that is not JSON and one without the identity are rejected, reported failed
//! for the DLQ (S2, S12), and the account closes (S14).
//!
//! It needs the stack's emulator (`DEDUP_SQS_ENDPOINT`, which `cargo xtask test` sets); without
//! it it says so and is skipped.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use lambda_dedup::{Effect, Item};
use lambda_dedup_batch::Outcome;
use lambda_dedup_runtime::testing::with_outcomes;
use lambda_dedup_runtime::{Dedup, Env, Envelope, Event};
use serde_json::{Value, json};

use dedup_tests as support;

/// A few SNS calls on the emulator's Query API: plain HTTP, as the Kinesis helper does.
struct Sns {
    http: reqwest::Client,
    endpoint: String,
}

impl Sns {
    /// `action` with `params`; the value of the first `<field>` element of the answer.
    async fn call(&self, action: &str, params: &[(&str, &str)], field: &str) -> String {
        let mut form = vec![("Action", action), ("Version", "2010-03-31")];
        form.extend_from_slice(params);
        let text = self
            .http
            .post(&self.endpoint)
            .header(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/sns/aws4_request, \
                 SignedHeaders=host, Signature=0",
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                form.iter()
                    .map(|(k, v)| format!("{k}={}", encoded(v)))
                    .collect::<Vec<_>>()
                    .join("&"),
            )
            .send()
            .await
            .expect("sns call")
            .text()
            .await
            .expect("sns answer");
        let (open, close) = (format!("<{field}>"), format!("</{field}>"));
        let start = text.find(&open).map(|i| i + open.len());
        let end = text.find(&close);
        match (start, end) {
            (Some(s), Some(e)) if s <= e => text[s..e].to_owned(),
            _ => panic!("sns {action}: no {field} in {text}"),
        }
    }
}

/// `v` percent-encoded for a form: unreserved characters kept, every other byte `%XX`.
fn encoded(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[derive(Debug, serde::Deserialize)]
struct Order {
    order_id: String,
    total: i64,
}

#[tokio::test]
async fn sns_to_sqs_with_moto_the_real_envelope_is_opened_and_a_republish_is_a_duplicate() {
    let Ok(endpoint) = std::env::var("DEDUP_SQS_ENDPOINT") else {
        eprintln!(
            "skipped the SNS → SQS envelope test: it needs the stack's emulator (DEDUP_SQS_ENDPOINT); run it with `cargo xtask test`"
        );
        return;
    };
    let sqs = super::e2e::sqs();
    let name = support::unique("sns-orders");
    let queue = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("queue")
        .queue_url
        .expect("url");
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("attributes")
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("arn");
    let sns = Sns {
        http: reqwest::Client::new(),
        endpoint: endpoint.clone(),
    };
    let topic = sns
        .call("CreateTopic", &[("Name", &name)], "TopicArn")
        .await;
    // No RawMessageDelivery: the queue gets SNS's envelope, the order in its `Message` string.
    sns.call(
        "Subscribe",
        &[
            ("TopicArn", &topic),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn),
        ],
        "SubscriptionArn",
    )
    .await;
    let order = json!({"order_id": "o-1", "total": 5}).to_string();
    let published = [
        order.as_str(),
        order.as_str(),
        "Hello, alice@example.com",
        r#"{"id": "o-2", "total": 1}"#,
    ];
    for message in published {
        sns.call(
            "Publish",
            &[("TopicArn", &topic), ("Message", message)],
            "MessageId",
        )
        .await;
    }

    // Read the deliveries back as Lambda's poller does, into its event.
    let mut records = Vec::new();
    for _ in 0..20 {
        let got = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive");
        for m in got.messages.unwrap_or_default() {
            records.push(json!({
                "messageId": m.message_id, "receiptHandle": m.receipt_handle,
                "body": m.body, "md5OfBody": m.md5_of_body, "attributes": {},
                "messageAttributes": {}, "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn, "awsRegion": "us-east-1"
            }));
        }
        if records.len() >= published.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(records.len(), published.len(), "every publish delivered");
    let inner = |r: &Value| -> String {
        let body: Value =
            serde_json::from_str(r["body"].as_str().expect("body")).expect("envelope");
        assert_eq!(body["Type"], "Notification", "moto's envelope: {body}");
        body["Message"].as_str().expect("Message").to_owned()
    };
    let event = serde_json::from_value(json!({ "Records": records })).expect("SQS event");

    let client = support::client();
    let marks = support::mark_table(&client).await;
    let orders = support::effect_table(&client, "order_id").await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", support::unique("sns").as_str()),
        ("DEDUP_MARK_TABLE", marks.as_str()),
        // One at a time: the two copies of the order meet as a duplicate, not as a race.
        ("DEDUP_MAX_CONCURRENCY", "1"),
    ]);
    let table = orders.clone();
    let service = Dedup::read(&env, "sns-orders")
        .expect("settings")
        .dynamodb_client(client.clone())
        .envelope(Envelope::Sns)
        .identity("/order_id")
        .sqs(move |e: Event<Order>| {
            let item = Item::from(("order_id", e.payload.order_id.as_str()));
            Effect::put(&table, item.with("total", e.payload.total))
        })
        .expect("service");
    let (answer, outcomes) = with_outcomes(service.call_with(event)).await;
    let answer = answer.expect("answered");
    let mut by_message: Vec<(String, &'static str)> = records
        .iter()
        .zip(&outcomes)
        .map(|(r, (id, o))| {
            assert_eq!(r["messageId"].as_str(), Some(id.as_str()));
            let label = match o {
                Outcome::Rejected { code, .. } => code.code(),
                other => other.label(),
            };
            (inner(r), label)
        })
        .collect();
    by_message.sort();
    let mut expected = vec![
        (order.clone(), "applied"),
        (order.clone(), "duplicate"),
        ("Hello, alice@example.com".to_owned(), "body_not_json"),
        (
            r#"{"id": "o-2", "total": 1}"#.to_owned(),
            "identity_missing",
        ),
    ];
    expected.sort();
    assert_eq!(by_message, expected);
    assert_eq!(
        answer.batch_item_failures.len(),
        2,
        "the two rejections, for the DLQ"
    );
    let item = support::get_item(&client, &orders, "order_id", "o-1").await;
    assert!(item.is_some(), "the order written once");
    assert_eq!(support::mark_keys(&client, &marks).await.len(), 1);
}
