//! `cargo xtask demo`: the main job, end to end, on local services.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lambda_dedup_fake_provider::Fault;
use lambda_dedup_testkit::dynamodb::items;
use serde_json::json;

use crate::Result;
use crate::stack::{
    Stack, TABLE_BALANCES, TABLE_FINE_REVIEWS, TABLE_FINES, TABLE_INBOX, TABLE_INTENTS,
    TABLE_MARKS, VISIBILITY_TIMEOUT_SECS, has,
};
use crate::workload::{Checks, ce, credit, payment};

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
    stack.send("ledger-projector", &twice).await?;
    println!("xtask: demo: ledger: a producer retry (same event id, new messageId)");
    stack
        .send("ledger-projector", &[credit("evt-2", "credito-18", 25)])
        .await?;
    stack.settle("the ledger batches").await?;

    println!("xtask: demo: ledger: a crash mid-batch (the function ran, its answer is lost)");
    stack.lose_next["ledger-projector"].store(true, Ordering::SeqCst);
    stack
        .send(
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
    stack
        .send(
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
    stack.send("fine-notices", &notices).await?;

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
    stack.send("payment-dispatcher", &payments).await?;

    // --- the other doors: webhooks (inbox, forwarder) and a Kinesis stream ---
    let doors = crate::demo_doors::send(&stack).await?;

    stack
        .settle("all queues (redeliveries and dead-lettering included)")
        .await?;
    // The relay follows the intents stream and the forwarder the inbox's: give them until every
    // intent is confirmed and every inbox item forwarded, and the ledger's queue until it has
    // taken the forwarded events.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let intents = stack.scan(TABLE_INTENTS).await?;
        let inbox = stack.scan(TABLE_INBOX).await?;
        if !intents.is_empty()
            && intents.iter().all(|i| has(i, "status", "CONFIRMED"))
            && inbox.iter().all(|i| has(i, "forward_status", "FORWARDED"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stack.settle("the forwarded webhooks").await?;
    tokio::time::sleep(Duration::from_secs(1)).await; // the last EMF lines

    // --- report ---
    let mut checks = Checks::default();
    println!("\n== final state against a single pass (the queues, the webhooks and the stream)");
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
    // The accounts the webhooks and the stream moved.
    expected.extend(doors.expected.iter().cloned());
    let balances: BTreeMap<String, i64> = stack
        .scan(TABLE_BALANCES)
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
        format!("no other accounts ({} found)", balances.len()),
        balances.len() == expected.len(),
    );

    let fines = stack.scan(TABLE_FINES).await?;
    checks.check(format!("fines: {} records for 4 distinct events (two providers' reports of one fine stay two, S3)", fines.len()), fines.len() == 4);
    let reviews = stack.scan(TABLE_FINE_REVIEWS).await?;
    let flagged: Vec<_> = reviews
        .iter()
        .filter(|r| items::number(r, "notices") == Some("2"))
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
    let intents = stack.scan(TABLE_INTENTS).await?;
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
    let marks = crate::audit::completed_marks(
        &stack.dynamodb,
        TABLE_MARKS,
        &[TABLE_INBOX, crate::stack::TABLE_ORDERS],
    )
    .await?;
    for (what, ok) in crate::audit::report(&accounts, &marks) {
        checks.check(what, ok);
    }
    // One application per distinct event; ledger-projector's 13: 10 sent to its queue, 3
    // forwarded from the webhook inbox; ledger-stream's 5 valid events on the stream.
    for (f, want) in [
        ("ledger-projector", 13),
        ("fine-notices", 4),
        ("payment-dispatcher", 3),
        ("webhook-receiver", 3),
        ("ledger-stream", 5),
    ] {
        let applied = accounts.get(f).and_then(|a| a.get("Applied")).copied();
        checks.check(
            format!(
                "{f} applied {} events, one per distinct event ({want})",
                applied.unwrap_or(0)
            ),
            applied == Some(want),
        );
    }

    println!("\n== dead-letter queues");
    for (f, want) in [
        ("ledger-projector", 3),
        ("fine-notices", 1),
        ("payment-dispatcher", 0),
    ] {
        let bodies = stack.bodies(&stack.queues[f].dlq_url).await?;
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
    crate::demo_http::run(&stack, &mut checks).await?;

    println!("\n== least privilege");
    let privileges = stack.check_privileges(root, false);
    if let Err(e) = &privileges {
        println!("  {e}");
    }
    checks.check(
        "every call each function made is granted by its role in infra/template.yaml".to_owned(),
        privileges.is_ok(),
    );

    println!();
    let verdict = checks.verdict("demo");
    if verdict.is_err() {
        stack.print_logs();
    }
    verdict
}
