//! A local DynamoDB for tests, the demo, chaos, soak and bench: Dynoxide (crate `dynoxide-rs`)
//! (MIT OR Apache-2.0, DynamoDB on SQLite) embedded as a library and served over HTTP on a
//! loopback port, so any AWS SDK client can talk to it.
//!
//! Two ways to run it:
//!
//! - [`shared`]: one server per test binary, in-process, in memory, started on first use. This is
//!   what `cargo test` gets when no endpoint is given.
//! - [`serve`]: the server on a given listener until a shutdown signal, for a process of its own
//!   (`xtask` runs itself as that process, so the chaos runs can freeze, kill and restart it).
//!
//! Dynoxide's HTTP server does not expire TTL items by itself; both ways run its TTL sweep every
//! [`SWEEP_EVERY`], so expired items are deleted (and their deletions appear on the table's
//! stream with the service identity) while a test watches. DynamoDB itself deletes expired items
//! within a few days; code must never depend on the deletion happening, only tests of the
//! stream's shape and of the account (S14) rely on it happening soon.
//!
//! [`items`] reads items back through the AWS SDK, for the checks of the tests and of xtask;
//! [`local_client!`] makes a client of any AWS SDK crate for a local endpoint.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

pub use dynoxide;
pub use dynoxide::Database;

/// A client of the AWS SDK crate `$sdk` (`aws_sdk_sqs`, …) for the local endpoint `$endpoint`
/// (this DynamoDB, the SQS emulator, moto): Region us-east-1, the local stack's credentials.
#[macro_export]
macro_rules! local_client {
    ($sdk:ident, $endpoint:expr) => {
        $sdk::Client::from_conf(
            $sdk::Config::builder()
                .behavior_version($sdk::config::BehaviorVersion::latest())
                .region($sdk::config::Region::new("us-east-1"))
                .credentials_provider($sdk::config::Credentials::new(
                    "local", "local", None, None, "local",
                ))
                .endpoint_url($endpoint)
                .build(),
        )
    };
}

pub mod items;
pub mod kinesis;
pub mod latency;
pub mod meter;
mod moto;
pub mod senders;
pub mod sns;

/// How often expired TTL items are swept.
pub const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// Opens the database: in memory, or in the SQLite file at `path` (created if absent), so that a
/// restarted server finds its tables and items again.
pub fn open(path: Option<&Path>) -> Result<Database, String> {
    match path {
        None => Database::memory().map_err(|e| format!("in-memory database: {e}")),
        Some(p) => {
            let s = p
                .to_str()
                .ok_or_else(|| format!("{} is not UTF-8", p.display()))?;
            Database::new(s).map_err(|e| format!("database {s}: {e}"))
        }
    }
}

/// Serves `db` on `listener` until `shutdown` resolves, sweeping expired TTL items every
/// [`SWEEP_EVERY`]. Must run inside a Tokio runtime.
pub async fn serve(
    listener: tokio::net::TcpListener,
    db: Database,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let sweeper = tokio::spawn(sweep_forever(db.clone()));
    let served = dynoxide::server::serve_with_shutdown(listener, db, shutdown).await;
    sweeper.abort();
    served
}

async fn sweep_forever(db: Database) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let db = db.clone();
        // The sweep takes the database lock page by page; keep it off the async workers.
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || db.sweep_ttl()).await {
            eprintln!("local-dynamodb: TTL sweep failed: {e}");
        }
    }
}

/// A server running on a thread of this process.
#[derive(Debug)]
pub struct InProcess {
    addr: SocketAddr,
}

impl InProcess {
    /// Starts an in-memory server on a free loopback port, on a thread of its own with its own
    /// runtime (so it outlives any test's runtime); it stops when the process exits.
    pub fn start() -> Result<Self, String> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("no free loopback port: {e}"))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| format!("listener address: {e}"))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| format!("listener: {e}"))?;
        let db = open(None)?;
        std::thread::Builder::new()
            .name("local-dynamodb".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return eprintln!("local-dynamodb: no runtime: {e}"),
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => return eprintln!("local-dynamodb: listener: {e}"),
                    };
                    if let Err(e) = serve(listener, db, std::future::pending()).await {
                        eprintln!("local-dynamodb: {e}");
                    }
                });
            })
            .map_err(|e| format!("could not start the server thread: {e}"))?;
        Ok(Self { addr })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The in-process server of this process, started on first use (one per test binary).
///
/// # Panics
/// If it cannot start (no loopback port, no thread): the tests that need it cannot run.
pub fn shared() -> &'static InProcess {
    static SERVER: OnceLock<InProcess> = OnceLock::new();
    SERVER.get_or_init(|| {
        InProcess::start().unwrap_or_else(|e| panic!("could not start the local DynamoDB: {e}"))
    })
}

/// `GetRecords` of a DynamoDB stream, read as JSON rather than through the SDK, with each
/// record's `userIdentity` in the shape Lambda's DynamoDB Streams events carry
/// (`{"type", "principalId"}`).
///
/// Why not the SDK: Dynoxide names the identity's fields `type` and `principalId`, where the
/// DynamoDB Streams API (and so the SDK's parser) has `Type` and `PrincipalId`; through the SDK
/// a TTL deletion's identity reads as empty. See `docs/EMULATORS.md`. This reads both spellings,
/// so it works against DynamoDB too.
///
/// Returns the records and the next shard iterator (`None` once the shard is closed).
pub async fn get_records(
    http: &reqwest::Client,
    endpoint: &str,
    shard_iterator: &str,
    limit: u32,
) -> Result<(Vec<serde_json::Value>, Option<String>), ApiError> {
    let request = serde_json::json!({"ShardIterator": shard_iterator, "Limit": limit});
    let body = call(
        http,
        endpoint,
        "DynamoDBStreams_20120810.GetRecords",
        &request,
    )
    .await?;
    let next = body["NextShardIterator"].as_str().map(str::to_owned);
    let records = body["Records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut r| {
            if let Some(u) = r.get("userIdentity").cloned() {
                let field = |a: &str, b: &str| u.get(a).or_else(|| u.get(b)).cloned();
                r["userIdentity"] = serde_json::json!({
                    "type": field("type", "Type"),
                    "principalId": field("principalId", "PrincipalId"),
                });
            }
            r
        })
        .collect();
    Ok((records, next))
}

/// `target` (`DynamoDB_20120810.CreateTable`, `DynamoDBStreams_20120810.GetRecords`, …) of the
/// DynamoDB JSON API at `endpoint` with `request`, as JSON, under a placeholder signature (the
/// local DynamoDB takes any): its answer, or its error code.
pub async fn call(
    http: &reqwest::Client,
    endpoint: &str,
    target: &str,
    request: &serde_json::Value,
) -> Result<serde_json::Value, ApiError> {
    let response = http
        .post(endpoint)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", target)
        .header("x-amz-date", "20260101T000000Z")
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00",
        )
        .body(request.to_string())
        .send()
        .await
        .map_err(|e| ApiError::Transport(format!("{target}: {e}")))?;
    let ok = response.status().is_success();
    let body: serde_json::Value =
        (response.json().await).map_err(|e| ApiError::Transport(format!("{target}: {e}")))?;
    if !ok {
        let code = body["__type"].as_str().unwrap_or("unknown");
        let code = code.rsplit('#').next().unwrap_or(code).to_owned();
        let message = body["message"].as_str().or(body["Message"].as_str());
        return Err(ApiError::Service(
            code,
            message.unwrap_or_default().to_owned(),
        ));
    }
    Ok(body)
}

/// Why a [`call`] (and so [`get_records`]) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// No answer, or an answer that is not JSON.
    Transport(String),
    /// The service's error code, e.g. `ExpiredIteratorException`, `TrimmedDataAccessException`,
    /// and its message.
    Service(String, String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "{e}"),
            Self::Service(code, message) => write!(f, "{code}: {message}"),
        }
    }
}

impl std::error::Error for ApiError {}
