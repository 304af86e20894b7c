//! `forget`: removes a mark on purpose so its event can be applied again; always audited
//! (`DynamoStore::forget` writes the audit item in the same transaction). `--dry-run` says what
//! it would do and writes nothing; otherwise it asks for confirmation on a terminal, and off a
//! terminal (a script) it forgets only with `--yes`.

use clap::Args;
use lambda_dedup_dynamodb::{ForgetRequest, Forgotten};
use serde_json::json;

use crate::commands::explain::full_key;
use crate::context::Context;
use crate::error::Error;
use crate::render::{mark_json, time};

#[derive(Debug, Args)]
pub(crate) struct ForgetArgs {
    /// The mark's key (as `explain` or the functions' log lines show it), or its digest alone.
    key: String,
    /// Why (recorded in the audit item).
    #[arg(long)]
    reason: String,
    /// A note of who asks (recorded beside the caller's identity, which AWS gives:
    /// STS `GetCallerIdentity`); default: `$USER`.
    #[arg(long)]
    by: Option<String>,
    /// Remove it even while a claim's lease is live (the holder may be calling out now).
    #[arg(long)]
    force: bool,
    /// Say what would be forgotten (the mark as it stands, or why it would be refused) and
    /// write nothing.
    #[arg(long, conflicts_with = "yes")]
    dry_run: bool,
    /// Forget without asking: required when standard input is not a terminal (a script).
    #[arg(long)]
    yes: bool,
}

/// What the store holds under the key now, and what `forget` would do with it: the dry run's
/// answer, and what the confirmation shows.
fn would(
    mark: Option<&lambda_dedup::Mark>,
    force: bool,
    now: std::time::SystemTime,
) -> (i32, String, serde_json::Value) {
    match mark {
        None => (
            1,
            "no live mark: nothing would be forgotten".into(),
            json!({"dry_run": true, "would_forget": false, "why": "no_mark"}),
        ),
        Some(m) if m.lease_is_live(now) && !force => (
            1,
            format!(
                "would be refused: claimed under a live lease until {} (owner {}); --force would remove it",
                m.lease_expires_at.map(time).unwrap_or_default(),
                m.owner.as_ref().map(|o| o.as_str()).unwrap_or("?")
            ),
            json!({"dry_run": true, "would_forget": false, "why": "live_lease", "mark": mark_json(m, now)}),
        ),
        Some(m) => (
            0,
            format!(
                "would forget {} ({}), audited",
                m.key.as_str(),
                m.status.as_str()
            ),
            json!({"dry_run": true, "would_forget": true, "mark": mark_json(m, now)}),
        ),
    }
}

/// Whether the operator confirms: `--yes`, or "yes" typed at the terminal's prompt. Off a
/// terminal without `--yes` there is nobody to ask: refused.
fn confirmed(yes: bool, what: &str) -> Result<bool, Error> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::NotConfirmed);
    }
    let mut err = std::io::stderr();
    let _ = write!(err, "{what}\nforget it? type yes to go on: ");
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(Error::Stdin)?;
    Ok(answer.trim() == "yes")
}

/// Who the audit item names: `--by`, else `$USER`, else `unknown`.
pub(crate) fn operator(by: Option<&str>) -> String {
    by.map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) async fn run(ctx: &Context, args: &ForgetArgs) -> Result<i32, Error> {
    if args.reason.trim().is_empty() {
        return Err(Error::NoReason);
    }
    let key = full_key(&args.key, &ctx.settings);
    let now = lambda_dedup::MarkStore::now(&ctx.store);
    let by = operator(args.by.as_deref());
    let cache_seconds = ctx.settings.cache_max_age.as_secs();
    if args.dry_run || !args.yes {
        let mark = lambda_dedup::MarkStore::get(&ctx.store, &key).await?;
        let (code, text, value) = would(mark.as_ref(), args.force, now);
        if args.dry_run {
            if ctx.json {
                println!("{value}");
            } else {
                println!("{text}");
            }
            return Ok(code);
        }
        // Only a removal is confirmed; a refusal (no mark, a live lease) is the store's to say.
        if code == 0 && !confirmed(false, &text)? {
            println!("not confirmed: nothing forgotten");
            return Ok(1);
        }
    }
    let caller = ctx.caller().await?;
    let forgotten = ctx
        .store
        .forget(ForgetRequest {
            key: &key,
            by: &by,
            caller: &caller,
            reason: &args.reason,
            force: args.force,
        })
        .await?;
    let (code, text, value) = match &forgotten {
        Forgotten::Removed { mark, audit_key } => (
            0,
            format!(
                "forgotten: {} ({}), recorded as {audit_key} by {caller} ({by}); warm containers see it gone within {} s (DEDUP_CACHE_SECONDS): a delivery of the event after that is applied",
                key.as_str(),
                mark.status.as_str(),
                cache_seconds
            ),
            json!({"forgotten": true, "mark": mark_json(mark, now), "audit_key": audit_key, "by": by, "caller": caller,
                   "effective_after_seconds": cache_seconds}),
        ),
        Forgotten::NoMark => (
            1,
            format!("no live mark under {}: nothing to forget", key.as_str()),
            json!({"forgotten": false, "why": "no_mark"}),
        ),
        Forgotten::LiveLease(mark) => (
            1,
            format!(
                "refused: {} is claimed under a live lease until {} (owner {}); its holder may be calling out now. Use --force to remove it anyway",
                key.as_str(),
                mark.lease_expires_at.map(time).unwrap_or_default(),
                mark.owner.as_ref().map(|o| o.as_str()).unwrap_or("?")
            ),
            json!({"forgotten": false, "why": "live_lease", "mark": mark_json(mark, now)}),
        ),
        Forgotten::Changed => (
            1,
            "the mark changed while it was being forgotten: nothing written; look again".into(),
            json!({"forgotten": false, "why": "changed"}),
        ),
    };
    if ctx.json {
        println!("{value}");
    } else {
        println!("{text}");
    }
    Ok(code)
}
