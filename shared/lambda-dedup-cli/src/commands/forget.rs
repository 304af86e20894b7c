//! `forget`: removes a mark on purpose so its event can be applied again; always audited
//! (`DynamoStore::forget` writes the audit item in the same transaction).

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
    /// Who asks (recorded); default: `$USER`.
    #[arg(long)]
    by: Option<String>,
    /// Remove it even while a claim's lease is live (the holder may be calling out now).
    #[arg(long)]
    force: bool,
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
    let forgotten = ctx
        .store
        .forget(ForgetRequest {
            key: &key,
            by: &by,
            reason: &args.reason,
            force: args.force,
        })
        .await?;
    let (code, text, value) = match &forgotten {
        Forgotten::Removed { mark, audit_key } => (
            0,
            format!(
                "forgotten: {} ({}), recorded as {audit_key} by {by}; warm containers see it gone within {} s (DEDUP_CACHE_SECONDS): a delivery of the event after that is applied",
                key.as_str(),
                mark.status.as_str(),
                cache_seconds
            ),
            json!({"forgotten": true, "mark": mark_json(mark, now), "audit_key": audit_key, "by": by,
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
