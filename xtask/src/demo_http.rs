//! The demo's HTTP `Idempotency-Key` door: `orders-api` over real HTTP through `cargo lambda
//! watch`'s Function URL front — a POST, its retry answered with the stored response
//! (`Idempotent-Replayed: true`), 409 while another instance holds the key, 422 for the key
//! reused with another body — and the p50 of a replay, timed over HTTP.
//!
//! Every documented answer (400s, 401, 413, caller scoping, AWS's API Gateway v2 payload) is
//! checked by `e2e_http`; the demo walks through the main ones.

use std::time::{Duration, Instant};

use lambda_dedup::{Claim, DedupKey, Retention, Scope};
use lambda_dedup_dynamodb::DynamoStore;

use crate::Result;
use crate::stack::{Stack, TABLE_MARKS, TABLE_ORDERS};
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

    // Another instance holds a key (its claim, a conditional write on the mark table): a
    // request with that key meanwhile is 409; once released, the retry runs.
    let busy_key = format!("demo-busy-{run}");
    let scope = Scope::new("demo", "orders-api").map_err(|e| e.to_string())?;
    // The door's caller string: its kind and each part prefixed by its length.
    let caller = format!("header:{}:{CALLER}", CALLER.len());
    let dedup_key = DedupKey::new(&scope, &caller, &["idempotency-key", &busy_key]);
    let retention = Retention::unchecked(Duration::from_secs(86_400)).map_err(|e| e.to_string())?;
    let store = DynamoStore::new(stack.dynamodb.clone(), TABLE_MARKS.to_owned(), retention);
    let Claim::Claimed(lease) = store
        .claim(&dedup_key, None, None)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Err("the demo's in-flight key was already taken".into());
    };
    let busy = post(stack, &busy_key, body).await?;
    checks.check(
        format!(
            "the same key while another request holds it: {} (documented: 409, retry-after)",
            busy.0
        ),
        busy.0 == 409,
    );
    store.release(&lease).await.map_err(|e| e.to_string())?;
    let after = post(stack, &busy_key, body).await?;
    checks.check(
        format!(
            "its retry once the first let go: {} (documented: 201)",
            after.0
        ),
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
            "the orders table holds each order once ({} and {}), written in its key's transaction",
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
