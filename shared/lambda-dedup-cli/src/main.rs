//! `lambda-dedup`: the operators' tool. See the README's "When something went wrong".

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName};
use clap::{Args, Parser, Subcommand, ValueEnum};
use lambda_dedup::{AttributeValue, DedupKey, KeySpec, Mark, Message};
use lambda_dedup_batch::{Deduplicator, Explanation, Verdict};
use lambda_dedup_cli::{account, template};
use lambda_dedup_dynamodb::{ForgetRequest, Forgotten};
use lambda_dedup_runtime::queue::string_attribute;
use lambda_dedup_runtime::settings::{Env, Settings};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Explain, redrive, forget and account for a lambda-dedup function's messages and marks.
///
/// The function's configuration is read as the function reads it: its `DEDUP_*` variables from
/// the environment, on top of its entry in the SAM template when `--template` is given. AWS is
/// reached with the SDK's usual credentials and region; `AWS_ENDPOINT_URL`,
/// `AWS_ENDPOINT_URL_DYNAMODB` and `AWS_ENDPOINT_URL_SQS` point it at a local stack.
#[derive(Debug, Parser)]
#[command(name = "lambda-dedup", version)]
struct Cli {
    #[command(flatten)]
    function: FunctionArgs,
    /// Print JSON for scripts instead of text for people.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct FunctionArgs {
    /// The function: its default consumer name and the `Function` of its metrics.
    #[arg(long, short = 'f', global = true, default_value = "ledger-projector")]
    function: String,
    /// The SAM template to read the function's variables from (the environment wins).
    #[arg(long, global = true)]
    template: Option<PathBuf>,
    /// The function's flow: `leased` for functions that call an external API (S6, S16).
    /// Default: `leased` for payment-dispatcher, `transactional` otherwise.
    #[arg(long, global = true, value_enum)]
    flow: Option<Flow>,
    /// The function's key spec, `cloudevents:<tenant extension>[:<fingerprint pointer>,…]`.
    /// Default: the function's own where the tool links it (ledger-projector, ledger-stream);
    /// required for the others (see the README).
    #[arg(long, global = true)]
    key_spec: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Flow {
    Transactional,
    Leased,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Why a message is treated as it is: its key (or why it has none), its mark, the verdict.
    Explain(ExplainArgs),
    /// Classify a dead-letter queue's messages and move back those that would be applied.
    Redrive(RedriveArgs),
    /// Remove a mark on purpose so its event can be applied again; always audited.
    Forget(ForgetArgs),
    /// The S14 account of the function from its EMF lines and the mark table.
    Account(AccountArgs),
}

#[derive(Debug, Args)]
struct ExplainArgs {
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

#[derive(Debug, Args)]
struct RedriveArgs {
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
    /// Also move conflicts back, once accepted: the stored mark is forgotten (audited, with
    /// `--reason`) so the new payload is applied, in addition to the first one's effect.
    #[arg(long, requires = "reason")]
    accept_conflicts: bool,
    /// Why conflicts are accepted (recorded in each forgotten mark's audit item).
    #[arg(long)]
    reason: Option<String>,
    /// Write the report (JSON: what was moved where, what was left and why) to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// How long received messages stay invisible while the redrive holds them (seconds).
    #[arg(long, default_value_t = 300)]
    hold_seconds: i32,
    /// Testing only (also `LAMBDA_DEDUP_EXIT_AFTER_SENDS`): exit (status 3) right after this
    /// many sends, before their deletes.
    #[arg(long, hide = true)]
    exit_after_sends: Option<usize>,
}

#[derive(Debug, Args)]
struct ForgetArgs {
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

#[derive(Debug, Args)]
struct AccountArgs {
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

/// What the tool works with: the function's settings, its deduplicator (as its `main` builds
/// it), the mark store, and SQS.
struct Context {
    settings: Settings,
    dedup: Deduplicator,
    store: lambda_dedup_dynamodb::DynamoStore,
    client: lambda_dedup_dynamodb::Client,
    env: Env,
    json: bool,
}

impl Context {
    async fn new(cli: &Cli) -> Result<Self, Error> {
        let f = &cli.function;
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        if let Some(path) = &f.template {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let entry = template::function_entry(&text, &f.function)?;
            vars.extend(entry.variables);
        }
        vars.extend(std::env::vars());
        let env = Env::from_pairs(vars);
        let settings = Settings::read(&env, &f.function)?;
        let spec = key_spec(f.key_spec.as_deref(), &f.function, &settings)?;
        let client = lambda_dedup_dynamodb::connect().await;
        let flow = f.flow.unwrap_or(match f.function.as_str() {
            "payment-dispatcher" => Flow::Leased,
            _ => Flow::Transactional,
        });
        let dedup = match flow {
            Flow::Transactional => settings.deduplicator(spec, client.clone())?,
            Flow::Leased => {
                let leased = settings.leased_deduplicator(spec, client.clone())?;
                (*leased).clone()
            }
        };
        let store = settings.mark_store(client.clone())?;
        Ok(Self {
            settings,
            dedup,
            store,
            client,
            env,
            json: cli.json,
        })
    }
}

/// The function's key spec, with the settings' body limit and event-time source applied (as
/// `Settings::deduplicator` applies them).
fn key_spec(text: Option<&str>, function: &str, settings: &Settings) -> Result<KeySpec, Error> {
    let scope = settings.scope.clone();
    let spec = match (text, function) {
        (Some(text), _) => lambda_dedup_runtime::cloudevents_key_spec(text, scope)?,
        // The function's own, from its library.
        (None, "ledger-projector" | "ledger-stream") => ledger_projector::ledger::key_spec(scope),
        (None, _) => {
            return Err(format!(
                "--key-spec is required for {function}: cloudevents:<tenant extension>[:<fingerprint pointer>,…] as its code declares (README, \"When something went wrong\")"
            )
            .into());
        }
    };
    Ok(settings.key_spec(spec))
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("lambda-dedup: {e}");
            std::process::exit(2);
        }
    }
}

async fn run(cli: Cli) -> Result<i32, Error> {
    if let Command::Account(args) = &cli.command {
        return account_cmd(&cli, args).await;
    }
    let ctx = Context::new(&cli).await?;
    match &cli.command {
        Command::Explain(args) => explain_cmd(&ctx, args).await,
        Command::Redrive(args) => redrive_cmd(&ctx, args).await,
        Command::Forget(args) => forget_cmd(&ctx, args).await,
        Command::Account(_) => unreachable!("handled above"),
    }
}

// ---------------------------------------------------------------- rendering

fn time(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn mark_json(m: &Mark, now: SystemTime) -> Value {
    json!({
        "key": m.key.as_str(),
        "status": m.status.as_str(),
        "first_attempt_at": time(m.first_seen_at),
        "completed_at": m.completed_at.map(time),
        "lease_expires_at": m.lease_expires_at.map(time),
        "lease_live": m.lease_is_live(now),
        "owner": m.owner.as_ref().map(|o| o.as_str()),
        "fingerprint": m.fingerprint.as_ref().map(|f| f.as_str()),
        "result": m.result,
        "expires_at": time(m.expires_at),
    })
}

/// The one-line verdict for people.
fn sentence(e: &Explanation) -> String {
    match &e.verdict {
        Verdict::WouldApply => match &e.mark {
            Some(_) => "would be applied: the earlier claim's lease has expired; it would be taken over".into(),
            None => "would be applied: no mark stands in its way".into(),
        },
        Verdict::Duplicate {
            first_seen_at,
            completed_at,
            ..
        } => format!(
            "is a duplicate of the event first processed at {}{}: acknowledged, not applied again",
            time(*first_seen_at),
            completed_at
                .map(|c| format!(" (completed {})", time(c)))
                .unwrap_or_default()
        ),
        Verdict::InProgress { lease_expires_at } => format!(
            "is in progress elsewhere (lease until {}): it would be retried",
            lease_expires_at.map(time).unwrap_or_else(|| "?".into())
        ),
        Verdict::Conflict { .. } => {
            "conflicts: same key, different payload than the one applied; dead-lettered, never applied".into()
        }
        Verdict::Late(r) => format!("is late ({r}): for reconciliation, never applied"),
        Verdict::ProviderKeyExpired { first_attempt_at } => format!(
            "is a takeover first attempted at {}, longer ago than the provider keeps keys: for reconciliation",
            time(*first_attempt_at)
        ),
        Verdict::NoIdentity(r) => {
            format!("has no identity ({}: {r}): rejected, dead-lettered", r.code())
        }
    }
}

fn explanation_json(e: &Explanation, now: SystemTime) -> Value {
    json!({
        "verdict": e.verdict.code(),
        "sentence": sentence(e),
        "key": e.key.as_ref().map(DedupKey::as_str),
        "rejection": match &e.verdict {
            Verdict::NoIdentity(r) | Verdict::Late(r) => Some(r.code()),
            _ => None,
        },
        "event_time": e.event_time.map(time),
        "fingerprint": e.fingerprint.as_ref().map(|f| f.as_str()),
        "fingerprint_matches": e.fingerprint_matches(),
        "mark": e.mark.as_ref().map(|m| mark_json(m, now)),
    })
}

fn print_explanation(e: &Explanation, now: SystemTime) {
    let row = |k: &str, v: &str| println!("  {k:<13} {v}");
    row(
        "key",
        e.key.as_ref().map(DedupKey::as_str).unwrap_or("(none)"),
    );
    if let Some(t) = e.event_time {
        row("event time", &time(t));
    }
    match &e.mark {
        None => row("mark", "none"),
        Some(m) => {
            row("mark", m.status.as_str());
            row("first attempt", &time(m.first_seen_at));
            if let Some(c) = m.completed_at {
                row("completed", &time(c));
            }
            match (&m.lease_expires_at, &m.owner) {
                (Some(l), owner) if m.status == lambda_dedup::MarkStatus::InProgress => row(
                    "lease",
                    &format!(
                        "{} until {} (owner {})",
                        if m.lease_is_live(now) {
                            "live"
                        } else {
                            "expired"
                        },
                        time(*l),
                        owner.as_ref().map(|o| o.as_str()).unwrap_or("?")
                    ),
                ),
                _ => row("lease", "none"),
            }
            row(
                "fingerprint",
                match e.fingerprint_matches() {
                    Some(true) => "matches",
                    Some(false) => "differs from the stored one",
                    None => "not compared",
                },
            );
            row("result", m.result.as_deref().unwrap_or("(none)"));
            row("expires", &time(m.expires_at));
        }
    }
    println!("verdict: {}", sentence(e));
}

/// Progress on stderr, for people watching a terminal.
struct Progress {
    on: bool,
    label: &'static str,
}

impl Progress {
    fn new(label: &'static str) -> Self {
        Self {
            on: std::io::stderr().is_terminal(),
            label,
        }
    }
    fn show(&self, n: u64) {
        if self.on {
            eprint!("\r{}: {n}", self.label);
            let _ = std::io::stderr().flush();
        }
    }
    fn done(&self) {
        if self.on {
            eprintln!();
        }
    }
}

// ---------------------------------------------------------------- explain

/// A mark's key as given: whole (`namespace#consumer#digest`), or its digest alone, within the
/// function's scope.
fn full_key(given: &str, settings: &Settings) -> DedupKey {
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
                .ok_or_else(|| format!("--attribute {p:?}: expected NAME=VALUE").into())
        })
        .collect()
}

async fn explain_cmd(ctx: &Context, args: &ExplainArgs) -> Result<i32, Error> {
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
    let message = match (&args.queue, &args.file) {
        (Some(queue), _) => {
            let id = args.message_id.as_deref().unwrap_or_default();
            find_in_queue(&sqs_client().await, queue, id).await?
        }
        (None, Some(path)) => {
            let mut body = Vec::new();
            if path.as_os_str() == "-" {
                std::io::stdin().read_to_end(&mut body)?;
            } else {
                body = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Message {
                message_id: "cli".into(),
                body,
                attributes: parse_attributes(&args.attributes)?,
                group_id: None,
            }
        }
        (None, None) => {
            return Err("give a file (or - for stdin), --queue with --message-id, or --key".into());
        }
    };
    let e = ctx.dedup.explain(&message).await?;
    if ctx.json {
        println!("{}", explanation_json(&e, now));
    } else {
        print_explanation(&e, now);
    }
    Ok(0)
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&lambda_dedup_dynamodb::sdk_config().await)
}

/// One received SQS message as the function would see it.
fn library_message(m: &aws_sdk_sqs::types::Message) -> Message {
    Message {
        message_id: m.message_id().unwrap_or_default().to_owned(),
        body: m.body().unwrap_or_default().as_bytes().to_vec(),
        attributes: m
            .message_attributes()
            .map(|a| {
                a.iter()
                    .filter_map(|(k, v)| {
                        let value = match (v.string_value(), v.binary_value()) {
                            (Some(s), _) => AttributeValue::String(s.to_owned()),
                            (None, Some(b)) => AttributeValue::Binary(b.as_ref().to_vec()),
                            _ => return None,
                        };
                        Some((k.clone(), value))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        group_id: m
            .attributes()
            .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
            .cloned(),
    }
}

async fn receive(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    hold_seconds: i32,
) -> Result<Vec<aws_sdk_sqs::types::Message>, Error> {
    let out = sqs
        .receive_message()
        .queue_url(queue)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .visibility_timeout(hold_seconds)
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .map_err(|e| sqs_failed(format_args!("receive from {queue}"), e))?;
    Ok(out.messages.unwrap_or_default())
}

/// An SQS call that failed, as the tool reports it: what it was doing, then the SDK's error
/// with its whole context.
fn sqs_failed(what: std::fmt::Arguments<'_>, e: impl std::error::Error) -> String {
    format!("{what}: {}", aws_sdk_sqs::error::DisplayErrorContext(e))
}

async fn release(sqs: &aws_sdk_sqs::Client, queue: &str, receipt: &str) {
    // Visible again at once: the message is left as it was.
    let _ = sqs
        .change_message_visibility()
        .queue_url(queue)
        .receipt_handle(receipt)
        .visibility_timeout(0)
        .send()
        .await;
}

async fn find_in_queue(sqs: &aws_sdk_sqs::Client, queue: &str, id: &str) -> Result<Message, Error> {
    let mut held = Vec::new();
    let mut found = None;
    let mut empty = 0;
    while found.is_none() && empty < 2 {
        let batch = receive(sqs, queue, 60).await?;
        if batch.is_empty() {
            empty += 1;
        }
        for m in batch {
            if m.message_id() == Some(id) {
                found = Some(library_message(&m));
            }
            held.extend(m.receipt_handle().map(str::to_owned));
        }
    }
    for r in &held {
        release(sqs, queue, r).await;
    }
    found.ok_or_else(|| format!("no message {id} in {queue}").into())
}

// ---------------------------------------------------------------- redrive

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

async fn redrive_cmd(ctx: &Context, args: &RedriveArgs) -> Result<i32, Error> {
    let reconciliation = args
        .reconciliation
        .clone()
        .or_else(|| ctx.env.get("DEDUP_RECONCILIATION_QUEUE_URL"))
        .filter(|u| !u.trim().is_empty());
    let exit_after_sends = args.exit_after_sends.or_else(|| {
        std::env::var("LAMBDA_DEDUP_EXIT_AFTER_SENDS")
            .ok()
            .and_then(|n| n.parse().ok())
    });
    let mut run = Redrive {
        ctx,
        args,
        sqs: sqs_client().await,
        reconciliation,
        exit_after_sends,
        sends: 0,
        seen: std::collections::HashSet::new(),
        held: Vec::new(),
        rows: Vec::new(),
        counts: BTreeMap::new(),
        moved: Vec::new(),
        left: Vec::new(),
    };
    let now = lambda_dedup::MarkStore::now(&ctx.store);
    let progress = Progress::new("messages classified");
    let mut empty = 0;
    while empty < 2 {
        let batch = receive(&run.sqs, &args.dlq, args.hold_seconds).await?;
        if batch.is_empty() {
            empty += 1;
            continue;
        }
        empty = 0;
        for m in batch {
            run.one(&m).await?;
            progress.show(run.seen.len() as u64);
        }
    }
    progress.done();
    for r in &run.held {
        release(&run.sqs, &args.dlq, r).await;
    }
    let report = json!({
        "function": ctx.settings.scope.consumer(),
        "dlq": args.dlq,
        "dry_run": args.dry_run,
        "at": time(now),
        "counts": run.counts,
        "moved": run.moved,
        "left": run.left,
    });
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if ctx.json {
        println!("{report}");
    } else {
        run.print();
    }
    Ok(0)
}

/// One redrive run: what it has classified, moved and left.
struct Redrive<'a> {
    ctx: &'a Context,
    args: &'a RedriveArgs,
    sqs: aws_sdk_sqs::Client,
    reconciliation: Option<String>,
    exit_after_sends: Option<usize>,
    sends: usize,
    seen: std::collections::HashSet<String>,
    /// Receipts of the messages left in the DLQ, made visible again at the end.
    held: Vec<String>,
    rows: Vec<Value>,
    counts: BTreeMap<&'static str, u64>,
    moved: Vec<Value>,
    left: Vec<Value>,
}

impl Redrive<'_> {
    /// Classifies one DLQ message and, unless a dry run or its verdict says otherwise, sends it
    /// on and deletes it from the DLQ — only once the send is confirmed.
    async fn one(&mut self, m: &aws_sdk_sqs::types::Message) -> Result<(), Error> {
        let Some(receipt) = m.receipt_handle().map(str::to_owned) else {
            return Ok(());
        };
        let id = m.message_id().unwrap_or_default().to_owned();
        if !self.seen.insert(id.clone()) {
            // Came back while held (a hold shorter than the scan): already classified.
            self.held.push(receipt);
            return Ok(());
        }
        let e = self.ctx.dedup.explain(&library_message(m)).await?;
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
            return self.leave(row, receipt);
        };
        if matches!(e.verdict, Verdict::Conflict { .. }) {
            let key = e.key.as_ref().ok_or("a conflict has a key")?;
            let forgotten = self
                .ctx
                .store
                .forget(ForgetRequest {
                    key,
                    by: &operator(None),
                    reason: args.reason.as_deref().unwrap_or_default(),
                    force: false,
                })
                .await?;
            if !matches!(forgotten, Forgotten::Removed { .. }) {
                row["left_because"] =
                    format!("conflict's mark not forgotten: {forgotten:?}").into();
                return self.leave(row, receipt);
            }
        }
        let to_name = match self.send(to, m, &e, &id).await {
            Ok(to) => to,
            Err(err) => {
                // Not sent: it stays in the DLQ.
                row["left_because"] = format!("send failed: {err}").into();
                return self.leave(row, receipt);
            }
        };
        self.moved(row, &receipt, to_name).await
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
            .map_err(|e| sqs_failed(format_args!("delete from the DLQ after its send"), e))?;
        row["moved_to"] = to.into();
        self.moved.push(row);
        Ok(())
    }

    /// Leaves the message in the DLQ, with why in its row.
    fn leave(&mut self, row: Value, receipt: String) -> Result<(), Error> {
        self.left.push(row);
        self.held.push(receipt);
        Ok(())
    }

    /// Sends `m` to `to`: the source queue with its attributes, or reconciliation with the
    /// attributes the functions' own router gives late events.
    async fn send(
        &self,
        to: Destination,
        m: &aws_sdk_sqs::types::Message,
        e: &Explanation,
        id: &str,
    ) -> Result<&'static str, String> {
        let body = m.body().unwrap_or_default().to_owned();
        let failed = |err| format!("{}", aws_sdk_sqs::error::DisplayErrorContext(err));
        match to {
            Destination::Source => self
                .sqs
                .send_message()
                .queue_url(&self.args.source)
                .message_body(body)
                .set_message_attributes(Some(string_attributes(m).into_iter().collect()))
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
                    Verdict::Late(r) => lambda_dedup_batch::Reason::from(r),
                    _ => lambda_dedup_batch::Reason::ProviderKeyExpired,
                };
                let attributes = lambda_dedup_runtime::reconcile::late_attributes_of(
                    reason,
                    e.key.as_ref().map(DedupKey::as_str).unwrap_or_default(),
                    id,
                    &originals,
                );
                let mut send = self
                    .sqs
                    .send_message()
                    .queue_url(self.reconciliation.as_deref().unwrap_or_default())
                    .message_body(body);
                for (k, v) in attributes {
                    send = send.message_attributes(k, string_attribute(v)?);
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

// ---------------------------------------------------------------- forget

fn operator(by: Option<&str>) -> String {
    by.map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "unknown".into())
}

async fn forget_cmd(ctx: &Context, args: &ForgetArgs) -> Result<i32, Error> {
    if args.reason.trim().is_empty() {
        return Err("--reason must say why".into());
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

// ---------------------------------------------------------------- account

fn epoch_ms(text: &str) -> Result<u64, Error> {
    let t = chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))?;
    Ok(u64::try_from(t.timestamp_millis()).unwrap_or(0))
}

async fn account_cmd(cli: &Cli, args: &AccountArgs) -> Result<i32, Error> {
    let ctx = Context::new(cli).await?;
    let range = account::Range {
        since_ms: args.since.as_deref().map(epoch_ms).transpose()?,
        until_ms: args.until.as_deref().map(epoch_ms).transpose()?,
    };
    let mut accounts = account::Accounts::new();
    for path in &args.logs {
        let text = if path.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        } else {
            std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings::read(
            &Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "m")]),
            "ledger-projector",
        )
        .expect("settings")
    }

    fn derived(spec: &KeySpec, amount: i64) -> lambda_dedup::Derived {
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/s", "id": "e-1",
            "tenantid": "acme", "data": {"account": "a", "amount": amount}});
        spec.derive(&Message {
            message_id: "m".into(),
            body: body.to_string().into_bytes(),
            ..Message::default()
        })
        .expect("key")
    }

    /// The ledger's key spec is the function's own (fingerprint included), and an explicit
    /// spec with the same pointers derives the same key and fingerprint.
    #[test]
    fn the_ledger_spec_is_the_functions_own() {
        let s = settings();
        let own = key_spec(None, "ledger-projector", &s).expect("spec");
        let function = s.key_spec(ledger_projector::ledger::key_spec(s.scope.clone()));
        let given = key_spec(
            Some("cloudevents:tenantid:/type,/data/account,/data/amount"),
            "anything",
            &s,
        )
        .expect("spec");
        for spec in [&own, &given] {
            assert_eq!(derived(spec, 5).key, derived(&function, 5).key);
            assert_eq!(
                derived(spec, 5).fingerprint,
                derived(&function, 5).fingerprint
            );
            assert_ne!(derived(spec, 5).fingerprint, derived(spec, 6).fingerprint);
        }
        assert!(key_spec(None, "fine-notices", &s).is_err(), "no guess");
        assert!(key_spec(Some("cloudevents:tenantid:type"), "x", &s).is_err());
        assert!(key_spec(Some("attribute:x"), "x", &s).is_err());
    }

    /// A digest alone names the mark within the function's scope; a whole key is kept.
    #[test]
    fn a_digest_alone_is_within_the_functions_scope() {
        let s = settings();
        assert_eq!(full_key("abc", &s).as_str(), "t#ledger-projector#abc");
        assert_eq!(full_key("x#y#abc", &s).as_str(), "x#y#abc");
    }
}
