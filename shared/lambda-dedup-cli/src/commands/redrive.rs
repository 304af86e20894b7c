//! `redrive`: classifies a dead-letter queue's messages with the function's own verdicts and
//! moves back only those that would be applied (late events to reconciliation), each deleted
//! from the DLQ only once its send is confirmed.
//!
//! The scan ends once two receives in a row bring no message it has not seen: a message whose
//! hold ends before the scan does is received again, and is neither classified nor counted
//! twice. Its exit status says whether it did what it should: 1 when a message it should have
//! moved was left (a send failed), so a script cannot take "moved 0" for success.
//!
//! To a FIFO queue (a URL ending in `.fifo`) each message goes with its own group id and, as
//! its deduplication id, the key's `idempotency_key` (the same event sent twice within SQS's
//! five minutes, by a run killed before its delete and the next, is taken once). Messages are
//! sent one at a time in the order received, which within a group is the group's order; once
//! a send in a group fails, the group's later messages are left too, so none overtakes it. A
//! FIFO DLQ hands out no more of a group while one of its messages is held, so the messages a
//! redrive leaves there are let go after each receive, not at the end.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use aws_sdk_sqs::operation::send_message::builders::SendMessageFluentBuilder;
use aws_sdk_sqs::types::MessageAttributeValue;
use clap::Args;
use lambda_dedup::DedupKey;
use lambda_dedup_dynamodb::{ForgetRequest, Forgotten};
use lambda_dedup_engine::{Explanation, Verdict};
use serde_json::{Value, json};

use crate::commands::forget::operator;
use crate::context::Context;
use crate::error::Error;
use crate::render::{Progress, sentence, time};
use crate::sqs;

#[derive(Debug, Args)]
pub(crate) struct RedriveArgs {
    /// The dead-letter queue (URL).
    #[arg(long)]
    dlq: String,
    /// The function's source queue (URL), where messages that would be applied go back.
    #[arg(long)]
    source: String,
    /// Where late events go (URL); default: the function's `DEDUP_RECONCILIATION_QUEUE_URL`.
    #[arg(long)]
    reconciliation: Option<String>,
    /// Classify and list only; nothing is sent, deleted or changed.
    #[arg(long)]
    dry_run: bool,
    /// Also move conflicts back, once accepted: once the new payload is sent, the stored mark is
    /// forgotten (audited, with `--reason`) so it is applied, in addition to the first one's
    /// effect. A failed send forgets nothing.
    #[arg(long, requires = "reason")]
    accept_conflicts: bool,
    /// Why conflicts are accepted (recorded in each forgotten mark's audit item).
    #[arg(long)]
    reason: Option<String>,
    /// Write the report (JSON: what was moved where, what was left and why) to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// How long received messages stay invisible while the redrive holds them (seconds); those
    /// it leaves are made visible again when it ends. A hold shorter than the scan is harmless:
    /// a message received again is not classified again.
    #[arg(long, default_value_t = 300)]
    hold_seconds: i32,
    /// Testing only (also `LAMBDA_DEDUP_EXIT_AFTER_SENDS`): exit (status 3) right after this
    /// many sends, before their deletes.
    #[arg(long, hide = true)]
    exit_after_sends: Option<usize>,
}

/// Why one message could not be sent on: it stays in the DLQ, this in its row.
#[derive(Debug, thiserror::Error)]
enum SendFailed {
    /// SQS refused or did not answer the send (the SDK's error with its whole context).
    #[error("{}", aws_sdk_sqs::error::DisplayErrorContext(.0.as_ref()))]
    Sqs(Box<aws_sdk_sqs::error::SdkError<aws_sdk_sqs::operation::send_message::SendMessageError>>),
    /// SQS's builder refused a message attribute.
    #[error(transparent)]
    Attribute(#[from] aws_sdk_sqs::error::BuildError),
}

/// Where a redrive sends a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Destination {
    Source,
    Reconciliation,
}

fn destination(v: &Verdict, accept_conflicts: bool, reconciliation: bool) -> Option<Destination> {
    match v {
        Verdict::WouldApply => Some(Destination::Source),
        Verdict::Conflict { .. } if accept_conflicts => Some(Destination::Source),
        v if v.for_reconciliation() && reconciliation => Some(Destination::Reconciliation),
        _ => None,
    }
}

fn left_because(v: &Verdict) -> &'static str {
    match v {
        Verdict::Duplicate { .. } => "already applied: redelivering it changes nothing",
        Verdict::Conflict { .. } => "conflict: accept it with --accept-conflicts --reason",
        Verdict::InProgress { .. } => "in progress under a live lease: try again later",
        Verdict::NoIdentity(_) => "no identity: the producer must fix it",
        Verdict::Late(_) | Verdict::ProviderKeyExpired { .. } => {
            "for reconciliation, and no reconciliation queue is configured"
        }
        Verdict::WouldApply => "would be applied",
    }
}

fn string_attributes(m: &aws_sdk_sqs::types::Message) -> BTreeMap<String, MessageAttributeValue> {
    m.message_attributes()
        .map(|a| a.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

pub(crate) async fn run(ctx: &Context, args: &RedriveArgs) -> Result<i32, Error> {
    let reconciliation = args
        .reconciliation
        .clone()
        .or_else(|| ctx.settings.queues.reconciliation.clone())
        .filter(|u| !u.trim().is_empty());
    let exit_after_sends = args.exit_after_sends.or_else(|| {
        std::env::var("LAMBDA_DEDUP_EXIT_AFTER_SENDS")
            .ok()
            .and_then(|n| n.parse().ok())
    });
    let mut run = Redrive {
        ctx,
        args,
        sqs: sqs::client(&ctx.settings.sdk_timeouts).await,
        dedup: ctx.deduplicator()?,
        reconciliation,
        exit_after_sends,
        sends: 0,
        seen: HashSet::new(),
        held: HashMap::new(),
        not_moved: 0,
        not_forgotten: 0,
        stopped_groups: HashSet::new(),
        rows: Vec::new(),
        counts: BTreeMap::new(),
        moved: Vec::new(),
        left: Vec::new(),
    };
    let now = lambda_dedup::MarkStore::now(&ctx.store);
    let progress = Progress::new("messages classified");
    let scanned = run.scan(&progress).await;
    progress.done();
    // What it left is let go even when the scan failed, rather than after the hold.
    for r in run.held.values() {
        sqs::release(&run.sqs, &args.dlq, r).await;
    }
    scanned?;
    let report = json!({
        "function": ctx.settings.scope.consumer(),
        "dlq": args.dlq,
        "dry_run": args.dry_run,
        "at": time(now),
        "counts": run.counts,
        "moved": run.moved,
        "left": run.left,
        "not_moved": run.not_moved,
        "not_forgotten": run.not_forgotten,
    });
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| Error::file(path, e))?;
    }
    if ctx.json {
        println!("{report}");
    } else {
        run.print();
    }
    if run.not_moved > 0 {
        eprintln!(
            "lambda-dedup: {} messages that should have moved were left in the DLQ (see left_because)",
            run.not_moved
        );
        return Ok(1);
    }
    if run.not_forgotten > 0 {
        eprintln!(
            "lambda-dedup: {} accepted conflicts were sent but their marks not forgotten (see mark_not_forgotten)",
            run.not_forgotten
        );
        return Ok(1);
    }
    Ok(0)
}

/// One redrive run: what it has classified, moved and left.
struct Redrive<'a> {
    ctx: &'a Context,
    args: &'a RedriveArgs,
    sqs: aws_sdk_sqs::Client,
    dedup: lambda_dedup_engine::Deduplicator,
    reconciliation: Option<String>,
    exit_after_sends: Option<usize>,
    sends: usize,
    seen: HashSet<String>,
    /// The newest receipt of each message left in the DLQ (by message id), made visible again
    /// at the end.
    held: HashMap<String, String>,
    /// Messages it should have moved but left (a send failed): the exit status is 1.
    not_moved: usize,
    /// Accepted conflicts sent whose mark could not be forgotten: the exit status is 1.
    not_forgotten: usize,
    /// The FIFO groups in which a send failed: their later messages stay behind it.
    stopped_groups: HashSet<String>,
    rows: Vec<Value>,
    counts: BTreeMap<&'static str, u64>,
    moved: Vec<Value>,
    left: Vec<Value>,
}

impl Redrive<'_> {
    /// Receives and handles the DLQ's messages until two receives in a row bring none it has
    /// not seen. Counting only new messages is what ends it: with a hold shorter than the scan,
    /// held messages come back and every receive is non-empty.
    async fn scan(&mut self, progress: &Progress) -> Result<(), Error> {
        let mut nothing_new = 0;
        while nothing_new < 2 {
            let batch = sqs::receive(&self.sqs, &self.args.dlq, self.args.hold_seconds).await?;
            let mut new = 0;
            for m in &batch {
                if self.one(m).await? {
                    new += 1;
                }
                progress.show(self.seen.len() as u64);
            }
            nothing_new = if new == 0 { nothing_new + 1 } else { 0 };
            if self.args.dlq.ends_with(".fifo") {
                // A held message holds its group back: let go of those left, so the next
                // receive hands out what follows them (they come back too, but seen).
                for m in &batch {
                    let left = m.message_id().and_then(|id| self.held.get(id));
                    if let Some(receipt) = left {
                        sqs::release(&self.sqs, &self.args.dlq, receipt).await;
                    }
                }
            }
        }
        Ok(())
    }

    /// Classifies one DLQ message and, unless a dry run or its verdict says otherwise, sends it
    /// on and deletes it from the DLQ — only once the send is confirmed. Whether it was new
    /// (not seen before in this run).
    async fn one(&mut self, m: &aws_sdk_sqs::types::Message) -> Result<bool, Error> {
        let Some(receipt) = m.receipt_handle().map(str::to_owned) else {
            return Ok(false);
        };
        let id = m.message_id().unwrap_or_default().to_owned();
        if !self.seen.insert(id.clone()) {
            // Came back while held (a hold shorter than the scan): already classified. Its
            // newest receipt is the one that lets it go at the end.
            self.held.insert(id, receipt);
            return Ok(false);
        }
        let e = self.dedup.explain(&sqs::library_message(m)).await?;
        *self.counts.entry(e.verdict.code()).or_default() += 1;
        let args = self.args;
        let to = destination(
            &e.verdict,
            args.accept_conflicts,
            self.reconciliation.is_some(),
        );
        let mut row = json!({
            "message_id": id,
            "verdict": e.verdict.code(),
            "key": e.key.as_ref().map(DedupKey::as_str),
            "sentence": sentence(&e),
        });
        self.rows.push(row.clone());
        let Some(to) = to.filter(|_| !args.dry_run) else {
            row["left_because"] = left_because(&e.verdict).into();
            if args.dry_run {
                row["would_go_to"] = match to {
                    Some(Destination::Source) => "source".into(),
                    Some(Destination::Reconciliation) => "reconciliation".into(),
                    None => Value::Null,
                };
            }
            self.leave(row, id, receipt);
            return Ok(true);
        };
        let group = sqs::group_id(m).map(str::to_owned);
        if let Some(g) = group.as_ref().filter(|g| self.stopped_groups.contains(*g)) {
            row["left_because"] =
                format!("an earlier message of group {g} could not be moved: kept behind it")
                    .into();
            self.not_moved += 1;
            self.leave(row, id, receipt);
            return Ok(true);
        }
        let to_name = match self.send(to, m, &e, &id).await {
            Ok(to) => to,
            Err(err) => {
                // Not sent: it stays in the DLQ, and the run failed.
                row["left_because"] = format!("send failed: {err}").into();
                self.not_moved += 1;
                self.stopped_groups.extend(group);
                self.leave(row, id, receipt);
                return Ok(true);
            }
        };
        if matches!(e.verdict, Verdict::Conflict { .. }) {
            // Forgotten only once the new payload is sent: forgotten first, a failed send
            // would leave the event without its mark, and the first payload's next delivery
            // would be applied again.
            self.forget_accepted(&mut row, e.key.as_ref()).await;
        }
        self.moved(row, &receipt, to_name).await?;
        Ok(true)
    }

    /// Forgets the mark of an accepted conflict that was just sent (audited, with `--reason`),
    /// so the new payload is applied. If it cannot, the run fails (exit 1): the sent payload
    /// meets the mark and is dead-lettered again as a conflict, which is safe.
    async fn forget_accepted(&mut self, row: &mut Value, key: Option<&DedupKey>) {
        let outcome = match key {
            None => Err("a conflict without a key".to_owned()),
            Some(key) => match self.ctx.caller().await {
                Err(e) => Err(e.to_string()),
                Ok(caller) => self
                    .ctx
                    .store
                    .forget(ForgetRequest {
                        key,
                        by: &operator(None),
                        caller: &caller,
                        reason: self.args.reason.as_deref().unwrap_or_default(),
                        force: false,
                    })
                    .await
                    .map_err(|e| e.to_string()),
            },
        };
        let not_forgotten = match outcome {
            Ok(Forgotten::Removed { .. }) => return,
            Ok(other) => format!("{other:?}"),
            Err(e) => e,
        };
        row["mark_not_forgotten"] =
            format!("{not_forgotten}: the sent payload will be dead-lettered again as a conflict")
                .into();
        self.not_forgotten += 1;
    }

    /// A message sent on: deleted from the DLQ (only now that its send is confirmed) and listed
    /// as moved.
    async fn moved(
        &mut self,
        mut row: Value,
        receipt: &str,
        to: &'static str,
    ) -> Result<(), Error> {
        self.sends += 1;
        if self.exit_after_sends == Some(self.sends) {
            // Testing hook: the tool dies between a confirmed send and its delete.
            eprintln!(
                "lambda-dedup: exiting after {} sends (LAMBDA_DEDUP_EXIT_AFTER_SENDS)",
                self.sends
            );
            std::process::exit(3);
        }
        // Deleted only once the send is confirmed: an interruption here leaves a copy in the
        // DLQ, which the next redrive finds applied (a duplicate by key) and leaves.
        self.sqs
            .delete_message()
            .queue_url(&self.args.dlq)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| Error::sqs("delete from the DLQ after its send", e))?;
        row["moved_to"] = to.into();
        self.moved.push(row);
        Ok(())
    }

    /// Leaves the message in the DLQ, with why in its row.
    fn leave(&mut self, row: Value, id: String, receipt: String) {
        self.left.push(row);
        self.held.insert(id, receipt);
    }

    /// Sends `m` to `to`: the source queue with its attributes, or reconciliation with the
    /// attributes the functions' own router gives late events.
    async fn send(
        &self,
        to: Destination,
        m: &aws_sdk_sqs::types::Message,
        e: &Explanation,
        id: &str,
    ) -> Result<&'static str, SendFailed> {
        let body = m.body().unwrap_or_default().to_owned();
        let failed = |err| SendFailed::Sqs(Box::new(err));
        let fifo = |url: &str, send: SendMessageFluentBuilder| {
            if !url.ends_with(".fifo") {
                return send;
            }
            // The key's idempotency key: short, of allowed characters, and the same for every
            // copy of the event. Without a key (never sent to the source), the message's id.
            let dedup_id = e
                .key
                .as_ref()
                .map(DedupKey::idempotency_key)
                .unwrap_or_else(|| id.to_owned());
            // Its own group, whose order it keeps; from a standard DLQ (no group), a group of
            // its own.
            let group = sqs::group_id(m).map_or_else(|| dedup_id.clone(), str::to_owned);
            send.message_group_id(group)
                .message_deduplication_id(dedup_id)
        };
        match to {
            Destination::Source => fifo(
                &self.args.source,
                self.sqs
                    .send_message()
                    .queue_url(&self.args.source)
                    .message_body(body)
                    .set_message_attributes(Some(string_attributes(m).into_iter().collect())),
            )
            .send()
            .await
            .map(|_| "source")
            .map_err(failed),
            Destination::Reconciliation => {
                let originals: BTreeMap<&str, &str> = m
                    .message_attributes()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.as_str(), v.string_value()?)))
                    .collect();
                let reason = match &e.verdict {
                    Verdict::Late(r) => lambda_dedup_engine::Reason::from(r),
                    _ => lambda_dedup_engine::Reason::ProviderKeyExpired,
                };
                let attributes = lambda_dedup_engine::late_attributes(
                    reason,
                    e.key.as_ref().map(DedupKey::as_str).unwrap_or_default(),
                    id,
                    &originals,
                );
                let url = self.reconciliation.as_deref().unwrap_or_default();
                let mut send = fifo(
                    url,
                    self.sqs.send_message().queue_url(url).message_body(body),
                );
                for (k, v) in attributes {
                    send = send.message_attributes(k, sqs::string_attribute(v)?);
                }
                send.send().await.map(|_| "reconciliation").map_err(failed)
            }
        }
    }

    /// The run as a table for people.
    fn print(&self) {
        let args = self.args;
        println!(
            "{} messages in {}{}",
            self.seen.len(),
            args.dlq,
            if args.dry_run {
                " (dry run: nothing changed)"
            } else {
                ""
            }
        );
        for (verdict, n) in &self.counts {
            println!("  {verdict:<22} {n:>6}");
        }
        println!();
        println!(
            "  {:<40} {:<22} {:<16} key",
            "message id", "verdict", "action"
        );
        let mut actions: BTreeMap<&str, String> = BTreeMap::new();
        for l in &self.left {
            let action = match l["would_go_to"].as_str() {
                Some(to) => format!("would go to {to}"),
                None => "left".into(),
            };
            actions.insert(l["message_id"].as_str().unwrap_or_default(), action);
        }
        for m in &self.moved {
            if let Some(to) = m["moved_to"].as_str() {
                actions.insert(
                    m["message_id"].as_str().unwrap_or_default(),
                    format!("moved to {to}"),
                );
            }
        }
        for r in &self.rows {
            let id = r["message_id"].as_str().unwrap_or_default();
            let action = actions.get(id).map(String::as_str).unwrap_or_default();
            println!(
                "  {id:<40} {:<22} {action:<16} {}",
                r["verdict"].as_str().unwrap_or_default(),
                r["key"].as_str().unwrap_or("-")
            );
        }
        println!(
            "moved {}, left {}{}",
            self.moved.len(),
            self.left.len(),
            args.report
                .as_ref()
                .map(|p| format!("; report in {}", p.display()))
                .unwrap_or_default()
        );
    }
}
