//! `bench hedge MESSAGES SEED DOCS`: hedging the single-write modes in the modelled bed.
//! Sequence and create-once run a batch's messages at once, one conditional write each, so a
//! batch costs the slowest of its writes. A hedge sends the same conditional write again when
//! the first has not answered after a delay near the model's p90, p95 or p99 of one write, and
//! the call takes whichever answers first (`Recorder::draw_hedged`): the second copy either
//! wins or fails its condition on our own first write (recognised as ours by the owner token its
//! `ALL_OLD` returns, so never a duplicate); either way it is one more conditional write billed.
//! The first writes draw from the row's stream as they would unhedged (the same seed every
//! row), the copies from a stream of their own (the next seed), so a hedged row and the
//! unhedged one differ only by the hedge. Each row: msgs/s and p50/p99 batch latency measured, the same computed from the draws (the
//! bound), the hedges per message (the extra write units), and whether the hedge pays: its
//! throughput gain against its cost in write units. Written between [`BEGIN`] and [`END`] in
//! `DOCS/BENCHMARKS.md` (appended the first time) and into `DOCS/benchmarks-hedge.json`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lambda_dedup::{KeySpec, Retention, Scope};
use local_dynamodb::latency::{Delays, Latency, calibrated};
use serde_json::{Value, json};

use super::{bed, bound};
use crate::Result;
use crate::error::BenchError;
use crate::modes::{Dedups, Mode, run_one, workload_ids};
use crate::table;

pub(crate) const BEGIN: &str = "<!-- hedge:begin -->";
pub(crate) const END: &str = "<!-- hedge:end -->";

/// The hedge delays: none, then the model's one-write p90, p95 and p99 (name, standard normal z).
const DELAYS: [(&str, Option<f64>); 4] = [
    ("off", None),
    ("p90", Some(1.2816)),
    ("p95", Some(1.6449)),
    ("p99", Some(2.3263)),
];

const BATCHES: [usize; 2] = [10, 100];

/// The price of a million write request units, on demand, US East (as the emulator bed's).
const WRITE_PRICE: f64 = 0.625;

/// The percentile `q` of `xs` (sorted in place), in ms.
fn pick(xs: &mut [Duration], q: f64) -> f64 {
    xs.sort();
    let at = ((q * xs.len() as f64) as usize).min(xs.len().saturating_sub(1));
    xs.get(at).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// One row: `mode` on all new messages, `n` in batches of `batch`, hedged after `after`.
async fn row(
    n: usize,
    batch: usize,
    seed: u64,
    mode: Mode,
    after: Option<Duration>,
) -> Result<Value> {
    let delays = Arc::new(Delays::new(Latency::Calibrated { seed }));
    let retention =
        Retention::unchecked(Duration::from_secs(86_400)).map_err(BenchError::failed)?;
    let spec = KeySpec::cloudevents(
        Scope::new("bench", "ledger").map_err(BenchError::failed)?,
        "tenantid",
    );
    let (table, key) = if mode == Mode::CreateOnce {
        ("entries", "entry")
    } else {
        ("balances", "account")
    };
    let store = bed::store(&delays, retention, table, key);
    let store = Arc::new(match after {
        Some(after) => store.hedged(
            after,
            Delays::new(Latency::Calibrated {
                seed: seed.wrapping_add(1),
            }),
        ),
        None => store,
    });
    let dedups = Dedups::new(&spec, store.clone(), mode);
    let ids = workload_ids("all_new", n, batch);
    let began = Instant::now();
    let (mut latencies, failures) = run_one(&dedups, table, mode, &ids, batch).await;
    let secs = began.elapsed().as_secs_f64();
    let draws = store.take_draws();
    let hedges = store.take_hedges();
    let applied = bed::applied(store.memory(), table, mode);
    if applied != n as u64 || failures > 0 {
        return Err(BenchError::Unexpected(format!(
            "hedge: {} applied {applied} of {n} events, {failures} failures",
            mode.name()
        )));
    }
    let mut bounds = bound::per_batch(&draws);
    let bound: f64 = bounds.iter().map(Duration::as_secs_f64).sum();
    let extra = hedges as f64 / n as f64;
    Ok(json!({
        "mode": mode.name(), "batch": batch, "messages": n,
        "hedge_after_ms": after.map(|d| d.as_secs_f64() * 1000.0),
        "msgs_per_s": n as f64 / secs,
        "p50_batch_ms": pick(&mut latencies, 0.5), "p99_batch_ms": pick(&mut latencies, 0.99),
        "bound_msgs_per_s": if bound > 0.0 { n as f64 / bound } else { 0.0 },
        "bound_p50_batch_ms": pick(&mut bounds, 0.5), "bound_p99_batch_ms": pick(&mut bounds, 0.99),
        "hedges_per_msg": extra, "wcu_per_msg": 1.0 + extra,
        "usd_per_million_msgs": (1.0 + extra) * WRITE_PRICE,
    }))
}

/// `bench hedge`: every row, then the section and the raw rows.
pub(crate) async fn run(n: usize, seed: u64, docs: &Path) -> Result<()> {
    let one = calibrated("PutItem", 1)
        .ok_or_else(|| BenchError::Unexpected("no PutItem distribution".into()))?;
    let mut rows = Vec::new();
    for batch in BATCHES {
        // As many batches at either size: `n` messages in batches of 10, 10 × `n` in 100.
        let n = n * batch / 10;
        let workloads = [("all_new", workload_ids("all_new", n, batch))];
        let pt = bound::powertools(
            &Delays::new(Latency::Calibrated { seed }),
            &workloads,
            "all_duplicates",
        );
        let pt = pt.first().map_or(0.0, Duration::as_secs_f64);
        for mode in [Mode::Sequence, Mode::CreateOnce] {
            for (name, z) in DELAYS {
                let after = z.map(|z| Duration::from_secs_f64(one.at(z) / 1000.0));
                let mut r = row(n, batch, seed, mode, after).await?;
                r["hedge"] = json!(name);
                r["powertools_bound_msgs_per_s"] =
                    json!(if pt > 0.0 { n as f64 / pt } else { 0.0 });
                println!(
                    "bench: hedge b{batch:<3} {:<12} {name:<4} {:>8.1} msgs/s, p99 batch {:>6.1} ms, {:.3} hedges/msg",
                    mode.name(),
                    r["msgs_per_s"].as_f64().unwrap_or(0.0),
                    r["p99_batch_ms"].as_f64().unwrap_or(0.0),
                    r["hedges_per_msg"].as_f64().unwrap_or(0.0),
                );
                rows.push(r);
            }
        }
    }
    let path = docs.join("BENCHMARKS.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let md = table::replace(&doc, (BEGIN, END), &render(&rows, n, seed));
    std::fs::write(&path, md).map_err(BenchError::failed)?;
    let raw = json!({"config": {"messages": n, "seed": seed, "batches": BATCHES}, "rows": rows});
    let text = serde_json::to_string_pretty(&raw).map_err(BenchError::failed)?;
    std::fs::write(docs.join("benchmarks-hedge.json"), text).map_err(BenchError::failed)
}

/// Whether a hedged row pays against the unhedged row `off` of its mode and batch: its
/// throughput gain (measured and bound) larger than the write units it adds, relatively.
fn pays(v: &Value, off: &Value) -> (f64, f64, bool) {
    let gain =
        |k: &str| table::num(Some(v), k) / table::num(Some(off), k).max(f64::MIN_POSITIVE) - 1.0;
    let cost = table::num(Some(v), "hedges_per_msg");
    let (measured, bound) = (gain("msgs_per_s"), gain("bound_msgs_per_s"));
    (measured, bound, measured > cost && bound > cost)
}

/// The section: one table of every row, and the verdict.
pub(crate) fn render(rows: &[Value], n: usize, seed: u64) -> String {
    let build = table::build();
    let (n100, copies) = (n * 10, seed.wrapping_add(1));
    let mut md = table::opened(BEGIN, "Hedging the single-write modes (modelled bed)");
    let _ = writeln!(
        md,
        "Measured by `cargo xtask bench --hedge-only` (`bench/src/modelled/hedge.rs`), this time \
         from a {build} build, on the modelled bed (above): sequence and create-once, all new \
         messages, {n} per row in batches of 10 and {} in batches of 100 (100 batches either \
         way), a fresh stream of the calibrated model (seed {seed}) per row for the first \
         writes, the copies drawn from a stream of their own (seed {}), so a hedged row differs \
         from the unhedged one by the hedge alone. A \
         batch runs its messages at once, one conditional write each, so it costs the slowest \
         of them. **Hedged**: when a write has not answered after the delay (the model's p90, \
         p95 or p99 of one `PutItem`), the same conditional write is sent again with a draw of \
         its own, and the call takes whichever answers first; the second copy is billed either \
         way (it wins, or its condition fails on our own first write — recognised as ours by \
         the owner token the failed condition's `ALL_OLD` returns, never a duplicate). \
         **hedges/msg** is the extra write units per message (the bench's items are under \
         1 KB). Measured columns are real time; *bound* columns are computed from the draws \
         (each batch's critical path, as the modelled bed's bound). **Pays** when the \
         throughput gain, measured and bound, is larger than the write units added.\n",
        n100, copies
    );
    table::head(
        &mut md,
        "| batch | mode | hedge after | msgs/s | p50 batch ms | p99 batch ms | bound msgs/s | bound p50 batch ms | bound p99 batch ms | × Powertools' bound | hedges/msg | WCU/msg | $/M msgs | gain, measured / bound | pays |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    );
    let mut verdicts = Vec::new();
    for r in rows {
        let off = rows
            .iter()
            .find(|o| o["hedge"] == "off" && o["mode"] == r["mode"] && o["batch"] == r["batch"]);
        let after = r["hedge_after_ms"].as_f64().map_or_else(
            || "off".to_owned(),
            |ms| format!("{} ({ms:.1} ms)", r["hedge"].as_str().unwrap_or("")),
        );
        let (gain, pay) = match off {
            Some(off) if r["hedge"] != "off" => {
                let (m, b, p) = pays(r, off);
                verdicts.push(p);
                (
                    format!("{:+.1} % / {:+.1} %", m * 100.0, b * 100.0),
                    if p { "yes" } else { "no" },
                )
            }
            _ => ("—".to_owned(), "—"),
        };
        let num = |k: &str| table::num(Some(r), k);
        let _ = writeln!(
            md,
            "| {} | {} | {after} | {:.0} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {:.3} | {:.2} | {:.3} | {gain} | {pay} |",
            r["batch"],
            r["mode"].as_str().unwrap_or(""),
            num("msgs_per_s"),
            num("p50_batch_ms"),
            num("p99_batch_ms"),
            num("bound_msgs_per_s"),
            num("bound_p50_batch_ms"),
            num("bound_p99_batch_ms"),
            num("msgs_per_s") / num("powertools_bound_msgs_per_s").max(f64::MIN_POSITIVE),
            num("hedges_per_msg"),
            num("wcu_per_msg"),
            num("usd_per_million_msgs"),
        );
    }
    let any = verdicts.iter().any(|p| *p);
    let _ = writeln!(
        md,
        "\n**Verdict of this run: {}.** {}\n\n{END}",
        if any {
            "a hedge pays in some row"
        } else {
            "no hedge pays"
        },
        if any {
            "See the rows marked yes."
        } else {
            "The model's one-write latency is a log-normal with a light tail (p99 / p50 = 2.1, \
             independent draws), so a second copy sent at p90 or later rarely answers before \
             the first: the slowest of a batch's writes moves little, while every hedge is one \
             more write billed. The DynamoDB store sends no hedge (none is implemented); a \
             tail heavier than the model's, or correlated, would need its own measurement."
        }
    );
    md
}
