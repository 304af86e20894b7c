//! The runtime API of one execution environment that runs several invocations at once, as
//! Lambda Managed Instances do: any number of `GET …/invocation/next` long polls open together
//! (the runtime's workers, `AWS_LAMBDA_MAX_CONCURRENCY` of them under `lambda_runtime`'s
//! `run_concurrent`), each handed the next queued invocation with its own deadline
//! (`Lambda-Runtime-Deadline-Ms`, epoch milliseconds, from the moment it is handed out), and an
//! answer after that deadline recorded as late, as Lambda refuses it.
//!
//! [`ConcurrentApi::invoke`] queues one invocation and waits for its answer (or its deadline);
//! the caller starts many of them together and reads what each got, and
//! [`ConcurrentApi::most_in_flight`] how many ran at once. It serves on loopback until dropped;
//! point a function at it with `AWS_LAMBDA_RUNTIME_API` ([`ConcurrentApi::runtime_api`]).
//! Unlike [`crate::runtime_api`], nothing is killed at a deadline: the test reads when each
//! invocation answered.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{Notify, oneshot};

use crate::Result;

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The function's response body (JSON).
    Response(serde_json::Value),
    /// The function reported an error (its JSON body).
    Error(serde_json::Value),
    /// Not answered by its deadline.
    TimedOut,
}

/// One invocation as the environment saw it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// Its request id.
    pub request_id: String,
    /// When a worker took it (`/next` answered).
    pub handed_out_at: SystemTime,
    /// Its deadline, as sent.
    pub deadline: SystemTime,
    /// When it was answered (`None`: never, by its deadline).
    pub answered_at: Option<SystemTime>,
    /// What it answered.
    pub answer: Answer,
}

impl Invocation {
    /// Answered before its own deadline.
    pub fn answered_in_time(&self) -> bool {
        self.answered_at.is_some_and(|at| at <= self.deadline)
    }
}

struct Queued {
    request_id: String,
    payload: serde_json::Value,
    timeout: Duration,
    handed_out: oneshot::Sender<(SystemTime, SystemTime)>,
    answered: oneshot::Sender<(SystemTime, Answer)>,
}

struct Open {
    answered: oneshot::Sender<(SystemTime, Answer)>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<VecDeque<Queued>>,
    queued: Notify,
    open: Mutex<HashMap<String, Open>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    next_id: AtomicU64,
}

/// The runtime API, serving until dropped.
#[derive(Debug)]
pub struct ConcurrentApi {
    addr: std::net::SocketAddr,
    shared: Arc<SharedHandle>,
    server: tokio::task::JoinHandle<()>,
}

/// [`Shared`] behind a name `Debug` can print.
struct SharedHandle(Arc<Shared>);

impl std::fmt::Debug for SharedHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConcurrentApi")
    }
}

impl Drop for ConcurrentApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

const PREFIX: &str = "/2018-06-01/runtime";

impl ConcurrentApi {
    /// Starts serving on a free loopback port.
    pub async fn start() -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("concurrent runtime API: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route(&format!("{PREFIX}/invocation/next"), get(next))
            .route(
                &format!("{PREFIX}/invocation/{{id}}/response"),
                post(response),
            )
            .route(&format!("{PREFIX}/invocation/{{id}}/error"), post(error))
            .route(&format!("{PREFIX}/init/error"), post(init_error))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            shared: Arc::new(SharedHandle(shared)),
            server,
        })
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn runtime_api(&self) -> String {
        self.addr.to_string()
    }

    /// Queues an invocation with `payload`, its deadline `timeout` after a worker takes it, and
    /// waits until it is answered or its deadline (plus `grace`, to see a late answer) passes.
    /// An invocation no worker takes within `timeout` counts as timed out, never handed out.
    pub async fn invoke(&self, payload: serde_json::Value, timeout: Duration) -> Invocation {
        let shared = &self.shared.0;
        let n = shared.next_id.fetch_add(1, Ordering::SeqCst);
        let request_id = format!("req-{n:05}");
        let (handed_out, taken) = oneshot::channel();
        let (answered, rx) = oneshot::channel();
        let queued = Queued {
            request_id: request_id.clone(),
            payload,
            timeout,
            handed_out,
            answered,
        };
        shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(queued);
        shared.queued.notify_one();
        let never = |at: SystemTime| Invocation {
            request_id: request_id.clone(),
            handed_out_at: at,
            deadline: at,
            answered_at: None,
            answer: Answer::TimedOut,
        };
        let Ok(Ok((handed_out_at, deadline))) = tokio::time::timeout(timeout, taken).await else {
            return never(SystemTime::now());
        };
        let wait = deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default()
            + Duration::from_millis(500);
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok((answered_at, answer))) => Invocation {
                request_id,
                handed_out_at,
                deadline,
                answered_at: Some(answered_at),
                answer,
            },
            _ => Invocation {
                handed_out_at,
                deadline,
                ..never(handed_out_at)
            },
        }
    }

    /// The most invocations handed out and not yet answered at any one time.
    pub fn most_in_flight(&self) -> usize {
        self.shared.0.most_in_flight.load(Ordering::SeqCst)
    }
}

fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

async fn next(State(shared): State<Arc<Shared>>) -> Response {
    loop {
        let notified = shared.queued.notified();
        let taken = shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some(queued) = taken else {
            notified.await;
            continue;
        };
        let now = SystemTime::now();
        let deadline = now + queued.timeout;
        let in_flight = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.most_in_flight.fetch_max(in_flight, Ordering::SeqCst);
        // Open before it is handed out, so an answer however quick finds it.
        shared
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                queued.request_id.clone(),
                Open {
                    answered: queued.answered,
                },
            );
        // The invoker may have given up already (no worker in time): then this one is skipped.
        if queued.handed_out.send((now, deadline)).is_err() {
            shared
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&queued.request_id);
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        return Response::builder()
            .header("Lambda-Runtime-Aws-Request-Id", &queued.request_id)
            .header(
                "Lambda-Runtime-Deadline-Ms",
                epoch_millis(deadline).to_string(),
            )
            .header(
                "Lambda-Runtime-Invoked-Function-Arn",
                "arn:aws:lambda:us-east-1:000000000000:function:local",
            )
            .header(
                "Lambda-Runtime-Trace-Id",
                "Root=1-00000000-000000000000000000000000",
            )
            .header("Content-Type", "application/json")
            .body(Body::from(queued.payload.to_string()))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
}

fn answer(shared: &Shared, id: &str, answer: Answer) -> StatusCode {
    let open = shared
        .open
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(id);
    match open {
        Some(open) => {
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            let _ = open.answered.send((SystemTime::now(), answer));
            StatusCode::ACCEPTED
        }
        None => StatusCode::BAD_REQUEST,
    }
}

fn json(body: &Bytes) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into()))
}

async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    answer(&shared, &id, Answer::Response(json(&body)))
}

async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    answer(&shared, &id, Answer::Error(json(&body)))
}

async fn init_error(body: Bytes) -> StatusCode {
    eprintln!("concurrent runtime API: init error: {}", json(&body));
    StatusCode::ACCEPTED
}
