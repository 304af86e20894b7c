//! `cargo xtask bench` (a benchmark, not a test): our modes — per-message, batch-transaction
//! (with and without the warm cache), sequence and create-once mode — against AWS Powertools for Lambda
//! (Python) idempotency, on the same workloads, through one metering proxy in front of a local
//! DynamoDB (Dynoxide, in memory) that counts requests, write and read units (failed writes
//! billed from the request) for both sides alike and holds every request for a simulated
//! latency.
//!
//! Configurations: the calibrated latency model (`local_dynamodb::latency`, seeded with
//! [`SEED`], the same draws for both sides) and a flat [`SIMULATED_RTT_MS`]; SQS batches of 10
//! and of 100 (a batching window). For each, the two sides alternate (the first side changes every run), each side runs
//! every workload `runs` times, and every side's run gets a fresh emulator and proxy, so neither
//! side runs on an emulator the other warmed up. Then our modes with several containers at once
//! on one table; then the cold start and peak RSS of a release function binary, and the arm64
//! zip sizes. This is the driver; the measuring is the `bench` crate's (`bench throughput`,
//! `bench coldstart`) and so is the report: `bench report` writes `docs/BENCHMARKS.md` (medians
//! and spreads) and `docs/benchmarks.json` from the raw results, then `bench/chart.py` draws
//! `docs/benchmarks.png` (matplotlib, in the project venv). Last, the PostgreSQL and Valkey
//! stores on servers of their own (`bench stores`, which writes their table into the report);
//! `--stores-only` runs that alone, on a debug build. The modelled bed (`bench modelled`: the
//! flows in process on the memory store, every request held for its draw of the calibrated
//! model, each row's bound and Powertools' computed from the draws) runs after the emulator
//! bed's report is written, and writes its own section; `--modelled-only` runs it alone, on a
//! debug build. On the same bed, three more sections: the single-write modes with and without
//! a hedge (`bench hedge`, `--hedge-only`), the HTTP door beside Powertools' (`bench http`,
//! `--http-only`), both on a debug build when alone, and the SQS door's CPU per message under
//! `run_concurrent` (`bench cpu`, `--cpu-only`, always a release build).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use local_dynamodb::meter::{Latency, Meter};
use serde_json::{Value, json};

use crate::Result;
use crate::dynamodb::LocalDynamo;
use local_lambda::process::succeeds;

/// The simulated round trip of one DynamoDB request from a Lambda function in the same Region,
/// in milliseconds. AWS describes DynamoDB's latency as "single-digit millisecond" at any
/// scale; 4 ms is a mid value of that range for a small request over a reused connection.
pub(crate) const SIMULATED_RTT_MS: u64 = 4;

/// The seed of the calibrated model's draws: every side's run starts the same stream.
pub(crate) const SEED: u64 = 21;

/// The latency models of the configurations: the name in the results, and the model.
fn models(delay_ms: u64) -> [(&'static str, Latency); 2] {
    [
        ("calibrated", Latency::Calibrated { seed: SEED }),
        ("flat", Latency::Flat(Duration::from_millis(delay_ms))),
    ]
}

const BENCH_PINS: &[&str] = &[
    "aws-lambda-powertools==3.37.0",
    "boto3==1.44.8",
    "matplotlib==3.11.2",
];
const BATCHES: [usize; 2] = [10, 100];
/// Containers at once, in the many-containers runs.
const CONTAINERS: usize = 4;

/// Runs `cmd`, echoing and collecting every JSON line it prints, tagged with `tags`.
fn json_lines(mut cmd: Command, what: &str, tags: &Value) -> Result<Vec<Value>> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut lines = Vec::new();
    for line in BufReader::new(out)
        .lines()
        .map_while(std::result::Result::ok)
    {
        if let Ok(mut v) = serde_json::from_str::<Value>(&line) {
            if let (Some(o), Some(t)) = (v.as_object_mut(), tags.as_object()) {
                o.extend(t.clone());
            }
            if v.get("msgs_per_s").is_some() {
                println!(
                    "xtask: bench: {:<10} b{:<3} c{} {:<30} {:<16} {:>8.1} msgs/s {:>5.3} calls/msg {:>5.2} WCU/msg",
                    v["model"].as_str().unwrap_or(""),
                    v["batch"].as_u64().unwrap_or(0),
                    v["containers"].as_u64().unwrap_or(1),
                    v["mode"].as_str().unwrap_or(""),
                    v["workload"].as_str().unwrap_or(""),
                    v["msgs_per_s"].as_f64().unwrap_or(0.0),
                    v["calls_per_msg"].as_f64().unwrap_or(0.0),
                    v["wcu_per_msg"].as_f64().unwrap_or(0.0)
                );
            }
            lines.push(v);
        }
    }
    let status = child.wait().map_err(|e| format!("{what}: {e}"))?;
    if !status.success() {
        return Err(format!("{what} failed ({status})"));
    }
    Ok(lines)
}

/// One side's run: which side, and its configuration.
#[derive(Clone, Copy)]
struct Side<'a> {
    rust: bool,
    n: usize,
    batch: usize,
    containers: usize,
    latency: Latency,
    modes: Option<&'a str>,
}

/// One side's run on a fresh emulator behind a fresh proxy.
fn side(root: &Path, run: &Side<'_>, tags: &Value) -> Result<Vec<Value>> {
    let ddb = LocalDynamo::start(root)?;
    let meter = Meter::start_with(&ddb.endpoint(), run.latency)?;
    let (endpoint, meter_url) = (meter.endpoint(), format!("{}/__meter", meter.endpoint()));
    let (n, batch) = (run.n.to_string(), run.batch.to_string());
    let (mut cmd, what) = if run.rust {
        let mut cmd = Command::new(crate::target_dir(root).join("release/bench"));
        cmd.args([
            "throughput",
            &endpoint,
            &n,
            &batch,
            &run.containers.to_string(),
        ]);
        (cmd, "bench throughput")
    } else {
        let mut cmd = Command::new(root.join(".cache/venv/bin/python"));
        cmd.arg(root.join("bench/powertools_bench.py"))
            .args([&endpoint, &n, &batch]);
        (cmd, "Powertools")
    };
    cmd.arg(&meter_url).args(run.modes);
    json_lines(cmd, what, tags)
}

pub(crate) fn run(root: &Path, messages: usize, delay_ms: u64, runs: usize) -> Result<()> {
    let bin = crate::tools::ensure(root)?;
    let python = bin.join("python");
    let imports = "import aws_lambda_powertools, boto3, matplotlib";
    if !succeeds(Command::new(&python).args(["-c", imports])) {
        let pins = BENCH_PINS.join(", ");
        println!("xtask: bench: installing {pins} into .cache/venv");
        crate::tools::pip_install(&bin, BENCH_PINS)?;
    }
    println!("xtask: bench: building the benchmark and ledger-projector in release (x86_64)");
    let mut build = Command::new(crate::cargo());
    build.current_dir(root).args(["build", "--release"]);
    if !succeeds(build.args(["-p", "bench", "-p", "ledger-projector"])) {
        return Err("release build failed".into());
    }
    let mut results = Vec::new();
    for (model, latency) in models(delay_ms) {
        for batch in BATCHES {
            for run in 0..runs {
                crate::step(format!(
                    "bench: {model} latency, batches of {batch}, run {} of {runs}",
                    run + 1
                ));
                let tags = json!({"model": model, "run": run});
                let order = if run % 2 == 0 {
                    [false, true]
                } else {
                    [true, false]
                };
                for rust in order {
                    let run = Side {
                        rust,
                        n: messages,
                        batch,
                        containers: 1,
                        latency,
                        modes: None,
                    };
                    results.extend(side(root, &run, &tags)?);
                }
            }
        }
    }
    for run in 0..runs {
        crate::step(format!(
            "bench: {CONTAINERS} containers at once, calibrated latency, batches of 10, run {} of {runs}",
            run + 1
        ));
        let tags = json!({"model": "calibrated", "run": run});
        let many = Side {
            rust: true,
            n: messages * CONTAINERS,
            batch: 10,
            containers: CONTAINERS,
            latency: Latency::Calibrated { seed: SEED },
            modes: Some("per_message,batch_transaction,sequence"),
        };
        results.extend(side(root, &many, &tags)?);
    }
    let ddb = LocalDynamo::start(root)?;
    let endpoint = ddb.endpoint();
    let release = crate::target_dir(root).join("release");
    let mut cold = Command::new(release.join("bench"));
    cold.arg("coldstart")
        .arg(release.join("ledger-projector"))
        .args([&endpoint, "7"]);
    let cold = json_lines(cold, "bench coldstart", &json!({}))?
        .into_iter()
        .next()
        .ok_or("no cold start result")?;
    drop(ddb);
    println!(
        "xtask: bench: cold start {:.1} ms (median of 7), peak RSS {:.1} MB",
        cold["cold_start_ms_median"].as_f64().unwrap_or(0.0),
        cold["peak_rss_mb_max"].as_f64().unwrap_or(0.0)
    );
    let zips: BTreeMap<&str, Option<f64>> = crate::package::FUNCTIONS
        .iter()
        .map(|f| (*f, crate::package::zip_mb(root, f)))
        .collect();
    // The report is the benchmark crate's: medians, spreads, costs, the targets.
    let model_p50 = |items| {
        local_dynamodb::latency::calibrated("TransactWriteItems", items).map_or(0.0, |f| f.at(0.0))
    };
    let raw = json!({
        "config": {"messages": messages, "delay_ms": delay_ms, "runs": runs, "seed": SEED,
                   "containers": CONTAINERS,
                   "transaction_p50_ms": {"20": model_p50(20), "100": model_p50(100)}},
        "runs": results, "cold": cold, "zips": zips,
    });
    let raw_path = root.join(".cache").join("bench-results.json");
    std::fs::write(&raw_path, raw.to_string()).map_err(|e| e.to_string())?;
    let docs = root.join("docs");
    if !succeeds(
        Command::new(release.join("bench"))
            .arg("report")
            .args([&raw_path, &docs]),
    ) {
        return Err("bench report failed".into());
    }
    let mut chart = Command::new(&python);
    chart
        .arg(root.join("bench/chart.py"))
        .arg(docs.join("benchmarks.json"));
    if !succeeds(chart.arg(docs.join("benchmarks.png")).arg("calibrated")) {
        return Err("drawing docs/benchmarks.png failed".into());
    }
    println!(
        "xtask: bench: wrote docs/BENCHMARKS.md, docs/benchmarks.json and docs/benchmarks.png"
    );
    modelled(root, &release.join("bench"), messages)?;
    hedge(root, &release.join("bench"), messages)?;
    http(root, &release.join("bench"), messages)?;
    cpu(root, &release.join("bench"), messages)?;
    stores(root, &release.join("bench"), messages)
}

/// `--modelled-only`: the modelled bed alone, on a debug build.
pub(crate) fn modelled_only(root: &Path, messages: usize) -> Result<()> {
    modelled(root, &debug_build(root)?, messages)
}

/// `--hedge-only`: the hedging rows alone, on a debug build.
pub(crate) fn hedge_only(root: &Path, messages: usize) -> Result<()> {
    hedge(root, &debug_build(root)?, messages)
}

/// `--http-only`: the HTTP door's rows alone, on a debug build.
pub(crate) fn http_only(root: &Path, requests: usize) -> Result<()> {
    http(root, &debug_build(root)?, requests)
}

/// `--cpu-only`: the CPU rows alone, on a release build with symbols (the `profiling` profile:
/// CPU time is what they measure, and the profile names functions).
pub(crate) fn cpu_only(root: &Path, messages: usize) -> Result<()> {
    let mut build = Command::new(crate::cargo());
    build
        .current_dir(root)
        .args(["build", "--profile", "profiling", "-p", "bench"]);
    if !succeeds(&mut build) {
        return Err("release build (profile profiling) failed".into());
    }
    cpu(
        root,
        &crate::target_dir(root).join("profiling/bench"),
        messages,
    )
}

/// `--stores-only`: the PostgreSQL and Valkey rows alone, on a debug build.
pub(crate) fn stores_only(root: &Path, messages: usize) -> Result<()> {
    stores(root, &debug_build(root)?, messages)
}

/// The bench binary, built in debug.
fn debug_build(root: &Path) -> Result<std::path::PathBuf> {
    let mut build = Command::new(crate::cargo());
    if !succeeds(build.current_dir(root).args(["build", "-p", "bench"])) {
        return Err("build failed".into());
    }
    Ok(crate::target_dir(root).join("debug/bench"))
}

/// `bench modelled`: its section of docs/BENCHMARKS.md and docs/benchmarks-modelled.json.
fn modelled(root: &Path, bench: &Path, messages: usize) -> Result<()> {
    crate::step("bench: the modelled bed (in process, calibrated latency per request)");
    let mut cmd = Command::new(bench);
    cmd.args(["modelled", &messages.to_string(), &SEED.to_string()]);
    if !succeeds(cmd.arg(root.join("docs"))) {
        return Err("bench modelled failed".into());
    }
    println!("xtask: bench: wrote the modelled bed's section into docs/BENCHMARKS.md");
    Ok(())
}

/// `bench hedge`: the single-write modes with and without a hedge on the modelled bed, its
/// section of docs/BENCHMARKS.md and docs/benchmarks-hedge.json.
fn hedge(root: &Path, bench: &Path, messages: usize) -> Result<()> {
    crate::step("bench: hedging the single-write modes (modelled bed)");
    let mut cmd = Command::new(bench);
    cmd.args(["hedge", &messages.to_string(), &SEED.to_string()]);
    if !succeeds(cmd.arg(root.join("docs"))) {
        return Err("bench hedge failed".into());
    }
    println!("xtask: bench: wrote the hedging rows into docs/BENCHMARKS.md");
    Ok(())
}

/// `bench http`: the HTTP door beside Powertools' on the modelled bed, its section of
/// docs/BENCHMARKS.md and docs/benchmarks-http.json.
fn http(root: &Path, bench: &Path, requests: usize) -> Result<()> {
    crate::step("bench: the HTTP door beside Powertools' (modelled bed)");
    let mut cmd = Command::new(bench);
    cmd.args(["http", &requests.to_string(), &SEED.to_string()]);
    if !succeeds(cmd.arg(root.join("docs"))) {
        return Err("bench http failed".into());
    }
    println!("xtask: bench: wrote the HTTP door's rows into docs/BENCHMARKS.md");
    Ok(())
}

/// `bench cpu`: the SQS door's CPU per message under `run_concurrent` at 8, 32 and 64
/// invocations at once, its section of docs/BENCHMARKS.md and docs/benchmarks-cpu.json.
fn cpu(root: &Path, bench: &Path, messages: usize) -> Result<()> {
    crate::step("bench: CPU per message under run_concurrent (modelled bed)");
    let mut cmd = Command::new(bench);
    cmd.args(["cpu", &messages.to_string()]);
    if !succeeds(cmd.arg(root.join("docs"))) {
        return Err("bench cpu failed".into());
    }
    println!("xtask: bench: wrote the CPU rows into docs/BENCHMARKS.md");
    Ok(())
}

/// `bench stores` on a local PostgreSQL and a local Valkey: their table in docs/BENCHMARKS.md.
fn stores(root: &Path, bench: &Path, messages: usize) -> Result<()> {
    let venv = crate::tools::venv(root)?;
    let pg = crate::postgres::LocalPostgres::start(venv.clone())?;
    let valkey = crate::valkey::LocalValkey::start(&venv)?;
    let url = |env: Vec<(String, String)>, var: &str| {
        env.into_iter()
            .find(|(k, _)| k == var)
            .map(|(_, v)| v)
            .ok_or(format!("no {var}"))
    };
    let (pg_url, valkey_url) = (
        url(pg.env(), crate::postgres::URL_VAR)?,
        url(valkey.env(), "DEDUP_VALKEY_URL")?,
    );
    crate::step("bench: the PostgreSQL and Valkey stores, calibrated latency per request");
    let mut cmd = Command::new(bench);
    cmd.args(["stores", &pg_url, &valkey_url, &messages.to_string()]);
    if !succeeds(cmd.arg(root.join("docs"))) {
        return Err("bench stores failed".into());
    }
    println!("xtask: bench: wrote the stores' table into docs/BENCHMARKS.md");
    Ok(())
}
