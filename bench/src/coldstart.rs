//! Cold start and peak memory of a function binary, through a minimal Lambda runtime API: the
//! time from spawning the process to its first `GET /runtime/invocation/next` (it has read its
//! configuration, built its clients and is ready for work), then one SQS batch of 10 served and
//! answered, then the process's peak RSS (`VmHWM`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::Result;
use crate::error::BenchError;

#[derive(Default)]
struct Shared {
    first_next: Option<Instant>,
    served: bool,
    responded: Option<Value>,
}

type S = Arc<Mutex<Shared>>;

fn lock(s: &S) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

async fn next(State(s): State<S>) -> (HeaderMap, String) {
    let first = {
        let mut g = lock(&s);
        g.first_next.get_or_insert_with(Instant::now);
        let first = !g.served;
        g.served = true;
        first
    };
    if !first {
        // Hold the second request for work until the process is stopped.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let records: Vec<Value> = (0..10)
        .map(|i| {
            let body = json!({"specversion": "1.0", "type": "credit", "source": "/coldstart",
                "id": format!("cold-{i}-{}", SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)),
                "tenantid": "t", "data": {"account": format!("acct-{i}"), "amount": 1}});
            json!({"messageId": format!("m{i}"), "receiptHandle": "r", "body": body.to_string(), "attributes": {},
                   "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:q", "awsRegion": "us-east-1"})
        })
        .collect();
    let deadline = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() + 30_000)
        .unwrap_or(0);
    let mut h = HeaderMap::new();
    let mut put = |k: &'static str, v: String| {
        if let Ok(v) = v.parse() {
            h.insert(k, v);
        }
    };
    put("lambda-runtime-aws-request-id", "req-1".into());
    put("lambda-runtime-deadline-ms", deadline.to_string());
    put(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:000000000000:function:f".into(),
    );
    put(
        "lambda-runtime-trace-id",
        "Root=1-00000000-000000000000000000000000".into(),
    );
    (h, json!({ "Records": records }).to_string())
}

async fn respond(State(s): State<S>, body: String) -> &'static str {
    lock(&s).responded = Some(serde_json::from_str(&body).unwrap_or(Value::Null));
    "{}"
}

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub(crate) async fn run(binary: &str, endpoint: &str, runs: usize) -> Result<()> {
    let client = crate::client(endpoint);
    lambda_dedup_dynamodb::provision::create_mark_table(&client, "cold-marks", false)
        .await
        .map_err(BenchError::failed)?;
    crate::table(&client, "cold-balances", "account").await?;
    let mut cold = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..runs {
        let s: S = Arc::default();
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(respond),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(respond))
            .with_state(s.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(BenchError::failed)?;
        let addr = listener.local_addr().map_err(BenchError::failed)?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let spawned = Instant::now();
        let mut child = std::process::Command::new(binary)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "ledger-projector")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
            .env("DEDUP_NAMESPACE", "bench")
            .env("DEDUP_MARK_TABLE", "cold-marks")
            .env("BALANCES_TABLE", "cold-balances")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| BenchError::step(binary, e))?;
        let limit = Instant::now() + Duration::from_secs(30);
        let mut outcome = Err(BenchError::Unexpected(
            "the function never asked for work".to_owned(),
        ));
        while Instant::now() < limit {
            let (first, answered) = {
                let g = lock(&s);
                (g.first_next, g.responded.clone())
            };
            if let (Some(first), Some(answer)) = (first, answered) {
                if answer.get("batchItemFailures").is_none() {
                    outcome = Err(BenchError::Unexpected(format!(
                        "unexpected answer {answer}"
                    )));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                outcome = Ok((first - spawned, vm_hwm_kb(child.id())));
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        server.abort();
        let (c, r) = outcome?;
        cold.push(c.as_secs_f64() * 1000.0);
        rss.push(r.unwrap_or(0) as f64 / 1024.0);
    }
    cold.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({"mode": "coldstart", "runs": runs, "cold_start_ms_median": cold[cold.len() / 2],
               "cold_start_ms_min": cold[0], "peak_rss_mb_max": rss.iter().copied().fold(0.0, f64::max)})
    );
    Ok(())
}
