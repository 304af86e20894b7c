//! `bench stores PG_URL VALKEY_URL MESSAGES DOCS`: the PostgreSQL store (`PgStore`) and the
//! Valkey store (`ValkeyStore`) on the transactional flow, per message and in batch
//! transactions, on the workloads of the DynamoDB rows, each server behind a [`DelayProxy`]
//! that holds every request for one draw of the DynamoDB rows' calibrated `PutItem` latency.
//! Prints one JSON line per row and writes the table into `DOCS/BENCHMARKS.md`, between the
//! markers [`ROWS_BEGIN`] and [`ROWS_END`] (appending the section if it is not there yet).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lambda_dedup::{Derived, KeySpec, Retention, Scope};
use lambda_dedup_engine::{Deduplicator, HandlerError, Plan, run_batch, run_batch_transactional};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};
use lambda_dedup_valkey::ValkeyEffect;
use local_dynamodb::latency::{Delays, Latency};
use serde_json::{Value, json};

use crate::Result;
use crate::delay::DelayProxy;
use crate::error::BenchError;
use crate::modes::{message, workload_ids};

/// The seed of the draws (the DynamoDB rows' seed): each proxy starts the same stream.
const SEED: u64 = 21;
const WORKLOADS: [&str; 4] = ["all_new", "half_duplicates", "mixed", "all_duplicates"];
const BATCHES: [usize; 2] = [10, 100];
/// Where the table starts and ends in `BENCHMARKS.md`.
pub(crate) const ROWS_BEGIN: &str = "<!-- store-rows:begin -->";
pub(crate) const ROWS_END: &str = "<!-- store-rows:end -->";
/// Where the whole section starts and ends (kept by `bench report` when it rewrites the file).
pub(crate) const SECTION_BEGIN: &str = "<!-- stores:begin -->";
pub(crate) const SECTION_END: &str = "<!-- stores:end -->";
/// Event ids of the warm-up batch (connections opened, scripts loaded), outside the workloads'.
const WARM: usize = 1_000_000_000;

#[derive(Clone, Copy, PartialEq)]
enum Flow {
    PerMessage,
    Batch,
}

impl Flow {
    fn name(self) -> &'static str {
        match self {
            Flow::PerMessage => "per_message",
            Flow::Batch => "batch_transaction",
        }
    }
}

/// One row's configuration.
struct Case<'a> {
    store: &'a str,
    batch: usize,
    flow: Flow,
    workload: &'a str,
    n: usize,
}

/// The address of `url`'s server (`scheme://[user@]host:port[/…]`, host an IP address).
fn server(url: &str) -> Result<(String, SocketAddr)> {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.rsplit('@').next())
        .ok_or_else(|| BenchError::Unexpected(format!("{url}: no host:port")))?;
    let addr = authority.parse().map_err(|_| {
        BenchError::Unexpected(format!("{url}: host:port must be an IP address and a port"))
    })?;
    Ok((authority.to_owned(), addr))
}

/// `url` with its server replaced by the proxy's.
fn through(url: &str, proxy: &DelayProxy) -> Result<String> {
    let (authority, _) = server(url)?;
    Ok(url.replacen(&authority, &format!("127.0.0.1:{}", proxy.port()), 1))
}

fn account(e: &Derived) -> std::result::Result<String, HandlerError> {
    HandlerError::data(e)?["account"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| HandlerError::invalid("account"))
}

fn spec() -> Result<KeySpec> {
    let scope = Scope::new("bench", "ledger").map_err(BenchError::failed)?;
    Ok(KeySpec::cloudevents(scope, "tenantid"))
}

/// One batch of `ids`: its latency is pushed for each message (per message: the message's own
/// `transactional` call; in a batch transaction: the batch's). Returns the failures.
async fn one_batch<E: 'static, F>(
    dedup: &Deduplicator<E>,
    plan: &F,
    flow: Flow,
    ids: &[usize],
    latencies: &Mutex<Vec<Duration>>,
) -> usize
where
    F: Fn(&Derived) -> std::result::Result<Plan<E>, HandlerError>,
{
    let batch: Vec<_> = ids.iter().map(|i| message(*i)).collect();
    let began = Instant::now();
    let report = match flow {
        Flow::PerMessage => {
            run_batch(batch, ids.len(), |m| async move {
                let t = Instant::now();
                let outcome = dedup.transactional(&m, plan).await;
                latencies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(t.elapsed());
                outcome
            })
            .await
        }
        Flow::Batch => {
            let report = run_batch_transactional(batch, ids.len(), dedup, plan).await;
            let mut l = latencies.lock().unwrap_or_else(|e| e.into_inner());
            l.extend(std::iter::repeat_n(began.elapsed(), ids.len()));
            report
        }
    };
    report.failures().len()
}

/// The latency at quantile `q` of `xs`, in ms.
fn quantile(xs: &mut [Duration], q: f64) -> f64 {
    xs.sort();
    xs.get(((q * xs.len() as f64) as usize).min(xs.len().saturating_sub(1)))
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// One row: a warm-up batch, the untimed first pass of `all_duplicates`, then the timed run.
async fn measure<E: 'static, F>(
    dedup: &Deduplicator<E>,
    plan: F,
    proxy: &DelayProxy,
    case: &Case<'_>,
) -> Value
where
    F: Fn(&Derived) -> std::result::Result<Plan<E>, HandlerError>,
{
    let untimed = Mutex::new(Vec::new());
    let warm: Vec<usize> = (WARM..WARM + case.batch).collect();
    one_batch(dedup, &plan, case.flow, &warm, &untimed).await;
    let ids = workload_ids(case.workload, case.n, case.batch);
    if case.workload == "all_duplicates" {
        for chunk in ids.chunks(case.batch) {
            one_batch(dedup, &plan, case.flow, chunk, &untimed).await;
        }
    }
    let (per_message, mut batches) = (Mutex::new(Vec::new()), Vec::new());
    let (before, began) = (proxy.requests(), Instant::now());
    let mut failures = 0;
    for chunk in ids.chunks(case.batch) {
        let t = Instant::now();
        failures += one_batch(dedup, &plan, case.flow, chunk, &per_message).await;
        batches.push(t.elapsed());
    }
    let secs = began.elapsed().as_secs_f64();
    let requests = proxy.requests() - before;
    let mut per_message = per_message.into_inner().unwrap_or_else(|e| e.into_inner());
    json!({"store": case.store, "mode": case.flow.name(), "workload": case.workload,
           "batch": case.batch, "messages": case.n, "seconds": secs,
           "msgs_per_s": case.n as f64 / secs, "requests_per_msg": requests as f64 / case.n as f64,
           "p50_msg_ms": quantile(&mut per_message, 0.5), "p99_msg_ms": quantile(&mut per_message, 0.99),
           "p50_batch_ms": quantile(&mut batches, 0.5), "p99_batch_ms": quantile(&mut batches, 0.99),
           "failures": failures})
}

/// A PostgreSQL row: fresh marks and balances tables (created on the server directly).
async fn postgres(url: &str, proxy: &DelayProxy, case: &Case<'_>, tag: &str) -> Result<Value> {
    let (setup, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| BenchError::step("PostgreSQL", e))?;
    let conn = tokio::spawn(conn);
    let balances = format!("bal_{tag}");
    setup
        .batch_execute(&format!(
            "CREATE TABLE {balances} (account text PRIMARY KEY, balance bigint NOT NULL)"
        ))
        .await
        .map_err(|e| BenchError::step("PostgreSQL", e))?;
    drop(setup);
    let _ = conn.await;
    let retention =
        Retention::unchecked(Duration::from_secs(86_400)).map_err(BenchError::failed)?;
    let store = PgStore::from_url(&through(url, proxy)?, Tls::Disabled, retention)
        .and_then(|s| s.with_table(&format!("marks_{tag}")))
        .map_err(BenchError::failed)?;
    store.create_table().await.map_err(BenchError::failed)?;
    let upsert = format!(
        "INSERT INTO {balances} (account, balance) VALUES ($1, 1) \
         ON CONFLICT (account) DO UPDATE SET balance = {balances}.balance + 1"
    );
    let plan = |e: &Derived| {
        let effect = SqlEffect::new(upsert.clone()).bind(account(e)?);
        Ok(Plan::from(vec![effect]))
    };
    Ok(measure(&Deduplicator::new(spec()?, store), plan, proxy, case).await)
}

/// A Valkey row: a fresh prefix for the marks, the balances as hashes of their own.
async fn valkey(url: &str, proxy: &DelayProxy, case: &Case<'_>, tag: &str) -> Result<Value> {
    let retention =
        Retention::unchecked(Duration::from_secs(86_400)).map_err(BenchError::failed)?;
    let store = lambda_dedup_valkey::ValkeyStore::from_url(&through(url, proxy)?, retention)
        .and_then(|s| s.with_prefix(&format!("mark:{tag}:")))
        .map_err(BenchError::failed)?;
    let plan = |e: &Derived| {
        let key = format!("bal:{tag}:{}", account(e)?);
        Ok(Plan::from(vec![ValkeyEffect::hincr_by(key, "balance", 1)]))
    };
    Ok(measure(&Deduplicator::new(spec()?, store), plan, proxy, case).await)
}

/// Every row, printed as it is measured; then the table written into `DOCS/BENCHMARKS.md`.
pub(crate) async fn run(pg_url: &str, valkey_url: &str, n: usize, docs: &Path) -> Result<()> {
    let mut rows = Vec::new();
    for batch in BATCHES {
        for (store, url) in [("postgres", pg_url), ("valkey", valkey_url)] {
            let (_, upstream) = server(url)?;
            let delays = Delays::new(Latency::Calibrated { seed: SEED });
            let proxy = DelayProxy::start(upstream, delays).await?;
            for flow in [Flow::PerMessage, Flow::Batch] {
                for workload in WORKLOADS {
                    let case = Case {
                        store,
                        batch,
                        flow,
                        workload,
                        n,
                    };
                    let tag = format!("b{batch}_{}_{workload}", flow.name());
                    let row = match store {
                        "postgres" => postgres(url, &proxy, &case, &tag).await?,
                        _ => valkey(url, &proxy, &case, &tag).await?,
                    };
                    println!("{row}");
                    rows.push(row);
                }
            }
        }
    }
    let path = docs.join("BENCHMARKS.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, splice(&doc, &table(&rows))).map_err(BenchError::failed)
}

/// The rows as a Markdown table.
fn table(rows: &[Value]) -> String {
    let mut md = String::from(
        "| store | batch | mode | workload | msgs/s | requests/msg | p50 message ms | p99 message ms | p50 batch ms | p99 batch ms | failures |\n\
         | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {} |\n",
            r["store"].as_str().unwrap_or(""),
            r["batch"],
            r["mode"].as_str().unwrap_or(""),
            r["workload"].as_str().unwrap_or(""),
            f("msgs_per_s"),
            f("requests_per_msg"),
            f("p50_msg_ms"),
            f("p99_msg_ms"),
            f("p50_batch_ms"),
            f("p99_batch_ms"),
            r["failures"]
        ));
    }
    md
}

/// `doc` with the table between the row markers replaced by `table`; without the markers, a
/// section with them appended.
fn splice(doc: &str, table: &str) -> String {
    if let (Some(b), Some(e)) = (doc.find(ROWS_BEGIN), doc.find(ROWS_END))
        && b < e
    {
        return format!("{}{ROWS_BEGIN}\n\n{table}\n{}", &doc[..b], &doc[e..]);
    }
    format!(
        "{}\n{SECTION_BEGIN}\n## PostgreSQL and Valkey stores\n\n{ROWS_BEGIN}\n\n{table}\n{ROWS_END}\n{SECTION_END}\n",
        doc.trim_end()
    )
}

/// The stores' section of `old` (a previous `BENCHMARKS.md`), for `bench report` to keep when
/// it rewrites the file; empty if there is none.
pub(crate) fn section(old: &str) -> &str {
    crate::table::kept(old, (SECTION_BEGIN, SECTION_END))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_replaces_the_old_one_and_keeps_the_rest() {
        let first = splice("# Benchmarks\n\ntext\n", "| a |\n");
        assert!(first.contains(SECTION_BEGIN) && first.contains("| a |"));
        let second = splice(&first, "| b |\n");
        assert!(second.contains("| b |") && !second.contains("| a |"));
        assert!(second.starts_with("# Benchmarks\n\ntext\n"));
        assert_eq!(section(&second).matches(ROWS_BEGIN).count(), 1);
        assert_eq!(section("no section"), "");
    }

    #[test]
    fn urls_are_pointed_at_the_proxy_host_and_port() {
        let (authority, addr) =
            server("postgresql://postgres@127.0.0.1:5999/postgres").expect("parses");
        assert_eq!((authority.as_str(), addr.port()), ("127.0.0.1:5999", 5999));
        assert!(server("redis://localhost:6379").is_err());
        assert!(server("nonsense").is_err());
    }
}
