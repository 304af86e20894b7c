//! The demo's other doors: signed webhooks over HTTP into `webhook-receiver` (its inbox
//! forwarded to the ledger's queue by `inbox-forwarder`), the ledger's Kinesis stream read
//! by `ledger-stream`, and the envelope door: the ledger's events published to an SNS topic,
//! fanned out to `ledger-fanout`'s queue in SNS's envelope.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::Result;
use crate::stack::{KINESIS_STREAM, Stack, TABLE_INBOX, has};
use crate::workload::{Checks, ce};

/// The function behind the ledger's SNS topic.
const FANOUT: &str = "ledger-fanout";

/// A forger's own Standard Webhooks secret: well formed, not the sender's.
const FORGERS_SECRET: &str = "whsec_Zm9yZ2Vycy1vd24ta2V5LTAxMjM0NTY3ODk=";

/// The end-to-end test that checks every documented answer of the webhook door (stale, re-signed,
/// oversized, conflicting, replayed under another id) is
/// `e2e_doors::e2e_webhook_deliveries_get_their_documented_answers_and_apply_once`; the demo
/// walks through the main ones.
///
/// An HTTP answer as the demo judges it: the status, and whether it says it is a replay.
type Answer = (u16, bool);

/// A webhook delivery: what it is, its id, body and secret, and its documented answer.
type Delivery<'a> = (&'static str, &'a str, &'a str, &'a str, Answer);

/// What the doors were sent, for the checks after the queues settle.
pub(crate) struct Sent {
    /// Each webhook delivery: what it was, the answer documented for it, and the answer.
    answers: Vec<(&'static str, Answer, Answer)>,
    /// Single-pass balances of the accounts the doors moved.
    pub(crate) expected: Vec<(String, i64)>,
}

/// The sender webhook-receiver serves locally (its `WEBHOOK_TENANT`: the template's
/// `WebhookSender` default). Its webhooks credit its own tenant's accounts: the ledger refuses a
/// forwarded event naming another tenant (issue 42).
const WEBHOOK_SENDER: &str = "acme-pay";

fn credit(source: &str, id: &str, account: &str, amount: serde_json::Value) -> String {
    credit_of("bank-a", source, id, account, amount)
}

/// A credit of `account` of `tenant`.
fn credit_of(
    tenant: &str,
    source: &str,
    id: &str,
    account: &str,
    amount: serde_json::Value,
) -> String {
    ce(
        "credit",
        source,
        id,
        tenant,
        json!({"account": account, "amount": amount}),
    )
}

/// POSTs `body` as the sender would, signed by its own library (`standardwebhooks`, in the venv;
/// `local_dynamodb::senders`): the demo never signs with the project's code. Returns the status and whether the
/// answer says it is a replay.
async fn post(stack: &Stack, id: &str, body: &str, timestamp: u64, secret: &str) -> Result<Answer> {
    let mut req = reqwest::Client::new()
        .post(&stack.webhook_url)
        .header("content-type", "application/json");
    let (python, script) = &stack.sender;
    let signer = (python.as_path(), script.as_path());
    let headers =
        local_dynamodb::senders::sign(signer, "standard-webhooks", id, timestamp, &[secret], body)?;
    for (name, value) in headers {
        req = req.header(name, value);
    }
    let resp = req.body(body.to_owned()).send().await;
    let resp = resp.map_err(|e| format!("webhook: {e}"))?;
    Ok((
        resp.status().as_u16(),
        resp.headers().contains_key("idempotent-replayed"),
    ))
}

/// Sends the webhooks and the Kinesis records.
pub(crate) async fn send(stack: &Stack) -> Result<Sent> {
    println!(
        "xtask: demo: webhooks: 3 signed events from acme-pay (one under the secret being rotated out), \
         a retry after a lost answer and a forgery (signed by the sender's own library, standardwebhooks)"
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (new, old) = crate::local::webhook_secrets();
    let webhook = |id, account, amount| credit_of(WEBHOOK_SENDER, "/acme-pay", id, account, amount);
    let w1 = webhook("wh-1", "wh-cuenta-1", json!(30));
    let w2 = webhook("wh-2", "wh-cuenta-1", json!(12));
    let w3 = webhook("wh-3", "wh-cuenta-2", json!(8));
    let (ok, replayed) = ((200, false), (200, true));
    let deliveries: [Delivery<'_>; 5] = [
        ("wh-1", "wh-1", &w1, new, ok),
        (
            "wh-1 again (the answer was lost)",
            "wh-1",
            &w1,
            new,
            replayed,
        ),
        ("wh-2, signed with the old secret", "wh-2", &w2, old, ok),
        (
            "wh-3 signed by a forger",
            "wh-3",
            &w3,
            FORGERS_SECRET,
            (401, false),
        ),
        ("wh-3", "wh-3", &w3, new, ok),
    ];
    let mut answers = Vec::new();
    for (what, id, body, secret, want) in deliveries {
        let got = post(stack, id, body, now, secret).await?;
        answers.push((what, want, got));
    }

    println!(
        "xtask: demo: kinesis: 7 records on 2 accounts; a producer retry, a record that can never apply mid-shard (parked), and a lost answer"
    );
    stack.lose_next["ledger-stream"].store(true, Ordering::SeqCst);
    let records = [
        ("st-1", "st-cuenta-1", json!(4)),
        ("st-2", "st-cuenta-2", json!(9)),
        ("st-poison", "st-cuenta-2", json!("nine")),
        ("st-1", "st-cuenta-1", json!(4)),
        ("st-3", "st-cuenta-1", json!(6)),
        ("st-4", "st-cuenta-2", json!(2)),
        ("st-5", "st-cuenta-1", json!(1)),
    ]
    .map(|(id, account, amount)| (account, credit("/stream", id, account, amount)));
    for (account, body) in &records {
        let put = stack.kinesis.put(KINESIS_STREAM, account, body.as_bytes());
        put.await?;
    }

    println!(
        "xtask: demo: sns: 2 events published to the ledger's topic (SNS → SQS, the envelope kept), \
         one republished by its producer, and a message that is not JSON"
    );
    let sns1 = credit("/core-banking", "sns-1", "sns-cuenta-1", json!(20));
    let sns2 = credit("/core-banking", "sns-2", "sns-cuenta-1", json!(5));
    let published = [
        sns1.clone(),
        sns1,
        sns2,
        "not json from the topic".to_owned(),
    ];
    let ids = stack.publish(FANOUT, &published).await?;
    println!(
        "xtask: demo: sns: published as SNS messages {}",
        ids.join(", ")
    );
    let scoped = |a: &str| lambda_dedup::tenant_scoped("bank-a", a);
    Ok(Sent {
        answers,
        expected: vec![
            (
                lambda_dedup::tenant_scoped(WEBHOOK_SENDER, "wh-cuenta-1"),
                42,
            ),
            (
                lambda_dedup::tenant_scoped(WEBHOOK_SENDER, "wh-cuenta-2"),
                8,
            ),
            (scoped("st-cuenta-1"), 11),
            (scoped("st-cuenta-2"), 11),
            (scoped("sns-cuenta-1"), 25),
        ],
    })
}

/// The doors' checks, once the queues have settled.
pub(crate) async fn check(stack: &Stack, sent: &Sent, checks: &mut Checks) -> Result<()> {
    println!("\n== webhooks (real HTTP through the Function URL front)");
    for (what, want, got) in &sent.answers {
        let show = |(s, r): &Answer| format!("{s}{}", if *r { " replayed" } else { "" });
        let what = format!("{what}: {} (documented: {})", show(got), show(want));
        checks.check(what, got == want);
    }
    let inbox = stack.scan(TABLE_INBOX).await?;
    let forwarded = inbox
        .iter()
        .filter(|i| has(i, "forward_status", "FORWARDED"));
    let forwarded = forwarded.count();
    checks.check(
        format!(
            "the inbox holds {} events for 3 accepted, {forwarded} forwarded to the ledger's queue",
            inbox.len()
        ),
        inbox.len() == 3 && forwarded == 3,
    );

    println!("\n== kinesis");
    // The record that can never apply is parked by ledger-stream itself (S15; that it is parked
    // whole, with its data, shard and sequence number, is checked by
    // `e2e_doors::e2e_a_kinesis_shard_with_duplicates_and_a_failure_applies_each_event_once_in_order`);
    // nothing reaches the trigger's on-failure destination (only records past their maximum age
    // would). Parking is at least once: a lost answer delivers the record again.
    let parked = stack.bodies(&stack.kinesis_parking_url).await?;
    let code = |b: &String| {
        serde_json::from_str::<serde_json::Value>(b).is_ok_and(|v| v["code"] == "invalid_payload")
    };
    checks.check(
        format!(
            "kinesis: the record that can never apply was parked by ledger-stream, as invalid_payload ({} cop{})",
            parked.len(),
            if parked.len() == 1 { "y" } else { "ies" }
        ),
        !parked.is_empty() && parked.iter().all(code),
    );
    let handed = stack.bodies(&stack.kinesis_failures_url).await?;
    checks.check(
        format!(
            "kinesis: nothing handed to the on-failure destination (retries bounded by record age only; {} record(s))",
            handed.len()
        ),
        handed.is_empty(),
    );

    println!("\n== sns → sqs (the envelope door)");
    // That each bad message is dead-lettered with its reason, and a body with no envelope too,
    // is checked by `e2e_envelopes::e2e_sns_fanout_through_the_stack_applies_once_and_dead_letters_with_reasons`.
    let accounts = stack.accounts.lock().map(|a| a.clone()).unwrap_or_default();
    let count = |m: &str| accounts.get(FANOUT).and_then(|a| a.get(m)).copied();
    checks.check(
        format!(
            "{FANOUT}: {:?} applied for 2 events, {:?} duplicate for the republish",
            count("Applied"),
            count("Duplicate")
        ),
        count("Applied") == Some(2) && count("Duplicate").is_some_and(|d| d >= 1),
    );
    let dead = stack.bodies(&stack.queues[FANOUT].dlq_url).await?;
    let in_envelope = |b: &String| {
        serde_json::from_str::<serde_json::Value>(b)
            .is_ok_and(|v| v["Type"] == "Notification" && v["Message"] == "not json from the topic")
    };
    checks.check(
        format!(
            "{FANOUT}-dlq holds {} message(s), expected 1: the one that is not JSON, in SNS's envelope",
            dead.len()
        ),
        dead.len() == 1 && dead.iter().all(in_envelope),
    );
    Ok(())
}
