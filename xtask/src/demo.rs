//! `cargo xtask demo`: the main job, end to end, on local services.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use fake_provider::Fault;
use serde_json::{Value, json};

use crate::Result;
use crate::stack::{
    Stack, TABLE_BALANCES, TABLE_FINE_REVIEWS, TABLE_FINES, TABLE_INTENTS, VISIBILITY_TIMEOUT_SECS,
};

pub(crate) fn ce(kind: &str, source: &str, id: &str, tenant: &str, data: Value) -> String {
    // Events happen now: one older than the retention would go to reconciliation (S10).
    let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    json!({"specversion": "1.0", "type": kind, "source": source, "id": id,
           "tenantid": tenant, "time": time, "data": data})
    .to_string()
}

pub(crate) fn credit(id: &str, account: &str, amount: i64) -> String {
    let (kind, amount) = if amount < 0 {
        ("debit", -amount)
    } else {
        ("credit", amount)
    };
    ce(
        kind,
        "/core-banking",
        id,
        "bank-a",
        json!({"account": account, "amount": amount}),
    )
}

fn notice(source: &str, id: &str, n: u32) -> String {
    ce(
        "fine.notice",
        source,
        id,
        "city-1",
        json!({
        "notice_number": format!("N-{n}"), "plate": format!("{n:04}-BCD"),
        "offence": "speeding", "amount_cents": 10_000 + n as i64, "issued_at": "2026-11-01T10:00:00Z"}),
    )
}

pub(crate) fn payment(id: &str, cents: i64) -> String {
    ce(
        "payment.requested",
        "/checkout",
        id,
        "shop-1",
        json!({"amount_cents": cents, "currency": "EUR", "customer_ref": format!("cust-{id}")}),
    )
}

/// Sends `bodies` to the function's queue, in order, in batches of 10.
pub(crate) async fn send(stack: &Stack, function: &str, bodies: &[String]) -> Result<()> {
    let url = &stack.queues[function].url;
    for chunk in bodies.chunks(10) {
        let entries: Vec<SendMessageBatchRequestEntry> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(b)
                    .message_attributes(
                        "producer",
                        MessageAttributeValue::builder()
                            .data_type("String")
                            .string_value("xtask-demo")
                            .build()
                            .ok()?,
                    )
                    .build()
                    .ok()
            })
            .collect();
        stack
            .sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(crate::sdk_error(format!("send to {function}")))?;
    }
    Ok(())
}

async fn settle(stack: &Stack, what: &str) -> Result<()> {
    print!("xtask: demo: waiting for {what} to settle");
    let start = Instant::now();
    let quiet = Duration::from_secs(VISIBILITY_TIMEOUT_SECS + 2);
    let limit = Duration::from_secs(180);
    let mut ticker = tokio::time::interval(Duration::from_secs(3));
    let waiting = stack.wait_idle(quiet, limit);
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            done = &mut waiting => {
                println!(" ({:.0}s)", start.elapsed().as_secs_f64());
                return if done { Ok(()) } else { Err(format!("{what} did not settle in {}s", limit.as_secs())) };
            }
            _ = ticker.tick() => {
                let (inv, del, ack) = stack.stats.values().fold((0, 0, 0), |(a, b, c), s| (
                    a + s.invocations.load(Ordering::Relaxed),
                    b + s.delivered.load(Ordering::Relaxed),
                    c + s.acknowledged.load(Ordering::Relaxed)));
                print!("\n  ... {inv} invocations, {del} deliveries, {ack} acknowledged");
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
        }
    }
}

pub(crate) async fn scan(
    stack: &Stack,
    table: &str,
) -> Result<Vec<std::collections::HashMap<String, AttributeValue>>> {
    let out = stack
        .dynamodb
        .scan()
        .table_name(table)
        .consistent_read(true)
        .send()
        .await
        .map_err(crate::sdk_error(format!("scan {table}")))?;
    Ok(out.items.unwrap_or_default())
}

/// Whether `item`'s string attribute `attr` is `value`.
pub(crate) fn has(
    item: &std::collections::HashMap<String, AttributeValue>,
    attr: &str,
    value: &str,
) -> bool {
    item.get(attr)
        .and_then(|v| v.as_s().ok())
        .is_some_and(|s| s == value)
}

pub(crate) async fn dlq_bodies(stack: &Stack, function: &str) -> Result<Vec<String>> {
    let mut bodies = Vec::new();
    for _ in 0..5 {
        let out = stack
            .sqs
            .receive_message()
            .queue_url(&stack.queues[function].dlq_url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .send()
            .await
            .map_err(crate::sdk_error("read DLQ"))?;
        let msgs = out.messages.unwrap_or_default();
        if msgs.is_empty() {
            break;
        }
        bodies.extend(msgs.iter().map(|m| m.body().unwrap_or_default().to_owned()));
    }
    Ok(bodies)
}

pub(crate) struct Checks(pub(crate) Vec<(String, bool)>);

impl Checks {
    pub(crate) fn check(&mut self, what: impl Into<String>, ok: bool) {
        let what = what.into();
        println!("  [{}] {what}", if ok { " ok " } else { "FAIL" });
        self.0.push((what, ok));
    }
}

pub(crate) async fn run(root: &Path) -> Result<()> {
    let stack = Stack::up(root).await?;
    let receives = stack
        .plan
        .queues
        .iter()
        .find_map(|q| q.redrive.as_ref().map(|r| r.1))
        .unwrap_or_default();
    println!(
        "\nxtask: demo: queues have visibility timeout {VISIBILITY_TIMEOUT_SECS}s and maxReceiveCount {receives} (infra/template.yaml); \
         what is reported failed comes back, and goes to the DLQ after {receives} receives.\n"
    );

    // --- ledger-projector: mark and balance in one transaction (S5) ---
    let events: Vec<(&str, &str, i64)> = vec![
        ("evt-1", "credito-17", 10),
        ("evt-2", "credito-18", 25),
        ("evt-3", "credito-17", -3),
        ("evt-4", "ahorro-3", 100),
        ("evt-5", "credito-17", 7),
        ("evt-6", "ahorro-3", -40),
        ("evt-7", "credito-18", 5),
        ("evt-8", "ahorro-3", 1),
    ];
    let batch: Vec<String> = events.iter().map(|(i, a, n)| credit(i, a, *n)).collect();
    println!(
        "xtask: demo: ledger: the same batch of {} events twice, interleaved",
        batch.len()
    );
    let twice: Vec<String> = batch.iter().flat_map(|b| [b.clone(), b.clone()]).collect();
    send(&stack, "ledger-projector", &twice).await?;
    println!("xtask: demo: ledger: a producer retry (same event id, new messageId)");
    send(
        &stack,
        "ledger-projector",
        &[credit("evt-2", "credito-18", 25)],
    )
    .await?;
    settle(&stack, "the ledger batches").await?;

    println!("xtask: demo: ledger: a crash mid-batch (the function ran, its answer is lost)");
    stack.lose_next["ledger-projector"].store(true, Ordering::SeqCst);
    send(
        &stack,
        "ledger-projector",
        &[
            credit("evt-9", "credito-17", 1),
            credit("evt-10", "credito-18", 2),
        ],
    )
    .await?;
    println!(
        "xtask: demo: ledger: a payload conflict, a malformed message, and one without identity"
    );
    let no_id = json!({"specversion": "1.0", "type": "credit", "source": "/core-banking",
                       "tenantid": "bank-a", "data": {"account": "credito-17", "amount": 1}})
    .to_string();
    send(
        &stack,
        "ledger-projector",
        &[
            credit("evt-1", "credito-17", 999),
            "{not json".into(),
            no_id,
        ],
    )
    .await?;

    // --- fine-notices + intent-relay: fine, intent and mark in one transaction (S5, S7) ---
    println!(
        "xtask: demo: fines: 3 notices each delivered twice, the same fine reported by a second provider, a malformed one; the collection API fails once"
    );
    stack
        .provider
        .inject(Fault::error_5xx(1).for_resource("collections"));
    let mut notices: Vec<String> = (1..=3)
        .flat_map(|n| {
            let b = notice("/provider-dgt", &format!("dgt-{n}"), n);
            [b.clone(), b]
        })
        .collect();
    notices.push(notice("/provider-city", "city-77", 1));
    notices.push("<xml>not a cloud event</xml>".into());
    send(&stack, "fine-notices", &notices).await?;

    // --- payment-dispatcher: lease, idempotency key, receipt (S6) ---
    println!(
        "xtask: demo: payments: 3 requests each delivered twice; the provider applies one and times out, and fails another with a 503"
    );
    stack
        .provider
        .inject(Fault::apply_then_timeout(1, Duration::from_millis(1500)).for_resource("payments"));
    stack
        .provider
        .inject(Fault::error_5xx(1).for_resource("payments"));
    let payments: Vec<String> = (1..=3)
        .flat_map(|n| {
            let b = payment(&format!("pay-{n}"), 1_000 * n);
            [b.clone(), b]
        })
        .collect();
    send(&stack, "payment-dispatcher", &payments).await?;

    // --- the other doors: webhooks (inbox, forwarder) and a Kinesis stream ---
    let doors = crate::demo_doors::send(&stack).await?;

    settle(
        &stack,
        "all queues (redeliveries and dead-lettering included)",
    )
    .await?;
    // The relay follows the intents stream; give it until every intent is confirmed.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let intents = scan(&stack, TABLE_INTENTS).await?;
        if !intents.is_empty() && intents.iter().all(|i| has(i, "status", "CONFIRMED")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await; // the last EMF lines

    // --- report ---
    let mut checks = Checks(Vec::new());
    println!("\n== final state against a single pass");
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for (_, a, n) in events
        .iter()
        .chain([("evt-9", "credito-17", 1), ("evt-10", "credito-18", 2)].iter())
    {
        // Balances are kept per tenant (S1): the demo's events are all tenant `bank-a`'s.
        *expected
            .entry(lambda_dedup::tenant_scoped("bank-a", a))
            .or_default() += n;
    }
    let balances: BTreeMap<String, i64> = scan(&stack, TABLE_BALANCES)
        .await?
        .iter()
        .filter_map(|i| {
            Some((
                i.get("account")?.as_s().ok()?.clone(),
                i.get("balance")?.as_n().ok()?.parse().ok()?,
            ))
        })
        .collect();
    for (account, want) in &expected {
        let got = balances.get(account).copied();
        checks.check(
            format!("balance {account}: {got:?}, single pass {want}"),
            got == Some(*want),
        );
    }
    checks.check(
        format!(
            "no other accounts ({} found; the webhooks' and the stream's are checked below)",
            balances.len()
        ),
        balances.len() == expected.len() + doors.accounts(),
    );

    let fines = scan(&stack, TABLE_FINES).await?;
    checks.check(format!("fines: {} records for 4 distinct events (two providers' reports of one fine stay two, S3)", fines.len()), fines.len() == 4);
    let reviews = scan(&stack, TABLE_FINE_REVIEWS).await?;
    let flagged: Vec<_> = reviews
        .iter()
        .filter(|r| {
            r.get("notices")
                .and_then(|n| n.as_n().ok())
                .map(String::as_str)
                == Some("2")
        })
        .collect();
    let names_both = flagged.first().is_some_and(|r| {
        let first = r.get("first_notice").and_then(|v| v.as_s().ok());
        let last = r.get("last_notice").and_then(|v| v.as_s().ok());
        first.is_some() && last.is_some() && first != last
    });
    checks.check(
        format!(
            "fine reviews: {} of {} correlations flagged (the second provider's report of one fine), naming both notices",
            flagged.len(),
            reviews.len()
        ),
        flagged.len() == 1 && reviews.len() == 3 && names_both,
    );
    let intents = scan(&stack, TABLE_INTENTS).await?;
    let confirmed = intents
        .iter()
        .filter(|i| has(i, "status", "CONFIRMED"))
        .count();
    checks.check(
        format!(
            "collection intents: {} written, {confirmed} confirmed by the collection API",
            intents.len()
        ),
        intents.len() == 4 && confirmed == 4,
    );

    let effects = stack.provider.effects();
    let collections = effects
        .keys()
        .filter(|k| {
            intents
                .iter()
                .any(|i| i.get("intent_id").and_then(|v| v.as_s().ok()) == Some(*k))
        })
        .count();
    let payments_applied = effects.len() - collections;
    checks.check(format!("provider: {} collection effects for 4 intents, {payments_applied} payment effects for 3 requests", collections), collections == 4 && payments_applied == 3);
    checks.check(
        format!(
            "provider: every idempotency key applied exactly once (total {})",
            stack.provider.total_effects()
        ),
        effects.values().all(|c| *c == 1) && stack.provider.total_effects() == 7,
    );

    println!(
        "\n== the account (from the functions' EMF lines, as CloudWatch would see them, and the mark table; S14)"
    );
    let accounts = stack.accounts.lock().map(|a| a.clone()).unwrap_or_default();
    let marks = crate::audit::completed_marks(&stack.dynamodb, crate::stack::TABLE_MARKS).await?;
    for (what, ok) in crate::audit::report(&accounts, &marks) {
        checks.check(what, ok);
    }
    let applied = |f: &str| {
        accounts
            .get(f)
            .and_then(|a| a.get("Applied"))
            .copied()
            .unwrap_or(0)
    };
    checks.check(
        format!(
            "ledger-projector applied {} events: one per distinct event (10 sent to its queue, 3 forwarded from the webhook inbox)",
            applied("ledger-projector")
        ),
        // The webhooks' 3 events reach it through the inbox and the ledger's queue.
        applied("ledger-projector") == 13,
    );
    checks.check(
        format!("fine-notices applied {} (4)", applied("fine-notices")),
        applied("fine-notices") == 4,
    );
    checks.check(
        format!(
            "payment-dispatcher applied {} (3)",
            applied("payment-dispatcher")
        ),
        applied("payment-dispatcher") == 3,
    );

    checks.check(
        format!(
            "webhook-receiver applied {} (3 accepted events), ledger-stream applied {} (5 valid events on the stream)",
            applied("webhook-receiver"),
            applied("ledger-stream")
        ),
        applied("webhook-receiver") == 3 && applied("ledger-stream") == 5,
    );

    println!("\n== dead-letter queues");
    for (f, want) in [
        ("ledger-projector", 3),
        ("fine-notices", 1),
        ("payment-dispatcher", 0),
    ] {
        let bodies = dlq_bodies(&stack, f).await?;
        for b in &bodies {
            let shown: String = b.chars().take(90).collect();
            println!("  {f}-dlq: {shown}");
        }
        checks.check(
            format!("{f}-dlq holds {} message(s), expected {want}", bodies.len()),
            bodies.len() == want,
        );
    }

    crate::demo_doors::check(&stack, &doors, &mut checks).await?;

    println!("\n== least privilege");
    let privileges = stack.check_privileges(root, false);
    if let Err(e) = &privileges {
        println!("  {e}");
    }
    checks.check(
        "every call each function made is granted by its role in infra/template.yaml".to_owned(),
        privileges.is_ok(),
    );

    let failed: Vec<&String> = checks
        .0
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(w, _)| w)
        .collect();
    println!();
    if failed.is_empty() {
        println!("xtask: demo: all {} checks passed", checks.0.len());
        Ok(())
    } else {
        stack.print_logs();
        Err(format!(
            "{} of {} checks failed",
            failed.len(),
            checks.0.len()
        ))
    }
}
