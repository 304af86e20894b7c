//! `explain`: why a message is treated as it is — its key (or why it has none), its mark, the
//! verdict — from a file, stdin or a queue; or a mark by its key.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use lambda_dedup::{AttributeValue, DedupKey, Message};
use lambda_dedup_config::Settings;
use lambda_dedup_engine::{Explanation, Verdict};
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
    ///
    /// Reading a queue receives from it: each receive raises a message's receive count, and the
    /// messages scanned are hidden from consumers (on a FIFO queue, their group is held back)
    /// until the scan ends, at most 30 s, when they are let go at once. So a queue with a
    /// redrive policy (a function's source queue, where the count dead-letters) is refused
    /// unless `--live-queue`; a dead-letter queue is read freely.
    #[arg(long, requires = "message_id")]
    queue: Option<String>,
    /// Read `--queue` even though it has a redrive policy (see `--queue`).
    #[arg(long, requires = "queue")]
    live_queue: bool,
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
            find_in_queue(
                &sqs::client(&ctx.settings.sdk_timeouts).await,
                queue,
                id,
                args.live_queue,
            )
            .await?
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

/// How long `--queue` holds the messages it scans: long enough for a scan to move on, short
/// enough that a consumer waits little if the tool dies before letting them go.
const QUEUE_HOLD_SECONDS: i32 = 30;

/// The message `id` of `queue`, found by receiving (refused on a queue with a redrive policy
/// unless `live`). Every message received is let go at once when the scan ends, found or not.
async fn find_in_queue(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    id: &str,
    live: bool,
) -> Result<Message, Error> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .map_err(|e| Error::sqs(format_args!("read the attributes of {queue}"), e))?;
    let policy = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy));
    if let (Some(policy), false) = (policy, live) {
        return Err(Error::LiveQueue {
            queue: queue.to_owned(),
            policy: policy.clone(),
        });
    }
    let mut held: HashMap<String, String> = HashMap::new();
    let scanned = scan(sqs, queue, id, &mut held).await;
    for r in held.values() {
        sqs::release(sqs, queue, r).await;
    }
    scanned?.ok_or_else(|| Error::NotInQueue {
        id: id.to_owned(),
        queue: queue.to_owned(),
    })
}

/// Receives from `queue` until message `id` is found or two receives in a row bring nothing
/// new (a message whose hold ended comes back), keeping each message's newest receipt in `held`.
async fn scan(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    id: &str,
    held: &mut HashMap<String, String>,
) -> Result<Option<Message>, Error> {
    let mut nothing_new = 0;
    while nothing_new < 2 {
        let batch = sqs::receive(sqs, queue, QUEUE_HOLD_SECONDS).await?;
        let mut found = None;
        let mut new = 0;
        for m in batch {
            let (Some(mid), Some(receipt)) = (m.message_id(), m.receipt_handle()) else {
                continue;
            };
            if held.insert(mid.to_owned(), receipt.to_owned()).is_none() {
                new += 1;
            }
            if mid == id {
                found = Some(sqs::library_message(&m));
            }
        }
        if found.is_some() {
            return Ok(found);
        }
        nothing_new = if new == 0 { nothing_new + 1 } else { 0 };
    }
    Ok(None)
}
