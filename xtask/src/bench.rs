//! `cargo xtask bench` (a benchmark, not a test): our modes — per-message, batch-transaction
//! (with and without the warm cache) and sequence mode — against AWS Powertools for Lambda
//! (Python) idempotency, on the same workloads, through one metering proxy in front of a local
//! DynamoDB (Dynoxide, in memory) that counts requests and write request units for both sides
//! alike and can add a simulated network round trip to every request.
//!
//! Configurations: no delay and [`SIMULATED_RTT_MS`]; SQS batches of 10 and of 100 (a batching
//! window). For each, the two sides alternate (the first side changes every run), each side runs
//! every workload `runs` times, and every side's run gets a fresh emulator and proxy, so neither
//! side runs on an emulator the other warmed up. Then our modes with several containers at once
//! on one table; then the cold start and peak RSS of a release function binary, and the arm64
//! zip sizes. Writes `docs/BENCHMARKS.md` (medians and spreads), `docs/benchmarks.json` and the
//! chart `docs/benchmarks.png` (matplotlib, in the project venv).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use local_dynamodb::meter::Meter;
use serde_json::{Value, json};

use crate::Result;
use crate::dynamodb::LocalDynamo;

/// The simulated round trip of one DynamoDB request from a Lambda function in the same Region,
/// in milliseconds. AWS describes DynamoDB's latency as "single-digit millisecond" at any
/// scale; 4 ms is a mid value of that range for a small request over a reused connection.
pub(crate) const SIMULATED_RTT_MS: u64 = 4;

const BENCH_PINS: &[&str] = &[
    "aws-lambda-powertools==3.37.0",
    "boto3==1.44.8",
    "matplotlib==3.11.2",
];
const WORKLOADS: [&str; 3] = ["all_new", "half_duplicates", "all_duplicates"];
const MODES: [&str; 5] = [
    "powertools",
    "per_message",
    "batch_transaction",
    "batch_transaction_warm_cache",
    "sequence",
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
                    "xtask: bench: {:>2} ms b{:<3} c{} {:<30} {:<16} {:>8.1} msgs/s {:>5.3} calls/msg {:>5.2} WCU/msg",
                    v["delay_ms"].as_u64().unwrap_or(0),
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
    delay_ms: u64,
    modes: Option<&'a str>,
}

/// One side's run on a fresh emulator behind a fresh proxy.
fn side(root: &Path, run: &Side<'_>, tags: &Value) -> Result<Vec<Value>> {
    let Side {
        rust,
        n,
        batch,
        containers,
        delay_ms,
        modes,
    } = *run;
    let ddb = LocalDynamo::start(root)?;
    let meter = Meter::start(&ddb.endpoint(), Duration::from_millis(delay_ms))?;
    let (endpoint, meter_url) = (meter.endpoint(), format!("{}/__meter", meter.endpoint()));
    let lines = if rust {
        let mut cmd = Command::new(root.join("target").join("release").join("bench"));
        cmd.args([
            "throughput",
            &endpoint,
            &n.to_string(),
            &batch.to_string(),
            &containers.to_string(),
            &meter_url,
        ]);
        cmd.args(modes);
        json_lines(cmd, "bench throughput", tags)?
    } else {
        let mut cmd = Command::new(root.join(".cache").join("venv").join("bin").join("python"));
        cmd.arg(root.join("bench").join("powertools_bench.py"))
            .args([&endpoint, &n.to_string(), &batch.to_string(), &meter_url]);
        json_lines(cmd, "Powertools", tags)?
    };
    drop(ddb);
    Ok(lines)
}

pub(crate) fn run(root: &Path, messages: usize, delay_ms: u64, runs: usize) -> Result<()> {
    let bin = crate::tools::ensure(root)?;
    let python = bin.join("python");
    let have = Command::new(&python)
        .args(["-c", "import aws_lambda_powertools, boto3, matplotlib"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        println!(
            "xtask: bench: installing {} into .cache/venv",
            BENCH_PINS.join(", ")
        );
        let ok = Command::new(bin.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(BENCH_PINS)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err("could not install Powertools into .cache/venv".into());
        }
    }
    println!("xtask: bench: building the benchmark and ledger-projector in release (x86_64)");
    let ok = crate::process::run(Command::new(crate::cargo()).current_dir(root).args([
        "build",
        "--release",
        "-p",
        "bench",
        "-p",
        "ledger-projector",
    ]))
    .is_ok_and(|s| s.success());
    if !ok {
        return Err("release build failed".into());
    }
    let mut results = Vec::new();
    for delay in [0, delay_ms] {
        for batch in BATCHES {
            for run in 0..runs {
                crate::step(format!(
                    "bench: delay {delay} ms, batches of {batch}, run {} of {runs}",
                    run + 1
                ));
                let tags = json!({"delay_ms": delay, "run": run});
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
                        delay_ms: delay,
                        modes: None,
                    };
                    results.extend(side(root, &run, &tags)?);
                }
            }
        }
    }
    for run in 0..runs {
        crate::step(format!(
            "bench: {CONTAINERS} containers at once, delay {delay_ms} ms, batches of 10, run {} of {runs}",
            run + 1
        ));
        let tags = json!({"delay_ms": delay_ms, "run": run});
        let many = Side {
            rust: true,
            n: messages * CONTAINERS,
            batch: 10,
            containers: CONTAINERS,
            delay_ms,
            modes: Some("per_message,batch_transaction,sequence"),
        };
        results.extend(side(root, &many, &tags)?);
    }
    let ddb = LocalDynamo::start(root)?;
    let endpoint = ddb.endpoint();
    let release = root.join("target").join("release");
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
    let zips: BTreeMap<String, Option<f64>> = crate::package::FUNCTIONS
        .iter()
        .map(|f| {
            let zip = root
                .join("target")
                .join("lambda")
                .join(f)
                .join("bootstrap.zip");
            let mb = std::fs::metadata(zip)
                .ok()
                .map(|m| m.len() as f64 / 1_048_576.0);
            ((*f).to_owned(), mb)
        })
        .collect();
    let summary = summarize(&results);
    let docs = root.join("docs");
    std::fs::create_dir_all(&docs).map_err(|e| e.to_string())?;
    std::fs::write(
        docs.join("BENCHMARKS.md"),
        report(&summary, &cold, &zips, messages, delay_ms, runs),
    )
    .map_err(|e| e.to_string())?;
    let mut all = summary.clone();
    all.push(cold.clone());
    std::fs::write(
        docs.join("benchmarks.json"),
        serde_json::to_string_pretty(&json!({"summary": all, "runs": results}))
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let ok = Command::new(&python)
        .arg(root.join("bench").join("chart.py"))
        .arg(docs.join("benchmarks.json"))
        .arg(docs.join("benchmarks.png"))
        .arg(delay_ms.to_string())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err("drawing docs/benchmarks.png failed".into());
    }
    println!(
        "xtask: bench: wrote docs/BENCHMARKS.md, docs/benchmarks.json and docs/benchmarks.png"
    );
    Ok(())
}

/// The median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// One entry per (delay, batch, containers, mode, workload): the median over runs of each
/// figure, and the spread (min, max) of messages per second.
fn summarize(results: &[Value]) -> Vec<Value> {
    let mut groups: BTreeMap<(u64, u64, u64, String, String), Vec<&Value>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.get("msgs_per_s").is_some()) {
        let key = (
            r["delay_ms"].as_u64().unwrap_or(0),
            r["batch"].as_u64().unwrap_or(10),
            r["containers"].as_u64().unwrap_or(1),
            r["mode"].as_str().unwrap_or("").to_owned(),
            r["workload"].as_str().unwrap_or("").to_owned(),
        );
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((delay, batch, containers, mode, workload), rs)| {
            let col = |k: &str| -> Vec<f64> { rs.iter().filter_map(|r| r[k].as_f64()).collect() };
            let rates = col("msgs_per_s");
            let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let max = rates.iter().copied().fold(0.0, f64::max);
            json!({"delay_ms": delay, "batch": batch, "containers": containers, "mode": mode,
                   "workload": workload, "runs": rs.len(),
                   "msgs_per_s": median(&mut rates.clone()), "msgs_per_s_min": min, "msgs_per_s_max": max,
                   "calls_per_msg": median(&mut col("calls_per_msg")),
                   "wcu_per_msg": median(&mut col("wcu_per_msg")),
                   "p50_ms": median(&mut col("p50_ms")), "p99_ms": median(&mut col("p99_ms")),
                   "failures": rs.iter().filter_map(|r| r["failures"].as_u64()).sum::<u64>()})
        })
        .collect()
}

/// The summary entry of one configuration, mode and workload.
fn find<'a>(
    summary: &'a [Value],
    (delay, batch, containers): (u64, usize, usize),
    mode: &str,
    workload: &str,
) -> Option<&'a Value> {
    summary.iter().find(|v| {
        v["delay_ms"] == delay
            && v["batch"] == batch as u64
            && v["containers"] == containers as u64
            && v["mode"] == mode
            && v["workload"] == workload
    })
}

fn num(v: Option<&Value>, k: &str) -> f64 {
    v.and_then(|v| v[k].as_f64()).unwrap_or(0.0)
}

fn report(
    summary: &[Value],
    cold: &Value,
    zips: &BTreeMap<String, Option<f64>>,
    n: usize,
    delay_ms: u64,
    runs: usize,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Measured by `cargo xtask bench` in one run on the project's 2-core machine, against a \
         local DynamoDB (Dynoxide 3.2, in memory, embedded in xtask) behind a metering proxy \
         (`local_dynamodb::meter`) that both sides go through: it asks every request for its \
         consumed capacity and adds up the write request units (WCU), counts requests, and, in \
         the runs with a simulated network, holds every request {delay_ms} ms before forwarding it. \
         {delay_ms} ms stands for one in-Region round trip from Lambda to DynamoDB, which AWS \
         describes as \"single-digit millisecond\" latency; the emulator's own time comes on top.\n\n\
         Every message is a CloudEvents credit whose effect is one balance update (`ADD`) on one of \
         1,000 accounts; {n} messages per workload and run, in SQS batches of 10 or of 100 (a \
         batching window), one batch at a time (one Lambda container). The two sides alternate: \
         in each configuration each side runs every workload {runs} times, the first side changes \
         every run, and every side's run gets a fresh emulator and proxy, so neither runs on an \
         emulator the other warmed up. Tables show the median of the runs and, for messages per \
         second, the spread (min–max).\n"
    );
    let _ = writeln!(
        md,
        "- **powertools**: AWS Powertools for Lambda (Python) 3.37, `BatchProcessor` + \
         `idempotent_function` with the DynamoDB persistence layer (a conditional put, the effect, \
         then an update: the mark and the effect are *not* atomic). Cost per new message: 3 \
         requests, 3 WCU (three single-item writes).\n\
         - **per_message**: `Deduplicator::transactional`, one `TransactWriteItems` (mark + \
         effect) per message, the batch's messages at once. 1 request, 4 WCU per new message: a \
         transaction costs 2 WCU per item, and it holds 2 items.\n\
         - **batch_transaction**: `run_batch_transactional`, the marks and effects of a batch in as \
         few `TransactWriteItems` as its 100-item limit allows (1 for 10 messages, 2–3 for 100). \
         4 WCU per new message, like per-message mode, in a tenth of the requests or fewer.\n\
         - **batch_transaction_warm_cache**: the same with the warm-container cache of completed \
         marks (for `all_duplicates`, the container had processed the events before).\n\
         - **sequence**: sequence mode (`Deduplicator::sequenced`) for ordered sources: a FIFO \
         batch grouped by account, each message one conditional `UpdateItem` of the balance item \
         carrying the account's high-water sequence. 1 request, 1 WCU per new message: no mark \
         item, no transaction. (It needs a producer that numbers its events per aggregate and a \
         source that keeps their order; the other modes need neither.)\n\n\
         Failed conditional writes (a duplicate's) are not metered: the emulator's error answers \
         carry no consumed capacity, for either side. DynamoDB charges them.\n"
    );
    for delay in [delay_ms, 0] {
        for batch in BATCHES {
            let cfg = (delay, batch, 1);
            let _ = writeln!(
                md,
                "\n## {} network, batches of {batch}\n",
                if delay > 0 {
                    format!("Simulated {delay} ms")
                } else {
                    "No simulated".to_owned()
                }
            );
            let _ = writeln!(
                md,
                "| workload | mode | msgs/s (median) | spread | × Powertools | requests/msg | WCU/msg | p50 batch ms | p99 batch ms |"
            );
            let _ = writeln!(
                md,
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
            );
            for w in WORKLOADS {
                let base = num(find(summary, cfg, "powertools", w), "msgs_per_s");
                for m in MODES {
                    let Some(v) = find(summary, cfg, m, w) else {
                        continue;
                    };
                    let r = num(Some(v), "msgs_per_s");
                    let _ = writeln!(
                        md,
                        "| {w} | {m} | {r:.0} | {:.0}–{:.0} | {:.1} | {:.3} | {:.2} | {:.1} | {:.1} |",
                        num(Some(v), "msgs_per_s_min"),
                        num(Some(v), "msgs_per_s_max"),
                        if base > 0.0 { r / base } else { 0.0 },
                        num(Some(v), "calls_per_msg"),
                        num(Some(v), "wcu_per_msg"),
                        num(Some(v), "p50_ms"),
                        num(Some(v), "p99_ms")
                    );
                }
            }
        }
    }
    let _ = writeln!(
        md,
        "\n## {CONTAINERS} containers at once on one table ({delay_ms} ms simulated network, batches of 10)\n\n\
         Our modes only: each container has its own client and processes its share of \
         {CONTAINERS} × {n} messages (split by account, so each FIFO group has one consumer), one batch \
         at a time; messages per second are for all containers together.\n"
    );
    let _ = writeln!(
        md,
        "| workload | mode | msgs/s (median) | spread | requests/msg | WCU/msg | p50 batch ms | p99 batch ms |"
    );
    let _ = writeln!(
        md,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for w in WORKLOADS {
        for m in MODES {
            let Some(v) = find(summary, (delay_ms, 10, CONTAINERS), m, w) else {
                continue;
            };
            let _ = writeln!(
                md,
                "| {w} | {m} | {:.0} | {:.0}–{:.0} | {:.3} | {:.2} | {:.1} | {:.1} |",
                num(Some(v), "msgs_per_s"),
                num(Some(v), "msgs_per_s_min"),
                num(Some(v), "msgs_per_s_max"),
                num(Some(v), "calls_per_msg"),
                num(Some(v), "wcu_per_msg"),
                num(Some(v), "p50_ms"),
                num(Some(v), "p99_ms")
            );
        }
    }
    // Targets, all on all-new messages with the simulated network.
    let ratio = |batch: usize, mode: &str| {
        num(
            find(summary, (delay_ms, batch, 1), mode, "all_new"),
            "msgs_per_s",
        ) / num(
            find(summary, (delay_ms, batch, 1), "powertools", "all_new"),
            "msgs_per_s",
        )
        .max(1e-9)
    };
    let b10 = ratio(10, "batch_transaction");
    let b100 = ratio(100, "batch_transaction");
    let seq = ratio(10, "sequence");
    let calls100 = num(
        find(summary, (delay_ms, 100, 1), "batch_transaction", "all_new"),
        "calls_per_msg",
    );
    let seq_wcu = num(
        find(summary, (delay_ms, 10, 1), "sequence", "all_new"),
        "wcu_per_msg",
    );
    let cold_ms = cold["cold_start_ms_median"].as_f64().unwrap_or(f64::MAX);
    let rss = cold["peak_rss_mb_max"].as_f64().unwrap_or(f64::MAX);
    let zip_max = zips.values().filter_map(|z| *z).fold(0.0, f64::max);
    let mark = |ok: bool| if ok { "met" } else { "**missed**" };
    let _ = writeln!(
        md,
        "\n## Against the targets (all new messages, {delay_ms} ms simulated network)\n"
    );
    let _ = writeln!(md, "| target | measured | |");
    let _ = writeln!(md, "| --- | --- | --- |");
    let _ = writeln!(
        md,
        "| batch-transaction ≥ 20 × Powertools, batches of 10 | {b10:.1} × | {} |",
        mark(b10 >= 20.0)
    );
    let _ = writeln!(
        md,
        "| batch-transaction ≥ 100 × Powertools, batches of 100 | {b100:.1} × | {} |",
        mark(b100 >= 100.0)
    );
    let _ = writeln!(
        md,
        "| batch-transaction ≤ 0.02 requests/msg, batches of 100 | {calls100:.3} | {} |",
        mark(calls100 <= 0.02)
    );
    let _ = writeln!(
        md,
        "| sequence mode: 1 WCU per message (small item) | {seq_wcu:.2} | {} |",
        mark((seq_wcu - 1.0).abs() < 0.01)
    );
    let _ = writeln!(
        md,
        "| sequence mode ≥ 20 × Powertools, batches of 10 | {seq:.1} × | {} |",
        mark(seq >= 20.0)
    );
    let _ = writeln!(
        md,
        "| cold start ≤ 50 ms to ready (median of 7, x86_64 release binary) | {cold_ms:.1} ms | {} |",
        mark(cold_ms <= 50.0)
    );
    let _ = writeln!(
        md,
        "| peak RSS ≤ 40 MB (after one batch of 10) | {rss:.1} MB | {} |",
        mark(rss <= 40.0)
    );
    if zip_max > 0.0 {
        let _ = writeln!(
            md,
            "| arm64 zip ≤ 5 MB (largest function) | {zip_max:.2} MB | {} |",
            mark(zip_max <= 5.0)
        );
    } else {
        let _ = writeln!(
            md,
            "| arm64 zip ≤ 5 MB | not built: run `cargo xtask package` first | |"
        );
    }
    let p50 = |batch: usize, mode: &str| {
        num(
            find(summary, (delay_ms, batch, 1), mode, "all_new"),
            "p50_ms",
        )
    };
    let _ = writeln!(
        md,
        "\n### Why, where a target is missed\n\n\
         With one batch at a time, a batch costs its requests' round trips plus the emulator's \
         time to execute them. Batch-transaction mode spends one request per 10 messages, but \
         the emulator executes a 20-item transaction in several milliseconds (p50 batch of 10: \
         {:.1} ms, of which {delay_ms} ms is the simulated network), and at batches of 100 it runs 2–3 \
         transactions of up to 100 items one after another (p50 batch: {:.1} ms). Powertools spends \
         3 requests per message, each {delay_ms} ms plus its own overhead. So the ratio is bounded by \
         the emulator's per-item execution time, which DynamoDB spreads across partitions; on \
         DynamoDB a transaction's latency depends far less on its item count, and the ratio \
         follows requests per message more closely. The requests and WCU per message are the \
         emulator-independent part of these figures.",
        p50(10, "batch_transaction"),
        p50(100, "batch_transaction")
    );
    let _ = writeln!(md, "\n## Arm64 release zips\n");
    for (f, z) in zips {
        let _ = writeln!(
            md,
            "- `{f}`: {}",
            z.map_or("not built".into(), |z| format!("{z:.2} MB"))
        );
    }
    let _ = writeln!(
        md,
        "\nCold start is measured from spawning the function process to its first request for work \
         on a local Lambda runtime API (configuration read, SDK client built), on this x86_64 \
         machine: arm64 binaries cannot run here. Raw results of every run and the summary: \
         `benchmarks.json`.\n\n\
         ![messages per second and write units per message, by mode, all new messages](benchmarks.png)"
    );
    md
}
