//! End to end through the other doors, as `cargo xtask test` runs them: signed webhooks over real
//! HTTP into `webhook-receiver` (through `cargo lambda watch`'s Function URL front), its inbox
//! forwarded by `inbox-forwarder` to the ledger's queue; and a Kinesis stream (the emulator)
//! read by `ledger-stream` through the stand-in Kinesis trigger.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use dedup_tests::{client, get_item, unique};
use lambda_dedup::signature::sign;
use lambda_dedup::{KeySpec, Message, Scope};
use local_dynamodb::kinesis::Kinesis;
use serde_json::json;

use crate::e2e::{ce, env, eventually, invoke_schedule, sqs, stack_is_up};

/// The balance and the number of events applied to `account` of tenant `tenant`.
pub(crate) async fn ledger(tenant: &str, account: &str) -> Option<(i64, i64)> {
    let key = lambda_dedup::tenant_scoped(tenant, account);
    let item = get_item(&client(), &env("DEDUP_TABLE_BALANCES"), "account", &key).await?;
    let n = |name: &str| item.get(name)?.as_n().ok()?.parse().ok();
    Some((n("balance")?, n("events")?))
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("epoch")
        .as_secs()
}

/// Waits until `account` of tenant `t1` has `balance`; returns it with its event count.
async fn balance_reaches(what: &str, account: &str, balance: i64) -> (i64, i64) {
    eventually(what, Duration::from_secs(60), || async move {
        ledger("t1", account).await.filter(|(b, _)| *b == balance)
    })
    .await
}

/// Writes an inbox item as `webhook-receiver` does (`body` is normally a string), received now.
async fn put_inbox(key: &str, body: AttributeValue) {
    client()
        .put_item()
        .table_name(env("DEDUP_TABLE_INBOX"))
        .item("event_key", AttributeValue::S(key.to_owned()))
        .item("body", body)
        .item(
            "received_at",
            AttributeValue::N((now_secs() * 1000).to_string()),
        )
        .send()
        .await
        .expect("put an inbox item");
}

/// Waits until the inbox item `key` is marked `FORWARDED`.
async fn forwarded(what: &str, key: &str) {
    eventually(what, Duration::from_secs(30), || async move {
        inbox_status(key).await.0.filter(|s| s == "FORWARDED")
    })
    .await;
}

/// One delivery as a sender makes it: the event id header, a timestamp, a signature.
pub(crate) struct Delivery {
    id: String,
    body: String,
    timestamp: u64,
    signature: String,
}

impl Delivery {
    pub(crate) fn signed(id: &str, body: &str, timestamp: u64, secret: &[u8]) -> Self {
        Self {
            id: id.into(),
            body: body.into(),
            timestamp,
            signature: sign(secret, timestamp, body.as_bytes()),
        }
    }

    pub(crate) async fn post(&self) -> (u16, Option<String>, String) {
        let resp = self.response().await;
        let status = resp.status().as_u16();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (status, replayed, resp.text().await.unwrap_or_default())
    }

    /// The receiver's whole answer.
    pub(crate) async fn response(&self) -> reqwest::Response {
        reqwest::Client::new()
            .post(env("DEDUP_WEBHOOK_URL"))
            .header("content-type", "application/json")
            .header("webhook-id", &self.id)
            .header("webhook-timestamp", self.timestamp.to_string())
            .header("webhook-signature", &self.signature)
            .body(self.body.clone())
            .send()
            .await
            .expect("the webhook receiver answers over HTTP")
    }
}

/// The inbox items whose body names `marker`.
async fn inbox_items(marker: &str) -> Vec<BTreeMap<String, AttributeValue>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = client()
            .scan()
            .table_name(env("DEDUP_TABLE_INBOX"))
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan the inbox");
        items.extend(
            out.items()
                .iter()
                .filter(|i| {
                    i.get("body")
                        .and_then(|b| b.as_s().ok())
                        .is_some_and(|b| b.contains(marker))
                })
                .map(|i| i.clone().into_iter().collect()),
        );
        start = out.last_evaluated_key;
        if start.is_none() {
            return items;
        }
    }
}

/// S1, S5, S8, S11 and the webhook door's answers, over real HTTP: a valid delivery is recorded
/// (200); the sender's retry, byte for byte or signed again later, gets the first answer with
/// `idempotent-replayed: true`; a signature under the secret being rotated in is accepted; a
/// stale, forged or altered one gets 401; an oversized body 413; the same id with another body
/// 409. The inbox holds each event once, `inbox-forwarder` hands it to the ledger's queue, and
/// the balance moves once per event.
#[tokio::test]
async fn e2e_webhook_deliveries_get_their_documented_answers_and_apply_once() {
    if !stack_is_up("e2e_webhook_deliveries_get_their_documented_answers_and_apply_once") {
        return;
    }
    let secret = env("DEDUP_WEBHOOK_SECRET");
    let secret = secret.as_bytes();
    let account = unique("wh-acct");
    let (id1, id2) = (unique("wh-e1"), unique("wh-e2"));
    let body1 = ce(
        "credit",
        "/acme-pay",
        &id1,
        "t1",
        json!({"account": account, "amount": 10}),
    );
    let body2 = ce(
        "credit",
        "/acme-pay",
        &id2,
        "t1",
        json!({"account": account, "amount": 5}),
    );
    let t = now_secs();

    let first = Delivery::signed(&id1, &body1, t, secret);
    let (status, replayed, answer) = first.post().await;
    assert_eq!((status, replayed.as_deref()), (200, None), "{answer}");
    assert!(answer.contains("inbox_key"), "{answer}");

    // The sender's retry after a lost answer: the same bytes.
    let (status, replayed, again) = first.post().await;
    assert_eq!(
        (status, replayed.as_deref(), again.as_str()),
        (200, Some("true"), answer.as_str())
    );
    // Its later retry, signed again with a new timestamp.
    let (status, replayed, resigned) = Delivery::signed(&id1, &body1, t + 30, secret).post().await;
    assert_eq!(
        (status, replayed.as_deref(), resigned.as_str()),
        (200, Some("true"), answer.as_str())
    );

    // Refused before anything is stored.
    let (stale, _, why) = Delivery::signed(&id2, &body2, t - 3600, secret)
        .post()
        .await;
    assert_eq!(stale, 401, "a signature from an hour ago: {why}");
    let (forged, _, _) = Delivery::signed(&id2, &body2, t, b"not-the-senders-secret")
        .post()
        .await;
    assert_eq!(forged, 401);
    let mut altered = Delivery::signed(&id2, &body2, t, secret);
    altered.body = body2.replace("\"amount\":5", "\"amount\":500");
    assert_eq!(altered.post().await.0, 401, "a body changed after signing");
    let pad = "x".repeat(70_000);
    let big = ce(
        "credit",
        "/acme-pay",
        &id2,
        "t1",
        json!({"account": account, "amount": 5, "pad": pad}),
    );
    assert_eq!(Delivery::signed(&id2, &big, t, secret).post().await.0, 413);

    // The second event, then its id again with another amount: a conflict, not a duplicate.
    let (status, replayed, _) = Delivery::signed(&id2, &body2, t, secret).post().await;
    assert_eq!((status, replayed), (200, None));
    let other = ce(
        "credit",
        "/acme-pay",
        &id2,
        "t1",
        json!({"account": account, "amount": 50}),
    );
    let (status, _, why) = Delivery::signed(&id2, &other, t, secret).post().await;
    assert_eq!(status, 409, "{why}");

    let items = inbox_items(&account).await;
    assert_eq!(items.len(), 2, "each event once in the inbox");
    // Forwarded to the ledger's queue and applied once each.
    let (balance, events) = balance_reaches("the forwarded events' balance", &account, 15).await;
    assert_eq!((balance, events), (15, 2));
    let forwarded = eventually(
        "both inbox items marked forwarded",
        Duration::from_secs(30),
        || {
            let account = account.clone();
            async move {
                let items = inbox_items(&account).await;
                items
                    .iter()
                    .all(|i| {
                        i.get("forward_status")
                            .and_then(|s| s.as_s().ok())
                            .map(String::as_str)
                            == Some("FORWARDED")
                    })
                    .then_some(items.len())
            }
        },
    )
    .await;
    assert_eq!(forwarded, 2);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        ledger("t1", &account).await,
        Some((15, 2)),
        "and it stays there"
    );
}

/// S1, S8, S12, S15 on a Kinesis stream: a producer's retry (the same event in a second record),
/// and a poison record mid-shard that the function reports until the trigger's retries run out.
/// Each account's records are applied in shard order, each event once; the poison record goes to
/// the on-failure destination (by sequence number, without its data) and the shard moves on.
#[tokio::test]
async fn e2e_a_kinesis_shard_with_duplicates_and_a_failure_applies_each_event_once_in_order() {
    if !stack_is_up(
        "e2e_a_kinesis_shard_with_duplicates_and_a_failure_applies_each_event_once_in_order",
    ) {
        return;
    }
    let kinesis = Kinesis::new(&env("DEDUP_SQS_ENDPOINT"));
    let stream = env("DEDUP_KINESIS_STREAM");
    let (a, b) = (unique("k-a"), unique("k-b"));
    let ev = |account: &str, id: &str, amount: serde_json::Value| {
        ce(
            "credit",
            "/kinesis",
            id,
            "t1",
            json!({"account": account, "amount": amount}),
        )
    };
    let ids: Vec<String> = (0..6).map(|i| unique(&format!("k-e{i}"))).collect();
    let workload = [
        (&a, ev(&a, &ids[0], json!(5))),
        (&b, ev(&b, &ids[1], json!(1))),
        (&a, ev(&a, &ids[2], json!(7))),
        (&b, ev(&b, &unique("k-poison"), json!("seven"))), // never valid: reported until handed on
        (&a, ev(&a, &ids[0], json!(5))), // the producer's retry of the first event
        (&b, ev(&b, &ids[3], json!(2))),
        (&a, ev(&a, &ids[4], json!(11))),
        (&b, ev(&b, &ids[5], json!(4))),
    ];
    // The keys ledger-stream derives (namespace `demo`, consumer `ledger-stream`), per account in
    // shard order: its log names each applied event by key. (The emulator numbers records per
    // shard, so a sequence number alone does not name a record across shards.)
    let spec = KeySpec::cloudevents(
        Scope::new("demo", "ledger-stream").expect("scope"),
        "tenantid",
    );
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut poison = (String::new(), String::new());
    for (account, body) in &workload {
        let (shard, seq) = kinesis
            .put(&stream, account, body.as_bytes())
            .await
            .expect("put a record");
        if body.contains("\"seven\"") {
            poison = (shard, seq);
            continue;
        }
        let message = Message {
            body: body.clone().into_bytes(),
            ..Message::default()
        };
        let key = spec.derive(&message).expect("a key").key.to_string();
        keys.entry((*account).clone()).or_default().push(key);
    }
    let (balance_a, events_a) = balance_reaches("account a", &a, 23).await;
    assert_eq!(
        (balance_a, events_a),
        (23, 3),
        "5 + 7 + 11, the retry skipped"
    );
    let (balance_b, events_b) = balance_reaches("account b, past the poison record", &b, 7).await;
    assert_eq!((balance_b, events_b), (7, 3), "1 + 2 + 4");

    // The poison record was handed to the on-failure destination, by shard and sequence number.
    let handed_on = eventually("the on-failure record", Duration::from_secs(30), || {
        let poison = poison.clone();
        async move {
            let out = sqs()
                .receive_message()
                .queue_url(env("DEDUP_QUEUE_LEDGER_STREAM_FAILURES"))
                .max_number_of_messages(10)
                .send()
                .await
                .ok()?;
            out.messages()
                .iter()
                .filter_map(|m| m.body())
                .find(|b| {
                    let v: serde_json::Value = serde_json::from_str(b).unwrap_or_default();
                    let info = &v["KinesisBatchInfo"];
                    info["shardId"] == poison.0.as_str()
                        && info["startSequenceNumber"] == poison.1.as_str()
                        && info["endSequenceNumber"] == poison.1.as_str()
                })
                .map(str::to_owned)
        }
    })
    .await;
    assert!(
        !handed_on.contains("seven"),
        "no data in the on-failure record"
    );

    // Order: each account's events were applied in their shard order, each once.
    let log = std::fs::read_to_string(env("DEDUP_FUNCTIONS_LOG")).expect("the functions' log");
    let applied: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(": applied message_id="))
        .filter_map(|l| l.split(" key=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    for (account, records) in &keys {
        let order: Vec<usize> = applied
            .iter()
            .filter_map(|key| records.iter().position(|r| r == key))
            .collect();
        // a's producer retry has the first record's key: applied once, at the first position.
        let expected: Vec<usize> = (0..records.len())
            .filter(|&i| !records[..i].contains(&records[i]))
            .collect();
        assert_eq!(
            order, expected,
            "{account}: applied in shard order, each event once"
        );
    }
}

/// The `forward_status` and `failure_reason` of the inbox item `key`.
async fn inbox_status(key: &str) -> (Option<String>, Option<String>) {
    let item = get_item(&client(), &env("DEDUP_TABLE_INBOX"), "event_key", key)
        .await
        .unwrap_or_default();
    let s = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    (s("forward_status"), s("failure_reason"))
}

/// S15 for the forwarder: an inbox item that can never be sent (its body is not a string) is
/// parked on the item with a reason code, and a good item behind it is still forwarded.
#[tokio::test]
async fn e2e_the_forwarder_parks_an_unsendable_item_and_moves_on() {
    if !stack_is_up("e2e_the_forwarder_parks_an_unsendable_item_and_moves_on") {
        return;
    }
    let (bad, good) = (unique("inbox-bad"), unique("inbox-good"));
    let account = unique("inbox-acct");
    let body = ce(
        "credit",
        "/inbox",
        &good,
        "t1",
        json!({"account": account, "amount": 3}),
    );
    put_inbox(&bad, AttributeValue::N("42".into())).await;
    put_inbox(&good, AttributeValue::S(body)).await;
    let (status, reason) = eventually("the bad item parked", Duration::from_secs(30), || {
        let bad = bad.clone();
        async move { Some(inbox_status(&bad).await).filter(|(s, _)| s.is_some()) }
    })
    .await;
    assert_eq!(
        (status.as_deref(), reason.as_deref()),
        (Some("PARKED"), Some("malformed_inbox_item"))
    );
    balance_reaches("the good item forwarded and applied", &account, 3).await;
}

/// The forwarder's sweep: an inbox item left unforwarded for longer than the bound (as when the
/// trigger gives its record up) is re-driven onto the stream and forwarded; the ledger applies
/// the event once all the same.
#[tokio::test]
async fn e2e_the_forwarder_sweep_redrives_an_item_left_unforwarded() {
    if !stack_is_up("e2e_the_forwarder_sweep_redrives_an_item_left_unforwarded") {
        return;
    }
    let (key, account) = (unique("inbox-sweep"), unique("sweep-acct"));
    let body = ce(
        "credit",
        "/inbox",
        &key,
        "t1",
        json!({"account": account, "amount": 4}),
    );
    put_inbox(&key, AttributeValue::S(body)).await;
    forwarded("the item forwarded", &key).await;
    // As if its record had been given up: unsettled, and received two hours ago.
    let two_hours_ago = (now_secs() - 7200) * 1000;
    client()
        .update_item()
        .table_name(env("DEDUP_TABLE_INBOX"))
        .key("event_key", AttributeValue::S(key.clone()))
        .update_expression("REMOVE forward_status SET received_at = :r")
        .expression_attribute_values(":r", AttributeValue::N(two_hours_ago.to_string()))
        .send()
        .await
        .expect("unsettle the item");
    let answer = invoke_schedule("inbox-forwarder").await;
    assert!(answer["redriven"].as_u64() >= Some(1), "{answer}");
    assert!(
        answer["oldest_pending_seconds"].as_u64() >= Some(7000),
        "{answer}"
    );
    forwarded("the item forwarded again", &key).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ledger("t1", &account).await, Some((4, 1)), "applied once");
}
