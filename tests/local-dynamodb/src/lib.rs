//! The local DynamoDB's internal helpers for the project's tests, the demo, chaos, soak and
//! bench, on top of the test kit's (`lambda_dedup_testkit::dynamodb`: the server, `items`,
//! `local_client!`):
//!
//! - [`shared`]: one server per test binary, started on first use. This is what `cargo test`
//!   gets when no endpoint is given.
//! - [`meter`]: a metering proxy in front of it (requests and capacity per operation),
//!   [`latency`] its calibrated delays; [`kinesis`], [`sns`]: the emulators' streams and
//!   topics; [`senders`]: the webhook senders' own signing libraries.
//! - [`get_records`] and [`call`]: the DynamoDB JSON API read as JSON, where the SDK's parser
//!   misreads the emulator.

use std::sync::OnceLock;

use lambda_dedup_testkit::dynamodb::LocalDynamoDb;

pub mod kinesis;
pub mod latency;
pub mod meter;
mod moto;
pub mod senders;
pub mod sns;

/// The in-process server of this process, started on first use (one per test binary; never
/// dropped, it stops when the process exits).
///
/// # Panics
/// If it cannot start (no loopback port, no thread): the tests that need it cannot run.
pub fn shared() -> &'static LocalDynamoDb {
    static SERVER: OnceLock<LocalDynamoDb> = OnceLock::new();
    SERVER.get_or_init(|| {
        LocalDynamoDb::start().unwrap_or_else(|e| panic!("could not start the local DynamoDB: {e}"))
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
