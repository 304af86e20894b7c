//! The modelled bed's section of `docs/BENCHMARKS.md`, between [`BEGIN`] and [`END`]: its
//! tables per batch size and the targets beside the emulator bed's figures (read from the
//! emulator bed's summary, `docs/benchmarks.json`). `bench modelled` writes it in place (or
//! before "## Against the targets" the first time); `bench report` keeps it as it stands.

use std::fmt::Write as _;

use serde_json::Value;

use crate::table::{self, num};

pub(crate) const BEGIN: &str = "<!-- modelled:begin -->";
pub(crate) const END: &str = "<!-- modelled:end -->";

/// Where the section goes the first time: before the targets of the emulator bed.
const BEFORE: &str = "## Against the targets";

/// The targets: mode, batch, the ratio to Powertools to reach (all new messages).
pub(crate) const TARGETS: [(&str, usize, f64); 6] = [
    ("batch_transaction", 10, 10.0),
    ("batch_transaction", 100, 45.0),
    ("sequence", 10, 25.0),
    ("sequence", 100, 75.0),
    ("create_once", 10, 25.0),
    ("create_once", 100, 75.0),
];

fn find<'a>(rows: &'a [Value], batch: usize, mode: &str, workload: &str) -> Option<&'a Value> {
    rows.iter()
        .find(|r| r["batch"] == batch as u64 && r["mode"] == mode && r["workload"] == workload)
}

/// `a / b`, or `None` when `b` is 0 (a bound of no requests at all).
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a > 0.0).then(|| a / b)
}

fn shown(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "—".to_owned(), |x| format!("{x:.decimals$}"))
}

/// Our mode's row of one table: measured, bound, fraction, and both against Powertools' bound.
pub(crate) fn row(v: &Value, powertools_bound: f64) -> String {
    let (measured, bound) = (num(Some(v), "msgs_per_s"), num(Some(v), "bound_msgs_per_s"));
    format!(
        "| {} | {} | {measured:.0} | {} | {} | {} | {} | {:.3} | {:.1} |",
        v["workload"].as_str().unwrap_or(""),
        v["mode"].as_str().unwrap_or(""),
        shown((bound > 0.0).then_some(bound), 0),
        shown(ratio(measured, bound), 2),
        shown(ratio(measured, powertools_bound), 1),
        shown(ratio(bound, powertools_bound), 1),
        num(Some(v), "requests_per_msg"),
        num(Some(v), "p50_batch_ms"),
    )
}

/// The section, from the modelled rows (`rows`) and the emulator bed's summary (`emulator`,
/// `docs/benchmarks.json`'s `summary`; empty if there is none).
pub(crate) fn render(rows: &[Value], emulator: &[Value], n: usize, seed: u64) -> String {
    let build = table::build();
    let mut md = table::opened(BEGIN, "The modelled bed");
    let _ = writeln!(
        md,
        "Measured by `cargo xtask bench --modelled-only` (a debug build; a full `cargo xtask \
         bench` runs it from its release build), this time from a {build} build, on 2 shared \
         cores, in one process: the same flows, workloads, batches and {n} messages per row as the \
         emulator bed, on the memory store (`lambda-dedup-memory`, the DynamoDB store's \
         semantics) behind `bench/src/modelled/store.rs`, which holds every store call for the \
         requests the DynamoDB store would send for it — the same operation and item count (a \
         commit of the mark and n effects: one `TransactWriteItems` of 1 + n items; a batch \
         commit: its rounds, as `DynamoStore` builds and retries them; the pre-filter's read: \
         `BatchGetItem`; sequence mode: `UpdateItem`; create-once: `PutItem`) — each for its \
         draw of the calibrated model (seed {seed}, one stream for the run, in request order), \
         in real time (tokio's timer to within 2 ms of the draw, the rest on a blocking thread's \
         `std::thread::sleep`: tokio's 1 ms timer alone rounded every hold up), then \
         executes it at once. No emulator, no network, no Python. *msgs/s* is the messages over \
         the batches' own time (the bed's building of each batch's messages between them left \
         out, as the bound leaves it out). Every row is checked: its \
         effects applied each distinct event exactly once.\n\n\
         **The bound** is the time the latency model alone requires for the requests the mode \
         issued, computed from their recorded draws, not measured: each batch's critical path \
         (the messages or FIFO groups a batch runs at once cost the longest of them; a chain \
         of calls that wait on each other adds; the rounds of one wave of a batch commit cost \
         the longest draw, waves and `BatchGetItem` chunks add), batches one after another. \
         **Powertools' bound** is the same for Powertools' requests, from a fresh stream of the \
         same seed in the order its run sends them (`bench/powertools_bench.py`: the batch's \
         messages one after another; 3 dependent requests per new event — conditional \
         `PutItem`, the effect's `UpdateItem`, the record's `UpdateItem` — and 1 per duplicate, \
         the failed `PutItem`). *Fraction of bound* = msgs/s ÷ bound msgs/s (what the bed's \
         own time costs); *× Powertools' bound* = msgs/s ÷ Powertools' bound msgs/s. A warm \
         cache that sends no request has no bound (—).\n"
    );
    for batch in [10, 100] {
        let _ = writeln!(md, "### Modelled bed, batches of {batch}\n");
        table::head(
            &mut md,
            "| workload | mode | msgs/s | bound msgs/s | fraction of bound | × Powertools' bound | bound × Powertools' bound | requests/msg | p50 batch ms |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        );
        for w in super::bed::WORKLOADS {
            let pt = num(find(rows, batch, "powertools", w), "bound_msgs_per_s");
            let _ = writeln!(
                md,
                "| {w} | powertools (bound only) | — | {pt:.1} | — | — | 1.0 | — | — |"
            );
            for m in table::OUR_MODES {
                if let Some(v) = find(rows, batch, m, w) {
                    let _ = writeln!(md, "{}", row(v, pt));
                }
            }
        }
        md.push('\n');
    }
    let emulated = |batch: usize, mode: &str| {
        let get = |m: &str| {
            emulator
                .iter()
                .find(|v| {
                    v["model"] == "calibrated"
                        && v["batch"] == batch as u64
                        && v["containers"] == 1
                        && v["mode"] == m
                        && v["workload"] == "all_new"
                })
                .and_then(|v| v["msgs_per_s"].as_f64())
                .unwrap_or(0.0)
        };
        ratio(get(mode), get("powertools"))
    };
    let _ = writeln!(
        md,
        "### Against the targets, both beds (all new messages)\n"
    );
    let _ = writeln!(
        md,
        "The emulator bed's figure is its measured ratio to Powertools measured on the same \
         emulator (the table above); the modelled bed's is its measured msgs/s over Powertools' \
         bound, and the bound's the mode's bound over Powertools' bound.\n"
    );
    table::head(
        &mut md,
        "| target | emulator bed | modelled bed (× Powertools' bound) | bound × Powertools' bound | modelled bed |",
        "| --- | ---: | ---: | ---: | --- |",
    );
    for (mode, batch, target) in TARGETS {
        let v = find(rows, batch, mode, "all_new");
        let pt = num(
            find(rows, batch, "powertools", "all_new"),
            "bound_msgs_per_s",
        );
        let measured = ratio(num(v, "msgs_per_s"), pt);
        let bound = ratio(num(v, "bound_msgs_per_s"), pt);
        let verdict = match measured {
            Some(r) if r >= target => "met",
            Some(_) => "**missed**",
            None => "not run",
        };
        let _ = writeln!(
            md,
            "| {mode} ≥ {target} × Powertools, batches of {batch} | {} × | {} × | {} × | {verdict} |",
            shown(emulated(batch, mode), 1),
            shown(measured, 1),
            shown(bound, 1),
        );
    }
    md.push('\n');
    for batch in [10, 100] {
        let pt = num(
            find(rows, batch, "powertools", "all_new"),
            "bound_msgs_per_s",
        );
        let measured = emulator
            .iter()
            .find(|v| {
                v["model"] == "calibrated"
                    && v["batch"] == batch as u64
                    && v["containers"] == 1
                    && v["mode"] == "powertools"
                    && v["workload"] == "all_new"
            })
            .and_then(|v| v["msgs_per_s"].as_f64());
        let _ = writeln!(
            md,
            "- Batches of {batch}: Powertools' bound is {pt:.1} msgs/s (all new); on the emulator bed, \
             whose proxy gave it the same draws, it measured {} msgs/s, {} of its bound.",
            shown(measured, 1),
            shown(measured.and_then(|m| ratio(m, pt)), 2),
        );
    }
    let _ = writeln!(md, "\n{END}");
    md
}

/// `doc` with its modelled section replaced by `section`; without one, `section` inserted
/// before the emulator bed's targets (or appended).
pub(crate) fn splice(doc: &str, section: &str) -> String {
    if let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END))
        && b < e
    {
        return format!(
            "{}{}{}",
            &doc[..b],
            section.trim_end(),
            &doc[e + END.len()..]
        );
    }
    match doc.find(BEFORE) {
        Some(at) => format!("{}{}\n\n{}", &doc[..at], section.trim_end(), &doc[at..]),
        None => format!("{}\n\n{}\n", doc.trim_end(), section.trim_end()),
    }
}

/// The modelled section of `old` (a previous `BENCHMARKS.md`), for `bench report` to keep;
/// empty if there is none.
pub(crate) fn section(old: &str) -> &str {
    match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if b < e => &old[b..e + END.len()],
        _ => "",
    }
}
