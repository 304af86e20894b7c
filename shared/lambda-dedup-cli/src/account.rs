//! The account (S14) over time: from a function's EMF lines (what CloudWatch extracts) and the
//! mark table's counts, whether every delivery ended in exactly one outcome
//! (received = applied + duplicate + retry + conflict + rejected) and whether every applied
//! event left its mark:
//! applied − purged − forgotten ≤ completed marks ≤ applied + duplicate − purged − forgotten.
//! Purges are counted by `mark-auditor` from the table's stream (its `Purged` EMF metric);
//! forgotten marks by their audit items (`lambda_dedup_dynamodb::forget`). Marks below the low
//! end mean some path applied an effect without leaving a mark; the high end allows for an
//! ambiguous commit (written, answer lost, counted as a retry, then seen as a duplicate) and no
//! more. `lambda-dedup account` and `cargo xtask audit` both use this module.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lambda_dedup_dynamodb::MarkCounts;

/// The EMF metrics summed per function: the account's, and the TTL purges `mark-auditor` counts.
fn metrics() -> impl Iterator<Item = &'static str> {
    lambda_dedup_engine::Account::METRICS
        .into_iter()
        .chain(["Purged"])
}

/// Metric sums per function (the EMF `Function` dimension), per metric name.
pub type Accounts = BTreeMap<String, BTreeMap<String, u64>>;

/// A time range in epoch milliseconds, both ends included (`None`: open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Range {
    /// From.
    pub since_ms: Option<u64>,
    /// Until.
    pub until_ms: Option<u64>,
}

impl Range {
    fn contains(&self, ms: Option<u64>) -> bool {
        match ms {
            None => self.since_ms.is_none() && self.until_ms.is_none(),
            Some(t) => self.since_ms.is_none_or(|s| t >= s) && self.until_ms.is_none_or(|u| t <= u),
        }
    }
}

/// Adds one log line to `accounts` when it is an EMF record (a JSON object with an `_aws`
/// member and a `Function`) whose `_aws.Timestamp` is in `range`; returns whether it was.
pub fn add_line(line: &str, range: Range, accounts: &mut Accounts) -> bool {
    let line = line.trim_start();
    if !line.starts_with('{') {
        return false;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return false;
    };
    let Some(function) = v.get("_aws").and(v["Function"].as_str()) else {
        return false;
    };
    if !range.contains(v["_aws"]["Timestamp"].as_u64()) {
        return false;
    }
    let entry = accounts.entry(function.to_owned()).or_default();
    for name in metrics() {
        *entry.entry(name.to_owned()).or_default() += v[name].as_u64().unwrap_or(0);
    }
    true
}

/// One check of the account: what it says, and whether it holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// The function (consumer).
    pub function: String,
    /// The sum, written out.
    pub what: String,
    /// Whether it holds.
    pub holds: bool,
}

fn functions<'a>(accounts: &'a Accounts, marks: &'a BTreeMap<String, MarkCounts>) -> Vec<&'a str> {
    let mut all: Vec<&str> = accounts
        .keys()
        .chain(marks.keys())
        .map(String::as_str)
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The checks of the account, per function.
pub fn checks(accounts: &Accounts, marks: &BTreeMap<String, MarkCounts>) -> Vec<Check> {
    let mut out = Vec::new();
    for f in functions(accounts, marks) {
        let a = accounts.get(f).cloned().unwrap_or_default();
        let g = |k: &str| a.get(k).copied().unwrap_or(0);
        let m = marks.get(f).copied().unwrap_or_default();
        if g("Received") > 0 {
            let sum = g("Applied") + g("Duplicate") + g("Retry") + g("Conflict") + g("Rejected");
            out.push(Check {
                function: f.to_owned(),
                what: format!(
                    "received {} = applied + duplicate + retry + conflict + rejected = {sum}",
                    g("Received")
                ),
                holds: g("Received") == sum,
            });
        }
        if g("Applied") > 0 || m.completed > 0 {
            // Every applied event left a mark, unless purged by TTL or forgotten on purpose;
            // an ambiguous commit may add one mark per duplicate, and nothing more.
            let gone = g("Purged") + m.forgotten;
            let low = g("Applied").saturating_sub(gone);
            let high = (g("Applied") + g("Duplicate")).saturating_sub(gone);
            out.push(Check {
                function: f.to_owned(),
                what: format!(
                    "completed marks {} within applied {} - purged {} - forgotten {} = {low} and that + duplicates {} = {high}",
                    m.completed,
                    g("Applied"),
                    g("Purged"),
                    m.forgotten,
                    g("Duplicate"),
                ),
                holds: (low..=high).contains(&m.completed),
            });
        }
    }
    out
}

/// The account as a table for people.
pub fn table(accounts: &Accounts, marks: &BTreeMap<String, MarkCounts>) -> String {
    let mut out = format!(
        "  {:<20} {:>8} {:>8} {:>9} {:>6} {:>8} {:>8} {:>7} {:>9} {:>6}\n",
        "function",
        "received",
        "applied",
        "duplicate",
        "retry",
        "conflict",
        "rejected",
        "purged",
        "forgotten",
        "marks"
    );
    for f in functions(accounts, marks) {
        let a = accounts.get(f).cloned().unwrap_or_default();
        let g = |k: &str| a.get(k).copied().unwrap_or(0);
        let m = marks.get(f).copied().unwrap_or_default();
        let _ = writeln!(
            out,
            "  {f:<20} {:>8} {:>8} {:>9} {:>6} {:>8} {:>8} {:>7} {:>9} {:>6}",
            g("Received"),
            g("Applied"),
            g("Duplicate"),
            g("Retry"),
            g("Conflict"),
            g("Rejected"),
            g("Purged"),
            m.forgotten,
            m.completed
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(pairs: &[(&str, u64)]) -> Accounts {
        Accounts::from([(
            "ledger-projector".to_owned(),
            pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        )])
    }

    fn holds(accounts: &Accounts, completed: u64, forgotten: u64) -> Vec<bool> {
        let marks = BTreeMap::from([(
            "ledger-projector".to_owned(),
            MarkCounts {
                completed,
                forgotten,
            },
        )]);
        checks(accounts, &marks)
            .into_iter()
            .map(|c| c.holds)
            .collect()
    }

    /// S14: an effect written without its mark (5 applied, 4 marks) breaks the account.
    #[test]
    fn s14_an_effect_without_a_mark_fails_the_account() {
        let a = account(&[("Received", 5), ("Applied", 5)]);
        assert_eq!(holds(&a, 4, 0), [true, false]);
        assert_eq!(holds(&a, 5, 0), [true, true]);
    }

    /// S14: a delivery without an outcome (6 received, 5 outcomes) breaks the account.
    #[test]
    fn s14_a_dropped_outcome_fails_the_account() {
        let a = account(&[("Received", 6), ("Applied", 5)]);
        assert_eq!(holds(&a, 5, 0), [false, true]);
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
        assert_eq!(holds(&a, 5, 0), [true, true], "the lost answer's mark");
        assert_eq!(holds(&a, 6, 0), [true, false], "a mark nobody acknowledged");
    }

    /// S14: a mark forgotten on purpose and applied again: applied counts it twice, the table
    /// holds it once, and its audit item closes the gap; without the audit item it would not.
    #[test]
    fn s14_a_forgotten_mark_is_subtracted() {
        let a = account(&[("Received", 3), ("Applied", 3)]);
        assert_eq!(holds(&a, 2, 1), [true, true]);
        assert_eq!(
            holds(&a, 2, 0),
            [true, false],
            "applied twice, one mark, no audit"
        );
    }

    /// EMF lines are summed per function, within the time range; other lines are skipped.
    #[test]
    fn emf_lines_in_range_are_summed() {
        let mut a = Accounts::new();
        let line = |ts: u64, n: u64| {
            format!(
                r#"{{"_aws":{{"Timestamp":{ts},"CloudWatchMetrics":[]}},"Function":"f","Received":{n},"Applied":{n}}}"#
            )
        };
        let range = Range {
            since_ms: Some(100),
            until_ms: Some(200),
        };
        assert!(add_line(&line(150, 2), range, &mut a));
        assert!(!add_line(&line(250, 5), range, &mut a), "after the range");
        assert!(!add_line(
            r#"{"level":"INFO","Function":"f"}"#,
            range,
            &mut a
        ));
        assert!(!add_line("not json", range, &mut a));
        assert!(add_line(&line(250, 5), Range::default(), &mut a));
        assert_eq!(a["f"]["Received"], 7);
    }
}
