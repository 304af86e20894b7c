//! The demo's other doors: signed webhooks over HTTP into `webhook-receiver` (its inbox
//! forwarded to the ledger's queue by `inbox-forwarder`), and the ledger's Kinesis stream read
//! by `ledger-stream`.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::Result;
use crate::demo::{Checks, ce, has, scan};
use crate::stack::{KINESIS_STREAM, Stack, TABLE_BALANCES, TABLE_INBOX, WEBHOOK_SECRETS};

/// A forger's own Standard Webhooks secret: well formed, not the sender's.
const FORGERS_SECRET: &str = "whsec_Zm9yZ2Vycy1vd24ta2V5LTAxMjM0NTY3ODk=";

/// An HTTP answer as the demo judges it: the status, and whether it says it is a replay.
type Answer = (u16, bool);

/// A webhook delivery: what it is, its id, body, timestamp and secret, and its documented answer.
type Delivery<'a> = (&'static str, &'a str, &'a str, u64, &'a str, Answer);

/// What the doors were sent, for the checks after the queues settle.
pub(crate) struct Sent {
    /// Each webhook delivery: what it was, the answer documented for it, and the answer.
    answers: Vec<(&'static str, Answer, Answer)>,
    /// Single-pass balances of the accounts the doors moved.
    expected: Vec<(String, i64)>,
    /// The shard, sequence number and data of the record that can never apply.
    poison: (String, String, String),
}

impl Sent {
    /// How many accounts the doors moved.
    pub(crate) fn accounts(&self) -> usize {
        self.expected.len()
    }
}

fn credit(source: &str, id: &str, account: &str, amount: serde_json::Value) -> String {
    ce(
        "credit",
        source,
        id,
        "bank-a",
        json!({"account": account, "amount": amount}),
    )
}

/// The Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) the
/// sender's own library (`standardwebhooks`, in the venv) makes for `body`: the demo never signs
/// with the project's code.
pub(crate) fn sender_headers(
    stack: &Stack,
    id: &str,
    timestamp: u64,
    secret: &str,
    body: &str,
) -> Result<Vec<(String, String)>> {
    use std::io::Write;
    let (python, script) = &stack.sender;
    let mut child = std::process::Command::new(python)
        .arg(script)
        .args(["standard-webhooks", id, &timestamp.to_string(), secret])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    child
        .stdin
        .take()
        .ok_or("sign.py: no stdin")?
        .write_all(body.as_bytes())
        .map_err(|e| format!("sign.py: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("sign.py: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sign.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let headers: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("sign.py: {e}"))?;
    Ok(headers.into_iter().collect())
}

/// POSTs `body` as the sender would, signed by its library (and, with `sent_id`, sent under
/// another `webhook-id` than the one signed). Returns the status and whether the answer says it
/// is a replay.
async fn post(
    stack: &Stack,
    (id, sent_id): (&str, Option<&str>),
    body: &str,
    timestamp: u64,
    secret: &str,
) -> Result<Answer> {
    let mut req = reqwest::Client::new()
        .post(&stack.webhook_url)
        .header("content-type", "application/json");
    for (name, value) in sender_headers(stack, id, timestamp, secret, body)? {
        match sent_id {
            Some(other) if name == "webhook-id" => req = req.header(name, other),
            _ => req = req.header(name, value),
        }
    }
    let resp = req
        .body(body.to_owned())
        .send()
        .await
        .map_err(|e| format!("webhook: {e}"))?;
    Ok((
        resp.status().as_u16(),
        resp.headers().contains_key("idempotent-replayed"),
    ))
}

/// Sends the webhooks and the Kinesis records.
pub(crate) async fn send(stack: &Stack) -> Result<Sent> {
    println!(
        "xtask: demo: webhooks: 3 signed events from acme-pay (one under the secret being rotated out); \
         a retry after a lost answer, a re-signed retry, a forgery, a stale replay, an oversized body, a conflicting body, \
         a replay under another webhook-id (all signed by the sender's own library, standardwebhooks)"
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (new, old) = (WEBHOOK_SECRETS[0], WEBHOOK_SECRETS[1]);
    let w1 = credit("/acme-pay", "wh-1", "wh-cuenta-1", json!(30));
    let w2 = credit("/acme-pay", "wh-2", "wh-cuenta-1", json!(12));
    let w3 = credit("/acme-pay", "wh-3", "wh-cuenta-2", json!(8));
    let big = credit(
        "/acme-pay",
        "wh-4",
        "wh-cuenta-2",
        json!({"pad": "x".repeat(70_000)}),
    );
    let conflicting = credit("/acme-pay", "wh-2", "wh-cuenta-1", json!(1200));
    let ok = (200, false);
    let replayed = (200, true);
    let deliveries: [Delivery<'_>; 9] = [
        ("wh-1", "wh-1", &w1, now, new, ok),
        (
            "wh-1 again (the answer was lost)",
            "wh-1",
            &w1,
            now,
            new,
            replayed,
        ),
        (
            "wh-2, signed with the old secret",
            "wh-2",
            &w2,
            now,
            old,
            ok,
        ),
        (
            "wh-1 re-signed a minute later",
            "wh-1",
            &w1,
            now + 60,
            new,
            replayed,
        ),
        (
            "wh-3 signed by a forger",
            "wh-3",
            &w3,
            now,
            FORGERS_SECRET,
            (401, false),
        ),
        (
            "wh-3 replayed an hour later",
            "wh-3",
            &w3,
            now - 3600,
            new,
            (401, false),
        ),
        ("an oversized body", "wh-4", &big, now, new, (413, false)),
        (
            "wh-2 with another amount",
            "wh-2",
            &conflicting,
            now,
            new,
            (409, false),
        ),
        ("wh-3", "wh-3", &w3, now, new, ok),
    ];
    let mut answers = Vec::new();
    for (what, id, body, ts, secret, want) in deliveries {
        let got = post(stack, (id, None), body, ts, secret).await?;
        answers.push((what, want, got));
    }
    // A captured delivery replayed inside the window under another id: the id is signed.
    let got = post(stack, ("wh-1", Some("wh-1-replayed")), &w1, now, new).await?;
    answers.push(("wh-1 replayed under another webhook-id", (401, false), got));

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
    let mut poison = (String::new(), String::new(), String::new());
    for (account, body) in &records {
        let (shard, seq) = stack
            .kinesis
            .put(KINESIS_STREAM, account, body.as_bytes())
            .await?;
        if body.contains("st-poison") {
            poison = (shard, seq, body.clone());
        }
    }
    let scoped = |a: &str| lambda_dedup::tenant_scoped("bank-a", a);
    Ok(Sent {
        answers,
        expected: vec![
            (scoped("wh-cuenta-1"), 42),
            (scoped("wh-cuenta-2"), 8),
            (scoped("st-cuenta-1"), 11),
            (scoped("st-cuenta-2"), 11),
        ],
        poison,
    })
}

/// The doors' checks, once the queues have settled.
pub(crate) async fn check(stack: &Stack, sent: &Sent, checks: &mut Checks) -> Result<()> {
    println!("\n== webhooks (real HTTP through the Function URL front)");
    for (what, want, got) in &sent.answers {
        let show = |(s, r): &Answer| format!("{s}{}", if *r { " replayed" } else { "" });
        checks.check(
            format!("{what}: {} (documented: {})", show(got), show(want)),
            got == want,
        );
    }
    // The forwarder follows the inbox's stream; give it until every item is forwarded.
    let start = std::time::Instant::now();
    let mut inbox = scan(stack, TABLE_INBOX).await?;
    let forwarded = |i: &_| has(i, "forward_status", "FORWARDED");
    while start.elapsed() < std::time::Duration::from_secs(30) && !inbox.iter().all(forwarded) {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        inbox = scan(stack, TABLE_INBOX).await?;
    }
    let forwarded = inbox.iter().filter(|i| forwarded(i)).count();
    checks.check(
        format!(
            "the inbox holds {} events for 3 accepted, {forwarded} forwarded to the ledger's queue",
            inbox.len()
        ),
        inbox.len() == 3 && forwarded == 3,
    );

    println!("\n== webhooks and kinesis: balances against a single pass");
    let balances = scan(stack, TABLE_BALANCES).await?;
    for (account, want) in &sent.expected {
        let got: Option<i64> = balances
            .iter()
            .find(|i| i.get("account").and_then(|a| a.as_s().ok()) == Some(account))
            .and_then(|i| i.get("balance")?.as_n().ok()?.parse().ok());
        checks.check(
            format!("balance {account}: {got:?}, single pass {want}"),
            got == Some(*want),
        );
    }
    // The record that can never apply is parked by ledger-stream itself, whole (S15); nothing
    // reaches the trigger's on-failure destination (only records past their maximum age would).
    let receive = |url: String| async move {
        stack
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .map(|out| {
                out.messages()
                    .iter()
                    .filter_map(|m| m.body().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .map_err(crate::sdk_error("the Kinesis side queues"))
    };
    let parked = receive(stack.kinesis_parking_url.clone()).await?;
    let (shard, seq, data) = &sent.poison;
    let whole = |body: &str| {
        serde_json::from_str::<serde_json::Value>(body).is_ok_and(|v| {
            use base64::Engine as _;
            let got = base64::engine::general_purpose::STANDARD
                .decode(v["record"]["kinesis"]["data"].as_str().unwrap_or_default())
                .unwrap_or_default();
            v["shardId"] == shard.as_str()
                && v["record"]["kinesis"]["sequenceNumber"] == seq.as_str()
                && v["code"] == "invalid_payload"
                && got == data.as_bytes()
        })
    };
    // Parking is at least once (a lost answer delivers the record again): every copy is the
    // poison, whole, and nothing else was parked.
    checks.check(
        format!(
            "kinesis: the record that can never apply was parked by ledger-stream with its data, shard, sequence number and code, and nothing else ({} cop{})",
            parked.len(),
            if parked.len() == 1 { "y" } else { "ies" }
        ),
        !parked.is_empty() && parked.iter().all(|b| whole(b)),
    );
    let handed = receive(stack.kinesis_failures_url.clone()).await?;
    checks.check(
        format!(
            "kinesis: nothing handed to the on-failure destination (retries bounded by record age only; {} record(s))",
            handed.len()
        ),
        handed.is_empty(),
    );
    Ok(())
}
