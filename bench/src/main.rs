//! The Rust side of `cargo xtask bench` (run that; it starts the local DynamoDB and builds this in
//! release). Usage: `bench throughput ENDPOINT MESSAGES` prints one JSON line per mode and
//! workload; `bench coldstart BINARY ENDPOINT RUNS` prints one JSON line with the cold start
//! (process start to its first request for work on the Lambda runtime API) and peak RSS.

mod coldstart;

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use lambda_dedup::{Effect, Item, KeySpec, Message, Retention, Scope};
use lambda_dedup_batch::{Deduplicator, HandlerError, Plan, run_batch, run_batch_transactional};
use lambda_dedup_dynamodb::DynamoStore;
use serde_json::json;

type Result<T> = std::result::Result<T, String>;

fn client(endpoint: &str) -> Client {
    Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("local", "local", None, None, "bench"))
            .endpoint_url(endpoint)
            .build(),
    )
}

async fn table(client: &Client, name: &str, key: &str) -> Result<()> {
    lambda_dedup_dynamodb::provision::create_table(client, name, key, false)
        .await
        .map(|_| ())
        .map_err(|e| format!("create {name}: {e}"))
}

/// The same event shape and effect as the Powertools side: a credit of 1 to one of 1000 accounts.
fn message(i: usize) -> Message {
    Message {
        message_id: format!("m-{i}-{}", Instant::now().elapsed().as_nanos()),
        body: json!({"specversion": "1.0", "type": "credit", "source": "/bench", "id": format!("evt-{i}"),
                     "tenantid": "t", "data": {"account": format!("acct-{}", i % 1000), "amount": 1}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    }
}

fn plan(
    balances: &str,
) -> impl Fn(&lambda_dedup::Derived) -> std::result::Result<Plan, HandlerError> + '_ {
    move |e| {
        let data = HandlerError::data(e)?;
        let account = data["account"]
            .as_str()
            .ok_or_else(|| HandlerError::Invalid("account".into()))?;
        Ok(Plan {
            effects: vec![
                Effect::update(balances, Item::new().with("account", account))
                    .expression("ADD #b :a")
                    .name("#b", "balance")
                    .value(":a", 1),
            ],
            result: None,
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    PerMessage,
    Batch,
    BatchCache,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::PerMessage => "per_message",
            Mode::Batch => "batch_transaction",
            Mode::BatchCache => "batch_transaction_warm_cache",
        }
    }
}

async fn run_one(
    dedup: &Deduplicator,
    balances: &str,
    mode: Mode,
    ids: &[usize],
) -> (Vec<Duration>, u64) {
    let mut latencies = Vec::new();
    let mut failures = 0;
    for chunk in ids.chunks(10) {
        let batch: Vec<Message> = chunk.iter().map(|i| message(*i)).collect();
        let t = Instant::now();
        let report = match mode {
            Mode::PerMessage => {
                let p = plan(balances);
                run_batch(batch, 10, |m| {
                    let p = &p;
                    async move { dedup.transactional(&m, p).await }
                })
                .await
            }
            Mode::Batch | Mode::BatchCache => {
                run_batch_transactional(batch, 10, dedup, plan(balances)).await
            }
        };
        latencies.push(t.elapsed());
        failures += report.failures.len() as u64;
    }
    (latencies, failures)
}

async fn throughput(endpoint: &str, n: usize) -> Result<()> {
    let client = client(endpoint);
    let retention = Retention::unchecked(Duration::from_secs(86_400)).map_err(|e| e.to_string())?;
    for workload in ["all_new", "half_duplicates", "all_duplicates"] {
        for mode in [Mode::PerMessage, Mode::Batch, Mode::BatchCache] {
            let suffix = format!("{}-{}", mode.name(), workload).replace('_', "-");
            let (marks, balances) = (
                format!("rs-marks-{suffix}"),
                format!("rs-balances-{suffix}"),
            );
            lambda_dedup_dynamodb::provision::create_mark_table(&client, &marks, false)
                .await
                .map_err(|e| e.to_string())?;
            table(&client, &balances, "account").await?;
            let store = DynamoStore::new(client.clone(), marks, retention);
            let spec = KeySpec::cloudevents(
                Scope::new("bench", "ledger").map_err(|e| e.to_string())?,
                "tenantid",
            );
            let mut dedup = Deduplicator::new(spec, store.clone());
            if mode == Mode::BatchCache {
                dedup = dedup.with_cache(100_000);
            }
            let ids: Vec<usize> = match workload {
                "all_new" => (0..n).collect(),
                "half_duplicates" => (0..n).map(|i| i % (n / 2)).collect(),
                _ => {
                    let ids: Vec<usize> = (0..n).collect();
                    run_one(&dedup, &balances, mode, &ids).await; // first pass, not timed
                    ids
                }
            };
            let before = store.calls();
            let began = Instant::now();
            let (mut latencies, failures) = run_one(&dedup, &balances, mode, &ids).await;
            let secs = began.elapsed().as_secs_f64();
            latencies.sort();
            let pick = |q: f64| {
                latencies[((q * latencies.len() as f64) as usize).min(latencies.len() - 1)]
                    .as_secs_f64()
                    * 1000.0
            };
            println!(
                "{}",
                json!({"mode": mode.name(), "workload": workload, "messages": n, "seconds": secs,
                       "msgs_per_s": n as f64 / secs, "calls_per_msg": (store.calls() - before) as f64 / n as f64,
                       "p50_ms": pick(0.5), "p99_ms": pick(0.99), "failures": failures})
            );
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("throughput") if args.len() == 3 => match args[2].parse() {
            Ok(n) => throughput(&args[1], n).await,
            Err(_) => Err("MESSAGES must be a number".into()),
        },
        Some("coldstart") if args.len() == 4 => match args[3].parse() {
            Ok(runs) => coldstart::run(&args[1], &args[2], runs).await,
            Err(_) => Err("RUNS must be a number".into()),
        },
        _ => Err(
            "usage: bench throughput ENDPOINT MESSAGES | bench coldstart BINARY ENDPOINT RUNS"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}
