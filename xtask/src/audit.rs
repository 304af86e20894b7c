//! The account (S14), locally: from the functions' EMF lines (what CloudWatch would extract) and
//! the mark table, whether every delivery ended in exactly one outcome
//! (received = applied + duplicate + retry + conflict + rejected) and whether every applied
//! event left its mark (completed marks = applied − purged, purges counted by `mark-auditor`
//! from the table's stream). If the second does not close, some path applied an effect without
//! leaving a mark.
//!
//! `cargo xtask audit` runs against a stack started with `cargo xtask up`; the demo runs it at
//! the end.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek};
use std::path::Path;
use std::sync::Mutex;

use crate::Result;
use crate::stack::Accounts;

/// The EMF metrics summed per function.
pub(crate) const METRICS: [&str; 7] = [
    "Received",
    "Applied",
    "Duplicate",
    "Retry",
    "Conflict",
    "Rejected",
    "Purged",
];

/// Reads EMF lines of `log` from `pos` on, adding them to `accounts`.
pub(crate) fn read_emf(log: &Path, pos: &mut u64, accounts: &Mutex<Accounts>) {
    let Ok(mut f) = std::fs::File::open(log) else {
        return;
    };
    if f.seek(std::io::SeekFrom::Start(*pos)).is_err() {
        return;
    }
    let mut reader = BufReader::new(f);
    let mut line = String::new();
    while let Ok(n) = reader.read_line(&mut line) {
        if n == 0 || !line.ends_with('\n') {
            break;
        }
        *pos += n as u64;
        // An EMF record is a JSON object with an `_aws` member, wherever that member is.
        if line.starts_with('{')
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
            && v.get("_aws").is_some()
            && let Some(function) = v["Function"].as_str()
        {
            let mut all = accounts.lock().unwrap_or_else(|e| e.into_inner());
            let entry = all.entry(function.to_owned()).or_default();
            for name in METRICS {
                *entry.entry(name.to_owned()).or_default() += v[name].as_u64().unwrap_or(0);
            }
        }
        line.clear();
    }
}

/// Completed marks per consumer in the mark table.
pub(crate) async fn completed_marks(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<BTreeMap<String, u64>> {
    let mut counts = BTreeMap::new();
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(crate::sdk_error(format!("scan {table}")))?;
        for item in out.items() {
            let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str);
            if s("status") == Some("COMPLETED")
                && let Some(consumer) = s("pk").and_then(|pk| pk.split('#').nth(1))
            {
                *counts.entry(consumer.to_owned()).or_default() += 1;
            }
        }
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(counts);
        }
    }
}

/// Prints the account and returns, per check, its description and whether it holds.
pub(crate) fn report(accounts: &Accounts, marks: &BTreeMap<String, u64>) -> Vec<(String, bool)> {
    let mut checks = Vec::new();
    println!(
        "  {:<20} {:>8} {:>8} {:>9} {:>6} {:>8} {:>8} {:>7} {:>6}",
        "function",
        "received",
        "applied",
        "duplicate",
        "retry",
        "conflict",
        "rejected",
        "purged",
        "marks"
    );
    let mut functions: Vec<&String> = accounts.keys().chain(marks.keys()).collect();
    functions.sort();
    functions.dedup();
    for f in functions {
        let a = accounts.get(f).cloned().unwrap_or_default();
        let g = |k: &str| a.get(k).copied().unwrap_or(0);
        let m = marks.get(f).copied().unwrap_or(0);
        println!(
            "  {f:<20} {:>8} {:>8} {:>9} {:>6} {:>8} {:>8} {:>7} {m:>6}",
            g("Received"),
            g("Applied"),
            g("Duplicate"),
            g("Retry"),
            g("Conflict"),
            g("Rejected"),
            g("Purged")
        );
        if g("Received") > 0 {
            let sum = g("Applied") + g("Duplicate") + g("Retry") + g("Conflict") + g("Rejected");
            checks.push((
                format!(
                    "{f}: received {} = applied + duplicate + retry + conflict + rejected = {sum}",
                    g("Received")
                ),
                g("Received") == sum,
            ));
        }
        if g("Applied") > 0 || m > 0 {
            let expected = g("Applied").saturating_sub(g("Purged"));
            checks.push((
                format!(
                    "{f}: completed marks {m} = applied {} - purged {} = {expected}",
                    g("Applied"),
                    g("Purged")
                ),
                m == expected,
            ));
        }
    }
    checks
}

/// `cargo xtask audit`: against the stack of a running `cargo xtask up`.
pub(crate) async fn run(root: &Path) -> Result<()> {
    let logs = root.join(".cache").join("logs");
    let env_text = std::fs::read_to_string(logs.join("functions.env"))
        .map_err(|_| "no local stack found: start one with `cargo xtask up` first".to_owned())?;
    let env: BTreeMap<&str, &str> = env_text.lines().filter_map(|l| l.split_once('=')).collect();
    let endpoint = env
        .get("AWS_ENDPOINT_URL_DYNAMODB")
        .ok_or("functions.env has no endpoint")?;
    let table = env
        .get("DEDUP_MARK_TABLE")
        .ok_or("functions.env has no mark table")?;
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "audit",
            ))
            .endpoint_url(*endpoint)
            .build(),
    );
    let marks = completed_marks(&client, table)
        .await
        .map_err(|e| format!("{e} (is `cargo xtask up` still running?)"))?;
    let accounts = Mutex::new(Accounts::new());
    read_emf(&logs.join("functions.log"), &mut 0, &accounts);
    let accounts = accounts.into_inner().unwrap_or_else(|e| e.into_inner());
    let checks = report(&accounts, &marks);
    let failed: Vec<&(String, bool)> = checks.iter().filter(|(_, ok)| !ok).collect();
    for (what, ok) in &checks {
        println!("  [{}] {what}", if *ok { " ok " } else { "FAIL" });
    }
    if failed.is_empty() {
        println!("xtask: audit: the account closes");
        Ok(())
    } else {
        Err(format!(
            "the account does not close ({} check(s))",
            failed.len()
        ))
    }
}
