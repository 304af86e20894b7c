//! `bench modelled MESSAGES SEED DOCS`: the benchmark's second bed, in one process — the real
//! flows on the memory store, every store call held for the draws of the requests the DynamoDB
//! store would send ([`store`]), every draw recorded ([`draws`]) with where it was made
//! (`crate::place`), each row's bound computed from them and Powertools' from the same seed's stream
//! ([`bound`]), the rows run as the emulator bed runs them ([`bed`]), and its section of
//! `DOCS/BENCHMARKS.md` ([`mod@section`]) plus `DOCS/benchmarks-modelled.json` (every row).

mod bed;
mod bound;
pub(crate) mod draws;
pub(crate) mod hedge;
pub(crate) mod http;
mod section;
pub(crate) mod store;

#[cfg(test)]
mod tests;

use std::path::Path;

use serde_json::{Value, json};

pub(crate) use section::{TARGETS, section, splice};

use crate::Result;
use crate::error::BenchError;
use crate::modes::Mode;

/// The batch sizes, as in the emulator bed.
const BATCHES: [usize; 2] = [10, 100];

/// `bench modelled`: both batch sizes, every mode; writes the section and the rows.
pub(crate) async fn run(n: usize, seed: u64, docs: &Path) -> Result<()> {
    let mut rows = Vec::new();
    for batch in BATCHES {
        let these = bed::run(n, batch, seed, &Mode::ALL).await?;
        for r in &these {
            if let Some(m) = r.get("msgs_per_s") {
                println!(
                    "bench: modelled b{batch:<3} {:<30} {:<16} {:>8.1} msgs/s, bound {:>8.1}",
                    r["mode"].as_str().unwrap_or(""),
                    r["workload"].as_str().unwrap_or(""),
                    m.as_f64().unwrap_or(0.0),
                    r["bound_msgs_per_s"].as_f64().unwrap_or(0.0)
                );
            }
        }
        rows.extend(these);
    }
    let read = |name: &str| std::fs::read_to_string(docs.join(name)).unwrap_or_default();
    let emulator: Vec<Value> = serde_json::from_str::<Value>(&read("benchmarks.json"))
        .ok()
        .and_then(|v| v["summary"].as_array().cloned())
        .unwrap_or_default();
    let md = section::splice(
        &read("BENCHMARKS.md"),
        &section::render(&rows, &emulator, n, seed),
    );
    std::fs::write(docs.join("BENCHMARKS.md"), md).map_err(BenchError::failed)?;
    let raw = json!({"config": {"messages": n, "seed": seed, "batches": BATCHES}, "rows": rows});
    let text = serde_json::to_string_pretty(&raw).map_err(BenchError::failed)?;
    std::fs::write(docs.join("benchmarks-modelled.json"), text).map_err(BenchError::failed)
}
