//! The runtime API as Lambda enforces it: a proxy between each function instance and
//! `cargo lambda watch`'s runtime API (`/.rt/<function>/…`), which cargo-lambda 1.9 serves
//! without deadlines (it sends a fixed timeout where Lambda sends the deadline, and waits for an
//! answer forever).
//!
//! - An invocation handed out (`GET …/invocation/next`) gets Lambda's deadline: now plus the
//!   function's `Timeout` in `infra/template.yaml`, as epoch milliseconds in
//!   `Lambda-Runtime-Deadline-Ms`, so the functions read it as they do in Lambda.
//! - An invocation not answered by then is ended as Lambda ends it: its instance is killed (the
//!   supervisor in [`crate::functions`] starts a fresh one), the invocation is answered with a
//!   `Sandbox.Timedout` error (the trigger treats it as a failed invocation: the whole batch comes
//!   back; an HTTP caller gets a 5xx), and a late answer from it is refused.
//!
//! `GET /__timeouts` answers how many invocations of each function timed out (the end-to-end
//! tests of a project read it to see that a deadline was enforced).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::Result;

/// What ends an instance: given the function's name, kills its current instance.
pub type Kill = Box<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct Book {
    /// Invocations handed out and not answered: request id → function.
    open: HashMap<String, String>,
    /// Invocations ended at their deadline: a late answer to one is refused.
    timed_out: HashSet<String>,
    /// Timed-out invocations per function.
    counts: BTreeMap<String, u64>,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    timeouts: BTreeMap<String, Duration>,
    book: Mutex<Book>,
    kill: Kill,
}

/// The proxy, serving until dropped.
#[derive(Debug)]
pub struct RuntimeApi {
    addr: std::net::SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl RuntimeApi {
    /// Starts the proxy to `upstream` (`http://host:port` of `cargo lambda watch`), ending each
    /// function's invocations after its `timeouts` entry (a function without one: Lambda's
    /// default, 3 s) with `kill`.
    pub async fn start(
        upstream: String,
        timeouts: BTreeMap<String, Duration>,
        kill: Kill,
    ) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("runtime API proxy: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            timeouts,
            book: Mutex::new(Book::default()),
            kill,
        });
        let app = axum::Router::new().fallback(proxy).with_state(shared);
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("local-lambda: runtime API proxy: {e}");
            }
        });
        Ok(Self { addr, server })
    }

    /// `http://127.0.0.1:<port>`: the functions' `AWS_LAMBDA_RUNTIME_API` is this plus
    /// `/.rt/<function>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn book(s: &Shared) -> std::sync::MutexGuard<'_, Book> {
    s.book.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `/.rt/<function>/2018-06-01/runtime/invocation/<id>/<what>`: the function and the rest.
fn split(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix("/.rt/")?.split_once('/')
}

/// The request id of an answer (`…/invocation/<id>/response` or `…/error`).
fn answered(rest: &str) -> Option<&str> {
    let rest = rest.strip_prefix("2018-06-01/runtime/invocation/")?;
    let (id, what) = rest.split_once('/')?;
    (what == "response" || what == "error").then_some(id)
}

async fn proxy(State(s): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if path == "/__timeouts" {
        let counts = book(&s).counts.clone();
        return axum::Json(counts).into_response();
    }
    let Some((function, rest)) = split(&path) else {
        return (StatusCode::NOT_FOUND, "not a runtime API path").into_response();
    };
    let function = function.to_owned();
    if let Some(id) = answered(rest) {
        let mut b = book(&s);
        if b.timed_out.contains(id) {
            return (
                StatusCode::GONE,
                "the invocation timed out; its answer is not taken",
            )
                .into_response();
        }
        b.open.remove(id);
    }
    let next = parts.method == axum::http::Method::GET && rest.ends_with("/invocation/next");
    let Ok(body) = axum::body::to_bytes(body, 64 << 20).await else {
        return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
    };
    let mut upstream = s
        .http
        .request(parts.method.clone(), format!("{}{path}", s.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.send().await {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = answer.status();
    let mut headers = answer.headers().clone();
    let Ok(bytes) = answer.bytes().await else {
        return (StatusCode::BAD_GATEWAY, "upstream body").into_response();
    };
    for h in [
        axum::http::header::CONTENT_LENGTH,
        axum::http::header::TRANSFER_ENCODING,
        axum::http::header::CONNECTION,
    ] {
        headers.remove(h);
    }
    if next && status.is_success() {
        let timeout = s
            .timeouts
            .get(&function)
            .copied()
            .unwrap_or(Duration::from_secs(3));
        let deadline = SystemTime::now() + timeout;
        let ms = deadline
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&ms.to_string()) {
            headers.insert("lambda-runtime-deadline-ms", v);
        }
        if let Some(id) = headers
            .get("lambda-runtime-aws-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
        {
            book(&s).open.insert(id.clone(), function.clone());
            tokio::spawn(watchdog(s.clone(), function, id, timeout));
        }
    }
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// Ends invocation `id` of `function` at its deadline, unless it was answered.
async fn watchdog(s: Arc<Shared>, function: String, id: String, timeout: Duration) {
    tokio::time::sleep(timeout).await;
    {
        let mut b = book(&s);
        if b.open.remove(&id).is_none() {
            return;
        }
        b.timed_out.insert(id.clone());
        *b.counts.entry(function.clone()).or_default() += 1;
    }
    println!(
        "local-lambda: {function}: invocation {id} timed out after {}s; its instance is replaced, as Lambda does",
        timeout.as_secs()
    );
    (s.kill)(&function);
    let url = format!(
        "{}/.rt/{function}/2018-06-01/runtime/invocation/{id}/error",
        s.upstream
    );
    let error = json!({
        "errorType": "Sandbox.Timedout",
        "errorMessage": format!("Task timed out after {:.2} seconds", timeout.as_secs_f64()),
    });
    if let Err(e) = s
        .http
        .post(url)
        .header("lambda-runtime-function-error-type", "Sandbox.Timedout")
        .json(&error)
        .send()
        .await
    {
        eprintln!("local-lambda: {function}: could not answer the timed-out invocation: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_api_paths_name_the_function_and_the_answer() {
        let path = "/.rt/some-function/2018-06-01/runtime/invocation/abc-1/response";
        let (function, rest) = split(path).expect("a runtime path");
        assert_eq!(function, "some-function");
        assert_eq!(answered(rest), Some("abc-1"));
        let (_, rest) =
            split("/.rt/f/2018-06-01/runtime/invocation/abc-1/error").expect("a runtime path");
        assert_eq!(answered(rest), Some("abc-1"));
        let (_, rest) = split("/.rt/f/2018-06-01/runtime/invocation/next").expect("next");
        assert_eq!(answered(rest), None);
        assert_eq!(split("/2015-03-31/functions/f/invocations"), None);
    }
}
