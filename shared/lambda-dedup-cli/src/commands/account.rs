//! `account`: the S14 account of the function from its EMF lines and the mark table (the sums
//! and checks are the library's `account` module, shared with `cargo xtask audit`).

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use lambda_dedup_cli::account;
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::render::Progress;

#[derive(Debug, Args)]
pub(crate) struct AccountArgs {
    /// Log files holding the function's EMF lines (CloudWatch exports, or the local stack's
    /// `functions.log`); `-` for stdin.
    #[arg(long = "log", required = true)]
    logs: Vec<PathBuf>,
    /// Only EMF lines from this time on (RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Only EMF lines up to this time (RFC 3339).
    #[arg(long)]
    until: Option<String>,
}

fn epoch_ms(text: &str) -> Result<u64, Error> {
    let t = chrono::DateTime::parse_from_rfc3339(text).map_err(|_| Error::Time(text.to_owned()))?;
    Ok(u64::try_from(t.timestamp_millis()).unwrap_or(0))
}

pub(crate) async fn run(ctx: &Context, args: &AccountArgs) -> Result<i32, Error> {
    let range = account::Range {
        since_ms: args.since.as_deref().map(epoch_ms).transpose()?,
        until_ms: args.until.as_deref().map(epoch_ms).transpose()?,
    };
    let mut accounts = account::Accounts::new();
    for path in &args.logs {
        let text = if path.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(Error::Stdin)?;
            s
        } else {
            std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?
        };
        for line in text.lines() {
            account::add_line(line, range, &mut accounts);
        }
    }
    let consumer = ctx.settings.scope.consumer().to_owned();
    accounts.retain(|f, _| *f == consumer);
    let progress = Progress::new("mark table items read");
    let mut marks = lambda_dedup_dynamodb::count_marks(
        &ctx.client,
        ctx.settings.required_mark_table()?,
        &|n| progress.show(n),
    )
    .await?;
    progress.done();
    marks.retain(|f, _| *f == consumer);
    let checks = account::checks(&accounts, &marks);
    let closes = checks.iter().all(|c| c.holds);
    if ctx.json {
        let m = marks.get(&consumer).copied().unwrap_or_default();
        println!(
            "{}",
            json!({
                "function": consumer,
                "metrics": accounts.get(&consumer),
                "completed_marks": m.completed,
                "forgotten": m.forgotten,
                "checks": checks,
                "closes": closes,
            })
        );
    } else {
        print!("{}", account::table(&accounts, &marks));
        for c in &checks {
            println!(
                "  [{}] {}: {}",
                if c.holds { " ok " } else { "FAIL" },
                c.function,
                c.what
            );
        }
        println!(
            "{}",
            if closes {
                "the account closes"
            } else {
                "the account does not close"
            }
        );
    }
    Ok(if closes { 0 } else { 1 })
}
