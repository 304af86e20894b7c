//! The webhook receiver (`webhook-receiver`): the inbox item is the mark (create-once), and its
//! warm cache (issue 45).

use std::collections::BTreeMap;

use lambda_dedup_runtime::webhook::WebhookConfig;
use lambda_dedup_runtime::{Dedup, Env, WebhookService, store::Items};
use lambda_http::tower::ServiceExt;
use local_dynamodb::meter::Meter;

use super::{metered, ops, sent};

/// A delivery and its retry in the same container.
#[tokio::test]
async fn round_trips_of_the_webhook_receiver() {
    let (meter, client) = metered();
    let inbox = dedup_tests::effect_table(&client, "event_key").await;
    let service = webhook_receiver(&client, &inbox, "acme");
    let id = dedup_tests::unique("evt");
    let body = serde_json::json!({"id": id, "amount": 10}).to_string();
    let mut rounds = Vec::new();
    for _ in 0..2 {
        meter.reset();
        let request =
            lambda_dedup_runtime::testing::events::signed_webhook(WEBHOOK_SECRET, &id, &body);
        let answer = service.clone().oneshot(request).await.expect("answer");
        assert_eq!(answer.status().as_u16(), 200);
        rounds.push(sent(&meter));
    }
    // The inbox item written once, as its own mark; the retry is answered by the warm cache
    // (`round_trips_of_the_webhook_receivers_warm_cache`).
    assert_eq!(rounds, [ops(&[("PutItem", 1)]), ops(&[])]);
}

/// A receiver as `webhook-receiver` wires it, for `sender` (`WEBHOOK_TENANT`), on `inbox`.
fn webhook_receiver(
    client: &aws_sdk_dynamodb::Client,
    inbox: &str,
    sender: &str,
) -> WebhookService {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("WEBHOOK_SECRETS", WEBHOOK_SECRET),
        ("WEBHOOK_TENANT", sender),
        ("INBOX_TABLE", inbox),
    ]);
    let dedup = Dedup::read(&env, "webhook-receiver").expect("settings");
    let config = WebhookConfig::read(&env).expect("config");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    WebhookService::new(dedup.on(store), config).expect("service")
}

const WEBHOOK_SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";

/// `body` delivered as `id` to `service`: its status, whether it is a replay, its body, and the
/// requests it sent.
async fn deliver(
    meter: &Meter,
    service: &WebhookService,
    id: &str,
    body: &str,
) -> (u16, bool, String, BTreeMap<String, u64>) {
    meter.reset();
    let request = lambda_dedup_runtime::testing::events::signed_webhook(WEBHOOK_SECRET, id, body);
    let response = service.clone().oneshot(request).await.expect("answer");
    let replayed = response.headers().contains_key("idempotent-replayed");
    let text = match response.body() {
        lambda_http::Body::Text(t) => t.clone(),
        other => format!("{other:?}"),
    };
    (response.status().as_u16(), replayed, text, sent(meter))
}

/// A sender's retry to the container that recorded the delivery is answered from its warm cache
/// (no request), with the first answer as a replay; another body under the same id there is the
/// 409 it always was, also without a request. Another container asks the inbox (its failed
/// `PutItem`), and another sender's delivery of the same id is its own event, never answered
/// from the first sender's cached item.
#[tokio::test]
async fn round_trips_of_the_webhook_receivers_warm_cache() {
    let (meter, client) = metered();
    let inbox = dedup_tests::effect_table(&client, "event_key").await;
    let first = webhook_receiver(&client, &inbox, "acme");
    let id = dedup_tests::unique("evt");
    let body = serde_json::json!({"id": id, "amount": 10}).to_string();
    let other_body = serde_json::json!({"id": id, "amount": 99}).to_string();

    let recorded = deliver(&meter, &first, &id, &body).await;
    assert_eq!((recorded.0, recorded.1), (200, false), "{recorded:?}");
    assert_eq!(recorded.3, ops(&[("PutItem", 1)]));

    let retry = deliver(&meter, &first, &id, &body).await;
    assert_eq!((retry.0, retry.1), (200, true), "{retry:?}");
    assert_eq!(retry.2, recorded.2, "the first answer");
    assert_eq!(retry.3, ops(&[]), "the retry in the same container");

    let conflict = deliver(&meter, &first, &id, &other_body).await;
    assert_eq!(conflict.0, 409, "{conflict:?}");
    assert_eq!(conflict.3, ops(&[]), "another body in the same container");

    let elsewhere = deliver(
        &meter,
        &webhook_receiver(&client, &inbox, "acme"),
        &id,
        &body,
    )
    .await;
    assert_eq!((elsewhere.0, elsewhere.1), (200, true), "{elsewhere:?}");
    assert_eq!(
        elsewhere.2, recorded.2,
        "the first answer, stored in the item"
    );
    assert_eq!(
        elsewhere.3,
        ops(&[("PutItem", 1)]),
        "a retry in another container"
    );

    let other_sender = webhook_receiver(&client, &inbox, "globex");
    let theirs = deliver(&meter, &other_sender, &id, &body).await;
    assert_eq!((theirs.0, theirs.1), (200, false), "{theirs:?}");
    assert_eq!(theirs.3, ops(&[("PutItem", 1)]), "another sender's event");
}
