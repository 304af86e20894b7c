//! `cargo xtask soak [N] [--memory M]`: the model-based fault schedules of
//! `tests/integration/model.rs` (transactional flow, with poison effects and DLQ redrives) and
//! `tests/integration/model_leased.rs` (leased flow with crashes, lease and TTL expiry, and
//! providers that refuse a key, run slow or forget keys), N of each (default 500; `cargo xtask
//! test` runs 32 and 16) against a fresh local DynamoDB (Dynoxide); then M transactional
//! and M leased schedules (default 100,000 each) on the memory store, which passes the same
//! conformance suite, in several test processes at once.
//! Prints how many schedules and faults they tried and what they found, and records the tables
//! in `docs/RELIABILITY.md`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Result;
use crate::dynamodb::LocalDynamo;

/// A table's rows: what was counted, and how many.
type Rows = Vec<(&'static str, u64)>;

fn read_stats(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The rows of a soak's table: each label with the count `stats` has under its key.
fn rows(stats: &Value, table: &[(&'static str, &str)]) -> Rows {
    table
        .iter()
        .map(|(label, key)| (*label, stats[key].as_u64().unwrap_or(0)))
        .collect()
}

/// What the transactional flow's schedules count (`tests/integration/model.rs`).
const TRANSACTIONAL: [(&str, &str); 17] = [
    ("schedules run", "schedules"),
    ("batches", "batches"),
    ("deliveries (before redeliveries)", "deliveries"),
    ("conflicting payloads sent", "conflicting_payloads"),
    (
        "lost answers (crash after processing, before acknowledgement)",
        "lost_answers",
    ),
    ("store outages", "store_outages"),
    ("concurrent batch pairs", "concurrent_pairs"),
    ("redelivery rounds", "redeliveries"),
    (
        "poison messages sent (an effect DynamoDB refuses for good)",
        "poison_messages",
    ),
    (
        "poison deliveries rejected (effect_refused, never applied)",
        "poison_rejections",
    ),
    ("messages dead-lettered", "dead_lettered"),
    ("DLQ redrives (days later)", "dlq_redrives"),
    (
        "DLQ redrives past the retention",
        "dlq_redrives_past_retention",
    ),
    ("messages redriven", "redriven_messages"),
    ("late events (never applied)", "late_events"),
    ("double effects found (must be 0)", "double_effects"),
    ("messages lost (must be 0)", "lost_messages"),
];

/// What the leased flow's schedules count (`tests/integration/model_leased.rs`).
const LEASED: [(&str, &str); 22] = [
    ("schedules run", "schedules"),
    ("batches (with redelivery batches)", "batches"),
    ("deliveries (with redeliveries)", "deliveries"),
    (
        "crashes after claim (killed holding the claim, before the call)",
        "crashes_after_claim",
    ),
    (
        "crashes after the provider call, before complete",
        "crashes_after_call",
    ),
    (
        "crashes during complete (never sent, or written and answer lost)",
        "crashes_during_complete",
    ),
    (
        "lease expiries (clock moved past the lease)",
        "lease_expiries",
    ),
    (
        "TTL expiries (clock moved past the retention: a new epoch)",
        "ttl_expiries",
    ),
    ("provider 5xx answers", "provider_5xx"),
    (
        "provider timeouts (applied, answered after the client gave up)",
        "provider_timeouts",
    ),
    ("concurrent batch pairs", "concurrent_pairs"),
    ("redelivery rounds", "redeliveries"),
    (
        "schedules whose provider refuses one key for good (422)",
        "refused_keys",
    ),
    (
        "provider refusals (invalid_payload, never applied)",
        "provider_rejections",
    ),
    ("messages dead-lettered", "dead_lettered"),
    (
        "slow provider calls (past the invocation deadline)",
        "slow_provider_calls",
    ),
    (
        "schedules whose provider forgets keys",
        "forgetful_providers",
    ),
    ("provider key retentions passed", "provider_key_expiries"),
    ("keys the provider forgot", "forgotten_keys"),
    (
        "takeovers past the key retention (provider_key_expired, no call)",
        "provider_key_expired",
    ),
    ("double effects found (must be 0)", "double_effects"),
    ("messages lost (must be 0)", "lost_messages"),
];

/// Test processes the memory-store soak runs side by side.
const MEMORY_PROCESSES: u64 = 12;

/// The integration test binary, built (debug) if need be.
fn integration_binary(root: &Path) -> Result<std::path::PathBuf> {
    let out = Command::new(crate::cargo())
        .current_dir(root)
        .args([
            "test",
            "-p",
            "dedup-tests",
            "--test",
            "integration",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cargo test --no-run: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"]["name"] == "integration")
        .find_map(|v| v["executable"].as_str().map(std::path::PathBuf::from))
        .ok_or_else(|| "cargo test --no-run named no integration test binary".into())
}

/// Sums the counts of several stats files.
fn sum_stats(paths: &[std::path::PathBuf]) -> Value {
    let mut sum = serde_json::Map::new();
    for p in paths {
        if let Value::Object(m) = read_stats(p) {
            for (k, v) in m {
                let total =
                    sum.get(&k).and_then(Value::as_u64).unwrap_or(0) + v.as_u64().unwrap_or(0);
                sum.insert(k, Value::from(total));
            }
        }
    }
    Value::Object(sum)
}

/// Runs `cases` schedules per flow on the memory store, split over [`MEMORY_PROCESSES`] runs of
/// the test binary at once. Returns whether all passed, and the summed stats of each flow.
fn memory_soak(root: &Path, cache: &Path, cases: u64) -> Result<(bool, Value, Value)> {
    let bin = integration_binary(root)?;
    let per = cases.div_ceil(MEMORY_PROCESSES);
    let files = |flow: &str| -> Vec<std::path::PathBuf> {
        (0..MEMORY_PROCESSES)
            .map(|i| cache.join(format!("model-stats-memory-{flow}-{i}.json")))
            .collect()
    };
    let (transactional, leased) = (files("transactional"), files("leased"));
    for f in transactional.iter().chain(&leased) {
        let _ = std::fs::remove_file(f);
    }
    let ok = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..MEMORY_PROCESSES as usize)
            .map(|i| {
                let (bin, t, l) = (&bin, &transactional[i], &leased[i]);
                scope.spawn(move || {
                    crate::process::run(
                        Command::new(bin)
                            .current_dir(root.join("tests"))
                            .args(["--quiet", "on_the_memory_store"])
                            .env("DEDUP_MODEL_CASES", per.to_string())
                            .env("DEDUP_MODEL_STATS", t)
                            .env("DEDUP_MODEL_STATS_LEASED", l),
                    )
                    .is_ok_and(|s| s.success())
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().unwrap_or(false))
            .fold(true, |a, b| a & b)
    });
    Ok((ok, sum_stats(&transactional), sum_stats(&leased)))
}

fn print_rows(title: &str, rows: &Rows) {
    println!("  {title}");
    for (what, n) in rows {
        println!("    {what:<68} {n:>8}");
    }
}

fn md_table(rows: &Rows) -> String {
    let mut md = String::from("| | |\n| --- | ---: |\n");
    for (what, n) in rows {
        md.push_str(&format!("| {what} | {n} |\n"));
    }
    md
}

pub(crate) fn run(root: &Path, cases: u64, memory: u64) -> Result<()> {
    let ddb = LocalDynamo::start(root)?;
    let cache = root.join(".cache");
    let stats = cache.join("model-stats.json");
    let stats_leased = cache.join("model-stats-leased.json");
    let _ = std::fs::remove_file(&stats);
    let _ = std::fs::remove_file(&stats_leased);
    println!(
        "xtask: soak: {cases} generated schedules per flow against the local DynamoDB (Dynoxide, in memory) at {}",
        ddb.endpoint()
    );
    let started = std::time::Instant::now();
    // `model` selects both `model::` and `model_leased::`; they run side by side.
    let status = crate::process::run(
        Command::new(crate::cargo())
            .current_dir(root)
            .args([
                "test",
                "--quiet",
                "-p",
                "dedup-tests",
                "--test",
                "integration",
                "--",
                "model",
                "--skip",
                "on_the_memory_store",
            ])
            .env("DEDUP_DYNAMODB_ENDPOINT", ddb.endpoint())
            .env("DEDUP_MODEL_CASES", cases.to_string())
            .env("DEDUP_MODEL_STATS", &stats)
            .env("DEDUP_MODEL_STATS_LEASED", &stats_leased),
    )
    .map_err(|e| format!("cargo test: {e}"))?;
    let secs = started.elapsed().as_secs();
    drop(ddb);
    let mut memory_status = true;
    let mut memory_secs = 0;
    let (mut on_memory, mut leased_on_memory) = (Value::Null, Value::Null);
    if memory > 0 {
        crate::step(format!(
            "soak: {memory} schedules per flow on the memory store, in {MEMORY_PROCESSES} processes"
        ));
        let started = std::time::Instant::now();
        let (ok, t, l) = memory_soak(root, &cache, memory)?;
        memory_status = ok;
        on_memory = t;
        leased_on_memory = l;
        memory_secs = started.elapsed().as_secs();
    }
    let transactional = rows(&read_stats(&stats), &TRANSACTIONAL);
    let on_memory = rows(&on_memory, &TRANSACTIONAL);
    let leased_on_memory = rows(&leased_on_memory, &LEASED);
    let leased = rows(&read_stats(&stats_leased), &LEASED);
    print_rows("transactional flow (model.rs)", &transactional);
    print_rows("leased flow (model_leased.rs)", &leased);
    if memory > 0 {
        print_rows("transactional flow on the memory store", &on_memory);
        print_rows("leased flow on the memory store", &leased_on_memory);
    }
    let mut md = String::from(
        "# Reliability\n\nNumbers from `cargo xtask soak`: model-based schedules against the local DynamoDB (Dynoxide 3.2, in memory), each \
         checked against a reference model. `cargo xtask test` runs 32 transactional and 16 leased \
         schedules on every CI run.\n\n## Transactional flow\n\n`tests/integration/model.rs`: duplicates, \
         producer retries, payload conflicts, lost answers, store outages, concurrent batches, per-message or \
         batch-transaction mode; and permanent faults: poison messages whose effect DynamoDB refuses for good, \
         and the DLQ redriven days later (within and past the retention). Checked: every event applied exactly \
         once, across redrives; nothing acknowledged unprocessed; conflicts only for a payload other than the \
         applied one; a poison rejected (`effect_refused`), counted, never applied, and the DLQ holding only \
         poisons and real conflicts; a redrive past the retention rejected as `late_event`; a good event applied \
         at its first receive in a step with no fault; every batch's account closed.\n\n",
    );
    md.push_str(&md_table(&transactional));
    md.push_str(
        "\n## Leased flow (external calls)\n\n`tests/integration/model_leased.rs`: payments sent to an \
         in-process fake provider with `Idempotency-Key` semantics through `Deduplicator::leased`, with \
         processes killed after the claim, after the call and during complete, provider 503s and timeouts, \
         leases and TTLs expiring on a manual clock; and permanent faults: a provider that refuses one key for \
         good (422), one slower than the invocation's deadline, one that forgets keys after a retention. \
         Checked: the provider applied each event exactly once overall; each event applied exactly once per \
         retention epoch; nothing acknowledged that the provider had not applied; a delivery during a live \
         lease retried, never processed; the refused key rejected (`invalid_payload`), dead-lettered, never \
         applied; a takeover past the provider's key retention never calls it (`provider_key_expired`, for \
         reconciliation); every mark's lease and first-attempt time as the model says; every batch's account \
         closed; every final mark `COMPLETED` (or kept for reconciliation). These schedules found two ways a \
         payment could be made twice after the provider forgot its key (a release that deleted the mark; a \
         first-attempt time written in a second request), both fixed in the store.\n\n",
    );
    md.push_str(&md_table(&leased));
    md.push_str(&format!(
        "\nRun of {cases} schedules per flow, {secs} s, result: {}.\n\n## Process-level chaos\n\n\
         `cargo xtask test` (and `cargo xtask chaos` alone) ends with three runs against the whole local \
         stack (`xtask/src/chaos.rs`): `kill -9` of `ledger-projector` mid-batch, with the local DynamoDB \
         frozen (SIGSTOP) meanwhile so that the kill lands inside the batch, repeated until two kills have \
         cut an invocation short; `kill -9` of `payment-dispatcher` while the provider holds its call \
         (the provider applies it anyway; the redelivery waits out the lease and gets the replay under the \
         same key); the local DynamoDB stopped and restarted (same port, data on disk) while both functions \
         are busy. Each workload holds producer retries and one message without an identity. After the \
         queues drain: balances equal one clean pass, each payment applied exactly once at the provider, \
         every mark `COMPLETED`, each DLQ holds exactly the message without an identity (15 checks). A \
         deliberately broken trigger that acknowledged a killed invocation's batch fails them.\n",
        if status.success() { "passed" } else { "FAILED" }
    ));
    if memory > 0 {
        md.push_str(&format!(
            "\n## Both flows on the memory store\n\nThe same schedules and checks as above, on \
             `lambda-dedup-memory`'s store, which passes the conformance suite the DynamoDB store passes \
             (`tests/integration/conformance.rs`); the leased flow still calls the fake provider \
             over HTTP. {memory} schedules per flow, run by {MEMORY_PROCESSES} test processes side by \
             side (each with its own random seeds; the leased schedules mostly wait on the \
             provider's real-time delays), in {memory_secs} s; result: {}.\n\n### Transactional \
             flow\n\n",
            if memory_status { "passed" } else { "FAILED" }
        ));
        md.push_str(&md_table(&on_memory));
        md.push_str("\n### Leased flow\n\n");
        md.push_str(&md_table(&leased_on_memory));
    }
    std::fs::create_dir_all(root.join("docs")).map_err(|e| e.to_string())?;
    std::fs::write(root.join("docs").join("RELIABILITY.md"), md).map_err(|e| e.to_string())?;
    println!("xtask: soak: wrote docs/RELIABILITY.md ({secs} s)");
    if status.success() && memory_status {
        Ok(())
    } else {
        Err("a schedule broke the model".into())
    }
}
