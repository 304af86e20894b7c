//! The whole system on loopback: the local DynamoDB (Dynoxide), the SQS emulator, the fake provider, tables and
//! queues, the functions under `cargo lambda watch`, and the local triggers. Everything stops when
//! the [`Stack`] is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use lambda_dedup_fake_provider::Provider;

use crate::audit::Accounts;
use crate::dynamodb::LocalDynamo;
use crate::functions::{GITHUB_RECEIVER, STRIPE_RECEIVER};
use crate::{Result, step};
use local_dynamodb::kinesis::Kinesis;
use local_dynamodb::meter::Meter;
use local_dynamodb::sns::Sns;
use local_lambda::functions::Functions;
use local_lambda::plan::{Plan, Source};
use local_lambda::process::Guarded;
use local_lambda::resources::{Resources, queue_attributes};
use local_lambda::trigger::{Ends, TriggerStats};

/// Visibility timeout of the local queues: short, so redeliveries happen within a demo.
pub(crate) const VISIBILITY_TIMEOUT_SECS: u64 = crate::local::LOCAL_QUEUE_SECS.0;

/// A queue and its dead-letter queue.
#[derive(Debug, Clone)]
pub(crate) struct Queues {
    pub(crate) url: String,
    pub(crate) dlq_url: String,
}

/// The package of the operators' tool, `lambda-dedup`, built with the functions.
const CLI_PACKAGE: &str = "lambda-dedup-cli";

pub(crate) struct Stack {
    // Field order is drop order: triggers first, then the functions, then the emulators.
    triggers: Vec<tokio::task::JoinHandle<()>>,
    pub(crate) functions: Functions,
    watch: Guarded,
    _moto: Guarded,
    pub(crate) ddb: LocalDynamo,
    pub(crate) provider: Provider,
    pub(crate) provider_url: String,
    pub(crate) sqs_endpoint: String,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) queues: BTreeMap<String, Queues>,
    /// The SNS emulator (moto, the SQS endpoint), and per function the topic whose SQS
    /// subscription feeds its queue: its ARN.
    pub(crate) sns: Sns,
    pub(crate) topics: BTreeMap<String, String>,
    /// Where the functions send late events (S10).
    pub(crate) reconciliation_url: String,
    /// The invoke API of `cargo lambda watch`.
    pub(crate) invoke_url: String,
    /// The webhook receiver's URL, through `cargo lambda watch`'s Function URL front.
    pub(crate) webhook_url: String,
    /// The venv's python, which has the webhook senders' signing libraries, and the script
    /// that signs with them (`tests/senders/sign.py`).
    pub(crate) sender: (PathBuf, PathBuf),
    /// The Kinesis emulator (moto) and the ledger's stream.
    pub(crate) kinesis: Kinesis,
    /// Where the Kinesis trigger hands records older than their maximum age.
    pub(crate) kinesis_failures_url: String,
    /// Where ledger-stream parks the records that can never apply.
    pub(crate) kinesis_parking_url: String,
    pub(crate) lose_next: BTreeMap<String, Arc<AtomicBool>>,
    pub(crate) stats: BTreeMap<String, Arc<TriggerStats>>,
    pub(crate) accounts: Arc<Mutex<Accounts>>,
    functions_log: PathBuf,
    /// The functions' environment (as in `functions.env`).
    function_env: Vec<(String, String)>,
    /// Per function, the metering proxies its DynamoDB and SQS requests go through: they record
    /// which actions it calls on which tables and queues (least privilege, proven).
    meters: BTreeMap<String, [Meter; 2]>,
    /// What the local stack was built from (`infra/template.yaml`, see `crate::local`).
    pub(crate) plan: Plan,
}

/// A DynamoDB item.
pub(crate) type Item = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

/// Whether `item`'s string attribute `attr` is `value`.
pub(crate) fn has(item: &Item, attr: &str, value: &str) -> bool {
    item.get(attr)
        .and_then(|v| v.as_s().ok())
        .is_some_and(|s| s == value)
}

pub(crate) const TABLE_MARKS: &str = "MarkTable";
pub(crate) const TABLE_BALANCES: &str = "BalancesTable";
pub(crate) const TABLE_FINES: &str = "FinesTable";
/// One correlation item per real-world fine (business duplicates flagged for review).
pub(crate) const TABLE_FINE_REVIEWS: &str = "FineReviewsTable";
pub(crate) const TABLE_INTENTS: &str = "IntentsTable";
/// The webhook receiver's inbox (a stream to `inbox-forwarder`).
pub(crate) const TABLE_INBOX: &str = "InboxTable";
/// `orders-api`'s orders (each its Idempotency-Key's own mark).
pub(crate) const TABLE_ORDERS: &str = "OrdersTable";
/// The tables the demo and the tests use, by the name of their `DEDUP_TABLE_*` variable.
const TABLES: [(&str, &str); 7] = [
    ("MARKS", TABLE_MARKS),
    ("BALANCES", TABLE_BALANCES),
    ("FINES", TABLE_FINES),
    ("FINE_REVIEWS", TABLE_FINE_REVIEWS),
    ("INTENTS", TABLE_INTENTS),
    ("INBOX", TABLE_INBOX),
    ("ORDERS", TABLE_ORDERS),
];
/// The ledger's Kinesis stream, read by `ledger-stream`.
pub(crate) const KINESIS_STREAM: &str = "LedgerEvents";
/// The Stripe configuration's secrets (Stripe's `whsec_…`, used as the string's bytes): current
/// and rotated out.
pub(crate) const STRIPE_SECRETS: [&str; 2] = [
    "whsec_local_stripe_endpoint_secret_2026_11",
    "whsec_local_stripe_endpoint_secret_2026_10",
];
/// The Stripe account it serves (its keys' tenant).
pub(crate) const STRIPE_SENDER: &str = "stripe-acct-local";
/// The GitHub configuration's webhook secrets (GitHub's raw secret, its bytes): current and
/// rotated out.
pub(crate) const GITHUB_SECRETS: [&str; 2] = [
    "local-github-webhook-secret-2026-11",
    "local-github-webhook-secret-2026-10",
];
/// The GitHub organisation it serves (its keys' tenant).
pub(crate) const GITHUB_SENDER: &str = "github-org-local";

fn conf_env() -> Vec<(String, String)> {
    [
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

impl Stack {
    pub(crate) async fn up(root: &Path) -> Result<Self> {
        let bin = crate::tools::ensure(root)?;
        step("starting the local DynamoDB (Dynoxide, embedded in xtask)");
        // Persistent, so that the chaos runs can stop and restart it mid-run.
        let ddb = LocalDynamo::start_persistent(root)?;
        let logs = root.join(".cache").join("logs");

        step("starting the SQS emulator (moto)");
        let (moto, moto_port) = crate::tools::serve(
            "moto",
            root,
            |port| {
                format!(
                    "exec '{}' -H 127.0.0.1 -p {port}",
                    bin.join("moto_server").display()
                )
            },
            &conf_env(),
            logs.join("moto.log"),
            Duration::from_secs(60),
        )?;
        let sqs_endpoint = format!("http://127.0.0.1:{moto_port}");

        step("starting the fake provider");
        let provider = Provider::new();
        let (provider_url, _server) = provider
            .serve()
            .await
            .map_err(|e| format!("fake provider: {e}"))?;

        let dynamodb = lambda_dedup_testkit::local_client!(aws_sdk_dynamodb, ddb.endpoint());
        let sqs = lambda_dedup_testkit::local_client!(aws_sdk_sqs, &sqs_endpoint);
        let template = crate::infra::load(&root.join("infra").join("template.yaml"))?;
        let plan = crate::local::plan(&template)?;
        let kinesis = Kinesis::new(&sqs_endpoint);
        step(format!(
            "creating what infra/template.yaml declares: {} tables, {} queues (each redrive policy as declared), {} Kinesis stream(s), {} SNS topic(s) with {} SQS subscription(s)",
            plan.tables.len(),
            plan.queues.len(),
            plan.streams.len(),
            plan.topics.len(),
            plan.subscriptions.len()
        ));
        let sns = Sns::new(&sqs_endpoint);
        let created = Resources::create(&plan, &ddb.endpoint(), &sqs, &kinesis, &sns).await?;
        for used in TABLES.map(|(_, t)| t).into_iter().chain([KINESIS_STREAM]) {
            if !created.names.contains_key(used) {
                return Err(format!(
                    "infra/template.yaml has no {used}, which the demo and the tests use"
                ));
            }
        }
        let queues = queues(&plan, &created)?;
        let topics = topics(&plan, &created)?;
        let reconciliation_url = created.named(&plan, "DEDUP_RECONCILIATION_QUEUE_URL")?;
        // Where ledger-stream parks the records that can never apply (S15).
        let kinesis_parking_url = created.named(&plan, "DEDUP_PARKING_QUEUE_URL")?;
        // The Kinesis trigger's on-failure destination.
        let kinesis_failures_url = created.url(
            plan.mapping("ledger-stream")
                .and_then(|m| m.on_failure.as_deref())
                .ok_or(
                    "infra/template.yaml: ledger-stream's trigger has no on-failure destination",
                )?,
        )?;

        build_functions(root)?;
        step("starting cargo lambda watch (runtime and invoke APIs) and the functions");
        let (watch, invoke_url) = start_watch(root, &bin, &logs)?;
        let webhook_secret_arn = local_secret(
            &sqs_endpoint,
            "webhook-secrets",
            crate::local::LOCAL_WEBHOOK_SECRETS,
        )
        .await?;
        let fines_key_arn = local_secret(
            &sqs_endpoint,
            "fines-correlation-key",
            crate::local::LOCAL_FINES_CORRELATION_KEY,
        )
        .await?;
        let envs = FunctionEnvs::new(
            &plan,
            &created,
            &ddb,
            &sqs_endpoint,
            &[
                ("PaymentsApiUrl", &provider_url),
                ("CollectionsApiUrl", &provider_url),
                ("WebhookSecretArn", &webhook_secret_arn),
                ("FinesCorrelationKeyArn", &fines_key_arn),
            ],
        )?;
        envs.write(&logs.join("functions.env"))?;
        let functions_log = logs.join("functions.log");
        let _ = std::fs::remove_file(&functions_log);
        let names: Vec<&str> = (crate::functions::ALL.into_iter())
            .chain(crate::functions::LOCAL_CONFIGURATIONS)
            .collect();
        let functions = Functions::start(
            crate::target_dir(root).join("debug"),
            &names,
            invoke_url.clone(),
            crate::infra::timeouts(&template),
            envs.shared,
            envs.own,
            functions_log.clone(),
        )
        .await?;

        let accounts = Arc::new(Mutex::new(Accounts::new()));
        let emf = tokio::spawn(collect_emf(functions_log.clone(), accounts.clone()));
        let ends = Ends {
            sqs: &sqs,
            dynamodb: ddb.endpoint(),
            kinesis: &kinesis,
        };
        let mut triggers =
            local_lambda::trigger::start(&plan, &created, &functions, &invoke_url, &ends)?;
        triggers.handles.push(emf);
        let webhook_url = format!("{invoke_url}/lambda-url/webhook-receiver/");
        step("the stack is up");
        Ok(Self {
            triggers: triggers.handles,
            functions,
            functions_log,
            watch,
            _moto: moto,
            ddb,
            provider,
            provider_url,
            sqs_endpoint,
            sqs,
            dynamodb,
            queues,
            sns,
            topics,
            reconciliation_url,
            invoke_url,
            webhook_url,
            sender: (
                bin.join("python"),
                root.join("tests").join("senders").join("sign.py"),
            ),
            kinesis,
            kinesis_failures_url,
            kinesis_parking_url,
            lose_next: triggers.lose_next,
            stats: triggers.stats,
            accounts,
            function_env: envs.all,
            meters: envs.meters,
            plan,
        })
    }

    /// What each function has called so far, through its own proxies: IAM action → local table
    /// or queue names.
    pub(crate) fn calls(&self) -> crate::infra::Calls {
        self.meters
            .iter()
            .map(|(f, meters)| {
                let mut actions = BTreeMap::new();
                for m in meters {
                    for (action, names) in m.usage().actions {
                        actions
                            .entry(action)
                            .or_insert_with(std::collections::BTreeSet::new)
                            .extend(names);
                    }
                }
                (f.clone(), actions)
            })
            .collect()
    }

    /// The partition keys each function's requests named so far on its mark tables (and a
    /// webhook receiver's inbox), through its own DynamoDB proxy: local table → keys.
    pub(crate) fn keys(&self) -> crate::infra::Keys {
        self.meters
            .iter()
            .map(|(f, [dynamodb, _])| (f.clone(), dynamodb.usage().leading_keys))
            .collect()
    }

    /// Least privilege, proven on this run: what each function called (so far) against its role
    /// in `infra/template.yaml` (see `infra::privileges`): every call granted and, with
    /// `both_ways` (a run that exercises every path, as `cargo xtask test` does), every granted
    /// data action called. Writes the calls to `.cache/logs/calls.json`.
    /// With `both_ways`, also keeps this run's calls as the full test run's record
    /// (`infra::FULL_RUN_RECORD`), the only one `cargo xtask check-infra` compares with.
    pub(crate) fn check_privileges(&self, root: &Path, both_ways: bool) -> Result<()> {
        let calls = self.calls();
        let keys = self.keys();
        let logs = root.join(".cache").join("logs");
        let _ = std::fs::write(
            logs.join("calls.json"),
            serde_json::to_string_pretty(&calls).unwrap_or_default(),
        );
        if both_ways {
            crate::infra::Record::new(calls.clone(), keys.clone(), self.function_env.clone())
                .save(root)?;
        }
        let t = crate::infra::load(&root.join("infra").join("template.yaml"))?;
        let (mut problems, unused) =
            crate::infra::privileges(&t, &calls, &keys, &self.function_env);
        if both_ways {
            problems.extend(unused);
        } else {
            for u in &unused {
                println!("  (not exercised by this run) {u}");
            }
        }
        if problems.is_empty() {
            let n: usize = calls.values().map(BTreeMap::len).sum();
            step(format!(
                "least privilege: the {n} (function, action) pairs called are granted by the roles in infra/template.yaml{} (.cache/logs/calls.json)",
                if both_ways {
                    ", and every grant was called"
                } else {
                    ""
                }
            ));
            Ok(())
        } else {
            for p in &problems {
                eprintln!("  {p}");
            }
            Err(format!(
                "least privilege: {} mismatch(es) between what the functions called and their roles",
                problems.len()
            ))
        }
    }

    /// The Stripe configuration's URL, through `cargo lambda watch`'s Function URL front.
    pub(crate) fn stripe_webhook_url(&self) -> String {
        format!("{}/lambda-url/{STRIPE_RECEIVER}/", self.invoke_url)
    }

    /// The GitHub configuration's URL, through `cargo lambda watch`'s Function URL front.
    pub(crate) fn github_webhook_url(&self) -> String {
        format!("{}/lambda-url/{GITHUB_RECEIVER}/", self.invoke_url)
    }

    /// `orders-api`'s URL, through `cargo lambda watch`'s Function URL front.
    pub(crate) fn orders_url(&self) -> String {
        format!("{}/lambda-url/orders-api/orders", self.invoke_url)
    }

    /// The environment the end-to-end tests read.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        // The built `lambda-dedup` (see `CLI_PACKAGE`).
        let cli = crate::target_dir(&crate::root()).join("debug/lambda-dedup");
        let mut env = conf_env();
        env.extend(
            [
                // For `cargo lambda invoke --invoke-port` against the running functions.
                ("DEDUP_INVOKE_URL", self.invoke_url.clone()),
                ("DEDUP_DYNAMODB_ENDPOINT", self.ddb.endpoint()),
                // The runtime API the functions poll: `GET /__timeouts` counts timed-out
                // invocations.
                ("DEDUP_RUNTIME_API", self.functions.runtime_api_url()),
                ("DEDUP_SQS_ENDPOINT", self.sqs_endpoint.clone()),
                ("DEDUP_CLI", cli.display().to_string()),
                // The built functions, for the tests that run one as Lambda would (several
                // invocations at once: `tests/integration/concurrent.rs`).
                (
                    "DEDUP_FUNCTIONS_DIR",
                    crate::target_dir(&crate::root())
                        .join("debug")
                        .display()
                        .to_string(),
                ),
                (
                    "DEDUP_QUEUE_RECONCILIATION",
                    self.reconciliation_url.clone(),
                ),
                ("DEDUP_PROVIDER_URL", self.provider_url.clone()),
                ("DEDUP_WEBHOOK_URL", self.webhook_url.clone()),
                (
                    "DEDUP_WEBHOOK_SECRET",
                    crate::local::webhook_secrets().1.into(),
                ),
                ("DEDUP_STRIPE_WEBHOOK_URL", self.stripe_webhook_url()),
                ("DEDUP_ORDERS_URL", self.orders_url()),
                ("DEDUP_STRIPE_WEBHOOK_SECRET", STRIPE_SECRETS[1].into()),
                ("DEDUP_GITHUB_WEBHOOK_URL", self.github_webhook_url()),
                ("DEDUP_GITHUB_WEBHOOK_SECRET", GITHUB_SECRETS[1].into()),
                // The senders' own signing libraries are in the venv: `tests/senders/sign.py`
                // runs there.
                ("DEDUP_SENDER_PYTHON", self.sender.0.display().to_string()),
                ("DEDUP_KINESIS_STREAM", KINESIS_STREAM.into()),
                (
                    "DEDUP_QUEUE_LEDGER_STREAM_FAILURES",
                    self.kinesis_failures_url.clone(),
                ),
                (
                    "DEDUP_QUEUE_LEDGER_STREAM_PARKING",
                    self.kinesis_parking_url.clone(),
                ),
                (
                    "DEDUP_FUNCTIONS_LOG",
                    self.functions_log.display().to_string(),
                ),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        // The local DynamoDB's process, which the deadline tests freeze (SIGSTOP).
        if let Some(pid) = self.ddb.pid() {
            env.push(("DEDUP_DYNAMODB_PID".into(), pid.to_string()));
        }
        let var = |f: &str| f.to_uppercase().replace('-', "_");
        // Each function's own proxies, which can also play an outage of what is behind them
        // (`local_dynamodb::meter`): `DEDUP_METER_<FUNCTION>_DYNAMODB` and `_SQS`.
        for (f, [dynamodb, sqs]) in &self.meters {
            env.push((
                format!("DEDUP_METER_{}_DYNAMODB", var(f)),
                dynamodb.endpoint(),
            ));
            env.push((format!("DEDUP_METER_{}_SQS", var(f)), sqs.endpoint()));
        }
        for (f, q) in &self.queues {
            env.push((format!("DEDUP_QUEUE_{}", var(f)), q.url.clone()));
            env.push((format!("DEDUP_DLQ_{}", var(f)), q.dlq_url.clone()));
        }
        for (f, topic) in &self.topics {
            env.push((format!("DEDUP_TOPIC_{}", var(f)), topic.clone()));
        }
        for (name, table) in TABLES {
            env.push((format!("DEDUP_TABLE_{name}"), table.into()));
        }
        env
    }

    pub(crate) fn print_logs(&self) {
        local_lambda::process::print_tail("the functions", &self.functions_log, 60);
        self.watch.print_log_tail(10);
        self.ddb.print_log_tail(20);
    }

    pub(crate) fn functions_alive(&mut self) -> bool {
        !self.watch.exited()
    }

    /// Waits until every queue has been empty (nothing visible or in flight) for longer than
    /// the visibility timeout (redeliveries included), printing the triggers' progress; an error
    /// after 180 s.
    pub(crate) async fn settle(&self, what: &str) -> Result<()> {
        print!("xtask: waiting for {what} to settle");
        let (start, limit) = (Instant::now(), Duration::from_secs(180));
        let quiet = Duration::from_secs(VISIBILITY_TIMEOUT_SECS + 2);
        let mut idle_since: Option<Instant> = None;
        let mut shown = Instant::now();
        while start.elapsed() < limit {
            let mut busy = false;
            for q in self.queues.values() {
                busy |= self.depth(&q.url).await.is_none_or(|d| d > 0);
            }
            match (busy, idle_since) {
                (true, _) => idle_since = None,
                (false, None) => idle_since = Some(Instant::now()),
                (false, Some(t)) if t.elapsed() >= quiet => {
                    println!(" ({:.0}s)", start.elapsed().as_secs_f64());
                    return Ok(());
                }
                _ => {}
            }
            if shown.elapsed() >= Duration::from_secs(3) {
                shown = Instant::now();
                let n = |f: fn(&TriggerStats) -> &std::sync::atomic::AtomicU64| -> u64 {
                    self.stats
                        .values()
                        .map(|s| f(s).load(Ordering::Relaxed))
                        .sum()
                };
                print!(
                    "\n  ... {} invocations, {} deliveries, {} acknowledged",
                    n(|s| &s.invocations),
                    n(|s| &s.delivered),
                    n(|s| &s.acknowledged)
                );
                let _ = std::io::Write::flush(&mut std::io::stdout());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(format!("{what} did not settle in {}s", limit.as_secs()))
    }

    /// Publishes `messages` to the topic that feeds `function`'s queue, in order; returns SNS's
    /// `MessageId`s.
    pub(crate) async fn publish(&self, function: &str, messages: &[String]) -> Result<Vec<String>> {
        let topic = (self.topics.get(function))
            .ok_or_else(|| format!("infra/template.yaml: no topic feeds {function}'s queue"))?;
        let mut ids = Vec::new();
        for m in messages {
            ids.push(self.sns.publish(topic, m).await?);
        }
        Ok(ids)
    }

    /// Sends `bodies` to `function`'s queue, in order, in batches of 10.
    pub(crate) async fn send(&self, function: &str, bodies: &[String]) -> Result<()> {
        use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
        let producer = MessageAttributeValue::builder()
            .data_type("String")
            .string_value("xtask-demo")
            .build()
            .map_err(|e| e.to_string())?;
        for chunk in bodies.chunks(10) {
            let entries = chunk.iter().enumerate().map(|(i, b)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(b)
                    .message_attributes("producer", producer.clone())
                    .build()
                    .map_err(|e| e.to_string())
            });
            self.sqs
                .send_message_batch()
                .queue_url(&self.queues[function].url)
                .set_entries(Some(entries.collect::<Result<_>>()?))
                .send()
                .await
                .map_err(crate::sdk_error(format!("send to {function}")))?;
        }
        Ok(())
    }

    /// Every item of `table`, read consistently.
    pub(crate) async fn scan(&self, table: &str) -> Result<Vec<Item>> {
        lambda_dedup_testkit::dynamodb::items::scan(&self.dynamodb, table)
            .await
            .map_err(crate::sdk_error(format!("scan {table}")))
    }

    /// The bodies of up to 50 messages of the queue at `url`, kept invisible for a minute.
    pub(crate) async fn bodies(&self, url: &str) -> Result<Vec<String>> {
        let mut bodies = Vec::new();
        for _ in 0..5 {
            let out = self.sqs.receive_message().queue_url(url);
            let out = out.max_number_of_messages(10).visibility_timeout(60);
            let out = out.send().await.map_err(crate::sdk_error("receive"))?;
            let msgs = out.messages.unwrap_or_default();
            if msgs.is_empty() {
                break;
            }
            bodies.extend(msgs.iter().map(|m| m.body().unwrap_or_default().to_owned()));
        }
        Ok(bodies)
    }

    /// Messages in a queue, visible or in flight.
    pub(crate) async fn depth(&self, url: &str) -> Option<u64> {
        use QueueAttributeName::{
            ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible,
        };
        let names = [
            ApproximateNumberOfMessages,
            ApproximateNumberOfMessagesNotVisible,
        ];
        let attrs = queue_attributes(&self.sqs, url, &names).await.ok()?;
        Some(attrs.values().filter_map(|v| v.parse::<u64>().ok()).sum())
    }

    pub(crate) fn stop_triggers(&mut self) {
        for t in self.triggers.drain(..) {
            t.abort();
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stop_triggers();
    }
}

/// Each SQS-triggered function's queue and its dead-letter queue.
fn queues(plan: &Plan, created: &Resources) -> Result<BTreeMap<String, Queues>> {
    let mut queues = BTreeMap::new();
    let mappings =
        (plan.functions.iter()).flat_map(|(f, def)| def.mappings.iter().map(move |m| (f, m)));
    for (f, m) in mappings {
        let Source::Sqs(q) = &m.source else { continue };
        let dlq = (plan.queues.iter().find(|x| &x.name == q))
            .and_then(|x| x.redrive.as_ref())
            .ok_or_else(|| format!("{q}: no redrive policy"))?;
        let (url, dlq_url) = (created.url(q)?, created.url(&dlq.0)?);
        queues.insert(f.clone(), Queues { url, dlq_url });
    }
    Ok(queues)
}

/// Per SQS-triggered function, the topic whose subscription delivers to its queue (its ARN).
fn topics(plan: &Plan, created: &Resources) -> Result<BTreeMap<String, String>> {
    let mut topics = BTreeMap::new();
    for (f, def) in &plan.functions {
        for m in &def.mappings {
            let Source::Sqs(q) = &m.source else { continue };
            for s in plan.subscriptions.iter().filter(|s| &s.queue == q) {
                topics.insert(f.clone(), created.url(&s.topic)?);
            }
        }
    }
    Ok(topics)
}

/// Builds the functions, their local configurations, the examples the tests run and the
/// operators' tool.
fn build_functions(root: &Path) -> Result<()> {
    step("building the functions (cargo build; the first run compiles the AWS SDK, a few minutes)");
    let packages = (crate::functions::ALL.iter())
        .chain(&crate::functions::LOCAL_CONFIGURATIONS)
        .chain(&crate::functions::EXAMPLES_RUN)
        .flat_map(|f| ["-p", f])
        // The operators' tool, which the end-to-end tests run as operators do.
        .chain(["-p", CLI_PACKAGE]);
    let mut cargo = std::process::Command::new(crate::cargo());
    cargo.current_dir(root).arg("build").args(packages);
    let status = local_lambda::process::run(&mut cargo).map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("the functions do not build".into());
    }
    Ok(())
}

/// Starts `cargo lambda watch` for its runtime and invoke APIs only (xtask starts the
/// functions); returns it and its invoke URL.
fn start_watch(root: &Path, bin: &Path, logs: &Path) -> Result<(Guarded, String)> {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env = vec![("PATH".to_owned(), path)];
    env.extend(conf_env());
    // Its routes all wait for a function, so readiness is an open port.
    let (watch, invoke_port) = crate::tools::serve(
        "cargo lambda watch",
        root,
        |port| format!("exec cargo lambda watch --only-lambda-apis --quiet -A 127.0.0.1 -P {port}"),
        &env,
        logs.join("cargo-lambda.log"),
        Duration::from_secs(120),
    )?;
    Ok((watch, format!("http://127.0.0.1:{invoke_port}")))
}

/// The functions' environments.
struct FunctionEnvs {
    /// What every function gets: the local credentials and endpoints.
    shared: Vec<(String, String)>,
    /// Per function (and local configuration), its template variables and its metering proxies.
    own: BTreeMap<String, Vec<(String, String)>>,
    /// Every function's template variables, each once.
    all: Vec<(String, String)>,
    /// Per function, the metering proxies its DynamoDB and SQS requests go through: they record
    /// which actions it calls on which tables and queues (least privilege, proven).
    meters: BTreeMap<String, [Meter; 2]>,
}

impl FunctionEnvs {
    fn new(
        plan: &Plan,
        created: &Resources,
        ddb: &LocalDynamo,
        sqs_endpoint: &str,
        params: &[(&'static str, &String)],
    ) -> Result<Self> {
        let mut shared = conf_env();
        shared.extend([
            ("AWS_ENDPOINT_URL_DYNAMODB".to_owned(), ddb.endpoint()),
            ("AWS_ENDPOINT_URL_SQS".to_owned(), sqs_endpoint.to_owned()),
            // moto serves Secrets Manager too: webhook-receiver and fine-notices read their
            // secrets there at init.
            (
                "AWS_ENDPOINT_URL_SECRETS_MANAGER".to_owned(),
                sqs_endpoint.to_owned(),
            ),
            // And STS: the operators' tool, run with a function's environment, asks it who the
            // caller is for forget's audit (no function calls it).
            ("AWS_ENDPOINT_URL_STS".to_owned(), sqs_endpoint.to_owned()),
        ]);
        // The parameters with no default: the fake provider plays both APIs; the secrets are
        // the ones created in moto.
        let params: BTreeMap<&str, String> =
            params.iter().map(|(k, v)| (*k, (*v).clone())).collect();
        let mut own = BTreeMap::new();
        for f in crate::functions::ALL {
            let env = plan.env(f, |id| created.names.get(id).cloned(), &params)?;
            own.insert(f.to_owned(), env);
        }
        let all: std::collections::BTreeSet<(String, String)> =
            own.values().flatten().cloned().collect();
        // Each function reaches DynamoDB and SQS through proxies of its own, which record what
        // it calls (`Stack::calls`, compared with its role by `infra::privileges`).
        let mut meters = BTreeMap::new();
        for f in crate::functions::ALL {
            let [dynamodb, sqs] = [ddb.endpoint(), sqs_endpoint.to_owned()]
                .map(|upstream| Meter::start(&upstream, Duration::ZERO));
            let (dynamodb, sqs) = (dynamodb?, sqs?);
            let env = own.entry(f.to_owned()).or_insert_with(Vec::new);
            // The partition keys it names on its mark tables (the inbox is a webhook
            // receiver's): compared with its role's `dynamodb:LeadingKeys` (S1).
            for (var, name) in env.iter() {
                if var != "DEDUP_MARK_TABLE" && var != "INBOX_TABLE" {
                    continue;
                }
                let table = plan
                    .tables
                    .iter()
                    .find(|t| created.names.get(&t.name) == Some(name));
                let hash = table.and_then(|t| {
                    t.create["KeySchema"]
                        .as_array()?
                        .iter()
                        .find(|k| k["KeyType"] == "HASH")?["AttributeName"]
                        .as_str()
                });
                if let Some(attr) = hash {
                    dynamodb.record_keys(name, attr);
                }
            }
            env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), dynamodb.endpoint()));
            env.push(("AWS_ENDPOINT_URL_SQS".into(), sqs.endpoint()));
            meters.insert(f.to_owned(), [dynamodb, sqs]);
        }
        // The Stripe configuration of webhook-receiver: its proxies (and so its role) are
        // webhook-receiver's, and so is its consumer; the sender (tenant) is its own.
        // Both hold their secrets in the plain variable (local use), in place of the secret.
        let plain = |env: &Vec<(String, String)>| -> Vec<(String, String)> {
            env.iter()
                .filter(|(k, _)| k != "WEBHOOK_SECRETS_ARN")
                .cloned()
                .collect()
        };
        let mut stripe_env = plain(&own["webhook-receiver"]);
        stripe_env.extend(
            [
                ("WEBHOOK_SCHEME", "stripe".to_owned()),
                ("WEBHOOK_SECRETS", STRIPE_SECRETS.join(",")),
                ("WEBHOOK_TENANT", STRIPE_SENDER.to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        own.insert(STRIPE_RECEIVER.to_owned(), stripe_env);
        // The GitHub configuration, the same way: GitHub signs the body only, so its identity is
        // the signed body's own event id (here the ledger's CloudEvents `id`).
        let mut github_env = plain(&own["webhook-receiver"]);
        github_env.extend(
            [
                ("WEBHOOK_SCHEME", "github".to_owned()),
                ("WEBHOOK_SECRETS", GITHUB_SECRETS.join(",")),
                ("WEBHOOK_ID_FROM", "json:/id".to_owned()),
                ("WEBHOOK_TENANT", GITHUB_SENDER.to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        own.insert(GITHUB_RECEIVER.to_owned(), github_env);
        let all = all.into_iter().collect();
        Ok(Self {
            shared,
            own,
            all,
            meters,
        })
    }

    /// Writes the shared variables and every template variable to `file`, one `K=V` a line.
    fn write(&self, file: &Path) -> Result<()> {
        let text: String = (self.shared.iter().chain(&self.all))
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))
    }
}

/// Creates the secret `what` in moto's Secrets Manager, holding `text` as AWS would (the
/// webhook receiver's secrets, [`crate::local::LOCAL_WEBHOOK_SECRETS`]; fine-notices'
/// correlation key, [`crate::local::LOCAL_FINES_CORRELATION_KEY`]): its ARN, which the
/// template's parameter (`WebhookSecretArn`, `FinesCorrelationKeyArn`) takes.
async fn local_secret(moto: &str, what: &str, text: &str) -> Result<String> {
    let client = lambda_dedup_testkit::local_client!(aws_sdk_secretsmanager, moto);
    let name = format!("lambda-dedup/{what}-{}", std::process::id());
    let out = client
        .create_secret()
        .name(&name)
        .secret_string(text)
        .send()
        .await
        .map_err(|e| format!("creating the secret {what} in moto: {e:?}"))?;
    out.arn()
        .map(str::to_owned)
        .ok_or_else(|| format!("moto created the secret {what} without an ARN"))
}

/// Follows the functions' log and sums their EMF records, as CloudWatch would extract them.
async fn collect_emf(log: PathBuf, accounts: Arc<Mutex<Accounts>>) {
    let mut pos = 0u64;
    loop {
        crate::audit::read_emf(&log, &mut pos, &accounts);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
