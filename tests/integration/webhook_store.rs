//! The webhook receiver on DynamoDB through the builder, as `main` wires it
//! (`WebhookService::new(Dedup::read(..).on(Items::dynamodb(..)), ..)`), with no `DEDUP_MARK_TABLE`: its marks are
//! its inbox items (create-once mode, S5), so it reads no mark table; a service that keeps marks
//! in the mark table is refused without one, naming the variable.

use lambda_dedup_runtime::webhook::WebhookConfig;
use lambda_dedup_runtime::{BuildError, Dedup, Env, SettingsError, WebhookService, store::Items};
use lambda_http::tower::ServiceExt;

const SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";

fn signed(id: &str, body: &str) -> lambda_http::Request {
    lambda_dedup_runtime::testing::events::signed_webhook(SECRET, id, body)
}

#[tokio::test]
async fn s5_the_webhook_receiver_needs_no_mark_table_and_records_each_delivery_once() {
    let client = dedup_tests::client();
    let inbox = dedup_tests::effect_table(&client, "event_key").await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("WEBHOOK_SECRETS", SECRET),
        ("WEBHOOK_TENANT", "acme"),
        ("INBOX_TABLE", inbox.as_str()),
    ]);
    let dedup = Dedup::read(&env, "webhook-receiver").expect("settings without a mark table");
    let config = WebhookConfig::read(&env).expect("config");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    let service = WebhookService::new(dedup.on(store), config)
        .expect("the webhook service needs no mark table");
    let body = r#"{"id":"evt-1","amount":10}"#;
    for _ in 0..2 {
        let answer = service.clone().oneshot(signed("evt-1", body)).await;
        assert_eq!(answer.expect("answer").status().as_u16(), 200);
    }
    let items = lambda_dedup_testkit::dynamodb::items::scan(&client, &inbox)
        .await
        .expect("scan");
    assert_eq!(
        items.len(),
        1,
        "one inbox item for the delivery and its retry"
    );

    // The same settings cannot build a service that keeps marks in the mark table.
    let dedup = Dedup::read(&env, "orders").expect("settings");
    let store = Items::dynamodb(client, dedup.settings());
    let refused = dedup
        .on(store)
        .sqs(|_: lambda_dedup_runtime::Event<serde_json::Value>| Vec::<lambda_dedup::Effect>::new())
        .expect_err("no mark table");
    assert!(
        matches!(&refused, BuildError::Settings(SettingsError::Missing(v)) if v == "DEDUP_MARK_TABLE"),
        "{refused}"
    );
}
