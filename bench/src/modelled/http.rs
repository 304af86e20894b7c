//! `bench http MESSAGES SEED DOCS`: the HTTP door beside Powertools' API Gateway idempotency on
//! the modelled bed. Our side is the door as it is built: `orders-api`'s service (one-item mode:
//! the order its own mark), the same order on the transaction path (`http`), and that path with
//! two effects (the order and a stock update), each on a
//! [`ModelledStore`] (every store call held for the requests the DynamoDB store would send),
//! `MESSAGES` first requests under new keys one after another (a person waits for each), then
//! the same requests again in another container (replays). Each request is timed, and its bound is its own
//! requests' draws (the door's calls wait on each other). Powertools' side is computed from a
//! fresh stream of the same seed (`idempotent` on an API Gateway handler with the DynamoDB
//! persistence layer): a first request is the in-progress `PutItem`, the effects one after
//! another (single writes, the faster way for it: a transaction of 2 effects draws
//! ~24 ms), the `UpdateItem` to completed; a replay one request (the conditional `PutItem` that
//! fails and returns the record).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lambda_dedup::{Effect, Item, OwnerToken};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::http::{HttpConfig, Reply};
use lambda_dedup_runtime::lambda_http::tower::ServiceExt as _;
use lambda_dedup_runtime::lambda_http::{self, Body, Request, RequestExt as _};
use lambda_dedup_runtime::store::Items;
use lambda_dedup_runtime::{Dedup, HandlerError, HttpEvent, HttpService};
use local_dynamodb::latency::{Delays, Latency, calibrated};
use serde_json::{Value, json};

use super::bound;
use super::draws::Recorder;
use super::store::ModelledStore;
use crate::Result;
use crate::error::BenchError;
use crate::{place, table};

pub(crate) const BEGIN: &str = "<!-- http:begin -->";
pub(crate) const END: &str = "<!-- http:end -->";

/// The door's tables: the orders, and the stock the two-effect door also updates.
const ORDERS: &str = "orders";
const STOCK: &str = "stock";

/// The environment the door is built from (its caller from a header, as `orders-api`'s tests).
fn env() -> lambda_dedup_runtime::Env {
    lambda_dedup_runtime::testing::env(&[
        ("ORDERS_TABLE", ORDERS),
        ("HTTP_CALLER_FROM", "header:x-caller"),
        ("HTTP_CALLER_FRONT", "alb"),
    ])
}

/// The two-effect work: `orders-api`'s order, and the SKU's stock taken down with it.
fn two_effects(
    e: HttpEvent<orders_api::order::NewOrder>,
) -> std::result::Result<Reply, HandlerError> {
    let sku = e.payload.sku.clone();
    let quantity = u64::from(e.payload.quantity);
    let reply = orders_api::order::create(ORDERS, e)?;
    Ok(reply.effect(
        Effect::update(STOCK, Item::new().with("sku", sku.as_str()))
            .expression("ADD #r :q")
            .name("#r", "reserved")
            .value(":q", quantity),
    ))
}

/// The doors measured: `orders-api`'s (one-item mode: the order its own mark, one `PutItem`),
/// the same order on the transaction path (`.http`: the mark and the order in one
/// `TransactWriteItems`), and the two-effect door on the transaction path. Each: its name in
/// the table, its effects, whether it is one-item mode.
const DOORS: [(&str, usize, bool); 3] = [
    (
        "one item, its own mark (`orders-api`, `http_create_once`)",
        1,
        true,
    ),
    ("one effect, transaction path (`http`)", 1, false),
    ("two effects, transaction path (`http`)", 2, false),
];

/// The memory store the doors share, as the function's settings configure it
/// (`testing::memory_store`'s), with the doors' tables.
fn memory() -> Result<MemoryStore> {
    let dedup = Dedup::read(&env(), orders_api::FUNCTION).map_err(BenchError::failed)?;
    let settings = dedup.settings();
    let memory = MemoryStore::new(settings.retention)
        .with_lease(settings.lease)
        .with_clock_skew(settings.clock_skew);
    memory.create_table(ORDERS, "order_id");
    memory.create_table(STOCK, "sku");
    Ok(memory)
}

/// A container of a door on `memory`, behind its own modelled store (its requests drawn from
/// `delays`) and with its own warm cache: `orders-api`'s (one-item mode), or `.http` with one
/// effect (`orders-api`'s order) or two.
fn door(
    delays: &Arc<Delays>,
    memory: &MemoryStore,
    effects: usize,
    one_item: bool,
) -> Result<(HttpService, Arc<Recorder>)> {
    let env = env();
    let dedup = Dedup::read(&env, orders_api::FUNCTION).map_err(BenchError::failed)?;
    let modelled = ModelledStore::new(memory.clone(), Recorder::new(delays.clone()));
    let recorder = modelled.recorder();
    let dedup = dedup.on(Items::with_tables(modelled, Arc::new(memory.clone())));
    let config = HttpConfig::read(&env).map_err(BenchError::failed)?;
    let service = match (one_item, effects) {
        (true, _) => orders_api::service(dedup, config).map_err(BenchError::failed)?,
        (false, 1) => dedup
            .http(config, |e: HttpEvent<orders_api::order::NewOrder>| {
                orders_api::order::create(ORDERS, e)
            })
            .map_err(BenchError::failed)?,
        (false, _) => dedup
            .http(config, two_effects)
            .map_err(BenchError::failed)?,
    };
    Ok((service, recorder))
}

/// The `i`-th request: a POST of an order under its own key, from an ALB, its own request id.
fn request(i: usize, attempt: usize) -> Result<Request> {
    let body = format!(r#"{{"sku":"sku-{}","quantity":1}}"#, i % 100);
    let r = lambda_http::http::Request::builder()
        .method("POST")
        .uri("/orders")
        .header("idempotency-key", format!("\"k-{i}\""))
        .header("x-caller", "shop-1")
        .body(Body::Text(body))
        .map_err(BenchError::failed)?;
    let mut context = lambda_dedup_runtime::lambda_runtime::Context::default();
    context.request_id = format!("req-{i}-{attempt}-{}", OwnerToken::random().as_str());
    Ok(
        r.with_request_context(lambda_http::request::RequestContext::Alb(Default::default()))
            .with_lambda_context(context),
    )
}

/// The percentile `q` of `xs` in ms (sorted in place).
fn pick(xs: &mut [Duration], q: f64) -> f64 {
    xs.sort();
    let at = ((q * xs.len() as f64) as usize).min(xs.len().saturating_sub(1));
    xs.get(at).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// `n` requests, one after another, each in its own place: their latencies, their bounds, the
/// requests sent per operation, and the statuses seen.
async fn pass(
    service: &HttpService,
    store: &Recorder,
    n: usize,
    attempt: usize,
    replayed: bool,
) -> Result<Value> {
    store.take();
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n {
        let r = request(i, attempt)?;
        let t = Instant::now();
        let answer = place::in_batch(i, service.clone().oneshot(r))
            .await
            .map_err(|e| BenchError::Unexpected(format!("the door failed: {e}")))?;
        latencies.push(t.elapsed());
        let seen = answer.headers().contains_key("idempotent-replayed");
        if answer.status().as_u16() != 201 || seen != replayed {
            return Err(BenchError::Unexpected(format!(
                "request {i}: {} (replayed: {seen}), not 201 (replayed: {replayed})",
                answer.status()
            )));
        }
    }
    // The door's EMF lines, one a request, kept off stdout and dropped.
    lambda_dedup_runtime::emf::take_captured();
    let draws = store.take();
    let mut bounds = bound::per_batch(&draws);
    let mut by_operation = std::collections::BTreeMap::<&str, f64>::new();
    for d in &draws {
        *by_operation.entry(d.operation).or_default() += 1.0 / n as f64;
    }
    Ok(json!({
        "p50_ms": pick(&mut latencies, 0.5), "p99_ms": pick(&mut latencies, 0.99),
        "bound_p50_ms": pick(&mut bounds, 0.5), "bound_p99_ms": pick(&mut bounds, 0.99),
        "requests_per_request": draws.len() as f64 / n as f64, "by_operation": by_operation,
    }))
}

/// Powertools' `n` first requests (with `effects` effects) then `n` replays, on a fresh
/// stream: each request's draws summed.
fn powertools(seed: u64, n: usize, effects: usize) -> (Value, Value) {
    let delays = Delays::new(Latency::Calibrated { seed });
    let effect_ops = ["PutItem", "UpdateItem"];
    let mut first: Vec<Duration> = (0..n)
        .map(|_| {
            let mut d = delays.next("PutItem", 1);
            for op in effect_ops.iter().take(effects) {
                d += delays.next(op, 1);
            }
            d + delays.next("UpdateItem", 1)
        })
        .collect();
    let mut replay: Vec<Duration> = (0..n).map(|_| delays.next("PutItem", 1)).collect();
    let row = |xs: &mut Vec<Duration>, requests: usize| {
        json!({"bound_p50_ms": pick(xs, 0.5), "bound_p99_ms": pick(xs, 0.99),
               "requests_per_request": requests})
    };
    (row(&mut first, 2 + effects), row(&mut replay, 1))
}

/// `bench http`: both doors, first requests and replays, our side and Powertools'.
pub(crate) async fn run(n: usize, seed: u64, docs: &Path) -> Result<()> {
    // The requests run on this thread (not spawned), so it keeps their EMF lines.
    lambda_dedup_runtime::emf::capture();
    let mut rows = Vec::new();
    for (name, effects, one_item) in DOORS {
        let delays = Arc::new(Delays::new(Latency::Calibrated { seed }));
        let memory = memory()?;
        let (service, store) = door(&delays, &memory, effects, one_item)?;
        let first = pass(&service, &store, n, 0, false).await?;
        // The retries reach another container (its own warm cache, empty): the container that
        // answered first would answer them from its cache, with no request.
        let (other, other_store) = door(&delays, &memory, effects, one_item)?;
        let replay = pass(&other, &other_store, n, 1, true).await?;
        let (pt_first, pt_replay) = powertools(seed, n, effects);
        for (case, ours, theirs) in [("first", first, pt_first), ("replay", replay, pt_replay)] {
            println!(
                "bench: http {name} {case:<6} p50 {:>6.1} ms p99 {:>6.1} ms; Powertools' bound p50 {:>6.1} ms",
                ours["p50_ms"].as_f64().unwrap_or(0.0),
                ours["p99_ms"].as_f64().unwrap_or(0.0),
                theirs["bound_p50_ms"].as_f64().unwrap_or(0.0),
            );
            rows.push(
                json!({"door": name, "effects": effects, "one_item": one_item,
                             "case": case, "requests": n, "ours": ours, "powertools": theirs}),
            );
        }
    }
    let path = docs.join("BENCHMARKS.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let md = table::replace(&doc, (BEGIN, END), &render(&rows, n, seed));
    std::fs::write(&path, md).map_err(BenchError::failed)?;
    let raw = json!({"config": {"requests": n, "seed": seed}, "rows": rows});
    let text = serde_json::to_string_pretty(&raw).map_err(BenchError::failed)?;
    std::fs::write(docs.join("benchmarks-http.json"), text).map_err(BenchError::failed)
}

/// The model's median of one `operation` of `items` items, ms.
fn median(operation: &str, items: usize) -> f64 {
    calibrated(operation, items).map_or(0.0, |f| f.at(0.0))
}

/// A target's verdict.
fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

/// The target row of `case`: its bound p50 at most 1.1 × one `request` (the model's median,
/// `median_ms`), judged, its measured p50 beside it.
fn within_a_tenth(
    md: &mut String,
    case: &str,
    request: &str,
    median_ms: f64,
    (p50, measured): (f64, f64),
) {
    let _ = writeln!(
        md,
        "| {case}: p50 ≤ 1.1 × one {request} ({:.1} ms) | {p50:.1} ms ({measured:.1}) | {} |",
        1.1 * median_ms,
        verdict(p50 <= 1.1 * median_ms)
    );
}

/// The section: the table, then the issue's targets for the door, met or missed.
pub(crate) fn render(rows: &[Value], n: usize, seed: u64) -> String {
    let build = table::build();
    let mut md = table::opened(
        BEGIN,
        "The HTTP door beside Powertools' API Gateway idempotency (modelled bed)",
    );
    let _ = writeln!(
        md,
        "Measured by `cargo xtask bench --http-only` (`bench/src/modelled/http.rs`), this time \
         from a {build} build: the HTTP door as it is built (`orders-api`'s service, in one-item \
         mode: the order its own mark, one conditional `PutItem`; the same order on the \
         transaction path, `http`, the mark and the order in one `TransactWriteItems`; and that \
         path with two effects, the order and the SKU's stock), on \
         the memory store behind the modelled bed's store (every store call held for the \
         requests `DynamoStore` would send, each for its draw of the calibrated model, seed \
         {seed}); {n} first requests under new keys, one after another, then the same {n} \
         again in another container (replays, each answered with `Idempotent-Replayed: true`; \
         the container that answered first answers them from its warm cache, no request). *Measured* is each \
         request's time through the door (the bed holds each draw to within tens of µs); *bound* its \
         requests' draws summed (the door's calls wait on each other). Powertools (`idempotent` \
         on an API Gateway handler, DynamoDB persistence) is computed from a fresh stream of the \
         same seed: a first request is 3 dependent requests with one effect (in-progress \
         `PutItem`, the effect, `UpdateItem` to completed; not atomic), 4 with two (its effects \
         one after another as single writes, faster in this model than a transaction of 2); a \
         replay 1 (the conditional `PutItem` that fails and returns the record).\n"
    );
    table::head(
        &mut md,
        "| door | case | our requests (by operation) | p50 ms | p99 ms | bound p50 ms | bound p99 ms | Powertools' requests | Powertools' bound p50 ms | Powertools' bound p99 ms | Powertools' bound p50 ÷ ours |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    );
    let get = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    for r in rows {
        let (ours, pt) = (&r["ours"], &r["powertools"]);
        let ops: Vec<String> = ours["by_operation"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(op, k)| format!("{op} {:.2}", k.as_f64().unwrap_or(0.0)))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {:.2}: {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {:.2} |",
            r["door"].as_str().unwrap_or(""),
            r["case"].as_str().unwrap_or(""),
            get(ours, "requests_per_request"),
            ops.join(", "),
            get(ours, "p50_ms"),
            get(ours, "p99_ms"),
            get(ours, "bound_p50_ms"),
            get(ours, "bound_p99_ms"),
            pt["requests_per_request"],
            get(pt, "bound_p50_ms"),
            get(pt, "bound_p99_ms"),
            get(pt, "bound_p50_ms") / get(ours, "bound_p50_ms").max(f64::MIN_POSITIVE),
        );
    }
    let find = |effects: u64, one_item: bool, case: &str| {
        rows.iter()
            .find(|r| r["effects"] == effects && r["one_item"] == one_item && r["case"] == case)
    };
    let put = median("PutItem", 1);
    let _ = writeln!(
        md,
        "\nAgainst the issue's targets: judged on the p50 of the bound (the door's requests' \
         draws: the protocol's cost, without the bed's timer and build), the measured p50 \
         beside it.\n"
    );
    table::head(
        &mut md,
        "| target | bound p50 (measured p50) | verdict |",
        "| --- | --- | --- |",
    );
    // Our bound's p50, and the measured one beside it.
    let p50s = |r: &Value| (get(&r["ours"], "bound_p50_ms"), get(&r["ours"], "p50_ms"));
    if let Some(r) = find(1, true, "first") {
        let ((p50, measured), pt) = (p50s(r), get(&r["powertools"], "bound_p50_ms"));
        let case = "first request, one item";
        within_a_tenth(&mut md, case, "`PutItem`", put, (p50, measured));
        let _ = writeln!(
            md,
            "| first request, one item: ≥ 2.5 × faster than Powertools' | {:.2} × ({pt:.1} ms ÷ {p50:.1} ms) | {} |",
            pt / p50.max(f64::MIN_POSITIVE),
            verdict(pt >= 2.5 * p50)
        );
    }
    if let Some(r) = find(2, false, "first") {
        let ((p50, measured), pt) = (p50s(r), get(&r["powertools"], "bound_p50_ms"));
        // The mark and the two effects in one transaction.
        let tx = median("TransactWriteItems", 3);
        let (case, one) = (
            "first request, two effects",
            "`TransactWriteItems` of 3 items",
        );
        within_a_tenth(&mut md, case, one, tx, (p50, measured));
        let _ = writeln!(
            md,
            "| first request, two effects: no slower than Powertools' | {p50:.1} ms ({measured:.1}) vs {pt:.1} ms | {} |",
            verdict(p50 <= pt)
        );
    }
    if let Some(r) = find(1, true, "replay") {
        within_a_tenth(&mut md, "replay", "`PutItem`", put, p50s(r));
    }
    let _ = writeln!(md, "\n{END}");
    md
}
