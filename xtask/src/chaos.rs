//! Process-level chaos, run by `cargo xtask test` once the tests have passed, on the same stack
//! (S5, S6, S8, S12, S13). Three runs, each with its own event ids and accounts:
//!
//! 1. **`kill -9` of `ledger-projector` mid-batch.** While an invocation is under way, DynamoDB
//!    Local is frozen (SIGSTOP), so the process is certainly inside its batch (its transaction may
//!    already be in DynamoDB's hands); the process is killed, DynamoDB thawed, and a new instance
//!    takes over, as Lambda's would. Repeated until two kills have cut an invocation short.
//! 2. **`kill -9` of `payment-dispatcher` during the external call.** The provider holds requests
//!    (a `slow` fault) and applies them afterwards; the process is killed while a call is out.
//!    The redelivery finds the lease live (retry), then expired, reclaims it and calls again with
//!    the same idempotency key, and gets the provider's replay.
//! 3. **The local DynamoDB stopped and started again mid-run** (SIGTERM, 3 s down, same port, data
//!    kept), with both functions busy.
//!
//! Each workload also holds producer retries (same event, new message id) and one message without
//! an identity. After each run the queues drain, and then: every balance equals one clean pass,
//! every payment reached the provider exactly once under its event's idempotency key, every
//! event's mark is COMPLETED, and the DLQ holds exactly the message without an identity.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lambda_dedup::{KeySpec, Message, Scope};
use lambda_dedup_fake_provider::Fault;
use serde_json::json;

use crate::Result;
use crate::stack::{Stack, TABLE_BALANCES, TABLE_MARKS};
use crate::workload::{Checks, credit, payment};

const LEDGER: &str = "ledger-projector";
const PAYMENTS: &str = "payment-dispatcher";

fn say(what: &str) {
    println!("xtask: chaos: {what}");
}

/// A ledger workload: `n` credits over 4 accounts, the first quarter sent twice more as producer
/// retries, and one message without an identity. Returns the bodies and the single-pass balances.
fn ledger_workload(run: &str, n: usize) -> (Vec<String>, Vec<String>, BTreeMap<String, i64>) {
    let events: Vec<(String, String, i64)> = (0..n)
        .map(|i| {
            (
                format!("{run}-c{i}"),
                format!("{run}-acct-{}", i % 4),
                1 + i as i64,
            )
        })
        .collect();
    let mut expected = BTreeMap::new();
    for (_, account, amount) in &events {
        *expected.entry(account.clone()).or_default() += amount;
    }
    let originals: Vec<String> = events.iter().map(|(i, a, n)| credit(i, a, *n)).collect();
    let mut bodies = originals.clone();
    bodies.extend(originals[..n / 4].iter().cloned());
    bodies.push(no_identity(run));
    (bodies, originals, expected)
}

/// A payments workload: `n` payments, the first half sent again, one message without identity.
fn payment_workload(run: &str, n: usize) -> (Vec<String>, Vec<String>) {
    let originals: Vec<String> = (0..n)
        .map(|i| payment(&format!("{run}-p{i}"), 100 + i as i64))
        .collect();
    let mut bodies = originals.clone();
    bodies.extend(originals[..n / 2].iter().cloned());
    bodies.push(no_identity(run));
    (bodies, originals)
}

fn no_identity(run: &str) -> String {
    json!({"specversion": "1.0", "type": "credit", "source": "/chaos", "tenantid": "bank-a",
           "data": {"run": run}})
    .to_string()
}

/// The mark key `function` derives for `body` (namespace `demo`, as the stack configures).
fn key(function: &str, body: &str) -> Result<lambda_dedup::DedupKey> {
    let spec = KeySpec::cloudevents(
        Scope::new("demo", function).map_err(|e| e.to_string())?,
        "tenantid",
    );
    spec.derive(&Message {
        body: body.as_bytes().to_vec(),
        ..Message::default()
    })
    .map(|d| d.key)
    .map_err(|e| format!("no key for {body}: {e:?}"))
}

async fn get_string(
    stack: &Stack,
    table: &str,
    key_attr: &str,
    key: &str,
    attr: &str,
) -> Result<Option<String>> {
    use lambda_dedup_testkit::dynamodb::items;
    let item = items::get(&stack.dynamodb, table, key_attr, key)
        .await
        .map_err(crate::sdk_error(format!("get {table}")))?;
    let text = |i: &items::Item| {
        items::string(i, attr)
            .or(items::number(i, attr))
            .map(str::to_owned)
    };
    Ok(item.as_ref().and_then(text))
}

/// Waits until `function`'s trigger has an invocation under way.
async fn invocation_under_way(stack: &Stack, function: &str, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if stack.stats[function].in_flight.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}

fn interrupted(stack: &Stack, function: &str) -> u64 {
    stack.stats[function].interrupted.load(Ordering::SeqCst)
}

/// The checks every run ends with: balances of one clean pass, completed marks, payments once
/// at the provider, and exactly the message without identity in each DLQ.
async fn final_state(
    stack: &Stack,
    run: &str,
    c: &mut Checks,
    ledger: Option<(&[String], &BTreeMap<String, i64>)>,
    payments: Option<&[String]>,
) -> Result<()> {
    if let Some((_, expected)) = ledger {
        let mut wrong = Vec::new();
        for (account, want) in expected {
            // Balances are kept per tenant (S1): the chaos events are tenant `bank-a`'s.
            let item = lambda_dedup::tenant_scoped("bank-a", account);
            let got = get_string(stack, TABLE_BALANCES, "account", &item, "balance").await?;
            if got.as_deref() != Some(want.to_string().as_str()) {
                wrong.push(format!("{account}: {got:?} (want {want})"));
            }
        }
        c.check(
            format!(
                "{run}: {} balances equal one clean pass {wrong:?}",
                expected.len()
            ),
            wrong.is_empty(),
        );
    }
    if let Some(originals) = payments {
        let effects = stack.provider.effects();
        let mut counts = Vec::new();
        for body in originals {
            let key = key(PAYMENTS, body)?.idempotency_key();
            counts.push(effects.get(&key).copied());
        }
        c.check(
            format!(
                "{run}: each of {} payments applied exactly once at the provider {counts:?}",
                originals.len()
            ),
            counts.iter().all(|n| *n == Some(1)),
        );
    }
    for (function, originals) in [(LEDGER, ledger.map(|l| l.0)), (PAYMENTS, payments)] {
        let Some(originals) = originals else { continue };
        let marks = completed(stack, function, originals).await?;
        let n = originals.len();
        c.check(
            format!("{run}: {marks} of {n} {function} marks COMPLETED"),
            marks == n,
        );
        let dead: Vec<String> = stack
            .bodies(&stack.queues[function].dlq_url)
            .await?
            .into_iter()
            .filter(|b| b.contains(run))
            .collect();
        c.check(
            format!(
                "{run}: {function}'s DLQ holds exactly the message without identity ({} of this run)",
                dead.len()
            ),
            dead == [no_identity(run)],
        );
    }
    Ok(())
}

async fn completed(stack: &Stack, function: &str, bodies: &[String]) -> Result<usize> {
    let mut n = 0;
    for body in bodies {
        let pk = key(function, body)?;
        let status = get_string(stack, TABLE_MARKS, "pk", pk.as_str(), "status").await?;
        n += usize::from(status.as_deref() == Some("COMPLETED"));
    }
    Ok(n)
}

/// 1: `kill -9` of ledger-projector mid-batch.
async fn kill_ledger_mid_batch(stack: &Stack, c: &mut Checks) -> Result<()> {
    let run = format!("chaos-kill-ledger-{}", std::process::id());
    let (bodies, originals, expected) = ledger_workload(&run, 60);
    say(&format!(
        "{run}: {} messages to {LEDGER}; killing it mid-batch",
        bodies.len()
    ));
    stack.send(LEDGER, &bodies).await?;
    let before = interrupted(stack, LEDGER);
    let mut kills = 0;
    while interrupted(stack, LEDGER) - before < 2 && kills < 8 {
        if !invocation_under_way(stack, LEDGER, Duration::from_secs(20)).await {
            break;
        }
        stack.ddb.freeze(true)?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let killed = stack.functions.kill9(LEDGER);
        tokio::time::sleep(Duration::from_millis(100)).await;
        stack.ddb.freeze(false)?;
        let pid = killed?;
        kills += 1;
        say(&format!("{run}: kill -9 {pid} ({LEDGER})"));
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let cut = interrupted(stack, LEDGER) - before;
    c.check(
        format!("{run}: {cut} of {kills} kills cut an invocation short (at least 1)"),
        cut >= 1,
    );
    stack.settle(&run).await?;
    final_state(stack, &run, c, Some((&originals, &expected)), None).await
}

/// 2: `kill -9` of payment-dispatcher while its provider call is out.
async fn kill_payments_mid_call(stack: &Stack, c: &mut Checks) -> Result<()> {
    let run = format!("chaos-kill-payments-{}", std::process::id());
    let (bodies, originals) = payment_workload(&run, 12);
    say(&format!(
        "{run}: {} messages to {PAYMENTS}; killing it while a provider call is out",
        bodies.len()
    ));
    let before = interrupted(stack, PAYMENTS);
    let mut kills = 0;
    stack
        .provider
        .inject(Fault::slow(2, Duration::from_millis(1500)).for_resource("payments"));
    stack.send(PAYMENTS, &bodies).await?;
    while interrupted(stack, PAYMENTS) - before < 2 && kills < 6 {
        if !invocation_under_way(stack, PAYMENTS, Duration::from_secs(20)).await {
            break;
        }
        // The first calls of the batch are held by the provider for 1.5 s.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let pid = stack.functions.kill9(PAYMENTS)?;
        kills += 1;
        say(&format!("{run}: kill -9 {pid} ({PAYMENTS})"));
        stack
            .provider
            .inject(Fault::slow(1, Duration::from_millis(1500)).for_resource("payments"));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stack.provider.clear_faults();
    let cut = interrupted(stack, PAYMENTS) - before;
    c.check(
        format!("{run}: {cut} of {kills} kills cut an invocation short (at least 1)"),
        cut >= 1,
    );
    stack.settle(&run).await?;
    final_state(stack, &run, c, None, Some(&originals)).await
}

/// 3: the local DynamoDB stopped and started again while both functions are busy.
async fn restart_dynamodb(stack: &mut Stack, c: &mut Checks) -> Result<()> {
    let run = format!("chaos-restart-ddb-{}", std::process::id());
    let (ledger, ledger_originals, expected) = ledger_workload(&run, 80);
    let (payments, payment_originals) = payment_workload(&run, 10);
    say(&format!(
        "{run}: {} + {} messages; the local DynamoDB stopped mid-run for 3 s",
        ledger.len(),
        payments.len()
    ));
    let retries_before = retries(stack);
    stack.send(LEDGER, &ledger).await?;
    stack.send(PAYMENTS, &payments).await?;
    if !invocation_under_way(stack, LEDGER, Duration::from_secs(20)).await {
        return Err(format!("{run}: {LEDGER} was never invoked"));
    }
    stack.ddb.stop();
    say(&format!("{run}: the local DynamoDB stopped"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    stack.ddb.ensure_running()?;
    say(&format!(
        "{run}: the local DynamoDB started again (same port, same data)"
    ));
    stack.settle(&run).await?;
    let failed = retries(stack) - retries_before;
    c.check(
        format!("{run}: the outage was felt: {failed} deliveries answered `retry` (S13)"),
        failed > 0,
    );
    final_state(
        stack,
        &run,
        c,
        Some((&ledger_originals, &expected)),
        Some(&payment_originals),
    )
    .await
}

/// `retry` outcomes of the SQS functions so far, from their EMF records.
fn retries(stack: &Stack) -> u64 {
    let accounts = stack.accounts.lock().map(|a| a.clone()).unwrap_or_default();
    [LEDGER, PAYMENTS]
        .iter()
        .map(|f| {
            accounts
                .get(*f)
                .and_then(|a| a.get("Retry"))
                .copied()
                .unwrap_or(0)
        })
        .sum()
}

/// Runs the three chaos runs and reports; an error when any check fails.
pub(crate) async fn run(stack: &mut Stack) -> Result<()> {
    let started = Instant::now();
    let mut c = Checks::default();
    kill_ledger_mid_batch(stack, &mut c).await?;
    kill_payments_mid_call(stack, &mut c).await?;
    restart_dynamodb(stack, &mut c).await?;
    say(&format!("{:.0} s", started.elapsed().as_secs_f64()));
    c.verdict("chaos")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_hold_retries_and_one_message_without_identity() {
        let (bodies, originals, expected) = ledger_workload("r", 8);
        assert_eq!(bodies.len(), 8 + 2 + 1);
        assert_eq!(originals.len(), 8);
        assert_eq!(expected.values().sum::<i64>(), (1..=8).sum::<i64>());
        assert!(key(LEDGER, bodies.last().map(String::as_str).unwrap_or("")).is_err());
        let (bodies, originals) = payment_workload("r", 4);
        assert_eq!((bodies.len(), originals.len()), (4 + 2 + 1, 4));
        assert_eq!(
            key(PAYMENTS, &bodies[4]).map(|k| k.idempotency_key()),
            key(PAYMENTS, &originals[0]).map(|k| k.idempotency_key()),
            "a producer retry has its original's key"
        );
    }
}
