//! `bench cpu MESSAGES DOCS`: CPU per message under Lambda Managed Instances, on the modelled
//! bed. For each mode and each concurrency (8, 32, 64 invocations at once), a function process
//! (`bench cpu-function MODE`, this binary again) runs the SQS door under
//! `lambda_runtime::run_concurrent` with `AWS_LAMBDA_MAX_CONCURRENCY` set, as Lambda Managed
//! Instances run it, its marks and effects on the memory store behind the modelled bed's store
//! (every store call held for its draw of the calibrated model). This process serves the Lambda
//! runtime API (`local_lambda::concurrent`) and keeps that many invocations (SQS batches of 10
//! new CloudEvents credits) in flight; the function process's own CPU time (user + system, from
//! `/proc/PID/stat`) over the timed invocations, after one untimed round, divided by the
//! messages, is the CPU per message; one vCPU's messages per second is its inverse. With
//! `perf` on the host, the batch-transaction row at 8 (the goal's worst) runs once more under `perf record`
//! and its profile is summarised by where the time goes. What the modelled store leaves out: the
//! DynamoDB client's work (request JSON, SigV4 signing, HTTP and TLS), since no request leaves
//! the process.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use lambda_dedup::{Effect, Item};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::flow::{create_once, transact};
use lambda_dedup_runtime::store::Items;
use lambda_dedup_runtime::{Dedup, Event, HandlerError, SqsService, Tenant};
use local_dynamodb::latency::{Delays, Latency};
use local_lambda::concurrent::ConcurrentApi;
use serde_json::{Value, json};

use crate::Result;
use crate::error::BenchError;
use crate::modelled::draws::Recorder;
use crate::modelled::store::ModelledStore;
use crate::table;

pub(crate) const BEGIN: &str = "<!-- cpu:begin -->";
pub(crate) const END: &str = "<!-- cpu:end -->";

const MODES: [&str; 3] = ["per_message", "batch_transaction", "create_once"];
const CONCURRENCY: [usize; 3] = [8, 32, 64];
/// The batch each invocation carries.
pub(crate) const BATCH: usize = 10;
/// The seed of the store's draws (the benchmark's).
const SEED: u64 = 21;
/// The concurrency whose batch-transaction row is profiled: the one furthest above the goal.
const PROFILED: usize = 8;
/// The goal of issue 45: CPU per message in batch-transaction mode, µs.
const GOAL_US: f64 = 50.0;

/// A credit event's account and amount (its `data`, the payload), checked.
fn credit_of(e: &Event<Value>) -> std::result::Result<(String, i64), HandlerError> {
    let data = &e.payload;
    match (data["account"].as_str(), data["amount"].as_i64()) {
        (Some(account), Some(amount)) => Ok((account.to_owned(), amount)),
        _ => Err(HandlerError::invalid("data.account and data.amount")),
    }
}

/// `mode`'s SQS service on `memory` behind `marks` (the modelled store, or the memory store
/// itself for `bench cpu-count`).
pub(crate) fn service<M>(mode: &str, memory: &MemoryStore, marks: M) -> Result<SqsService>
where
    M: lambda_dedup::store::CreateOnceStore
        + lambda_dedup::store::SequenceStore
        + lambda_dedup::store::LatestStore
        + 'static,
{
    let env = lambda_dedup_runtime::Env::from_pairs([
        ("DEDUP_NAMESPACE", "bench"),
        ("DEDUP_MARK_TABLE", "marks"),
    ]);
    let dedup = Dedup::read(&env, "bench-cpu").map_err(BenchError::failed)?;
    let dedup = dedup
        .on(Items::with_tables(marks, Arc::new(memory.clone())))
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers();
    let credit = |e: Event<Value>| -> std::result::Result<Effect, HandlerError> {
        let (account, amount) = credit_of(&e)?;
        let account = ("account", e.scoped(&account));
        Ok(Effect::add("balances", account, "balance", amount))
    };
    match mode {
        "per_message" => dedup.sqs(credit),
        "batch_transaction" => dedup.sqs(transact(credit).one_transaction_per_batch()),
        _ => dedup.sqs(create_once(
            |e: Event<Value>| -> std::result::Result<Effect, HandlerError> {
                let (account, amount) = credit_of(&e)?;
                let item = Item::new()
                    .with("entry", e.key.as_str())
                    .with("account", account.as_str())
                    .with("amount", amount);
                Ok(Effect::put("entries", item))
            },
        )),
    }
    .map_err(BenchError::failed)
}

/// The memory store of the bench's settings, its tables created.
pub(crate) fn memory_store() -> Result<MemoryStore> {
    let env = lambda_dedup_runtime::Env::from_pairs([
        ("DEDUP_NAMESPACE", "bench"),
        ("DEDUP_MARK_TABLE", "marks"),
    ]);
    let dedup = Dedup::read(&env, "bench-cpu").map_err(BenchError::failed)?;
    let settings = dedup.settings();
    let memory = MemoryStore::new(settings.retention)
        .with_lease(settings.lease)
        .with_clock_skew(settings.clock_skew);
    memory.create_table("balances", "account");
    memory.create_table("entries", "entry");
    Ok(memory)
}

/// The function process: `mode`'s SQS service on the modelled store, under `run_concurrent`.
pub(crate) async fn function(mode: &str) -> Result<()> {
    lambda_dedup_runtime::init_tracing();
    let memory = memory_store()?;
    let delays = Arc::new(Delays::new(Latency::Calibrated { seed: SEED }));
    let store = ModelledStore::new(memory.clone(), Recorder::new(delays)).on_tokio_timer();
    let service = service(mode, &memory, store)?;
    lambda_dedup_runtime::lambda_runtime::run_concurrent(service)
        .await
        .map_err(|e| BenchError::Unexpected(format!("run_concurrent: {e}")))
}

/// An SQS event of `BATCH` new credits, numbered from `first`.
pub(crate) fn payload(first: usize) -> Result<Value> {
    let bodies: Vec<String> = (first..first + BATCH)
        .map(|i| {
            json!({"specversion": "1.0", "type": "credit", "source": "/bench",
                   "id": format!("evt-{i}"), "tenantid": "t",
                   "data": {"account": format!("acct-{}", i % 1000), "amount": 1}})
            .to_string()
        })
        .collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    serde_json::to_value(lambda_dedup_testkit::events::sqs_event(&refs)).map_err(BenchError::failed)
}

/// The CPU time `pid` has used so far (user + system), from `/proc/PID/stat`.
fn cpu_of(pid: u32, tick: f64) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(BenchError::failed)?;
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(Duration::from_secs_f64(
        (ticks(11) + ticks(12)) as f64 / tick,
    ))
}

/// The clock ticks per second `/proc` counts in.
fn clock_tick() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// `count` invocations numbered from `first`, `at_once` in flight; an error if one fails or
/// reports a failure.
async fn invoke(api: &ConcurrentApi, first: usize, count: usize, at_once: usize) -> Result<()> {
    let answers: Vec<Result<()>> = futures::stream::iter(0..count)
        .map(|k| async move {
            let invocation = api
                .invoke(payload(first + k * BATCH)?, Duration::from_secs(30))
                .await;
            match &invocation.answer {
                local_lambda::concurrent::Answer::Response(v)
                    if v["batchItemFailures"].as_array().is_none_or(Vec::is_empty) =>
                {
                    Ok(())
                }
                other => Err(BenchError::Unexpected(format!("invocation {k}: {other:?}"))),
            }
        })
        .buffer_unordered(at_once)
        .collect()
        .await;
    answers.into_iter().collect()
}

/// The first child of `pid` (the function `perf` started), waited for up to 5 s.
fn child_of(pid: u32) -> Result<u32> {
    for _ in 0..500 {
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(c) = children
            .split_whitespace()
            .next()
            .and_then(|c| c.parse().ok())
        {
            return Ok(c);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(BenchError::Unexpected("perf started no function".into()))
}

/// One row: `mode` at `at_once` invocations at once, `n` messages timed. With `profile`, the
/// function runs under `perf record` (a run of its own: the sampling costs CPU too) and the
/// answer is the report's shares by kind of work instead ([`perf_shares`]).
async fn row(mode: &str, at_once: usize, n: usize, tick: f64, profile: bool) -> Result<Value> {
    let api = ConcurrentApi::start()
        .await
        .map_err(BenchError::Unexpected)?;
    let exe = std::env::current_exe().map_err(BenchError::failed)?;
    let out = std::env::temp_dir().join(format!("bench-cpu-{}.perf", std::process::id()));
    let mut cmd = if profile {
        let mut cmd = Command::new("perf");
        cmd.args(["record", "-q", "-F", "999", "-o"])
            .arg(&out)
            .arg("--")
            .arg(exe);
        cmd
    } else {
        Command::new(exe)
    };
    let mut child = cmd
        .args(["cpu-function", mode])
        .env("AWS_LAMBDA_RUNTIME_API", api.runtime_api())
        .env("AWS_LAMBDA_MAX_CONCURRENCY", at_once.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench-cpu")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(BenchError::failed)?;
    let pid = if profile {
        child_of(child.id())
    } else {
        Ok(child.id())
    };
    let result = async {
        let pid = pid?;
        invoke(&api, 0, at_once, at_once).await?; // untimed: connections, caches, pages
        let invocations = n.div_ceil(BATCH);
        let (cpu0, began) = (cpu_of(pid, tick)?, Instant::now());
        invoke(&api, 1_000_000, invocations, at_once).await?;
        let (cpu, secs) = (cpu_of(pid, tick)? - cpu0, began.elapsed().as_secs_f64());
        let messages = (invocations * BATCH) as f64;
        let per = cpu.as_secs_f64() / messages;
        Ok::<_, BenchError>((
            pid,
            json!({
                "mode": mode, "concurrency": at_once, "messages": messages,
                "cpu_us_per_msg": per * 1e6,
                "msgs_per_s_per_vcpu": if per > 0.0 { 1.0 / per } else { 0.0 },
                "msgs_per_s": messages / secs,
            }),
        ))
    }
    .await;
    match (profile, result) {
        (true, Ok((pid, _))) => {
            // perf writes its data when the function it started ends.
            let _ = Command::new("kill").arg(pid.to_string()).status();
            let _ = child.wait();
            let shares = perf_shares(&out);
            let _ = std::fs::remove_file(&out);
            Ok(json!(shares))
        }
        (_, result) => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&out);
            result.map(|(_, row)| row)
        }
    }
}

/// Where the time goes, by kind of work: the share of the samples whose function (self time)
/// names one, the first kind that matches. Release builds are stripped; `cargo xtask bench
/// --cpu-only` builds in the `profiling` profile (release with symbols), or every sample would
/// be "other".
const KINDS: [(&str, &[&str]); 11] = [
    ("kernel (syscalls, network, scheduling)", &["[k]"]),
    (
        "allocation and copies (malloc, free, memcpy)",
        &[
            "malloc",
            "free",
            "realloc",
            "memcpy",
            "memmove",
            "alloc::",
            "unlink_chunk",
            "tcache",
            "__rdl_",
            "__rust_",
        ],
    ),
    (
        "JSON (serde_json: the event, the answer)",
        &["serde_json", "serde_path_to_error", "serde::", "serde_core"],
    ),
    (
        "key derivation and fingerprint (SHA-256, hex)",
        &[
            "sha2",
            "sha256",
            "Sha256",
            "hex::",
            "hash_parts",
            "lambda_dedup::key",
            "fingerprint",
        ],
    ),
    (
        "hash maps (SipHash, hashbrown)",
        &["sip::", "hash_one", "hashbrown"],
    ),
    (
        "log and EMF lines (tracing, formatting)",
        &["tracing", "emf", "fmt::", "_print", "writev"],
    ),
    (
        "runtime API client (lambda_runtime, hyper, http)",
        &[
            "hyper",
            "http::",
            "h2::",
            "lambda_runtime",
            "aws_lambda_events",
        ],
    ),
    (
        "the bed's store (memory store, latency model)",
        &["bench::modelled", "lambda_dedup_memory", "local_dynamodb"],
    ),
    ("lambda-dedup flows (engine, runtime)", &["lambda_dedup"]),
    ("tokio scheduler and timers", &["tokio"]),
    ("other", &[]),
];

/// The report of `perf` at `out` summed by [`KINDS`]: each kind's share of the samples, %.
fn perf_shares(out: &Path) -> Vec<(&'static str, f64)> {
    let report = Command::new("perf")
        .args(["report", "--stdio", "--no-children", "--sort", "sym", "-i"])
        .arg(out)
        .stderr(Stdio::null())
        .output();
    let text = report
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    let mut shares = vec![0.0; KINDS.len()];
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((pct, sym)) = line.trim().split_once('%') else {
            continue;
        };
        let Ok(pct) = pct.trim().parse::<f64>() else {
            continue;
        };
        let kind = KINDS
            .iter()
            .position(|(_, words)| words.iter().any(|w| sym.contains(w)))
            .unwrap_or(KINDS.len() - 1);
        shares[kind] += pct;
    }
    KINDS.iter().map(|(name, _)| *name).zip(shares).collect()
}

/// Whether `perf` is there to profile with.
fn perf_runs() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `bench cpu`: every mode at every concurrency; the section and the raw rows.
pub(crate) async fn run(n: usize, docs: &Path) -> Result<()> {
    let tick = clock_tick();
    let mut rows = Vec::new();
    for mode in MODES {
        for at_once in CONCURRENCY {
            let mut r = row(mode, at_once, n, tick, false).await?;
            if mode == "batch_transaction" && at_once == PROFILED && perf_runs() {
                let shares = row(mode, at_once, n, tick, true).await?;
                let us = table::num(Some(&r), "cpu_us_per_msg");
                let parts: Vec<Value> = shares
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        let pct = s[1].as_f64().unwrap_or(0.0);
                        json!({"kind": s[0], "percent": pct, "us_per_msg": us * pct / 100.0})
                    })
                    .collect();
                r["breakdown"] = json!(parts);
            }
            println!(
                "bench: cpu {mode:<18} c{at_once:<3} {:>7.1} µs/msg {:>8.0} msgs/s per vCPU {:>7.0} msgs/s",
                r["cpu_us_per_msg"].as_f64().unwrap_or(0.0),
                r["msgs_per_s_per_vcpu"].as_f64().unwrap_or(0.0),
                r["msgs_per_s"].as_f64().unwrap_or(0.0),
            );
            rows.push(r);
        }
    }
    let counts: Vec<Value> = MODES
        .iter()
        .filter_map(|mode| crate::cpu_count::per_message(mode))
        .inspect(|c| println!("bench: cpu counts {c}"))
        .collect();
    let path = docs.join("BENCHMARKS.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let md = table::replace(&doc, (BEGIN, END), &render(&rows, &counts, n));
    std::fs::write(&path, md).map_err(BenchError::failed)?;
    let text = serde_json::to_string_pretty(&json!({"rows": rows, "counts": counts}))
        .map_err(BenchError::failed)?;
    std::fs::write(docs.join("benchmarks-cpu.json"), text).map_err(BenchError::failed)
}

/// The section.
fn render(rows: &[Value], counts: &[Value], n: usize) -> String {
    let build = table::build();
    let mut md = table::opened(
        BEGIN,
        "CPU per message under Lambda Managed Instances (modelled bed)",
    );
    let _ = writeln!(
        md,
        "Measured by `bench cpu` (`bench/src/cpu.rs`; `cargo xtask bench --cpu-only` runs it \
         from a release build), this time from a {build} build, on 2 shared cores: a function process runs the SQS door under \
         `lambda_runtime::run_concurrent` with `AWS_LAMBDA_MAX_CONCURRENCY` at 8, 32 or 64, \
         its store the modelled bed's (the memory store, every call held for its draw of the \
         calibrated model); the bench serves it the Lambda runtime API and keeps that many \
         invocations in flight, each an SQS batch of {BATCH} new CloudEvents credits, {n} \
         messages timed after one untimed round. **CPU µs/msg** is the function process's own \
         CPU time (user + system, `/proc/PID/stat`) over the timed invocations ÷ messages; \
         **msgs/s per vCPU** its inverse (what one vCPU could process); **msgs/s** the wall \
         rate at that concurrency. Not in these figures: the DynamoDB client's work (request \
         JSON, SigV4 signing, HTTP, TLS), since the modelled store sends no request.\n"
    );
    table::head(
        &mut md,
        "| mode | invocations at once | CPU µs/msg | msgs/s per vCPU | msgs/s |",
        "| --- | ---: | ---: | ---: | ---: |",
    );
    let num = |v: &Value, k: &str| table::num(Some(v), k);
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.0} | {:.0} |",
            r["mode"].as_str().unwrap_or(""),
            r["concurrency"],
            num(r, "cpu_us_per_msg"),
            num(r, "msgs_per_s_per_vcpu"),
            num(r, "msgs_per_s"),
        );
    }
    let batch: Vec<&Value> = rows
        .iter()
        .filter(|r| r["mode"] == "batch_transaction")
        .collect();
    let worst = batch
        .iter()
        .map(|r| num(r, "cpu_us_per_msg"))
        .fold(0.0, f64::max);
    let verdict = if cfg!(debug_assertions) {
        "not judged: a debug build's CPU time is several times a release build's; \
         `cargo xtask bench --cpu-only` measures on a release build"
    } else if !batch.is_empty() && worst <= GOAL_US {
        "met"
    } else {
        "missed"
    };
    let _ = writeln!(
        md,
        "\nGoal (issue 45): at most {GOAL_US:.0} µs of CPU per message in batch-transaction \
         mode: **{verdict}** ({worst:.1} µs at most over 8, 32 and 64 invocations at once, \
         this {build} build)."
    );
    if let Some(parts) = batch
        .iter()
        .find_map(|r| r["breakdown"].as_array().filter(|a| !a.is_empty()))
    {
        let _ = writeln!(
            md,
            "\nWhere the time goes, batch-transaction at {PROFILED} invocations at once: `perf record \
             -F 999` around the function in a run of its own (sampling costs CPU too), each \
             sample's function sorted into a kind of work by its name (self time); µs/msg is \
             that share of the unprofiled row's CPU per message.\n"
        );
        table::head(
            &mut md,
            "| kind of work | share of samples | µs/msg |",
            "| --- | ---: | ---: |",
        );
        for p in parts {
            let _ = writeln!(
                md,
                "| {} | {:.1} % | {:.1} |",
                p["kind"].as_str().unwrap_or(""),
                num(p, "percent"),
                num(p, "us_per_msg"),
            );
        }
    }
    if !counts.is_empty() {
        let _ = writeln!(
            md,
            "\nCounted, not timed (`bench cpu-count`, `bench/src/cpu_count.rs`): the same SQS door \
             path on one thread, without the runtime API and the holds, the memory store alone; \
             instructions inside the served batches (`valgrind --tool=callgrind`), calls to \
             allocation functions over the process (`heaptrack`: the bench's building of the \
             events included); a run of {LONG} messages minus one of {SHORT}, over the \
             difference. A loaded machine does not move these.\n",
            LONG = crate::cpu_count::LONG,
            SHORT = crate::cpu_count::SHORT,
        );
        table::head(
            &mut md,
            "| mode | instructions/msg | allocation calls/msg |",
            "| --- | ---: | ---: |",
        );
        for c in counts {
            let _ = writeln!(
                md,
                "| {} | {:.0} | {:.1} |",
                c["mode"].as_str().unwrap_or(""),
                num(c, "instructions_per_msg"),
                num(c, "allocations_per_msg"),
            );
        }
    }
    let _ = writeln!(md, "\n{END}");
    md
}
