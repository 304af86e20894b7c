//! A metering proxy in front of a DynamoDB endpoint, for the benchmark (and any test that wants
//! to know what a run cost): every request is forwarded unchanged except that it asks for
//! `ReturnConsumedCapacity: TOTAL` (unless it asked itself), the answers' consumed capacity is
//! added up, requests are counted by operation, and, optionally, every request waits a fixed
//! delay first — a simulated network round trip, the same for every client.
//!
//! It also records which IAM actions each request needs on which resources (tables, queues): a
//! `TransactWriteItems` needs `PutItem`, `UpdateItem`, `DeleteItem` or `ConditionCheckItem` on each
//! item's table; an SQS request (JSON protocol) its action on its queue. `cargo xtask` puts one
//! proxy in front of each function to prove its role grants what it calls, and nothing more.
//!
//! `GET /__meter` answers the totals as JSON ([`Usage`]); `POST /__meter/reset` zeroes them.
//! Clients in other processes (the Python side of the benchmark) read them there.
//!
//! It can also play an outage of the endpoint behind it, for the clients of this proxy only:
//! `POST /__meter/outage` starts one (every request is answered `500 InternalServerError`, in
//! DynamoDB's JSON error format, without reaching the endpoint), `DELETE /__meter/outage` ends
//! it; both answer `{"outage": bool, "refused": n}`, `n` counting the requests refused so far.
//!
//! Caveats, the same for every client: the proxy rewrites the request body, so it suits
//! endpoints that do not check SigV4 signatures (local emulators); failed conditional writes are
//! not metered when the endpoint's error answer carries no consumed capacity (DynamoDB charges
//! them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the proxy has counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Requests forwarded.
    pub requests: u64,
    /// Write request units consumed (`WriteCapacityUnits`, or `CapacityUnits` of a write).
    pub write_units: f64,
    /// Read request units consumed.
    pub read_units: f64,
    /// Requests by operation (`TransactWriteItems`, `UpdateItem`, …).
    pub by_operation: BTreeMap<String, u64>,
    /// The IAM actions the requests needed (`dynamodb:UpdateItem`, `sqs:SendMessage`), each with
    /// the names of the tables or queues it was needed on.
    pub actions: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl Usage {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({"requests": self.requests, "write_units": self.write_units,
               "read_units": self.read_units, "by_operation": self.by_operation,
               "actions": self.actions})
    }
}

/// A running proxy.
#[derive(Debug)]
pub struct Meter {
    addr: SocketAddr,
    usage: Arc<Mutex<Usage>>,
}

/// The outage the proxy plays (see the module docs): on or off, and the requests it refused.
#[derive(Debug, Default)]
struct Outage {
    on: AtomicBool,
    refused: AtomicU64,
}

impl Outage {
    fn json(&self) -> Vec<u8> {
        json!({"outage": self.on.load(Ordering::SeqCst),
               "refused": self.refused.load(Ordering::SeqCst)})
        .to_string()
        .into_bytes()
    }
}

impl Meter {
    /// Starts a proxy to `upstream` (`http://host:port`) on a free loopback port, on a thread of
    /// its own, adding `delay` before each request is forwarded.
    pub fn start(upstream: &str, delay: Duration) -> Result<Self, String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("no free loopback port: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let usage = Arc::new(Mutex::new(Usage::default()));
        let outage = Arc::new(Outage::default());
        let (shared, upstream) = (usage.clone(), upstream.trim_end_matches('/').to_owned());
        std::thread::Builder::new()
            .name("dynamodb-meter".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                else {
                    return eprintln!("meter: no runtime");
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return eprintln!("meter: listener");
                    };
                    let http = reqwest::Client::new();
                    loop {
                        let Ok((socket, _)) = listener.accept().await else {
                            continue;
                        };
                        // Answers go out in one write; without this, Nagle's algorithm and the
                        // client's delayed ACK add tens of milliseconds per request.
                        let _ = socket.set_nodelay(true);
                        let (http, usage, upstream, outage) = (
                            http.clone(),
                            shared.clone(),
                            upstream.clone(),
                            outage.clone(),
                        );
                        tokio::spawn(async move {
                            let _ =
                                connection(socket, &http, &upstream, &usage, &outage, delay).await;
                        });
                    }
                });
            })
            .map_err(|e| e.to_string())?;
        Ok(Self { addr, usage })
    }

    /// `http://127.0.0.1:<port>`: give this to clients as their DynamoDB endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The totals so far.
    pub fn usage(&self) -> Usage {
        self.usage.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Zeroes the totals.
    pub fn reset(&self) {
        *self.usage.lock().unwrap_or_else(|e| e.into_inner()) = Usage::default();
    }
}

/// One HTTP/1.1 request as read off the socket.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request(socket: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.split("\r\n");
            let mut first = lines.next()?.split(' ');
            let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let mut chunk = [0u8; 65536];
                let n = socket.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(Request {
                method,
                path,
                headers,
                body,
            });
        }
        let mut chunk = [0u8; 65536];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Serves one keep-alive connection.
async fn connection(
    mut socket: tokio::net::TcpStream,
    http: &reqwest::Client,
    upstream: &str,
    usage: &Mutex<Usage>,
    outage: &Outage,
    delay: Duration,
) -> Option<()> {
    let mut buf = Vec::new();
    let json_type = || vec![("content-type".to_owned(), "application/json".to_owned())];
    loop {
        let req = read_request(&mut socket, &mut buf).await?;
        let (status, headers, body) = if req.path.starts_with("/__meter/outage") {
            match req.method.as_str() {
                "POST" => outage.on.store(true, Ordering::SeqCst),
                "DELETE" => outage.on.store(false, Ordering::SeqCst),
                _ => {}
            }
            (200, json_type(), outage.json())
        } else if req.path.starts_with("/__meter") {
            let lock = || usage.lock().unwrap_or_else(|e| e.into_inner());
            if req.method == "POST" {
                *lock() = Usage::default();
            }
            let body = lock().to_json().to_string().into_bytes();
            (200, json_type(), body)
        } else if outage.on.load(Ordering::SeqCst) {
            outage.refused.fetch_add(1, Ordering::SeqCst);
            let body = json!({"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
                              "message": "meter: the endpoint is out (a played outage)"});
            (
                500,
                vec![(
                    "content-type".to_owned(),
                    "application/x-amz-json-1.0".to_owned(),
                )],
                body.to_string().into_bytes(),
            )
        } else {
            forward(http, upstream, usage, delay, req).await
        };
        let mut head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
        for (k, v) in headers {
            if k != "content-length" && k != "transfer-encoding" && k != "connection" {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        head.push_str("\r\n");
        let mut answer = head.into_bytes();
        answer.extend_from_slice(&body);
        socket.write_all(&answer).await.ok()?;
    }
}

async fn forward(
    http: &reqwest::Client,
    upstream: &str,
    usage: &Mutex<Usage>,
    delay: Duration,
    req: Request,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let target = req
        .headers
        .iter()
        .find(|(k, _)| k == "x-amz-target")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let operation = target.rsplit('.').next().unwrap_or("").to_owned();
    let needed = serde_json::from_slice::<Value>(&req.body)
        .map(|v| needs(&target, &operation, &v))
        .unwrap_or_default();
    let mut body = req.body;
    if let Ok(mut v) = serde_json::from_slice::<Value>(&body)
        && metered(&operation)
        && v.get("ReturnConsumedCapacity").is_none()
    {
        v["ReturnConsumedCapacity"] = json!("TOTAL");
        body = v.to_string().into_bytes();
    }
    let mut out = http.post(format!("{upstream}{}", req.path)).body(body);
    for (k, v) in &req.headers {
        if !matches!(k.as_str(), "content-length" | "host" | "connection") {
            out = out.header(k.as_str(), v.as_str());
        }
    }
    let Ok(resp) = out.send().await else {
        return (502, Vec::new(), b"meter: upstream unreachable".to_vec());
    };
    let status = resp.status().as_u16();
    let headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let bytes = resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    let (write, read) = serde_json::from_slice::<Value>(&bytes)
        .map(|v| capacity(&operation, &v["ConsumedCapacity"]))
        .unwrap_or((0.0, 0.0));
    let mut u = usage.lock().unwrap_or_else(|e| e.into_inner());
    u.requests += 1;
    u.write_units += write;
    u.read_units += read;
    *u.by_operation.entry(operation).or_default() += 1;
    for (action, resource) in needed {
        u.actions.entry(action).or_default().insert(resource);
    }
    (status, headers, bytes)
}

/// The IAM actions a request needs, each with the table or queue it needs it on.
fn needs(target: &str, operation: &str, body: &Value) -> Vec<(String, String)> {
    let name = |k: &str| body[k].as_str().map(str::to_owned);
    if target.starts_with("AmazonSQS.") {
        // The queue's name is the last segment of its URL.
        let queue = name("QueueUrl")
            .map(|u| u.rsplit('/').next().unwrap_or_default().to_owned())
            .or_else(|| name("QueueName"))
            .unwrap_or_default();
        return vec![(format!("sqs:{operation}"), queue)];
    }
    if !target.starts_with("DynamoDB_") {
        return Vec::new();
    }
    let dynamodb = |action: &str, table: &str| (format!("dynamodb:{action}"), table.to_owned());
    match operation {
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                [
                    ("Put", "PutItem"),
                    ("Update", "UpdateItem"),
                    ("Delete", "DeleteItem"),
                    ("ConditionCheck", "ConditionCheckItem"),
                ]
                .into_iter()
                .find_map(|(k, action)| item[k]["TableName"].as_str().map(|t| dynamodb(action, t)))
            })
            .collect(),
        "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["Get"]["TableName"].as_str())
            .map(|t| dynamodb("GetItem", t))
            .collect(),
        "BatchWriteItem" | "BatchGetItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(t, _)| dynamodb(operation, t))
            .collect(),
        _ => name("TableName")
            .map(|t| vec![dynamodb(operation, &t)])
            .unwrap_or_default(),
    }
}

/// Operations that can report consumed capacity.
fn metered(operation: &str) -> bool {
    matches!(
        operation,
        "GetItem"
            | "PutItem"
            | "UpdateItem"
            | "DeleteItem"
            | "Query"
            | "Scan"
            | "BatchGetItem"
            | "BatchWriteItem"
            | "TransactWriteItems"
            | "TransactGetItems"
    )
}

/// Write and read units of a `ConsumedCapacity` (one object, or a list per table).
fn capacity(operation: &str, c: &Value) -> (f64, f64) {
    match c {
        Value::Array(list) => list.iter().fold((0.0, 0.0), |(w, r), x| {
            let (w2, r2) = capacity(operation, x);
            (w + w2, r + r2)
        }),
        Value::Object(o) => {
            let num = |k: &str| o.get(k).and_then(Value::as_f64);
            let total = num("CapacityUnits").unwrap_or(0.0);
            let write = num("WriteCapacityUnits");
            let read = num("ReadCapacityUnits");
            let reads = matches!(
                operation,
                "GetItem" | "Query" | "Scan" | "BatchGetItem" | "TransactGetItems"
            );
            match (write, read) {
                (None, None) if reads => (0.0, total),
                (None, None) => (total, 0.0),
                (w, r) => (w.unwrap_or(0.0), r.unwrap_or(0.0)),
            }
        }
        _ => (0.0, 0.0),
    }
}
