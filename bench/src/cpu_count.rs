//! `bench cpu-count MODE MESSAGES`: the SQS door's path of `bench cpu` without the Lambda
//! runtime API and without the bed's holds, for counters that a loaded machine does not move:
//! `MESSAGES` new CloudEvents credits in SQS batches of 10 (as `bench cpu` builds them), each
//! batch's JSON parsed as the runtime parses it, given to `mode`'s service (`cpu::service`) on
//! the memory store alone, its answer serialised, one batch after another on one thread. Run it
//! under `valgrind --tool=callgrind` for instructions, under `heaptrack` for allocations by call
//! site (the stacks through `serve` are the served batches'; those through
//! `lambda_dedup_memory` the bed's); a run of 10 messages (one batch) is the start-up and the
//! first batch's one-time costs to subtract from a run of 1010, over 1000 messages.

use std::path::Path;
use std::process::{Command, Stdio};

use lambda_dedup_runtime::aws_lambda_events::event::sqs::SqsEvent;
use serde_json::{Value, json};

use crate::Result;
use crate::cpu::{BATCH, memory_store, payload, service};
use crate::error::BenchError;

/// Runs `messages` (rounded up to whole batches) through `mode`'s service.
pub(crate) fn run(mode: &str, messages: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BenchError::failed)?;
    lambda_dedup_runtime::init_tracing();
    let memory = memory_store()?;
    let service = service(mode, &memory, memory.clone())?;
    // The events are the bench's to build: all of them before the first is served.
    let events: Vec<Vec<u8>> = (0..messages.div_ceil(BATCH))
        .map(|k| {
            payload(k * BATCH).and_then(|v| serde_json::to_vec(&v).map_err(BenchError::failed))
        })
        .collect::<Result<_>>()?;
    serve(&runtime, &service, &events)
}

/// The batches served, one after another: the counted part (`valgrind
/// --toggle-collect=*cpu_count*serve*`; heaptrack's stacks through it).
#[inline(never)]
fn serve(
    runtime: &tokio::runtime::Runtime,
    service: &lambda_dedup_runtime::SqsService,
    events: &[Vec<u8>],
) -> Result<()> {
    runtime.block_on(async {
        for (k, bytes) in events.iter().enumerate() {
            let event: SqsEvent = serde_json::from_slice(bytes).map_err(BenchError::failed)?;
            let answer = service
                .call_with(event)
                .await
                .map_err(|e| BenchError::Unexpected(format!("batch {k}: {e}")))?;
            if !answer.batch_item_failures.is_empty() {
                return Err(BenchError::Unexpected(format!("batch {k}: {answer:?}")));
            }
            let out = serde_json::to_vec(&answer).map_err(BenchError::failed)?;
            std::hint::black_box(out);
        }
        Ok(())
    })
}

/// The counted path's messages: a long run, and the short one (its first batch) subtracted.
pub(crate) const LONG: usize = 1010;
pub(crate) const SHORT: usize = BATCH;

/// Instructions and allocation calls per message on `mode`'s counted path, when `valgrind` and
/// `heaptrack` are on the host: each tool runs `bench cpu-count` on [`LONG`] messages and on
/// [`SHORT`], and the difference over the difference is the figure, free of start-up and first
/// batch. Instructions are counted inside `serve` alone (callgrind's `--toggle-collect`);
/// allocation calls over the whole process, so they include the bed's building of the events.
/// A count as repeatable as the build: a loaded machine does not move it.
pub(crate) fn per_message(mode: &str) -> Option<Value> {
    let exe = std::env::current_exe().ok()?;
    let dir = std::env::temp_dir().join(format!("bench-cpu-count-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let count = |n: usize| -> Option<(f64, f64)> {
        let instructions = callgrind(&exe, &dir, mode, n)?;
        let allocations = heaptrack(&exe, &dir, mode, n)?;
        Some((instructions, allocations))
    };
    let counts = count(LONG).zip(count(SHORT));
    let _ = std::fs::remove_dir_all(&dir);
    let ((i_long, a_long), (i_short, a_short)) = counts?;
    let messages = (LONG - SHORT) as f64;
    Some(json!({
        "mode": mode,
        "instructions_per_msg": (i_long - i_short) / messages,
        "allocations_per_msg": (a_long - a_short) / messages,
    }))
}

/// Instructions inside `serve`, from callgrind's summary.
fn callgrind(exe: &Path, dir: &Path, mode: &str, n: usize) -> Option<f64> {
    let out = dir.join(format!("callgrind-{n}"));
    let mut tool = Command::new("valgrind");
    tool.args(["--tool=callgrind", "--toggle-collect=*cpu_count*serve*"])
        .arg(format!("--callgrind-out-file={}", out.display()));
    counted_under(tool, exe, mode, n)?;
    let text = std::fs::read_to_string(&out).ok()?;
    first_number_after(&text, &["summary:", "totals:"])
}

/// Calls to allocation functions over the whole process, from heaptrack's summary.
fn heaptrack(exe: &Path, dir: &Path, mode: &str, n: usize) -> Option<f64> {
    let out = dir.join(format!("heaptrack-{n}"));
    let mut tool = Command::new("heaptrack");
    tool.arg("-o").arg(&out);
    counted_under(tool, exe, mode, n)?;
    // heaptrack names its file after `-o` with the compression's extension.
    let file = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(&format!("heaptrack-{n}.")))
        })?;
    let report = Command::new("heaptrack_print")
        .arg("-f")
        .arg(&file)
        .args([
            "--print-peaks=0",
            "--print-allocators=0",
            "--print-temporary=0",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(report.stdout).ok()?;
    first_number_after(&text, &["calls to allocation functions:"])
}

/// `bench cpu-count mode n` run under `tool` (its own arguments given): `Some` if it succeeded.
fn counted_under(mut tool: Command, exe: &Path, mode: &str, n: usize) -> Option<()> {
    let status = tool
        .arg(exe)
        .args(["cpu-count", mode, &n.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then_some(())
}

/// The number that follows the first of `labels` to start a line of `text` (trimmed).
fn first_number_after(text: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .find_map(|l| labels.iter().find_map(|label| l.trim().strip_prefix(label)))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}
