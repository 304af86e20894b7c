//! End to end through the other doors, as `cargo xtask test` runs them: signed webhooks over real
//! HTTP into `webhook-receiver` (through `cargo lambda watch`'s Function URL front), its inbox
//! forwarded by `inbox-forwarder` to the ledger's queue; and a Kinesis stream (the emulator)
//! read by `ledger-stream` through the stand-in Kinesis trigger.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use dedup_tests::{client, get_item, unique};
use lambda_dedup_testkit::dynamodb::items::{self as stored, Item};
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

/// The senders of the local stack's webhook receivers: each one's `WEBHOOK_TENANT`, which the
/// inbox forwarder sends as the verified sender. A sender credits only its own tenant's accounts
/// (issue 42): webhook-receiver's (the template's `WebhookSender` default), the Stripe and GitHub
/// configurations' (`xtask/src/stack.rs`).
pub(crate) const SENDER: &str = "acme-pay";
const STRIPE_SENDER: &str = "stripe-acct-local";
const GITHUB_SENDER: &str = "github-org-local";

/// Waits until `account` of tenant `t1` has `balance`; returns it with its event count.
async fn balance_reaches(what: &str, account: &str, balance: i64) -> (i64, i64) {
    tenant_balance_reaches(what, "t1", account, balance).await
}

/// Waits until `account` of `tenant` has `balance`; returns it with its event count.
async fn tenant_balance_reaches(
    what: &str,
    tenant: &str,
    account: &str,
    balance: i64,
) -> (i64, i64) {
    eventually(what, Duration::from_secs(60), || async move {
        ledger(tenant, account).await.filter(|(b, _)| *b == balance)
    })
    .await
}

/// A ledger credit of `amount` to `account` of `tenant`: a CloudEvent from `source`, as a
/// webhook sender sends one for its own tenant.
pub(crate) fn sender_credit(
    source: &str,
    tenant: &str,
    id: &str,
    account: &str,
    amount: i64,
) -> String {
    ce(
        "credit",
        source,
        id,
        tenant,
        json!({"account": account, "amount": amount}),
    )
}

/// A fresh inbox key named `name`, in webhook-receiver's key format (`demo#webhook-receiver#…`):
/// the forwarder's role may update only the receiver's items.
fn inbox_key(name: &str) -> String {
    format!("demo#webhook-receiver#{}", unique(name))
}

/// Writes an inbox item as `webhook-receiver` does (`body` is normally a string), received now.
async fn put_inbox(key: &str, body: AttributeValue) {
    client()
        .put_item()
        .table_name(env("DEDUP_TABLE_INBOX"))
        .item("event_key", AttributeValue::S(key.to_owned()))
        .item("body", body)
        .item("tenant", AttributeValue::S(SENDER.to_owned()))
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

/// The signature headers the sender's own library makes for `body`
/// (`local_dynamodb::senders`), never the project's own signing code.
fn sender_headers(
    scheme: &str,
    id: &str,
    timestamp: u64,
    secrets: &[&str],
    body: &str,
) -> Vec<(String, String)> {
    let python = std::path::PathBuf::from(env("DEDUP_SENDER_PYTHON"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/senders/sign.py");
    let signer = (python.as_path(), std::path::Path::new(script));
    local_dynamodb::senders::sign(signer, scheme, id, timestamp, secrets, body)
        .expect("the sender's signing library signs")
}

/// The value of the header `name` of `resp`, if it has one (as text).
pub(crate) fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// One delivery as a sender makes it: where it goes, its body and its headers.
#[derive(Clone)]
pub(crate) struct Delivery {
    url: String,
    body: String,
    headers: Vec<(String, String)>,
}

impl Delivery {
    /// A Standard Webhooks delivery of event `id` to `webhook-receiver`, signed at `timestamp`
    /// with each of `secrets` by the `standardwebhooks` library.
    pub(crate) fn standard(id: &str, body: &str, timestamp: u64, secrets: &[&str]) -> Self {
        Self {
            url: env("DEDUP_WEBHOOK_URL"),
            body: body.into(),
            headers: sender_headers("standard-webhooks", id, timestamp, secrets, body),
        }
    }

    /// A Stripe delivery to the Stripe configuration of `webhook-receiver`, signed at
    /// `timestamp` with each of `secrets` by the `stripe` library.
    fn stripe(body: &str, timestamp: u64, secrets: &[&str]) -> Self {
        Self {
            url: env("DEDUP_STRIPE_WEBHOOK_URL"),
            body: body.into(),
            headers: sender_headers("stripe", "", timestamp, secrets, body),
        }
    }

    /// A delivery of event `id` to `webhook-receiver` as Svix sends it: signed at `timestamp`
    /// with each of `secrets` by Svix's own library (`svix`), under Svix's header names.
    fn svix(id: &str, body: &str, timestamp: u64, secrets: &[&str]) -> Self {
        Self {
            url: env("DEDUP_WEBHOOK_URL"),
            body: body.into(),
            headers: sender_headers("svix", id, timestamp, secrets, body),
        }
    }

    /// A GitHub delivery (`X-GitHub-Delivery: delivery`) to the GitHub configuration of
    /// `webhook-receiver`, signed with `secret` by `githubkit` (GitHub signs no timestamp).
    fn github(delivery: &str, body: &str, secret: &str) -> Self {
        Self {
            url: env("DEDUP_GITHUB_WEBHOOK_URL"),
            body: body.into(),
            headers: sender_headers("github", delivery, 0, &[secret], body),
        }
    }

    /// The same, with header `name` set to `value` (added if absent).
    fn with_header(&self, name: &str, value: &str) -> Self {
        let mut d = self.clone();
        d.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        d.headers.push((name.into(), value.into()));
        d
    }

    pub(crate) async fn post(&self) -> (u16, Option<String>, String) {
        let resp = self.response().await;
        let status = resp.status().as_u16();
        let replayed = header(&resp, "idempotent-replayed");
        (status, replayed, resp.text().await.unwrap_or_default())
    }

    /// The receiver's whole answer.
    pub(crate) async fn response(&self) -> reqwest::Response {
        let mut req = reqwest::Client::new()
            .post(&self.url)
            .header("content-type", "application/json");
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        req.body(self.body.clone())
            .send()
            .await
            .expect("the webhook receiver answers over HTTP")
    }
}

/// The inbox items whose body names `marker`.
async fn inbox_items(marker: &str) -> Vec<Item> {
    let items = stored::scan(&client(), &env("DEDUP_TABLE_INBOX")).await;
    let mut items = items.expect("scan the inbox");
    items.retain(|i| stored::string(i, "body").is_some_and(|b| b.contains(marker)));
    items
}

/// A forger's own Standard Webhooks secret (well formed, not the sender's).
const FORGERS_SECRET: &str = "whsec_Zm9yZ2Vycy1vd24ta2V5LTAxMjM0NTY3ODk=";

/// Waits until every inbox item naming `account` is forwarded; returns how many there are.
async fn all_forwarded(account: &str) -> usize {
    eventually(
        "the inbox items marked forwarded",
        Duration::from_secs(30),
        || async move {
            let items = inbox_items(account).await;
            items
                .iter()
                .all(|i| stored::string(i, "forward_status") == Some("FORWARDED"))
                .then_some(items.len())
        },
    )
    .await
}

/// A sender's retry: answered as the first delivery was, marked replayed.
async fn assert_replays(delivery: &Delivery, answer: &str, why: &str) {
    let (status, replayed, again) = delivery.post().await;
    assert_eq!(
        (status, replayed.as_deref(), again.as_str()),
        (200, Some("true"), answer),
        "{why}"
    );
}

/// Refused as unauthorized, naming `code` when given; nothing is stored.
async fn assert_unauthorized(delivery: &Delivery, code: Option<&str>, why: &str) {
    let (status, _, answer) = delivery.post().await;
    assert_eq!(status, 401, "{why}: {answer}");
    if let Some(code) = code {
        assert!(answer.contains(code), "{why}: {answer}");
    }
}

/// `delivery` with its body changed after signing.
fn altered(delivery: &Delivery, from: &str, to: &str) -> Delivery {
    let mut altered = delivery.clone();
    altered.body = delivery.body.replace(from, to);
    altered
}

/// Two ledger credits of `amounts` to one fresh account from `source`, with fresh event ids
/// `{prefix}_1`… and `{prefix}_2`…: the account, the ids, the bodies.
fn two_credits(
    source: &str,
    tenant: &str,
    prefix: &str,
    amounts: [i64; 2],
) -> (String, [String; 2], [String; 2]) {
    let account = unique(&format!("{prefix}-acct"));
    let ids = [
        unique(&format!("{prefix}_1")),
        unique(&format!("{prefix}_2")),
    ];
    let bodies = [0, 1].map(|i| sender_credit(source, tenant, &ids[i], &account, amounts[i]));
    (account, ids, bodies)
}

/// `delivery` is recorded: 200, not a replay of an earlier answer. Its answer.
async fn recorded(delivery: &Delivery) -> String {
    let (status, replayed, answer) = delivery.post().await;
    assert_eq!((status, replayed.as_deref()), (200, None), "{answer}");
    answer
}

/// A ledger credit (tenant `t1`) of `amount` (any JSON: a poison's is not a number) to
/// `account`, as the Kinesis producer sends it.
fn kinesis_credit(account: &str, id: &str, amount: serde_json::Value) -> String {
    ce(
        "credit",
        "/kinesis",
        id,
        "t1",
        json!({"account": account, "amount": amount}),
    )
}

/// Refused (401) before anything is stored: `sign`ed (at a time, with secrets) an hour before
/// `t`, with the `forger`'s secret alone, and a delivery signed with `secret` whose body's amount
/// (`amount`) changed after signing. That last delivery, unaltered, is returned: it is valid.
async fn assert_bad_signatures_refused(
    sign: impl Fn(u64, &[&str]) -> Delivery,
    t: u64,
    secret: &str,
    forger: &str,
    amount: &str,
) -> Delivery {
    let stale = sign(t - 3600, &[secret]);
    assert_unauthorized(
        &stale,
        Some("stale_signature"),
        "a signature from an hour ago",
    )
    .await;
    assert_unauthorized(&sign(t, &[forger]), None, "a forger's secret").await;
    let valid = sign(t, &[secret]);
    let from = format!("\"amount\":{amount}");
    let changed = altered(&valid, &from, &format!("{from}00"));
    assert_unauthorized(&changed, None, "a body changed after signing").await;
    valid
}

/// Two events of `account` (of `tenant`, the sender's own) recorded once each in the inbox,
/// forwarded to the ledger's queue and applied once each, to `balance`.
async fn assert_applied_once(what: &str, tenant: &str, account: &str, balance: i64) {
    assert_eq!(
        inbox_items(account).await.len(),
        2,
        "each event once in the inbox"
    );
    assert_eq!(
        tenant_balance_reaches(what, tenant, account, balance).await,
        (balance, 2)
    );
    assert_eq!(all_forwarded(account).await, 2);
}

/// S1, S5, S8, S11 and the webhook door's answers, over real HTTP, for deliveries signed by the
/// Standard Webhooks reference library (`standardwebhooks` from PyPI): a valid delivery is
/// recorded (200); the sender's retry, byte for byte or signed again later (with two secrets,
/// one unknown to us), gets the first answer with `idempotent-replayed: true`; a signature under
/// the secret being rotated in is accepted; the same signed delivery replayed under another
/// `webhook-id` (a replay attack: the id is signed) gets 401 and no inbox item; a stale, forged
/// or altered one gets 401; an oversized body 413; the same id with another body 409. The inbox
/// holds each event once, `inbox-forwarder` hands it to the ledger's queue, and the balance moves
/// once per event.
#[tokio::test]
async fn e2e_webhook_deliveries_get_their_documented_answers_and_apply_once() {
    if !stack_is_up() {
        return;
    }
    let secret: &str = &env("DEDUP_WEBHOOK_SECRET");
    let (account, [id1, id2], [body1, body2]) = two_credits("/acme-pay", SENDER, "wh", [10, 5]);
    let t = now_secs();

    let first = Delivery::standard(&id1, &body1, t, &[secret]);
    let answer = recorded(&first).await;
    assert!(answer.contains("inbox_key"), "{answer}");
    assert_replays(&first, &answer, "the sender's retry after a lost answer").await;
    assert_replays(
        &Delivery::standard(&id1, &body1, t + 30, &[FORGERS_SECRET, secret]),
        &answer,
        "a later retry, signed again with a new timestamp, under two secrets (one not ours)",
    )
    .await;
    // A captured delivery replayed inside the window under another webhook-id: the id is
    // signed, so it is refused, and no second event is recorded.
    let replayed_elsewhere = first.with_header("webhook-id", &unique("wh-replayed"));
    assert_unauthorized(
        &replayed_elsewhere,
        Some("bad_signature"),
        "a replay under another id",
    )
    .await;

    // Refused before anything is stored.
    let sign = |at: u64, secrets: &[&str]| Delivery::standard(&id2, &body2, at, secrets);
    let second = assert_bad_signatures_refused(sign, t, secret, FORGERS_SECRET, "5").await;
    let pad = "x".repeat(70_000);
    let big = ce(
        "credit",
        "/acme-pay",
        &id2,
        SENDER,
        json!({"account": account, "amount": 5, "pad": pad}),
    );
    assert_eq!(
        Delivery::standard(&id2, &big, t, &[secret]).post().await.0,
        413
    );

    // The second event, then its id again with another amount: a conflict, not a duplicate.
    recorded(&second).await;
    let other = sender_credit("/acme-pay", SENDER, &id2, &account, 50);
    let (status, _, why) = Delivery::standard(&id2, &other, t, &[secret]).post().await;
    assert_eq!(status, 409, "{why}");

    assert_applied_once("the forwarded events' balance", SENDER, &account, 15).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        ledger(SENDER, &account).await,
        Some((15, 2)),
        "and it stays there"
    );
}

/// Issue 42 through the local stack: webhook-receiver (sender `acme-pay`) records a validly
/// signed delivery naming tenant `t1`, inbox-forwarder hands it to the ledger's queue with its
/// verified sender, and ledger-projector refuses it: dead-lettered, no balance of `t1` moved. A
/// webhook reusing an internal producer's `source` + `id` (for the sender's own tenant) and the
/// internal producer's event with them, sent to the ledger's queue directly, are both applied:
/// the webhook's key lies in the sender's own key space, so the internal event is neither its
/// duplicate nor its conflict.
#[tokio::test]
async fn e2e_a_signed_webhook_naming_another_tenant_moves_no_balance_and_shadows_no_internal_event()
{
    if !stack_is_up() {
        return;
    }
    let secret: &str = &env("DEDUP_WEBHOOK_SECRET");
    let t = now_secs();
    let account = unique("prov-acct");

    let forged_id = unique("prov-other");
    let forged = sender_credit("/acme-pay", "t1", &forged_id, &account, 50);
    recorded(&Delivery::standard(&forged_id, &forged, t, &[secret])).await;

    let shared_id = unique("prov-shared");
    let hook = sender_credit("/core-banking", SENDER, &shared_id, &account, 5);
    recorded(&Delivery::standard(&shared_id, &hook, t, &[secret])).await;
    tenant_balance_reaches(
        "the webhook's credit to its own tenant",
        SENDER,
        &account,
        5,
    )
    .await;
    let internal = sender_credit("/core-banking", SENDER, &shared_id, &account, 10);
    crate::e2e::send("DEDUP_QUEUE_LEDGER_PROJECTOR", &[internal]).await;
    assert_eq!(
        tenant_balance_reaches("the internal event, not shadowed", SENDER, &account, 15).await,
        (15, 2)
    );

    // The forged one is dead-lettered with its verified sender; nothing of `t1` moved.
    let sqs = sqs();
    let dlq = env("DEDUP_DLQ_LEDGER_PROJECTOR");
    let sender = eventually(
        "the forged webhook in the DLQ",
        Duration::from_secs(120),
        async || {
            crate::e2e::waiting(&sqs, &dlq)
                .await?
                .iter()
                .find(|m| m.body().unwrap_or_default().contains(forged_id.as_str()))
                .map(|m| {
                    m.message_attributes()
                        .and_then(|a| a.get(lambda_dedup::VERIFIED_SENDER_ATTRIBUTE))
                        .and_then(|v| v.string_value().map(str::to_owned))
                })
        },
    )
    .await;
    assert_eq!(sender.as_deref(), Some(SENDER));
    assert_eq!(ledger("t1", &account).await, None, "no balance of t1 moved");
    assert_eq!(ledger(SENDER, &account).await, Some((15, 2)));
}

/// The Stripe scheme, through the same binary configured with `WEBHOOK_SCHEME=stripe` (its own
/// Function URL), for deliveries signed by Stripe's own library (`stripe` from PyPI): the event
/// id is the signed body's `id` (`evt_…`). A valid delivery is recorded; a retry, byte for byte
/// or re-signed with two `v1` signatures (one under a secret not held), gets the first answer;
/// the same delivery under another `webhook-id` header is still the same event (that header is
/// not the identity here); a delivery signed with the rotated-in secret is accepted; stale,
/// forged and altered ones get 401, and a Standard Webhooks signature is no Stripe signature.
#[tokio::test]
async fn e2e_stripe_deliveries_signed_by_stripes_library_are_accepted_once() {
    if !stack_is_up() {
        return;
    }
    let secret: &str = &env("DEDUP_STRIPE_WEBHOOK_SECRET");
    // A Stripe event's top-level `id` is the event id (`evt_…`); these are also the ledger's
    // CloudEvents.
    let (account, [_, evt2], [body1, body2]) = two_credits("/stripe", STRIPE_SENDER, "evt", [7, 2]);
    let t = now_secs();

    let first = Delivery::stripe(&body1, t, &[secret]);
    let answer = recorded(&first).await;
    assert_replays(&first, &answer, "a retry, byte for byte").await;
    let resigned = Delivery::stripe(&body1, t + 20, &["whsec_not_this_endpoints_secret", secret]);
    assert_replays(&resigned, &answer, "re-signed with two v1 signatures").await;
    let other_id = first.with_header("webhook-id", &unique("other-id"));
    assert_replays(&other_id, &answer, "an unsigned header is not the identity").await;

    let sign = |at: u64, secrets: &[&str]| Delivery::stripe(&body2, at, secrets);
    let forger = "whsec_a_forgers_own_secret_0000";
    let second = assert_bad_signatures_refused(sign, t, secret, forger, "2").await;
    let mut standard = Delivery::standard(&evt2, &body2, t, &[&env("DEDUP_WEBHOOK_SECRET")]);
    standard.url = env("DEDUP_STRIPE_WEBHOOK_URL");
    assert_unauthorized(&standard, None, "another scheme's signature").await;

    recorded(&second).await;
    assert_applied_once("the Stripe events' balance", STRIPE_SENDER, &account, 9).await;
}

/// Svix's header names, over real HTTP into the Standard Webhooks configuration, for
/// deliveries signed by Svix's own library (`svix` from PyPI): a delivery under `svix-*` is
/// recorded; the same event under `webhook-*` (signed by `standardwebhooks`) is the sender's
/// retry, answered as the first; `svix-id` is signed (a replay under another one is refused);
/// an id sent under both names with two values is refused as conflicting. The event is applied
/// once.
#[tokio::test]
async fn e2e_svix_deliveries_under_svixs_header_names_are_recorded_once() {
    if !stack_is_up() {
        return;
    }
    let secret: &str = &env("DEDUP_WEBHOOK_SECRET");
    let account = unique("svix-acct");
    let id = unique("msg_svix");
    let body = sender_credit("/svix", SENDER, &id, &account, 12);
    let t = now_secs();

    let first = Delivery::svix(&id, &body, t, &[secret]);
    assert!(first.headers.iter().any(|(n, _)| n == "svix-signature"));
    let answer = recorded(&first).await;
    assert_replays(&first, &answer, "Svix's retry, byte for byte").await;
    assert_replays(
        &Delivery::standard(&id, &body, t + 10, &[secret]),
        &answer,
        "the same event under the specification's names",
    )
    .await;
    let renamed = first.with_header("svix-id", &unique("msg_svix_replayed"));
    assert_unauthorized(
        &renamed,
        Some("bad_signature"),
        "a replay under another svix-id",
    )
    .await;
    let conflicting = first.with_header("webhook-id", &unique("msg_svix_other"));
    assert_unauthorized(
        &conflicting,
        Some("conflicting_headers"),
        "svix-id and webhook-id disagree",
    )
    .await;

    assert_eq!(
        inbox_items(&account).await.len(),
        1,
        "the event once in the inbox"
    );
    assert_eq!(
        tenant_balance_reaches("the Svix event", SENDER, &account, 12).await,
        (12, 1)
    );
}

/// GitHub's scheme through the same binary configured with `WEBHOOK_SCHEME=github` and
/// `WEBHOOK_ID_FROM=json:/id` (its own Function URL), for deliveries signed by `githubkit`
/// (PyPI). GitHub signs the body only: the captured delivery sent again under a new
/// `X-GitHub-Delivery` (unsigned) is the same event, answered as the first, because the identity
/// is in the signed body; a forged, altered or malformed signature gets 401, and each event is
/// applied once.
#[tokio::test]
async fn e2e_github_deliveries_signed_by_githubkit_are_recorded_once_whatever_their_delivery_id() {
    if !stack_is_up() {
        return;
    }
    let secret: &str = &env("DEDUP_GITHUB_WEBHOOK_SECRET");
    let (account, _, [body1, body2]) = two_credits("/github", GITHUB_SENDER, "gh", [4, 3]);

    let first = Delivery::github(&unique("delivery"), &body1, secret);
    let answer = recorded(&first).await;
    assert_replays(&first, &answer, "GitHub's redelivery, byte for byte").await;
    let new_delivery = first.with_header("X-GitHub-Delivery", &unique("replayed-delivery"));
    assert_replays(
        &new_delivery,
        &answer,
        "the captured body under a new delivery id",
    )
    .await;

    let second = Delivery::github(&unique("delivery"), &body2, secret);
    let forged = Delivery::github(&unique("delivery"), &body2, "a-forgers-own-github-secret");
    assert_unauthorized(&forged, Some("bad_signature"), "a forger's secret").await;
    let changed = altered(&second, "\"amount\":3", "\"amount\":300");
    assert_unauthorized(
        &changed,
        Some("bad_signature"),
        "a body changed after signing",
    )
    .await;
    let (_, signature) = (second.headers.iter())
        .find(|(n, _)| n == "X-Hub-Signature-256")
        .cloned()
        .expect("githubkit's signature");
    let short = second.with_header("X-Hub-Signature-256", &signature[..40]);
    assert_unauthorized(&short, Some("malformed_signature"), "a truncated digest").await;
    // A signature header sent twice is refused in the receiver's unit tests, in the joined form a
    // Function URL hands it (`a_github_signature_joined_with_a_comma_by_a_function_url_is_refused`):
    // `cargo lambda watch`'s front passes one copy only, so it cannot be shown here.

    recorded(&second).await;
    assert_applied_once("the GitHub events' balance", GITHUB_SENDER, &account, 7).await;
}

/// S1, S8, S12, S15 on a Kinesis stream: a producer's retry (the same event in a second record),
/// and a poison record mid-shard. Each account's records are applied in shard order, each event
/// once; the poison record is parked by the function, whole (its data as received), and the
/// shard moves on; nothing reaches the trigger's on-failure destination.
#[tokio::test]
async fn e2e_a_kinesis_shard_with_duplicates_and_a_failure_applies_each_event_once_in_order() {
    if !stack_is_up() {
        return;
    }
    let (a, b) = (unique("k-a"), unique("k-b"));
    let ev = kinesis_credit;
    let ids: Vec<String> = (0..6).map(|i| unique(&format!("k-e{i}"))).collect();
    let workload = [
        (&a, ev(&a, &ids[0], json!(5))),
        (&b, ev(&b, &ids[1], json!(1))),
        (&a, ev(&a, &ids[2], json!(7))),
        (&b, ev(&b, &unique("k-poison"), json!("seven"))), // never valid: parked
        (&a, ev(&a, &ids[0], json!(5))), // the producer's retry of the first event
        (&b, ev(&b, &ids[3], json!(2))),
        (&a, ev(&a, &ids[4], json!(11))),
        (&b, ev(&b, &ids[5], json!(4))),
    ];
    // The keys ledger-stream derives (namespace `demo`, consumer `ledger-stream`), per account in
    // shard order: its log names each applied event by key. (The emulator numbers records per
    // shard, so a sequence number alone does not name a record across shards.)
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut poison = (String::new(), String::new());
    for ((account, body), record) in workload.iter().zip(put_records(&workload).await) {
        if body.contains("\"seven\"") {
            poison = record;
            continue;
        }
        let key = crate::e2e::key_of("ledger-stream", body).to_string();
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

    // The poison record was parked by the function, whole.
    let poison_body = workload[3].1.clone();
    let parked = &parked_eventually(&poison).await[0];
    assert_eq!(
        record_data(parked),
        poison_body.as_bytes(),
        "parked with its data"
    );
    assert_eq!(parked["code"], "invalid_payload");
    let handed_on = handed_on(std::slice::from_ref(&poison)).await.len();
    assert_eq!(handed_on, 0, "not handed to the on-failure destination");

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
    if !stack_is_up() {
        return;
    }
    let (bad, good) = (inbox_key("inbox-bad"), inbox_key("inbox-good"));
    let account = unique("inbox-acct");
    let body = sender_credit("/inbox", SENDER, &good, &account, 3);
    put_inbox(&bad, AttributeValue::N("42".into())).await;
    put_inbox(&good, AttributeValue::S(body)).await;
    let (status, reason) = eventually("the bad item parked", Duration::from_secs(30), async || {
        Some(inbox_status(&bad).await).filter(|(s, _)| s.is_some())
    })
    .await;
    assert_eq!(
        (status.as_deref(), reason.as_deref()),
        (Some("PARKED"), Some("malformed_inbox_item"))
    );
    tenant_balance_reaches("the good item forwarded and applied", SENDER, &account, 3).await;
}

/// The forwarder's sweep: an inbox item left unforwarded for longer than the bound (as when the
/// trigger gives its record up) is re-driven onto the stream and forwarded; the ledger applies
/// the event once all the same.
#[tokio::test]
async fn e2e_the_forwarder_sweep_redrives_an_item_left_unforwarded() {
    if !stack_is_up() {
        return;
    }
    let (key, account) = (inbox_key("inbox-sweep"), unique("sweep-acct"));
    let body = sender_credit("/inbox", SENDER, &key, &account, 4);
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
    assert_eq!(ledger(SENDER, &account).await, Some((4, 1)), "applied once");
}

/// An outage of the local DynamoDB as one function sees it, played by the metering proxy in
/// front of it (`local_dynamodb::meter`: every request answered `500 InternalServerError`), until
/// dropped, even if the test fails on the way.
struct Outage(String);

impl Outage {
    async fn start(meter: String) -> Self {
        let answer: serde_json::Value = reqwest::Client::new()
            .post(format!("{meter}/__meter/outage"))
            .send()
            .await
            .expect("the proxy answers")
            .json()
            .await
            .expect("json");
        assert_eq!(answer["outage"], true, "{answer}");
        Self(meter)
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        // Blocking, so that it ends even while a failed test unwinds.
        use std::io::{Read, Write};
        let Some(addr) = self.0.strip_prefix("http://") else {
            return;
        };
        if let Ok(mut s) = std::net::TcpStream::connect(addr) {
            let _ = s.write_all(
                b"DELETE /__meter/outage HTTP/1.1\r\nhost: meter\r\ncontent-length: 0\r\n\r\n",
            );
            let _ = s.read(&mut [0u8; 512]);
        }
    }
}

/// `ledger-stream`'s EMF lines in the functions' log from byte `from` on that counted a retry.
fn retried_invocations(from: usize) -> usize {
    let log = std::fs::read(env("DEDUP_FUNCTIONS_LOG")).unwrap_or_default();
    String::from_utf8_lossy(log.get(from..).unwrap_or_default())
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["Function"] == "ledger-stream" && v["Retry"].as_u64() > Some(0))
        .count()
}

/// The messages now in the queue of `var`, left visible for other readers.
async fn peek(var: &str) -> Vec<aws_sdk_sqs::types::Message> {
    let mut all = Vec::new();
    for _ in 0..5 {
        let out = sqs()
            .receive_message()
            .queue_url(env(var))
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        for m in out.messages() {
            if !all
                .iter()
                .any(|a: &aws_sdk_sqs::types::Message| a.message_id() == m.message_id())
            {
                all.push(m.clone());
            }
        }
    }
    all
}

/// Puts each `(partition key, data)` of `workload` on the stack's Kinesis stream, in order; each
/// record's shard and sequence number.
async fn put_records(workload: &[(&String, String)]) -> Vec<(String, String)> {
    let kinesis = Kinesis::new(&env("DEDUP_SQS_ENDPOINT"));
    let stream = env("DEDUP_KINESIS_STREAM");
    let mut records = Vec::new();
    for (account, body) in workload {
        let record = kinesis
            .put(&stream, account, body.as_bytes())
            .await
            .expect("put a record");
        records.push(record);
    }
    records
}

/// What `ledger-stream` parked of the record `(shard, sequence number)`, once there is some.
async fn parked_eventually(record: &(String, String)) -> Vec<serde_json::Value> {
    eventually("the poison parked", Duration::from_secs(30), || async {
        let found: Vec<serde_json::Value> = peek("DEDUP_QUEUE_LEDGER_STREAM_PARKING")
            .await
            .iter()
            .filter_map(|m| serde_json::from_str(m.body()?).ok())
            .filter(|v: &serde_json::Value| {
                v["record"]["kinesis"]["sequenceNumber"] == record.1.as_str()
                    && v["shardId"] == record.0.as_str()
            })
            .collect();
        (!found.is_empty()).then_some(found)
    })
    .await
}

/// A parked Kinesis record's data, decoded from its base64.
fn record_data(parked: &serde_json::Value) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(
            parked["record"]["kinesis"]["data"]
                .as_str()
                .unwrap_or_default(),
        )
        .expect("base64 data")
}

/// The batches in the trigger's on-failure destination that start at one of `records`
/// (`(shard, sequence number)` each).
async fn handed_on(records: &[(String, String)]) -> Vec<String> {
    peek("DEDUP_QUEUE_LEDGER_STREAM_FAILURES")
        .await
        .iter()
        .filter_map(|m| m.body().map(str::to_owned))
        .filter(|body| {
            let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
            let info = &v["KinesisBatchInfo"];
            records.iter().any(|(shard, seq)| {
                info["shardId"] == shard.as_str() && info["startSequenceNumber"] == seq.as_str()
            })
        })
        .collect()
}

/// S12, S13, S15: a store outage that outlasts many attempts skips no good record. While
/// `ledger-stream`'s DynamoDB (and its SQS, so parking fails too) is out for more than three
/// invocations in a row, every record is reported; after recovery every good record is applied,
/// once, in order, and only the record that can never apply is parked — the whole record, its
/// data included — and nothing reaches the trigger's on-failure destination.
#[tokio::test]
async fn e2e_a_kinesis_store_outage_longer_than_three_attempts_skips_no_good_record() {
    if !stack_is_up() {
        return;
    }
    let (a, b) = (unique("out-a"), unique("out-b"));
    let ev = kinesis_credit;
    let from = std::fs::metadata(env("DEDUP_FUNCTIONS_LOG")).map_or(0, |m| m.len() as usize);
    let store_out = Outage::start(env("DEDUP_METER_LEDGER_STREAM_DYNAMODB")).await;
    let queues_out = Outage::start(env("DEDUP_METER_LEDGER_STREAM_SQS")).await;
    let poison_body = ev(&b, &unique("out-poison"), json!("seven"));
    // The poison leads b's records: they wait behind it until it is parked (the parking queue
    // is out with the store; ledger-stream only judges the record once its store answers).
    let workload = [
        (&a, ev(&a, &unique("out-1"), json!(5))),
        (&b, poison_body.clone()),
        (&b, ev(&b, &unique("out-2"), json!(1))),
        (&a, ev(&a, &unique("out-3"), json!(7))),
        (&b, ev(&b, &unique("out-4"), json!(2))),
    ];
    let ours = put_records(&workload).await;
    let at = workload.iter().position(|(_, body)| *body == poison_body);
    let poison = ours[at.expect("the poison is in the workload")].clone();
    // Longer than three attempts: Lambda's old budget (MaximumRetryAttempts: 2) is spent twice
    // over on whichever shard is read first.
    eventually(
        "eight invocations of ledger-stream reporting a retry",
        Duration::from_secs(90),
        || async move { (retried_invocations(from) >= 8).then_some(()) },
    )
    .await;
    assert_eq!(ledger("t1", &a).await, None, "nothing applied while out");
    drop((store_out, queues_out));

    let (balance_a, events_a) = balance_reaches("account a after the outage", &a, 12).await;
    assert_eq!((balance_a, events_a), (12, 2), "5 + 7");
    let (balance_b, events_b) = balance_reaches("account b, past the poison", &b, 3).await;
    assert_eq!((balance_b, events_b), (3, 2), "1 + 2");

    // The poison is parked, whole: its data as received, partition key, shard and sequence
    // number, and why.
    let parked = parked_eventually(&poison).await;
    assert_eq!(parked.len(), 1, "parked once: {parked:?}");
    let p = &parked[0];
    assert_eq!(p["code"], "invalid_payload", "{p}");
    assert_eq!(p["function"], "ledger-stream", "{p}");
    assert_eq!(p["record"]["kinesis"]["partitionKey"], b.as_str(), "{p}");
    assert_eq!(
        record_data(p),
        poison_body.as_bytes(),
        "the data as the producer put it"
    );

    // Nothing of this run was handed to the on-failure destination.
    let handed = handed_on(&ours).await;
    assert!(handed.is_empty(), "handed on: {handed:?}");
}

/// S15, issue 36 item 4: a 1 MiB record that is not JSON, between two good records on one key
/// (so one shard, in order), through the local stack's Kinesis and trigger. Parked whole it would
/// be its data in base64 inside JSON, about 1.37 MB, over SQS's maximum: it is parked by
/// reference — its metadata, its data's size and SHA-256, attribute `dedup-parked-by:
/// reference` — the good record after it is applied, and the shard is not stalled (nothing
/// reaches the trigger's on-failure destination).
#[tokio::test]
async fn oversized_record_parked_by_reference_and_the_record_after_it_applied() {
    if !stack_is_up() {
        return;
    }
    let a = unique("big-a");
    let ev = kinesis_credit;
    // Kinesis counts the partition key in the record's 1 MiB.
    let big: Vec<u8> = b"\xffnot json \x00"
        .iter()
        .copied()
        .cycle()
        .take(1024 * 1024 - a.len())
        .collect();
    let kinesis = Kinesis::new(&env("DEDUP_SQS_ENDPOINT"));
    let stream = env("DEDUP_KINESIS_STREAM");
    let mut records = Vec::new();
    for data in [
        ev(&a, &unique("big-1"), json!(5)).into_bytes(),
        big.clone(),
        ev(&a, &unique("big-2"), json!(7)).into_bytes(),
    ] {
        records.push(kinesis.put(&stream, &a, &data).await.expect("put a record"));
    }
    let (balance, events) = balance_reaches("the record after the oversized one", &a, 12).await;
    assert_eq!(
        (balance, events),
        (12, 2),
        "5 + 7: both good records applied"
    );

    let parked = parked_eventually(&records[1]).await;
    assert_eq!(parked.len(), 1, "parked once");
    let p = &parked[0];
    assert_eq!(p["parkedBy"], "reference", "{}", p["code"]);
    assert_eq!(
        p["code"], "body_not_utf8",
        "its bytes are neither UTF-8 nor JSON"
    );
    assert_eq!(p["data"]["bytes"], big.len());
    let digest = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(&big))
    };
    assert_eq!(
        p["data"]["sha256"],
        digest.as_str(),
        "names the bytes it stands for"
    );
    assert!(
        p["record"]["kinesis"].get("data").is_none(),
        "not the data itself"
    );
    let handed = handed_on(&records).await;
    assert!(
        handed.is_empty(),
        "the shard was never given up: {handed:?}"
    );
}
