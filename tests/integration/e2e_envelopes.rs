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
//!
//! `e2e_sns_fanout_…` goes all the way through the local stack instead: the topic, its
//! subscription and `ledger-fanout`'s queue and DLQ are the template's (`infra/template.yaml`,
//! created by xtask in moto), the function is the built binary under the local runtime, fed
//! by the stand-in SQS trigger.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use lambda_dedup::{Effect, Item};
use lambda_dedup_engine::Outcome;
use lambda_dedup_runtime::testing::with_outcomes;
use lambda_dedup_runtime::{Dedup, Env, Envelope, Event, store::Items};
use local_dynamodb::sns::Sns;
use serde_json::{Value, json};

use dedup_tests as support;

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
    let sns = Sns::new(&endpoint);
    let topic = sns.create_topic(&name).await.expect("topic");
    // No RawMessageDelivery: the queue gets SNS's envelope, the order in its `Message` string.
    sns.subscribe_queue(&topic, &queue_arn, false)
        .await
        .expect("subscription");
    let order = json!({"order_id": "o-1", "total": 5}).to_string();
    let published = [
        order.as_str(),
        order.as_str(),
        "Hello, alice@example.com",
        r#"{"id": "o-2", "total": 1}"#,
    ];
    for message in published {
        sns.publish(&topic, message).await.expect("publish");
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
    let dedup = Dedup::read(&env, "sns-orders").expect("settings");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    let service = dedup
        .on(store)
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

/// The rejection code `ledger-fanout` logged for the SQS message `id` (its `code=` field, quoted
/// as tracing writes a string).
fn logged_code(id: &str) -> Option<String> {
    let log = std::fs::read_to_string(super::e2e::env("DEDUP_FUNCTIONS_LOG")).ok()?;
    let needle = format!("message_id={id} ");
    log.lines()
        .filter(|l| l.contains(&needle) && l.contains("rejected"))
        .find_map(|l| {
            l.split(" code=")
                .nth(1)?
                .split_whitespace()
                .next()
                .map(|code| code.trim_matches('"').to_owned())
        })
}

/// Through the local stack (S1, S2, S8, S12, S14): the ledger's CloudEvents published to the
/// template's `LedgerFanoutTopic` reach `ledger-fanout` in SNS's envelope (moto's, no raw
/// delivery). The credit moves the balance once; the producer's republish of it (a new SNS
/// `MessageId`) is a duplicate; a `Message` that is not JSON, one whose CloudEvent has no `id`,
/// and a body sent to the queue with no envelope at all reach the DLQ, each logged with its
/// reason (`body_not_json`, `identity_missing`, `envelope_malformed`); an event two days old
/// goes to the reconciliation queue as `late_event` (S10); and the balance is untouched by them.
#[tokio::test]
async fn e2e_sns_fanout_through_the_stack_applies_once_and_dead_letters_with_reasons() {
    let Some(super::e2e::Run { id: run, account }) = super::e2e::e2e_run("sns-fanout") else {
        return;
    };
    let sns = Sns::new(&super::e2e::env("DEDUP_SQS_ENDPOINT"));
    let topic = super::e2e::env("DEDUP_TOPIC_LEDGER_FANOUT");
    let credit = super::e2e::ledger_credit("/e2e", &format!("{run}-1"), &account, 7);
    let first = sns.publish(&topic, &credit).await.expect("publish");
    let again = sns.publish(&topic, &credit).await.expect("republish");
    assert_ne!(first, again, "a republish is a new SNS message");
    let not_json = format!("not json: {run}");
    sns.publish(&topic, &not_json).await.expect("publish");
    let no_id = json!({"specversion": "1.0", "type": "credit", "source": "/e2e",
                       "tenantid": "t1", "data": {"account": account, "amount": 100}});
    sns.publish(&topic, &no_id.to_string())
        .await
        .expect("publish");
    // Two days old, past the local retention (S10): never applied, sent to reconciliation.
    let late_id = format!("{run}-late");
    let late = super::e2e::late_event(
        "credit",
        &late_id,
        json!({"account": account, "amount": 50}),
    );
    sns.publish(&topic, &late).await.expect("publish");
    // Raw, as if the subscription had raw delivery on: no envelope to open.
    let raw = super::e2e::ledger_credit("/e2e", &format!("{run}-raw"), &account, 1000);
    super::e2e::send("DEDUP_QUEUE_LEDGER_FANOUT", std::slice::from_ref(&raw)).await;

    let once = super::e2e::eventually("the credit applied", Duration::from_secs(60), || async {
        super::e2e_doors::ledger("t1", &account)
            .await
            .filter(|(b, _)| *b == 7)
    })
    .await;
    assert_eq!(
        once,
        (7, 1),
        "one event applied: the republish was a duplicate"
    );

    let mut reasons = Vec::new();
    for (id, body) in super::e2e::dead_lettered("DEDUP_DLQ_LEDGER_FANOUT", &run, 3).await {
        let envelope: Value = serde_json::from_str(&body).expect("a JSON body");
        let message = match envelope["Type"].as_str() {
            Some("Notification") => envelope["Message"].as_str().expect("Message").to_owned(),
            _ => body.clone(),
        };
        let code = logged_code(&id).unwrap_or_else(|| panic!("{id}: no rejection logged"));
        reasons.push((message, code));
    }
    reasons.sort();
    let mut expected = vec![
        (not_json, "body_not_json".to_owned()),
        (no_id.to_string(), "identity_missing".to_owned()),
        (raw, "envelope_malformed".to_owned()),
    ];
    expected.sort();
    assert_eq!(reasons, expected);
    let reason = super::e2e::eventually(
        "the late event in the reconciliation queue",
        Duration::from_secs(60),
        || async {
            let got = super::e2e::reconciled().await;
            got.into_iter()
                .find(|(body, _)| body.contains(&late_id))
                .map(|(_, r)| r)
        },
    )
    .await;
    assert_eq!(reason, "late_event");
    assert_eq!(
        super::e2e_doors::ledger("t1", &account).await,
        Some((7, 1)),
        "nothing dead-lettered or late moved the balance"
    );
}
