//! `bench report RAW DOCS`: the medians, spreads and costs of a `cargo xtask bench` run (every
//! run's JSON line, the cold start and the zip sizes, in `RAW`), written as `DOCS/BENCHMARKS.md`
//! and `DOCS/benchmarks.json` (the summary and every run).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::table::{self, num};
use serde_json::{Value, json};

use crate::Result;
use crate::error::BenchError;

/// DynamoDB on-demand prices in US East (N. Virginia), USD per million request units, since
/// the price cut of 1 November 2024.
const WRITE_PRICE: f64 = 0.625;
const READ_PRICE: f64 = 0.125;

const WORKLOADS: [&str; 4] = ["all_new", "half_duplicates", "mixed", "all_duplicates"];
const BATCHES: [usize; 2] = [10, 100];
/// The latency models of the configurations, by their name in the results.
const MODELS: [&str; 2] = ["calibrated", "flat"];

/// How the run was made (`RAW`'s `config`): messages per workload and run, the flat model's
/// delay, runs per configuration, the calibrated model's seed, containers in the
/// many-containers runs, and the calibrated model's p50 of a transaction of 20 and of 100 items.
struct Config {
    n: usize,
    delay_ms: u64,
    runs: usize,
    seed: u64,
    containers: usize,
    transaction_p50: (f64, f64),
}

impl Config {
    fn from(v: &Value) -> Result<Self> {
        let int = |k: &str| {
            v[k].as_u64()
                .ok_or_else(|| BenchError::Unexpected(format!("config.{k}: not a number")))
        };
        let p50 = |items: &str| v["transaction_p50_ms"][items].as_f64().unwrap_or(0.0);
        Ok(Self {
            n: usize::try_from(int("messages")?).map_err(BenchError::failed)?,
            delay_ms: int("delay_ms")?,
            runs: usize::try_from(int("runs")?).map_err(BenchError::failed)?,
            seed: int("seed")?,
            containers: usize::try_from(int("containers")?).map_err(BenchError::failed)?,
            transaction_p50: (p50("20"), p50("100")),
        })
    }
}

/// `bench report RAW DOCS`.
pub(crate) fn run(raw: &Path, docs: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(raw).map_err(|e| BenchError::step(raw.display().to_string(), e))?;
    let raw: Value =
        serde_json::from_str(&text).map_err(|e| BenchError::step(raw.display().to_string(), e))?;
    let config = Config::from(&raw["config"])?;
    let results = raw["runs"].as_array().cloned().unwrap_or_default();
    let cold = &raw["cold"];
    let zips: BTreeMap<String, Option<f64>> = raw["zips"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(f, mb)| (f.clone(), mb.as_f64()))
        .collect();
    let summary = summarize(&results);
    std::fs::create_dir_all(docs).map_err(BenchError::failed)?;
    let mut md = report(&summary, cold, &zips, &config);
    // The stores' and the modelled bed's sections (`bench stores`, `bench modelled`) are
    // measured apart: kept as they stand.
    let old = std::fs::read_to_string(docs.join("BENCHMARKS.md")).unwrap_or_default();
    let modelled = crate::modelled::section(&old);
    if !modelled.is_empty() {
        md = crate::modelled::splice(&md, modelled);
    }
    // So are the round-trip table, pinned by `tests/integration/round_trips/`, the hedging
    // rows (`bench hedge`), the HTTP door's (`bench http`) and the CPU rows (`bench cpu`).
    for section in [
        crate::stores::section(&old),
        crate::table::kept(&old, ROUND_TRIPS),
        crate::table::kept(
            &old,
            (crate::modelled::hedge::BEGIN, crate::modelled::hedge::END),
        ),
    ] {
        if !section.is_empty() {
            md = format!("{}\n\n{section}\n", md.trim_end());
        }
    }
    std::fs::write(docs.join("BENCHMARKS.md"), md).map_err(BenchError::failed)?;
    let mut all = summary;
    all.push(cold.clone());
    let json = serde_json::to_string_pretty(&json!({"summary": all, "runs": results}));
    std::fs::write(
        docs.join("benchmarks.json"),
        json.map_err(BenchError::failed)?,
    )
    .map_err(BenchError::failed)
}

/// Where the round-trip table starts and ends in `BENCHMARKS.md` (written by hand from the
/// counts `tests/integration/round_trips/` pins).
const ROUND_TRIPS: (&str, &str) = ("<!-- round-trips:begin -->", "<!-- round-trips:end -->");

/// The median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// One entry per (model, batch, containers, mode, workload): the median over runs of each
/// figure, and the spread (min, max) of messages per second.
fn summarize(results: &[Value]) -> Vec<Value> {
    let mut groups: BTreeMap<(String, u64, u64, String, String), Vec<&Value>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.get("msgs_per_s").is_some()) {
        let key = (
            r["model"].as_str().unwrap_or("").to_owned(),
            r["batch"].as_u64().unwrap_or(10),
            r["containers"].as_u64().unwrap_or(1),
            r["mode"].as_str().unwrap_or("").to_owned(),
            r["workload"].as_str().unwrap_or("").to_owned(),
        );
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((model, batch, containers, mode, workload), rs)| {
            let col = |k: &str| -> Vec<f64> { rs.iter().filter_map(|r| r[k].as_f64()).collect() };
            let rates = col("msgs_per_s");
            let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let max = rates.iter().copied().fold(0.0, f64::max);
            let wcu = median(&mut col("wcu_per_msg"));
            let failed = median(&mut col("failed_wcu_per_msg"));
            let cancelled = median(&mut col("cancelled_wcu_per_msg"));
            let rcu = median(&mut col("rcu_per_msg"));
            // USD per million messages: units per message × USD per million units.
            let billed = (wcu + failed + cancelled) * WRITE_PRICE + rcu * READ_PRICE;
            let unbilled = (wcu + failed) * WRITE_PRICE + rcu * READ_PRICE;
            json!({"model": model, "batch": batch, "containers": containers, "mode": mode,
                   "workload": workload, "runs": rs.len(),
                   "msgs_per_s": median(&mut rates.clone()), "msgs_per_s_min": min, "msgs_per_s_max": max,
                   "calls_per_msg": median(&mut col("calls_per_msg")),
                   "wcu_per_msg": wcu, "failed_wcu_per_msg": failed,
                   "cancelled_wcu_per_msg": cancelled, "rcu_per_msg": rcu,
                   "cancelled_per_msg": median(&mut col("cancelled_per_msg")),
                   "usd_per_million_cancelled_billed": billed,
                   "usd_per_million_cancelled_free": unbilled,
                   "p50_ms": median(&mut col("p50_ms")), "p99_ms": median(&mut col("p99_ms")),
                   "failures": rs.iter().filter_map(|r| r["failures"].as_u64()).sum::<u64>(),
                   "service_ms": rs.first().map_or(Value::Null, |r| r["service_ms"].clone())})
        })
        .collect()
}

/// The summary entry of one configuration, mode and workload.
fn find<'a>(
    summary: &'a [Value],
    (model, batch, containers): (&str, usize, usize),
    mode: &str,
    workload: &str,
) -> Option<&'a Value> {
    summary.iter().find(|v| {
        v["model"] == model
            && v["batch"] == batch as u64
            && v["containers"] == containers as u64
            && v["mode"] == mode
            && v["workload"] == workload
    })
}

/// The emulator's own service time of a row (its first run's), per operation:
/// `Operation p50/mean` in ms, or — when the run did not record it.
fn service_cell(v: &Value) -> String {
    let cells: Vec<String> = v["service_ms"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(op, s)| {
            format!(
                "{op} {:.1}/{:.1}",
                s["p50_ms"].as_f64().unwrap_or(0.0),
                s["mean_ms"].as_f64().unwrap_or(0.0)
            )
        })
        .collect();
    if cells.is_empty() {
        "—".to_owned()
    } else {
        cells.join("; ")
    }
}

/// One table row of the summary `v` of workload `w` in mode `m`: messages per second and their
/// spread, then `ratio` (to one decimal) if given, then each of `columns` (a summary field and
/// its decimals).
fn row(w: &str, m: &str, v: &Value, ratio: Option<f64>, columns: &[(&str, usize)]) -> String {
    let mut line = format!(
        "| {w} | {m} | {:.0} | {:.0}–{:.0} |",
        num(Some(v), "msgs_per_s"),
        num(Some(v), "msgs_per_s_min"),
        num(Some(v), "msgs_per_s_max"),
    );
    if let Some(ratio) = ratio {
        let _ = write!(line, " {ratio:.1} |");
    }
    for (field, decimals) in columns {
        let _ = write!(line, " {:.*} |", decimals, num(Some(v), field));
    }
    line
}

/// The columns after the ratio to Powertools in the tables of one latency model and batch size.
const PER_CONFIG: &[(&str, usize)] = &[
    ("calls_per_msg", 3),
    ("wcu_per_msg", 2),
    ("failed_wcu_per_msg", 2),
    ("cancelled_wcu_per_msg", 2),
    ("rcu_per_msg", 2),
    ("usd_per_million_cancelled_billed", 2),
    ("usd_per_million_cancelled_free", 2),
    ("p50_ms", 1),
    ("p99_ms", 1),
];

/// The columns after the spread in the table of containers at once.
const PER_CONTAINERS: &[(&str, usize)] = &[
    ("calls_per_msg", 3),
    ("wcu_per_msg", 2),
    ("p50_ms", 1),
    ("p99_ms", 1),
];

fn report(
    summary: &[Value],
    cold: &Value,
    zips: &BTreeMap<String, Option<f64>>,
    config: &Config,
) -> String {
    let &Config {
        n,
        delay_ms,
        runs,
        seed,
        containers,
        transaction_p50: (p50_20, p50_100),
    } = config;
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Measured by `cargo xtask bench --runs {runs}` in one run on 2 shared cores (other \
         engineers' builds running at the same time), against a local DynamoDB (Dynoxide, in \
         memory, embedded in xtask, built optimised: the workspace's dev profile compiles \
         `dynoxide-rs`, `rusqlite`, `libsqlite3-sys` and `bigdecimal` at opt-level 3) behind a metering proxy (`local_dynamodb::meter`) that both \
         sides go through. Both sides see the same DynamoDB: same emulator, same proxy, same \
         latency model, same draws.\n\n\
         ## The latency model\n\n\
         The proxy holds every request before forwarding it, for a latency drawn per operation \
         and item count from DynamoDB's latency as measured from a Lambda function in the same \
         Region (alexdebrie/dynamodb-performance-testing, `put-batch-transaction-performance`): \
         `PutItem` p50 7.55 ms, p99 16.2 ms; `TransactWriteItems` of 5 items p50 25.3, p99 92.5; \
         of 25 items p50 32.1, p99 97.5.\n\n\
         - Single-item operations (`GetItem`, `PutItem`, `UpdateItem`, `DeleteItem`) take \
         `PutItem`'s distribution; so do the data-plane operations that were not measured \
         (`BatchGetItem`, `Query`, …).\n\
         - Transactions of `n` items: p50 and p99 linear in `n` through the two measured points, \
         `p50 = 25.3 + 0.34 (n − 5)`, `p99 = 92.5 + 0.25 (n − 5)` ms. Beyond 25 items this is an \
         extrapolation no measurement backs: {:.1} ms p50 at 20 items (a batch of 10, \
         measured range), {:.1} ms at 100 items.\n\
         - Each is a log-normal fitted to its p50 and p99 (`σ = ln(p99/p50) / 2.326`).\n\
         - Draws are seeded (seed {seed}): the k-th request of every side's run gets the k-th \
         normal of the same stream.\n\n\
         The second configuration is a flat {delay_ms} ms per request (the model of the earlier \
         reports). The emulator's own execution time comes on top in both, and the emulator \
         executes requests one at a time; the last column of each table is that time as the \
         proxy measures it (from forwarding a request, its held latency over, to the answer's \
         last byte), p50/mean per operation, for the row's first run.\n",
        p50_20, p50_100
    );
    let _ = writeln!(
        md,
        "## Cost as AWS bills it\n\n\
         Write and read request units per message: the emulator's consumed capacity for requests \
         that succeeded; for failed conditional writes, which DynamoDB bills but the emulator \
         reports nothing for, the proxy computes the units from the request (the item's size in \
         1 KB units, at least 1 per failed write; DynamoDB bills the existing item's size). \
         Cancelled `TransactWriteItems` (a duplicate in a shared round) are reported both ways, \
         since AWS does not document whether they are billed: *billed as attempted* (2 units per \
         1 KB of each item, as a transaction that succeeds) and *not billed*. Prices: on-demand, \
         US East (N. Virginia), ${WRITE_PRICE} per million write request units and ${READ_PRICE} per \
         million read request units, the rates since the price cut of 1 November 2024; cost \
         per million messages = units per message × price per million units.\n\n\
         Every message is a CloudEvents credit whose effect is one balance update (`ADD`) on one of \
         1,000 accounts; {n} messages per workload and run, in SQS batches of 10 or of 100 (a \
         batching window), one batch at a time (one Lambda container); our modes run the batch's \
         messages (and transactions) with a concurrency of the batch size. The two sides \
         alternate: in each configuration each side runs every workload {runs} time(s), the first \
         side changes every run, and every side's run gets a fresh emulator and proxy. Tables \
         show the median of the runs and, for messages per second, the spread (min–max).\n\n\
         Workloads: `all_new` (1000 new events); `half_duplicates` (the first half of the run \
         new, the second half repeats it); `mixed` (each batch 30 % redeliveries of events of \
         earlier batches, at positions 2, 5 and 8 of every 10, the rest new; the first batch all \
         new); `all_duplicates` (every event processed once before, untimed).\n"
    );
    let _ = writeln!(
        md,
        "- **powertools**: AWS Powertools for Lambda (Python) 3.37, `BatchProcessor` + \
         `idempotent_function` with the DynamoDB persistence layer (a conditional put, the effect, \
         then an update: the mark and the effect are *not* atomic), through the same proxy.\n\
         - **per_message**: `Deduplicator::transactional`, one `TransactWriteItems` (mark + \
         effect) per message, the batch's messages at once.\n\
         - **batch_transaction**: `run_batch_transactional`, the marks and effects of a batch in as \
         few `TransactWriteItems` as its 100-item limit allows (1 for 10 messages, 2 for 100), \
         the batch's transactions in flight at once (never two writing one item).\n\
         - **batch_transaction_prefilter**: the same with `DEDUP_PREFILTER_DUPLICATES=true`: one \
         strongly consistent `BatchGetItem` of the batch's marks first; known duplicates stay \
         out of the transactions (a filter only: the conditional write still decides, S4).\n\
         - **batch_transaction_warm_cache**: the same as batch_transaction with the \
         warm-container cache of completed marks (for `all_duplicates`, the container had \
         processed the events before).\n\
         - **sequence**: sequence mode (`SequencedDeduplicator::sequenced`) for ordered sources: a FIFO \
         batch grouped by account, each message one conditional `UpdateItem` of the balance item \
         carrying the account's high-water sequence, the groups at once. (It needs a producer \
         that numbers its events per aggregate and a source that keeps their order.)\n\
         - **create_once**: create-once mode (`CreateOnceDeduplicator::create_once`) for effects that create \
         one item per event: the credit recorded as its own entry item, keyed by the event, in one \
         conditional `PutItem` that is also the mark (no mark table, no transaction), the batch's \
         messages at once.\n"
    );
    for model in MODELS {
        for batch in BATCHES {
            let cfg = (model, batch, 1);
            let title = if model == "calibrated" {
                "Calibrated latency model".to_owned()
            } else {
                format!("Flat {delay_ms} ms per request")
            };
            let _ = writeln!(md, "\n## {title}, batches of {batch}\n");
            table::head(
                &mut md,
                "| workload | mode | msgs/s | spread | × Powertools | requests/msg | WCU/msg | failed WCU/msg | cancelled WCU/msg | RCU/msg | $/M msgs (cancelled billed) | $/M msgs (cancelled free) | p50 batch ms | p99 batch ms | emulator ms per request, p50/mean |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            );
            for w in WORKLOADS {
                let base = num(find(summary, cfg, "powertools", w), "msgs_per_s");
                for m in table::MODES {
                    let Some(v) = find(summary, cfg, m, w) else {
                        continue;
                    };
                    let r = num(Some(v), "msgs_per_s");
                    let ratio = if base > 0.0 { r / base } else { 0.0 };
                    let line = row(w, m, v, Some(ratio), PER_CONFIG);
                    let _ = writeln!(md, "{line} {} |", service_cell(v));
                }
            }
        }
    }
    let _ = writeln!(
        md,
        "\n## {containers} containers at once on one table (calibrated latency, batches of 10)\n\n\
         Our modes only: each container has its own client and processes its share of \
         {containers} × {n} messages (split by account, so each FIFO group has one consumer), one batch \
         at a time; messages per second are for all containers together.\n"
    );
    table::head(
        &mut md,
        "| workload | mode | msgs/s | spread | requests/msg | WCU/msg | p50 batch ms | p99 batch ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    );
    for w in WORKLOADS {
        for m in table::MODES {
            let Some(v) = find(summary, ("calibrated", 10, containers), m, w) else {
                continue;
            };
            let _ = writeln!(md, "{}", row(w, m, v, None, PER_CONTAINERS));
        }
    }
    // Targets, all on all-new messages under the calibrated model.
    let cal = |batch: usize, mode: &str, w: &str| find(summary, ("calibrated", batch, 1), mode, w);
    let ratio = |batch: usize, mode: &str| {
        num(cal(batch, mode, "all_new"), "msgs_per_s")
            / num(cal(batch, "powertools", "all_new"), "msgs_per_s").max(1e-9)
    };
    let mark = |ok: bool| if ok { "met" } else { "**missed**" };
    let _ = writeln!(
        md,
        "\n## Against the targets (all new messages, calibrated latency model)\n"
    );
    table::head(&mut md, "| target | measured | |", "| --- | --- | --- |");
    for (mode, batch, target) in crate::modelled::TARGETS {
        let r = ratio(batch, mode);
        let _ = writeln!(
            md,
            "| {mode} ≥ {target} × Powertools, batches of {batch} | {r:.1} × | {} |",
            mark(r >= target)
        );
    }
    let cost = |batch: usize, mode: &str, w: &str, k: &str| num(cal(batch, mode, w), k);
    for (mode, batch) in ["sequence", "create_once"]
        .into_iter()
        .flat_map(|m| BATCHES.map(|b| (m, b)))
    {
        let cheaper = WORKLOADS.iter().all(|w| {
            cost(batch, mode, w, "usd_per_million_cancelled_billed")
                <= cost(batch, "powertools", w, "usd_per_million_cancelled_billed") + 1e-9
        });
        let worst = WORKLOADS
            .iter()
            .map(|w| {
                format!(
                    "{w} {:.2} vs {:.2}",
                    cost(batch, mode, w, "usd_per_million_cancelled_billed"),
                    cost(batch, "powertools", w, "usd_per_million_cancelled_billed")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(
            md,
            "| {mode} costs at most Powertools on every workload, batches of {batch} ($/M msgs) | {worst} | {} |",
            mark(cheaper)
        );
    }
    for batch in BATCHES {
        let _ = writeln!(
            md,
            "| mixed workload, batch_transaction without / with the pre-filter, batches of {batch} ($/M msgs, cancelled billed; not billed) | {:.2} / {:.2}; {:.2} / {:.2} | reported |",
            cost(
                batch,
                "batch_transaction",
                "mixed",
                "usd_per_million_cancelled_billed"
            ),
            cost(
                batch,
                "batch_transaction_prefilter",
                "mixed",
                "usd_per_million_cancelled_billed"
            ),
            cost(
                batch,
                "batch_transaction",
                "mixed",
                "usd_per_million_cancelled_free"
            ),
            cost(
                batch,
                "batch_transaction_prefilter",
                "mixed",
                "usd_per_million_cancelled_free"
            ),
        );
    }
    let cold_ms = cold["cold_start_ms_median"].as_f64().unwrap_or(f64::MAX);
    let rss = cold["peak_rss_mb_max"].as_f64().unwrap_or(f64::MAX);
    let zip_max = zips.values().filter_map(|z| *z).fold(0.0, f64::max);
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
    let p50 = |batch: usize, mode: &str| num(cal(batch, mode, "all_new"), "p50_ms");
    let (pt10, pt100) = (p50(10, "powertools"), p50(100, "powertools"));
    let _ = writeln!(
        md,
        "\n### What bounds the ratios\n\n\
         One batch at a time, a batch costs the latency of its requests that run one after \
         another, plus the emulator's time, which runs every request one at a time. Powertools \
         makes 3 requests per new message one after another (p50 batch: {pt10:.1} ms at 10, \
         {pt100:.1} ms at 100).\n\n\
         - Batch-transaction, batches of 10: one 20-item transaction, whose model p50 alone is \
         {:.1} ms: the ratio cannot pass {:.1} × at the median (measured p50 batch {:.1} ms).\n\
         - Batch-transaction, batches of 100: 200 items in 2 transactions of 100, in flight \
         together; the model's p50 of a 100-item transaction (extrapolated) is {:.1} ms, and the \
         batch waits for the slower of the two, so the ratio cannot pass {:.1} × at the median; \
         the emulator's serial execution of 200 items comes on top (measured p50 batch {:.1} \
         ms).\n\
         - Sequence and create-once, batches of 10 and 100: one `UpdateItem` (sequence) or \
         `PutItem` (create-once) per message, all in flight at once; the batch waits for the \
         slowest of 10 or 100 draws (near the model's p90 and p99, ~11 and 16 ms) and for the \
         emulator, which executes the writes one after another (measured p50 batch: sequence \
         {:.1} and {:.1} ms, create-once {:.1} and {:.1} ms).\n\n\
         Whatever a measured p50 batch has beyond the model's latency is the emulator's and the \
         clients' time on this machine: the emulator (Dynoxide on SQLite, run by the xtask \
         binary) executes every request of every client one after another, and the machine's \
         2 cores are shared. That part is why a ratio falls short of its bound; on DynamoDB it \
         is spread across partitions.",
        p50_20,
        pt10 / p50_20.max(1e-9),
        p50(10, "batch_transaction"),
        p50_100,
        pt100 / p50_100.max(1e-9),
        p50(100, "batch_transaction"),
        p50(10, "sequence"),
        p50(100, "sequence"),
        p50(10, "create_once"),
        p50(100, "create_once"),
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
         ![messages per second and write units per message, by mode, calibrated latency](benchmarks.png)"
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The round-trip table in docs/BENCHMARKS.md is found whole, so `bench report` keeps it.
    #[test]
    fn the_round_trip_table_is_kept_whole() {
        let doc = include_str!("../../docs/BENCHMARKS.md");
        let table = crate::table::kept(doc, ROUND_TRIPS);
        assert!(table.starts_with(ROUND_TRIPS.0) && table.ends_with(ROUND_TRIPS.1));
        assert!(
            table.contains("| HTTP, the key held in flight (409) |"),
            "{table}"
        );
        assert_eq!(crate::table::kept("no table", ROUND_TRIPS), "");
    }

    /// The service cell names each operation with its p50 and mean; a run without them shows —.
    #[test]
    fn the_service_cell_lists_each_operations_p50_and_mean() {
        let v = serde_json::json!({"service_ms": {
            "PutItem": {"requests": 3, "p50_ms": 1.26, "mean_ms": 2.04},
            "TransactWriteItems": {"requests": 1, "p50_ms": 12.0, "mean_ms": 12.0}}});
        assert_eq!(
            service_cell(&v),
            "PutItem 1.3/2.0; TransactWriteItems 12.0/12.0"
        );
        assert_eq!(service_cell(&serde_json::json!({})), "—");
    }

    /// The rows are the ones the tables were written with before `row` served both.
    #[test]
    fn a_row_has_the_spread_the_ratio_and_each_column_at_its_decimals() {
        let v = serde_json::json!({
            "msgs_per_s": 1234.56, "msgs_per_s_min": 1000.4, "msgs_per_s_max": 1500.6,
            "calls_per_msg": 1.23456, "wcu_per_msg": 2.3456, "p50_ms": 12.34, "p99_ms": 56.78,
        });
        assert_eq!(
            row("all_new", "leased", &v, None, PER_CONTAINERS),
            "| all_new | leased | 1235 | 1000–1501 | 1.235 | 2.35 | 12.3 | 56.8 |"
        );
        assert_eq!(
            row("all_new", "leased", &v, Some(2.06), PER_CONFIG),
            "| all_new | leased | 1235 | 1000–1501 | 2.1 | 1.235 | 2.35 | 0.00 | 0.00 | 0.00 \
             | 0.00 | 0.00 | 12.3 | 56.8 |"
        );
    }
}
