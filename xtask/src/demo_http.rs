//! The demo's HTTP `Idempotency-Key` door: `orders-api` over real HTTP through `cargo lambda
//! watch`'s Function URL front — a POST, its retry answered with the stored response
//! (`Idempotent-Replayed: true`), 422 for the key reused with another body, another key's own
//! order (each order its key's own mark) — and the p50 of a replay, timed over HTTP.
//!
//! Every documented answer (400s, 401, 413, caller scoping, AWS's API Gateway v2 payload) is
//! checked by `e2e_http`; the demo walks through the main ones.

use std::time::Instant;

use crate::Result;
use crate::stack::{Stack, TABLE_ORDERS};
use crate::workload::Checks;

/// The caller the demo's requests name (`HTTP_CALLER_FROM=header:x-caller-id` locally).
const CALLER: &str = "shop-demo";
/// Replays timed for the p50.
const TIMED_REPLAYS: usize = 50;

/// An answer as the demo judges it: status, whether replayed, the body.
type Answer = (u16, bool, String);

async fn post(stack: &Stack, key: &str, body: &str) -> Result<Answer> {
    let resp = reqwest::Client::new()
        .post(stack.orders_url())
        .header("content-type", "application/json")
        .header("idempotency-key", format!("\"{key}\""))
        .header("x-caller-id", CALLER)
        .body(body.to_owned())
        .send()
        .await
        .map_err(|e| format!("orders-api: {e}"))?;
    let status = resp.status().as_u16();
    let replayed = resp
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    Ok((status, replayed, resp.text().await.unwrap_or_default()))
}

/// Runs the door's walk-through and adds its checks.
pub(crate) async fn run(stack: &Stack, checks: &mut Checks) -> Result<()> {
    println!(
        "\n== the HTTP Idempotency-Key door (orders-api, real HTTP through the Function URL front)"
    );
    let run = std::process::id();
    let key = format!("demo-order-{run}");
    let body = r#"{"sku":"book-1","quantity":2}"#;
    let first = post(stack, &key, body).await?;
    checks.check(
        format!("POST /orders: {} (documented: 201)", first.0),
        first.0 == 201 && !first.1,
    );
    let retry = post(stack, &key, body).await?;
    checks.check(
        format!(
            "its retry: {}{} with the identical body (documented: the stored 201, Idempotent-Replayed: true)",
            retry.0,
            if retry.1 { " replayed" } else { "" }
        ),
        retry.0 == 201 && retry.1 && retry.2 == first.2,
    );
    let other = post(stack, &key, r#"{"sku":"book-1","quantity":5}"#).await?;
    checks.check(
        format!(
            "the key reused with another body: {} (documented: 422)",
            other.0
        ),
        other.0 == 422,
    );

    // The order is the key's own mark (one conditional PutItem; no mark, so no key is ever in
    // flight): another key is another order.
    let next_key = format!("demo-next-{run}");
    let after = post(stack, &next_key, body).await?;
    checks.check(
        format!("another key: {} (documented: 201)", after.0),
        after.0 == 201 && !after.1,
    );

    let orders = stack.scan(TABLE_ORDERS).await?;
    let id_of = |b: &str| {
        serde_json::from_str::<serde_json::Value>(b)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_owned))
    };
    let ids = [id_of(&first.2), id_of(&after.2)];
    let stored = |id: &Option<String>| {
        orders
            .iter()
            .filter(|o| {
                id.as_deref()
                    .is_some_and(|id| crate::stack::has(o, "order_id", id))
            })
            .count()
    };
    checks.check(
        format!(
            "the orders table holds each order once ({} and {}), each its key's own mark",
            stored(&ids[0]),
            stored(&ids[1])
        ),
        ids.iter().all(|id| stored(id) == 1),
    );

    // One figure: how long a replay takes, over HTTP through the local front (the Lambda
    // runtime API, the function, one consistent mark read on the local DynamoDB).
    let mut took = Vec::with_capacity(TIMED_REPLAYS);
    for _ in 0..TIMED_REPLAYS {
        let start = Instant::now();
        let got = post(stack, &key, body).await?;
        took.push(start.elapsed());
        if !got.1 {
            return Err(format!("a timed replay was not a replay: {}", got.0));
        }
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "  replay through the door ({TIMED_REPLAYS} over HTTP, local stack): p50 {:.1} ms, p90 {:.1} ms",
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3
    );
    Ok(())
}
