//! `explain`: why a message is treated as it is — its key (or why it has none), its mark, the
//! verdict — from a file, stdin or a queue; or a mark by its key.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use lambda_dedup::{AttributeValue, DedupKey, Message};
use lambda_dedup_batch::{Explanation, Verdict};
use lambda_dedup_runtime::settings::Settings;
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::render::{explanation_json, mark_json, print_explanation};
use crate::sqs;

#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// A file holding the message body; `-` for stdin.
    file: Option<PathBuf>,
    /// A message attribute of the message, `NAME=VALUE` (repeatable).
    #[arg(long = "attribute", value_name = "NAME=VALUE")]
    attributes: Vec<String>,
    /// Read the message from this queue (URL), by `--message-id`; it is left in the queue.
    #[arg(long, requires = "message_id")]
    queue: Option<String>,
    /// The SQS message id to find in `--queue`.
    #[arg(long)]
    message_id: Option<String>,
    /// Look a mark up by its key (the `key` field of the functions' log lines), or by its
    /// digest alone (the part after the last `#`), within the function's namespace and consumer.
    #[arg(long, conflicts_with_all = ["file", "queue"])]
    key: Option<String>,
}

/// A mark's key as given: whole (`namespace#consumer#digest`), or its digest alone, within the
/// function's scope.
pub(crate) fn full_key(given: &str, settings: &Settings) -> DedupKey {
    if given.contains('#') {
        DedupKey::from_stored(given.to_owned())
    } else {
        DedupKey::from_stored(format!(
            "{}#{}#{given}",
            settings.scope.namespace(),
            settings.scope.consumer()
        ))
    }
}

fn parse_attributes(pairs: &[String]) -> Result<BTreeMap<String, AttributeValue>, Error> {
    pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_owned(), AttributeValue::String(v.to_owned())))
                .ok_or_else(|| Error::Attribute(p.clone()))
        })
        .collect()
}

pub(crate) async fn run(ctx: &Context, args: &ExplainArgs) -> Result<i32, Error> {
    let now = lambda_dedup::MarkStore::now(&ctx.store);
    if let Some(key) = &args.key {
        let full = full_key(key, &ctx.settings);
        let key = full.as_str();
        let mark = lambda_dedup::MarkStore::get(&ctx.store, &full).await?;
        if ctx.json {
            println!(
                "{}",
                json!({"key": key, "mark": mark.as_ref().map(|m| mark_json(m, now))})
            );
        } else {
            match &mark {
                None => println!("no live mark under {key}: a delivery would be applied"),
                Some(m) => {
                    let e = Explanation {
                        key: Some(m.key.clone()),
                        fingerprint: None,
                        event_time: None,
                        mark: Some(m.clone()),
                        verdict: Verdict::WouldApply,
                    };
                    print_explanation(&e, now);
                }
            }
        }
        return Ok(0);
    }
    let dedup = ctx.deduplicator()?;
    let message = match (&args.queue, &args.file) {
        (Some(queue), _) => {
            let id = args.message_id.as_deref().unwrap_or_default();
            find_in_queue(&sqs::client().await, queue, id).await?
        }
        (None, Some(path)) => {
            let mut body = Vec::new();
            if path.as_os_str() == "-" {
                std::io::stdin()
                    .read_to_end(&mut body)
                    .map_err(Error::Stdin)?;
            } else {
                body = std::fs::read(path).map_err(|e| Error::file(path, e))?;
            }
            Message {
                message_id: "cli".into(),
                body,
                attributes: parse_attributes(&args.attributes)?,
                group_id: None,
            }
        }
        (None, None) => return Err(Error::NoMessage),
    };
    let e = dedup.explain(&message).await?;
    if ctx.json {
        println!("{}", explanation_json(&e, now));
    } else {
        print_explanation(&e, now);
    }
    Ok(0)
}

async fn find_in_queue(sqs: &aws_sdk_sqs::Client, queue: &str, id: &str) -> Result<Message, Error> {
    let mut held = Vec::new();
    let mut found = None;
    let mut empty = 0;
    while found.is_none() && empty < 2 {
        let batch = sqs::receive(sqs, queue, 60).await?;
        if batch.is_empty() {
            empty += 1;
        }
        for m in batch {
            if m.message_id() == Some(id) {
                found = Some(sqs::library_message(&m));
            }
            held.extend(m.receipt_handle().map(str::to_owned));
        }
    }
    for r in &held {
        sqs::release(sqs, queue, r).await;
    }
    found.ok_or_else(|| Error::NotInQueue {
        id: id.to_owned(),
        queue: queue.to_owned(),
    })
}
