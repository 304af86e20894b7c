//! The Rust side of `cargo xtask bench` (run that; it starts the local DynamoDB and builds this in
//! release). Usage: `bench throughput ENDPOINT MESSAGES BATCH CONTAINERS METER_URL [MODES]` prints
//! one JSON line per mode and workload (requests and write units read from the metering proxy at
//! `METER_URL`, `GET /__meter`); `bench coldstart BINARY ENDPOINT RUNS` prints one JSON line with the cold start
//! (process start to its first request for work on the Lambda runtime API) and peak RSS;
//! `bench report RAW DOCS` writes the report of a run's results (`report.rs`);
//! `bench stores PG_URL VALKEY_URL MESSAGES DOCS` measures the PostgreSQL and Valkey stores
//! behind a proxy with the same latency model (`stores.rs`, `delay.rs`) and writes their table
//! into `DOCS/BENCHMARKS.md`; `bench modelled MESSAGES SEED DOCS` runs the modelled bed (the
//! flows on the memory store behind the latency model alone, `modelled.rs`) and writes its
//! section of `DOCS/BENCHMARKS.md`.

mod coldstart;
mod delay;
mod modelled;
mod report;
mod stores;

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use lambda_dedup::store::{CreateOnceStore, SequenceStore};
use lambda_dedup::{Effect, Item, KeySpec, Message, Retention, Scope, SequenceSource};
use lambda_dedup_batch::{
    CreateOnceDeduplicator, Deduplicator, HandlerError, Plan, SequencedDeduplicator, run_batch,
    run_batch_transactional,
};
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
/// `seq` is the producer's sequence per account (used by sequence mode only); the account is
/// the FIFO message group.
fn message(i: usize) -> Message {
    let account = format!("acct-{}", i % ACCOUNTS);
    Message {
        message_id: format!("m-{i}-{}", Instant::now().elapsed().as_nanos()),
        body: json!({"specversion": "1.0", "type": "credit", "source": "/bench", "id": format!("evt-{i}"),
                     "tenantid": "t", "data": {"account": account, "amount": 1, "seq": i / ACCOUNTS + 1}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    }
}

const ACCOUNTS: usize = 1000;

fn credit(balances: &str, e: &lambda_dedup::Derived) -> std::result::Result<Effect, HandlerError> {
    let data = HandlerError::data(e)?;
    let account = data["account"]
        .as_str()
        .ok_or_else(|| HandlerError::invalid("account"))?;
    Ok(
        Effect::update(balances, Item::new().with("account", account))
            .expression("ADD #b :a")
            .name("#b", "balance")
            .value(":a", 1),
    )
}

/// Create-once mode's effect: the credit recorded as its own entry item, keyed by the event (in
/// the table `entries`, key `entry`): one item per event, which is the mark.
fn entry(entries: &str, e: &lambda_dedup::Derived) -> std::result::Result<Plan, HandlerError> {
    let data = HandlerError::data(e)?;
    let account = data["account"]
        .as_str()
        .ok_or_else(|| HandlerError::invalid("account"))?;
    let item = Item::new()
        .with("entry", e.key.as_str())
        .with("account", account)
        .with("amount", 1);
    Ok(Effect::put(entries, item).into())
}

fn plan(
    balances: &str,
) -> impl Fn(&lambda_dedup::Derived) -> std::result::Result<Plan, HandlerError> + '_ {
    move |e| {
        Ok(Plan {
            effects: vec![credit(balances, e)?],
            result: None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    PerMessage,
    Batch,
    BatchCache,
    BatchPrefilter,
    Sequence,
    CreateOnce,
}

impl Mode {
    /// Every mode, in the order the rows are run.
    const ALL: [Mode; 6] = [
        Mode::PerMessage,
        Mode::Batch,
        Mode::BatchCache,
        Mode::BatchPrefilter,
        Mode::Sequence,
        Mode::CreateOnce,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::PerMessage => "per_message",
            Mode::Batch => "batch_transaction",
            Mode::BatchCache => "batch_transaction_warm_cache",
            Mode::BatchPrefilter => "batch_transaction_prefilter",
            Mode::Sequence => "sequence",
            Mode::CreateOnce => "create_once",
        }
    }
}

/// One container's deduplicators, all on its one store: the flows of every mode.
struct Dedups {
    dedup: Deduplicator,
    sequenced: SequencedDeduplicator,
    create_once: CreateOnceDeduplicator,
}

impl Dedups {
    /// The deduplicators of `spec` on `store` (DynamoDB, or the modelled bed's), the mode's
    /// options set.
    fn new<S>(spec: &KeySpec, store: std::sync::Arc<S>, mode: Mode) -> Self
    where
        S: SequenceStore + CreateOnceStore + 'static,
    {
        let dedup = Deduplicator::with_store(spec.clone(), store.clone());
        Self {
            dedup: match mode {
                Mode::BatchCache => dedup.with_cache(100_000),
                Mode::BatchPrefilter => dedup.with_duplicate_prefilter(true),
                _ => dedup,
            },
            sequenced: SequencedDeduplicator::with_store(spec.clone(), store.clone()),
            create_once: CreateOnceDeduplicator::with_store(spec.clone(), store),
        }
    }
}

/// One container's work: its batches, one at a time, as one Lambda container processes them.
/// Each batch runs in its place ([`modelled::in_batch`]), each message of a mode that runs a
/// batch's messages at once in its lane (its FIFO group, or itself): what the modelled bed's
/// bound is computed over; nothing else reads them.
async fn run_one(
    dedups: &Dedups,
    balances: &str,
    mode: Mode,
    ids: &[usize],
    batch_size: usize,
) -> (Vec<Duration>, u64) {
    let mut latencies = Vec::new();
    let mut failures = 0;
    let source = SequenceSource::pointer("/data/seq");
    let dedup = &dedups.dedup;
    for (number, chunk) in ids.chunks(batch_size).enumerate() {
        let batch: Vec<Message> = chunk.iter().map(|i| message(*i)).collect();
        let t = Instant::now();
        let report = modelled::in_batch(number, async {
            match mode {
                Mode::PerMessage => {
                    let p = plan(balances);
                    run_batch(batch, batch_size, |m| {
                        let p = &p;
                        async move {
                            let lane = m.message_id.clone();
                            modelled::in_lane(&lane, dedup.transactional(&m, p)).await
                        }
                    })
                    .await
                }
                Mode::Batch | Mode::BatchCache | Mode::BatchPrefilter => {
                    run_batch_transactional(batch, batch_size, dedup, plan(balances)).await
                }
                Mode::Sequence => {
                    // A FIFO batch: each account is a message group, kept in order.
                    let batch = batch
                        .into_iter()
                        .zip(chunk)
                        .map(|(mut m, i)| {
                            m.group_id = Some(format!("acct-{}", i % ACCOUNTS));
                            m
                        })
                        .collect();
                    let source = &source;
                    run_batch(batch, batch_size, |m| async move {
                        let lane = m.group_id.clone().unwrap_or_default();
                        let applied = dedups
                            .sequenced
                            .sequenced(&m, source, |e| credit(balances, e));
                        modelled::in_lane(&lane, applied).await
                    })
                    .await
                }
                Mode::CreateOnce => {
                    run_batch(batch, batch_size, |m| async move {
                        let lane = m.message_id.clone();
                        let created = dedups.create_once.create_once(&m, |e| entry(balances, e));
                        modelled::in_lane(&lane, created).await
                    })
                    .await
                }
            }
        })
        .await;
        latencies.push(t.elapsed());
        failures += report.failures().len() as u64;
    }
    (latencies, failures)
}

/// The meter's totals, read over HTTP: requests, write units of writes that succeeded, of
/// failed conditional writes, of cancelled transactions (billed as attempted), read units,
/// cancelled transactions.
async fn meter(http: &reqwest::Client, url: &str) -> Result<[f64; 6]> {
    let v: serde_json::Value = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("meter: {e}"))?
        .json()
        .await
        .map_err(|e| format!("meter: {e}"))?;
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    Ok([
        f("requests"),
        f("write_units"),
        f("failed_write_units"),
        f("cancelled_write_units"),
        f("read_units"),
        f("cancelled_transactions"),
    ])
}

/// The emulator's own service time per operation since the last call (p50 and mean, ms), read
/// from the metering proxy and started again (`POST METER_URL/service`).
async fn service(http: &reqwest::Client, url: &str) -> Result<serde_json::Value> {
    http.post(format!("{url}/service"))
        .send()
        .await
        .map_err(|e| format!("meter: {e}"))?
        .json()
        .await
        .map_err(|e| format!("meter: {e}"))
}

/// The events a workload delivers, in order: each a number (its event id, its account).
/// `mixed`: each batch delivers 30 % redeliveries of events of earlier batches, interleaved
/// (positions 2, 5 and 8 of every 10), the rest new; the first batch is all new. The same
/// sequence as `powertools_bench.py`'s.
fn workload_ids(workload: &str, n: usize, batch: usize) -> Vec<usize> {
    match workload {
        "half_duplicates" => (0..n).map(|i| i % (n / 2)).collect(),
        "mixed" => {
            let (mut ids, mut fresh, mut r) = (Vec::with_capacity(n), 0, 0);
            while ids.len() < n {
                let before = fresh;
                for k in 0..batch.min(n - ids.len()) {
                    if matches!(k % 10, 2 | 5 | 8) && before > 0 {
                        ids.push((r * 7919) % before);
                        r += 1;
                    } else {
                        ids.push(fresh);
                        fresh += 1;
                    }
                }
            }
            ids
        }
        _ => (0..n).collect(),
    }
}

/// Every mode on every workload: `containers` containers at once on one table, each processing
/// its share of the messages in batches of `batch_size`, one batch at a time. Requests and write
/// units come from the metering proxy at `meter_url`, as for the Powertools side.
async fn throughput(
    endpoint: &str,
    n: usize,
    batch_size: usize,
    containers: usize,
    meter_url: &str,
    modes: &[Mode],
) -> Result<()> {
    let http = reqwest::Client::new();
    let retention = Retention::unchecked(Duration::from_secs(86_400)).map_err(|e| e.to_string())?;
    for workload in ["all_new", "half_duplicates", "mixed", "all_duplicates"] {
        for &mode in modes {
            let suffix = format!("{}-{}", mode.name(), workload).replace('_', "-");
            let (marks, balances) = (
                format!("rs-marks-{suffix}"),
                format!("rs-balances-{suffix}"),
            );
            let setup = client(endpoint);
            lambda_dedup_dynamodb::provision::create_mark_table(&setup, &marks, false)
                .await
                .map_err(|e| e.to_string())?;
            let key = if mode == Mode::CreateOnce {
                "entry"
            } else {
                "account"
            };
            table(&setup, &balances, key).await?;
            let spec = KeySpec::cloudevents(
                Scope::new("bench", "ledger").map_err(|e| e.to_string())?,
                "tenantid",
            );
            // Each container has its own client (its own connections), as in Lambda.
            let dedups: Vec<Dedups> = (0..containers)
                .map(|_| {
                    let store = DynamoStore::new(client(endpoint), marks.clone(), retention);
                    Dedups::new(&spec, std::sync::Arc::new(store), mode)
                })
                .collect();
            let ids = workload_ids(workload, n, batch_size);
            // Containers split the messages by account, so each FIFO group has one consumer.
            let shares: Vec<Vec<usize>> = (0..containers)
                .map(|c| {
                    ids.iter()
                        .copied()
                        .filter(|i| (i % ACCOUNTS) % containers == c)
                        .collect()
                })
                .collect();
            let run_all = || {
                futures::future::join_all(
                    dedups
                        .iter()
                        .zip(&shares)
                        .map(|(d, share)| run_one(d, &balances, mode, share, batch_size)),
                )
            };
            if workload == "all_duplicates" {
                run_all().await; // first pass, not timed
            }
            service(&http, meter_url).await?; // the untimed pass's service times dropped
            let before = meter(&http, meter_url).await?;
            let began = Instant::now();
            let runs = run_all().await;
            let secs = began.elapsed().as_secs_f64();
            let after = meter(&http, meter_url).await?;
            let service_ms = service(&http, meter_url).await?;
            let failures: u64 = runs.iter().map(|(_, f)| f).sum();
            let mut latencies: Vec<Duration> = runs.into_iter().flat_map(|(l, _)| l).collect();
            latencies.sort();
            let pick = |q: f64| {
                latencies[((q * latencies.len() as f64) as usize).min(latencies.len() - 1)]
                    .as_secs_f64()
                    * 1000.0
            };
            let per = |k: usize| (after[k] - before[k]) / n as f64;
            println!(
                "{}",
                json!({"mode": mode.name(), "workload": workload, "messages": n, "seconds": secs,
                       "batch": batch_size, "containers": containers,
                       "msgs_per_s": n as f64 / secs,
                       "calls_per_msg": per(0), "wcu_per_msg": per(1),
                       "failed_wcu_per_msg": per(2), "cancelled_wcu_per_msg": per(3),
                       "rcu_per_msg": per(4), "cancelled_per_msg": per(5),
                       "p50_ms": pick(0.5), "p99_ms": pick(0.99), "failures": failures,
                       "service_ms": service_ms})
            );
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("throughput") if args.len() == 6 || args.len() == 7 => {
            let num = |i: usize| args[i].parse::<usize>().map_err(|_| format!("{} must be a number", args[i]));
            let all = Mode::ALL;
            let modes: Vec<Mode> = match args.get(6) {
                None => all.to_vec(),
                Some(list) => all
                    .into_iter()
                    .filter(|m| list.split(',').any(|x| x == m.name()))
                    .collect(),
            };
            match (num(2), num(3), num(4)) {
                (Ok(n), Ok(batch), Ok(containers)) if batch > 0 && containers > 0 => {
                    throughput(&args[1], n, batch, containers, &args[5], &modes).await
                }
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
                _ => Err("BATCH and CONTAINERS must be at least 1".into()),
            }
        }
        Some("coldstart") if args.len() == 4 => match args[3].parse() {
            Ok(runs) => coldstart::run(&args[1], &args[2], runs).await,
            Err(_) => Err("RUNS must be a number".into()),
        },
        Some("stores") if args.len() == 5 => match args[3].parse::<usize>() {
            Ok(n) if n > 0 => {
                stores::run(&args[1], &args[2], n, std::path::Path::new(&args[4])).await
            }
            _ => Err("MESSAGES must be a number above 0".into()),
        },
        Some("modelled") if args.len() == 4 => match (args[1].parse::<usize>(), args[2].parse()) {
            (Ok(n), Ok(seed)) if n > 0 => {
                modelled::run(n, seed, std::path::Path::new(&args[3])).await
            }
            _ => Err("MESSAGES must be a number above 0, SEED a number".into()),
        },
        Some("report") if args.len() == 3 => {
            report::run(std::path::Path::new(&args[1]), std::path::Path::new(&args[2]))
        }
        _ => Err(
            "usage: bench throughput ENDPOINT MESSAGES BATCH CONTAINERS METER_URL [MODES] | bench coldstart BINARY ENDPOINT RUNS | bench report RAW DOCS | bench stores PG_URL VALKEY_URL MESSAGES DOCS | bench modelled MESSAGES SEED DOCS"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}
