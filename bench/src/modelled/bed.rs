//! The modelled bed's run: every mode on every workload, as the emulator bed runs them (same
//! messages, batches, order of workloads and modes, one stream of draws for the run), on a
//! [`ModelledStore`] per row; each row's timed pass measured in real time, its bound computed
//! from its draws, and its effects checked: every distinct event applied once.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{Item, KeySpec, Retention, Scope, Value};
use lambda_dedup_memory::MemoryStore;
use local_dynamodb::latency::{Delays, Latency};
use serde_json::{Value as Json, json};

use super::bound;
use super::draws::Recorder;
use super::store::ModelledStore;
use crate::Result;
use crate::error::BenchError;
use crate::modes::{Dedups, Mode, run_one, workload_ids};

/// The workloads, in the emulator bed's order.
pub(crate) const WORKLOADS: [&str; 4] = ["all_new", "half_duplicates", "mixed", "all_duplicates"];

/// One row's store: a fresh memory store with the row's effect table, behind the run's stream.
pub(crate) fn store(
    delays: &Arc<Delays>,
    retention: Retention,
    table: &str,
    key: &str,
) -> ModelledStore {
    let memory = MemoryStore::new(retention);
    memory.create_table(table, key);
    ModelledStore::new(memory, Recorder::new(delays.clone()))
}

/// How many events the row's effects applied: the balances' sum (a credit of 1 each), or the
/// entries created (create-once mode).
pub(crate) fn applied(memory: &MemoryStore, table: &str, mode: Mode) -> u64 {
    let items = memory.items(table);
    if mode == Mode::CreateOnce {
        return items.len() as u64;
    }
    items
        .iter()
        .filter_map(|i: &Item| match i.0.get("balance") {
            Some(Value::N(n)) => n.parse::<u64>().ok(),
            _ => None,
        })
        .sum()
}

/// Every mode of `modes` on every workload, `n` messages in batches of `batch`, the draws from
/// one stream of the calibrated model seeded `seed`; then Powertools' bound of each workload.
/// One JSON object per row; an error if a row did not apply every distinct event exactly once.
pub(crate) async fn run(n: usize, batch: usize, seed: u64, modes: &[Mode]) -> Result<Vec<Json>> {
    let latency = Latency::Calibrated { seed };
    let delays = Arc::new(Delays::new(latency));
    let retention =
        Retention::unchecked(Duration::from_secs(86_400)).map_err(BenchError::failed)?;
    let spec = KeySpec::cloudevents(
        Scope::new("bench", "ledger").map_err(BenchError::failed)?,
        "tenantid",
    );
    let mut rows = Vec::new();
    for workload in WORKLOADS {
        let ids = workload_ids(workload, n, batch);
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for &mode in modes {
            let (table, key) = if mode == Mode::CreateOnce {
                ("entries", "entry")
            } else {
                ("balances", "account")
            };
            let store = Arc::new(store(&delays, retention, table, key));
            let dedups = Dedups::new(&spec, store.clone(), mode);
            if workload == "all_duplicates" {
                run_one(&dedups, table, mode, &ids, batch).await; // first pass, not timed
            }
            store.take_draws();
            let (mut latencies, failures) = run_one(&dedups, table, mode, &ids, batch).await;
            // The batches' own time, as the bound is theirs: not the bed's building of each
            // batch's messages between them (in Lambda the poller hands them over built).
            let secs = latencies.iter().sum::<Duration>().as_secs_f64();
            let draws = store.take_draws();
            let bound = bound::of(&draws).as_secs_f64();
            let applied = applied(store.memory(), table, mode);
            if applied != distinct.len() as u64 {
                return Err(BenchError::Unexpected(format!(
                    "modelled bed: {} on {workload} applied {applied} events, not the {} distinct",
                    mode.name(),
                    distinct.len()
                )));
            }
            latencies.sort();
            let p50 = latencies
                .get(latencies.len() / 2)
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
            let mut by_operation = std::collections::BTreeMap::<&str, u64>::new();
            for d in &draws {
                *by_operation.entry(d.operation).or_default() += 1;
            }
            let held: f64 = draws.iter().map(|d| d.held.as_secs_f64()).sum();
            rows.push(json!({
                "mode": mode.name(), "workload": workload, "batch": batch, "messages": n,
                "seconds": secs, "msgs_per_s": n as f64 / secs,
                "bound_seconds": bound,
                "bound_msgs_per_s": if bound > 0.0 { n as f64 / bound } else { 0.0 },
                "requests_per_msg": draws.len() as f64 / n as f64,
                "by_operation": by_operation, "held_seconds_total": held,
                "p50_batch_ms": p50, "failures": failures, "applied": applied,
            }));
        }
    }
    let workloads: Vec<(&str, Vec<usize>)> = WORKLOADS
        .iter()
        .map(|w| (*w, workload_ids(w, n, batch)))
        .collect();
    let powertools = bound::powertools(&Delays::new(latency), &workloads, "all_duplicates");
    for ((workload, _), secs) in workloads.iter().zip(powertools) {
        let secs = secs.as_secs_f64();
        rows.push(json!({
            "mode": "powertools", "workload": workload, "batch": batch, "messages": n,
            "bound_seconds": secs,
            "bound_msgs_per_s": if secs > 0.0 { n as f64 / secs } else { 0.0 },
        }));
    }
    Ok(rows)
}
