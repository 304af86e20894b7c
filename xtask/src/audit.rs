//! The account (S14), locally: from the functions' EMF lines (what CloudWatch would extract) and
//! the mark table, whether every delivery ended in exactly one outcome and whether every applied
//! event left its mark (applied − purged − forgotten ≤ completed marks ≤ applied + duplicate −
//! purged − forgotten). The sums and checks are `lambda_dedup_cli::account`'s, the same as
//! `lambda-dedup account`'s; this module reads the local stack's log and table.
//!
//! `cargo xtask audit` runs against a stack started with `cargo xtask up`; the demo runs it at
//! the end.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek};
use std::path::Path;
use std::sync::Mutex;

use lambda_dedup_cli::account::{self, Range};
use lambda_dedup_dynamodb::MarkCounts;

use crate::Result;

/// Per-function sums of the EMF records the functions printed (S14).
pub(crate) type Accounts = BTreeMap<String, BTreeMap<String, u64>>;

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
        let mut all = accounts.lock().unwrap_or_else(|e| e.into_inner());
        account::add_line(&line, Range::default(), &mut all);
        line.clear();
    }
}

/// Completed and forgotten marks per consumer in the mark table `table` and, as completed
/// marks, the items of the tables `created` whose items are their own marks (create-once mode:
/// webhook-receiver's inbox, orders-api's orders).
pub(crate) async fn completed_marks(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    created: &[&str],
) -> Result<BTreeMap<String, MarkCounts>> {
    let mut marks = lambda_dedup_dynamodb::count_marks(client, table, &|_| {})
        .await
        .map_err(|e| format!("scan {table}: {e}"))?;
    for items in created {
        let counted = lambda_dedup_dynamodb::count_marks(client, items, &|_| {}).await;
        for (consumer, m) in counted.map_err(|e| format!("scan {items}: {e}"))? {
            marks.entry(consumer).or_default().completed += m.completed;
        }
    }
    Ok(marks)
}

/// Prints the account and returns, per check, its description and whether it holds.
pub(crate) fn report(
    accounts: &Accounts,
    marks: &BTreeMap<String, MarkCounts>,
) -> Vec<(String, bool)> {
    print!("{}", account::table(accounts, marks));
    account::checks(accounts, marks)
        .into_iter()
        .map(|c| (format!("{}: {}", c.function, c.what), c.holds))
        .collect()
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
    let inbox = env
        .get("INBOX_TABLE")
        .ok_or("functions.env has no inbox table")?;
    let client = lambda_dedup_testkit::local_client!(aws_sdk_dynamodb, *endpoint);
    let mut created = vec![*inbox];
    created.extend(env.get("ORDERS_TABLE"));
    let marks = completed_marks(&client, table, &created)
        .await
        .map_err(|e| format!("{e} (is `cargo xtask up` still running?)"))?;
    let accounts = Mutex::new(Accounts::new());
    read_emf(&logs.join("functions.log"), &mut 0, &accounts);
    let accounts = accounts.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut checks = crate::workload::Checks::default();
    for (what, ok) in report(&accounts, &marks) {
        checks.check(what, ok);
    }
    checks.verdict("audit")?;
    println!("xtask: audit: the account closes");
    Ok(())
}
