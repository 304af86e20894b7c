//! `cargo xtask bench` (a benchmark, not a test): our per-message and batch-transaction modes
//! (and the warm cache) against AWS Powertools for Lambda (Python) idempotency, on the same
//! local DynamoDB (Dynoxide, in memory), the same workloads and SQS-shaped batches of 10; then the cold start and peak
//! RSS of a release function binary, and the arm64 zip sizes. Writes `docs/BENCHMARKS.md`, the
//! raw results `docs/benchmarks.json`, and the chart `docs/benchmarks.png` (matplotlib, in the
//! project venv).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::Result;
use crate::dynamodb::LocalDynamo;

const BENCH_PINS: &[&str] = &[
    "aws-lambda-powertools==3.37.0",
    "boto3==1.44.8",
    "matplotlib==3.11.2",
];
const WORKLOADS: [&str; 3] = ["all_new", "half_duplicates", "all_duplicates"];
const MODES: [&str; 4] = [
    "powertools",
    "per_message",
    "batch_transaction",
    "batch_transaction_warm_cache",
];

/// Runs `cmd`, echoing and collecting every JSON line it prints.
fn json_lines(mut cmd: Command, what: &str) -> Result<Vec<Value>> {
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
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            if v.get("msgs_per_s").is_none() {
                lines.push(v);
                continue;
            }
            println!(
                "xtask: bench: {:<32} {:<16} {:>9.1} msgs/s {:>5.2} calls/msg",
                v["mode"].as_str().unwrap_or(""),
                v["workload"].as_str().unwrap_or(""),
                v["msgs_per_s"].as_f64().unwrap_or(0.0),
                v["calls_per_msg"].as_f64().unwrap_or(0.0)
            );
            lines.push(v);
        }
    }
    let status = child.wait().map_err(|e| format!("{what}: {e}"))?;
    if !status.success() {
        return Err(format!("{what} failed ({status})"));
    }
    Ok(lines)
}

pub(crate) fn run(root: &Path, messages: usize) -> Result<()> {
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
    let ddb = LocalDynamo::start(root)?;
    let endpoint = ddb.endpoint();
    let release = root.join("target").join("release");

    println!(
        "xtask: bench: {messages} messages per workload, batches of 10, one local DynamoDB (Dynoxide)"
    );
    let mut results = Vec::new();
    let mut py = Command::new(&python);
    py.arg(root.join("bench").join("powertools_bench.py"))
        .arg(&endpoint)
        .arg(messages.to_string());
    results.extend(json_lines(py, "Powertools")?);
    let mut rs = Command::new(release.join("bench"));
    rs.args(["throughput", &endpoint, &messages.to_string()]);
    results.extend(json_lines(rs, "bench throughput")?);
    let mut cold = Command::new(release.join("bench"));
    cold.arg("coldstart")
        .arg(release.join("ledger-projector"))
        .args([&endpoint, "7"]);
    let cold = json_lines(cold, "bench coldstart")?
        .into_iter()
        .next()
        .ok_or("no cold start result")?;
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
    let docs = root.join("docs");
    std::fs::create_dir_all(&docs).map_err(|e| e.to_string())?;
    std::fs::write(
        docs.join("BENCHMARKS.md"),
        report(&results, &cold, &zips, messages),
    )
    .map_err(|e| e.to_string())?;
    let mut all = results.clone();
    all.push(cold.clone());
    std::fs::write(
        docs.join("benchmarks.json"),
        serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let ok = Command::new(&python)
        .arg(root.join("bench").join("chart.py"))
        .arg(docs.join("benchmarks.json"))
        .arg(docs.join("benchmarks.png"))
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

fn find<'a>(results: &'a [Value], mode: &str, workload: &str) -> Option<&'a Value> {
    results
        .iter()
        .find(|v| v["mode"] == mode && v["workload"] == workload)
}

fn rate(results: &[Value], mode: &str, workload: &str) -> f64 {
    find(results, mode, workload)
        .and_then(|v| v["msgs_per_s"].as_f64())
        .unwrap_or(0.0)
}

fn report(
    results: &[Value],
    cold: &Value,
    zips: &BTreeMap<String, Option<f64>>,
    n: usize,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Measured by `cargo xtask bench` in one run, on one local DynamoDB (Dynoxide 3.2, in memory, embedded in xtask) on the \
         project's 2-core machine: {n} messages per workload, in SQS-shaped batches of 10 processed \
         one batch at a time (as one Lambda container does). Every message is a CloudEvents credit \
         whose effect is one balance update (`ADD`). Dynoxide serialises requests behind one SQLite connection, so absolute \
         numbers are the emulator's; the ratios and the DynamoDB calls per message are what carry \
         over to AWS.\n"
    );
    let _ = writeln!(
        md,
        "- **powertools**: AWS Powertools for Lambda (Python) 3.37, `BatchProcessor` + \
         `idempotent_function` with the DynamoDB persistence layer (a conditional put, the effect, \
         then an update: the mark and the effect are *not* atomic).\n\
         - **per_message**: `Deduplicator::transactional`, one `TransactWriteItems` (mark + effect) \
         per message, 10 at a time.\n\
         - **batch_transaction**: `run_batch_transactional`, the marks and effects of a batch in \
         one `TransactWriteItems`.\n\
         - **batch_transaction_warm_cache**: the same with the warm-container cache of completed \
         marks (for `all_duplicates`, the container had processed the events before).\n"
    );
    let _ = writeln!(
        md,
        "| workload | mode | msgs/s | × Powertools | DynamoDB calls/msg | p50 batch ms | p99 batch ms |"
    );
    let _ = writeln!(md, "| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for w in WORKLOADS {
        let base = rate(results, "powertools", w);
        for m in MODES {
            if let Some(v) = find(results, m, w) {
                let r = v["msgs_per_s"].as_f64().unwrap_or(0.0);
                let _ = writeln!(
                    md,
                    "| {w} | {m} | {r:.0} | {:.1} | {:.2} | {:.1} | {:.1} |",
                    if base > 0.0 { r / base } else { 0.0 },
                    v["calls_per_msg"].as_f64().unwrap_or(0.0),
                    v["p50_ms"].as_f64().unwrap_or(0.0),
                    v["p99_ms"].as_f64().unwrap_or(0.0)
                );
            }
        }
    }
    let cold_ms = cold["cold_start_ms_median"].as_f64().unwrap_or(f64::MAX);
    let rss = cold["peak_rss_mb_max"].as_f64().unwrap_or(f64::MAX);
    let zip_max = zips.values().filter_map(|z| *z).fold(0.0, f64::max);
    let new_ratio = rate(results, "batch_transaction", "all_new")
        / rate(results, "powertools", "all_new").max(1e-9);
    let per_ratio =
        rate(results, "per_message", "all_new") / rate(results, "powertools", "all_new").max(1e-9);
    let cache_ratio = rate(results, "batch_transaction_warm_cache", "all_duplicates")
        / rate(results, "powertools", "all_duplicates").max(1e-9);
    let calls = find(results, "batch_transaction", "all_new")
        .and_then(|v| v["calls_per_msg"].as_f64())
        .unwrap_or(f64::MAX);
    let mark = |ok: bool| if ok { "met" } else { "**missed**" };
    let _ = writeln!(md, "\n## Against the targets\n");
    let _ = writeln!(md, "| target | measured | |");
    let _ = writeln!(md, "| --- | --- | --- |");
    let _ = writeln!(
        md,
        "| batch-transaction ≥ 10 × Powertools, all new | {new_ratio:.1} × | {} |",
        mark(new_ratio >= 10.0)
    );
    let _ = writeln!(
        md,
        "| batch-transaction ≤ 0.2 DynamoDB calls/msg, all new | {calls:.2} | {} |",
        mark(calls <= 0.2)
    );
    let _ = writeln!(
        md,
        "| per-message ≥ 1.5 × Powertools, all new | {per_ratio:.1} × | {} |",
        mark(per_ratio >= 1.5)
    );
    let _ = writeln!(
        md,
        "| all duplicates, warm cache ≥ 20 × Powertools | {cache_ratio:.1} × | {} |",
        mark(cache_ratio >= 20.0)
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
    if new_ratio < 10.0 {
        let p50 = find(results, "batch_transaction", "all_new")
            .and_then(|v| v["p50_ms"].as_f64())
            .unwrap_or(0.0);
        let _ = writeln!(
            md,
            "\nWhy the 10 × target is missed here: with one batch at a time, batch-transaction mode \
             waits for one `TransactWriteItems` of 20 items (10 marks, 10 balance updates) per \
             batch, and the emulator takes {p50:.1} ms (p50) to execute it: the emulator, not \
             the client, bounds the mode at about {:.0} messages/s. Powertools spends 3 calls per \
             new message and per-message mode 1, against 0.1 here, so on DynamoDB itself, where a \
             call's latency hardly depends on its item count, the ratio follows the call count \
             more closely than on the emulator.",
            if p50 > 0.0 { 10_000.0 / p50 } else { 0.0 }
        );
    }
    let _ = writeln!(
        md,
        "\n## Which emulator\n\nEvery figure on this page comes from Dynoxide, run by this \
         `cargo xtask bench`. Until 2026-11-29 the bench ran on AWS's DynamoDB Local (Java, in \
         memory), which the project no longer uses (its licence is not open source); its last \
         run measured, for all-new messages, Powertools at 156 msgs/s, per-message mode at 358 \
         and batch-transaction mode at 798 (5.1 ×), with the same calls per message. Figures \
         from the two emulators are not comparable with each other; ratios within one run are."
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
         machine: arm64 binaries cannot run here. Raw results: `benchmarks.json`.\n\n\
         ![messages per second by workload and mode](benchmarks.png)"
    );
    md
}
