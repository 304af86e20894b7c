//! `cargo xtask soak [N]`: the model-based fault schedules of `tests/integration/model.rs`, N of
//! them (default 500; `cargo xtask test` runs 32), against a fresh DynamoDB Local; prints how
//! many schedules and faults it tried and what it found, and records them in
//! `docs/RELIABILITY.md`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Result;
use crate::dynamodb::DynamoLocal;

pub(crate) fn run(root: &Path, cases: u64) -> Result<()> {
    let ddb = DynamoLocal::start(root)?;
    let stats = root.join(".cache").join("model-stats.json");
    let _ = std::fs::remove_file(&stats);
    println!(
        "xtask: soak: {cases} generated schedules against DynamoDB Local at {}",
        ddb.endpoint()
    );
    let started = std::time::Instant::now();
    let status = Command::new(crate::cargo())
        .current_dir(root)
        .args([
            "test",
            "--quiet",
            "-p",
            "dedup-tests",
            "--test",
            "integration",
            "--",
            "model::",
        ])
        .env("DEDUP_DYNAMODB_ENDPOINT", ddb.endpoint())
        .env("DEDUP_MODEL_CASES", cases.to_string())
        .env("DEDUP_MODEL_STATS", &stats)
        .status()
        .map_err(|e| format!("cargo test: {e}"))?;
    let secs = started.elapsed().as_secs();
    let s: Value = std::fs::read_to_string(&stats)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let g = |k: &str| s[k].as_u64().unwrap_or(0);
    let rows = [
        ("schedules run", g("schedules")),
        ("batches", g("batches")),
        ("deliveries (before redeliveries)", g("deliveries")),
        ("conflicting payloads sent", g("conflicting_payloads")),
        (
            "lost answers (crash after processing, before acknowledgement)",
            g("lost_answers"),
        ),
        ("store outages", g("store_outages")),
        ("concurrent batch pairs", g("concurrent_pairs")),
        ("redelivery rounds", g("redeliveries")),
        ("double effects found (must be 0)", g("double_effects")),
        ("messages lost (must be 0)", g("lost_messages")),
    ];
    for (what, n) in rows {
        println!("  {what:<64} {n:>8}");
    }
    let mut md = String::from(
        "# Reliability\n\nNumbers from `cargo xtask soak`: model-based schedules (`tests/integration/model.rs`) \
         against DynamoDB Local, each checked against a reference model: every event applied exactly once, \
         nothing acknowledged unprocessed, conflicts only for a payload other than the applied one, every \
         batch's account closed. `cargo xtask test` runs 32 schedules on every CI run.\n\n| | |\n| --- | ---: |\n",
    );
    for (what, n) in rows {
        md.push_str(&format!("| {what} | {n} |\n"));
    }
    md.push_str(&format!(
        "\nRun of {cases} schedules, {secs} s, result: {}.\n\nNot covered yet: process-level chaos \
         (`kill -9` of a function mid-batch, restarting DynamoDB Local) and TTL expiry inside a \
         schedule (beyond the retention horizon a redelivery is a new event by design, S9).\n",
        if status.success() { "passed" } else { "FAILED" }
    ));
    std::fs::create_dir_all(root.join("docs")).map_err(|e| e.to_string())?;
    std::fs::write(root.join("docs").join("RELIABILITY.md"), md).map_err(|e| e.to_string())?;
    println!("xtask: soak: wrote docs/RELIABILITY.md ({secs} s)");
    if status.success() {
        Ok(())
    } else {
        Err("a schedule broke the model".into())
    }
}
