//! The account (S14), locally: from the functions' EMF lines (what CloudWatch would extract) and
//! the mark table, whether every delivery ended in exactly one outcome
//! (received = applied + duplicate + retry + conflict + rejected) and whether every applied
//! event left its mark: applied − purged ≤ completed marks ≤ applied + duplicate − purged
//! (purges counted by `mark-auditor` from the table's stream). Marks below the low end mean some
//! path applied an effect without leaving a mark; the high end allows for an ambiguous commit
//! (written, answer lost, counted as a retry, then seen as a duplicate) and no more: a mark that
//! no delivery ever acknowledged is above it.
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
            // Every applied event left a mark: a real loss (an effect written without its
            // mark) makes marks fall short. A mark may also exist for an event whose commit
            // succeeded but whose answer was lost (counted as a retry, then seen as a
            // duplicate), so the marks may exceed applied by at most the duplicates.
            let low = g("Applied").saturating_sub(g("Purged"));
            let high = (g("Applied") + g("Duplicate")).saturating_sub(g("Purged"));
            checks.push((
                format!(
                    "{f}: completed marks {m} within applied {} - purged {} = {low} and that + duplicates {} = {high}",
                    g("Applied"),
                    g("Purged"),
                    g("Duplicate"),
                ),
                (low..=high).contains(&m),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn account(pairs: &[(&str, u64)]) -> Accounts {
        let mut a = Accounts::new();
        a.insert(
            "ledger-projector".into(),
            pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        );
        a
    }

    fn holds(accounts: &Accounts, marks: u64) -> Vec<bool> {
        let marks = BTreeMap::from([("ledger-projector".to_owned(), marks)]);
        report(accounts, &marks)
            .into_iter()
            .map(|(_, ok)| ok)
            .collect()
    }

    /// S14: an effect written without its mark (5 applied, 4 marks) breaks the account.
    #[test]
    fn s14_an_effect_without_a_mark_fails_the_account() {
        let a = account(&[("Received", 5), ("Applied", 5)]);
        assert_eq!(holds(&a, 4), [true, false]);
        assert_eq!(holds(&a, 5), [true, true]);
    }

    /// S14: a delivery without an outcome (6 received, 5 outcomes) breaks the account.
    #[test]
    fn s14_a_dropped_outcome_fails_the_account() {
        let a = account(&[("Received", 6), ("Applied", 5)]);
        assert_eq!(holds(&a, 5), [false, true]);
    }

    /// S14: an ambiguous commit (written, answer lost: a retry, then a duplicate) does not
    /// break the account; a mark beyond every acknowledgement does.
    #[test]
    fn s14_an_ambiguous_commit_keeps_the_account_closed() {
        let a = account(&[
            ("Received", 6),
            ("Applied", 4),
            ("Retry", 1),
            ("Duplicate", 1),
        ]);
        assert_eq!(holds(&a, 5), [true, true], "the lost answer's mark");
        assert_eq!(holds(&a, 6), [true, false], "a mark nobody acknowledged");
    }
}
