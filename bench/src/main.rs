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
//! section of `DOCS/BENCHMARKS.md`; `bench hedge MESSAGES SEED DOCS` the single-write modes
//! with and without a hedge on that bed (`modelled/hedge.rs`), its section likewise; `bench http
//! REQUESTS SEED DOCS` the HTTP door beside Powertools' on that bed (`modelled/http.rs`);
//! `bench cpu MESSAGES DOCS` the CPU per message of the SQS door under `run_concurrent`
//! (`cpu.rs`, which runs this binary again as `bench cpu-function MODE`); `bench cpu-count MODE
//! MESSAGES` the same path without the runtime API or the bed's holds, for callgrind and
//! heaptrack (`cpu_count.rs`).

mod coldstart;
mod cpu;
mod cpu_count;
mod delay;
mod error;
mod modelled;
mod modes;
mod place;
mod report;
mod stores;
mod table;

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use lambda_dedup::{KeySpec, Retention, Scope};
use lambda_dedup_dynamodb::DynamoStore;
use serde_json::json;

use error::BenchError;
use modes::{ACCOUNTS, Dedups, Mode, run_one, workload_ids};

type Result<T> = std::result::Result<T, BenchError>;

fn client(endpoint: &str) -> Client {
    lambda_dedup_testkit::local_client!(aws_sdk_dynamodb, endpoint)
}

async fn table(client: &Client, name: &str, key: &str) -> Result<()> {
    lambda_dedup_dynamodb::provision::create_table(client, name, key, false)
        .await
        .map(|_| ())
        .map_err(|e| BenchError::step(format!("create {name}"), e))
}

/// The meter's totals, read over HTTP: requests, write units of writes that succeeded, of
/// failed conditional writes, of cancelled transactions (billed as attempted), read units,
/// cancelled transactions.
async fn meter(http: &reqwest::Client, url: &str) -> Result<[f64; 6]> {
    let v: serde_json::Value = http
        .get(url)
        .send()
        .await
        .map_err(|e| BenchError::step("meter", e))?
        .json()
        .await
        .map_err(|e| BenchError::step("meter", e))?;
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
        .map_err(|e| BenchError::step("meter", e))?
        .json()
        .await
        .map_err(|e| BenchError::step("meter", e))
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
    let retention =
        Retention::unchecked(Duration::from_secs(86_400)).map_err(BenchError::failed)?;
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
                .map_err(BenchError::failed)?;
            let key = if mode == Mode::CreateOnce {
                "entry"
            } else {
                "account"
            };
            table(&setup, &balances, key).await?;
            let spec = KeySpec::cloudevents(
                Scope::new("bench", "ledger").map_err(BenchError::failed)?,
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // On a runtime of its own: one thread, nothing else scheduled.
    if let (Some("cpu-count"), 3) = (args.first().map(String::as_str), args.len()) {
        let result = match args[2].parse::<usize>() {
            Ok(n) => cpu_count::run(&args[1], n),
            Err(_) => Err(BenchError::NotANumber(args[2].clone())),
        };
        if let Err(e) = result {
            eprintln!("bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    run(args);
}

#[tokio::main]
async fn run(args: Vec<String>) {
    let result = match args.first().map(String::as_str) {
        Some("throughput") if args.len() == 6 || args.len() == 7 => {
            let num = |i: usize| {
                args[i]
                    .parse::<usize>()
                    .map_err(|_| BenchError::NotANumber(args[i].clone()))
            };
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
                _ => Err(BenchError::Usage("BATCH and CONTAINERS must be at least 1")),
            }
        }
        Some("coldstart") if args.len() == 4 => match args[3].parse() {
            Ok(runs) => coldstart::run(&args[1], &args[2], runs).await,
            Err(_) => Err(BenchError::NotANumber("RUNS".to_owned())),
        },
        Some("stores") if args.len() == 5 => match args[3].parse::<usize>() {
            Ok(n) if n > 0 => {
                stores::run(&args[1], &args[2], n, std::path::Path::new(&args[4])).await
            }
            _ => Err(BenchError::Usage("MESSAGES must be a number above 0")),
        },
        Some("modelled") if args.len() == 4 => match (args[1].parse::<usize>(), args[2].parse()) {
            (Ok(n), Ok(seed)) if n > 0 => {
                modelled::run(n, seed, std::path::Path::new(&args[3])).await
            }
            _ => Err(BenchError::Usage(
                "MESSAGES must be a number above 0, SEED a number",
            )),
        },
        Some("hedge") if args.len() == 4 => match (args[1].parse::<usize>(), args[2].parse()) {
            (Ok(n), Ok(seed)) if n > 0 => {
                modelled::hedge::run(n, seed, std::path::Path::new(&args[3])).await
            }
            _ => Err(BenchError::Usage(
                "MESSAGES must be a number above 0, SEED a number",
            )),
        },
        Some("http") if args.len() == 4 => match (args[1].parse::<usize>(), args[2].parse()) {
            (Ok(n), Ok(seed)) if n > 0 => {
                modelled::http::run(n, seed, std::path::Path::new(&args[3])).await
            }
            _ => Err(BenchError::Usage(
                "REQUESTS must be a number above 0, SEED a number",
            )),
        },
        Some("cpu") if args.len() == 3 => match args[1].parse::<usize>() {
            Ok(n) if n > 0 => cpu::run(n, std::path::Path::new(&args[2])).await,
            _ => Err(BenchError::Usage("MESSAGES must be a number above 0")),
        },
        Some("cpu-function") if args.len() == 2 => cpu::function(&args[1]).await,
        Some("report") if args.len() == 3 => report::run(
            std::path::Path::new(&args[1]),
            std::path::Path::new(&args[2]),
        ),
        _ => Err(BenchError::Usage(
            "usage: bench throughput ENDPOINT MESSAGES BATCH CONTAINERS METER_URL [MODES] | bench coldstart BINARY ENDPOINT RUNS | bench report RAW DOCS | bench stores PG_URL VALKEY_URL MESSAGES DOCS | bench modelled MESSAGES SEED DOCS | bench hedge MESSAGES SEED DOCS | bench http REQUESTS SEED DOCS | bench cpu MESSAGES DOCS | bench cpu-count MODE MESSAGES",
        )),
    };
    if let Err(e) = result {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}
