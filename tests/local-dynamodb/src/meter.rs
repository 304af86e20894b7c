//! A metering proxy in front of a DynamoDB endpoint, for the benchmark (and any test that wants
//! to know what a run cost): every request is forwarded unchanged except that it asks for
//! `ReturnConsumedCapacity: TOTAL` (unless it asked itself), the answers' consumed capacity is
//! added up, requests are counted by operation, and, optionally, every request waits first —
//! a flat delay or a draw from DynamoDB's measured latency per operation and item count
//! ([`Latency`], see [`crate::latency`]), the same for every client.
//!
//! Failed writes are billed as DynamoDB bills them, computed from the request because the
//! emulator's error answers carry no consumed capacity: a conditional write whose condition
//! fails (`ConditionalCheckFailedException`) consumes at least 1 write unit — DynamoDB bills the
//! size of the existing item; the proxy bills the written item's size in 1 KB units, at least 1
//! ([`Usage::failed_write_units`]). A cancelled `TransactWriteItems` (`TransactionCanceledException`)
//! is counted apart, as 2 units per 1 KB of each of its items
//! ([`Usage::cancelled_write_units`]): whether DynamoDB bills a cancelled transaction is not
//! documented, so readers report it both ways.
//!
//! It also watches writes in flight at once ([`Usage::peak_in_flight`]) and counts the writes
//! that arrived while another write in flight held one of their items
//! ([`Usage::shared_in_flight`]; items are told apart by their table and key, the key schema
//! learnt from the `CreateTable` requests that pass through it, or the whole item for a `Put`
//! on a table it did not see created).
//!
//! It also records which IAM actions each request needs on which resources (tables, queues): a
//! `TransactWriteItems` needs `PutItem`, `UpdateItem`, `DeleteItem` or `ConditionCheckItem` on each
//! item's table; an SQS request (JSON protocol) its action on its queue. `cargo xtask` puts one
//! proxy in front of each function to prove its role grants what it calls, and nothing more.
//!
//! It also times the endpoint's own work on each request ([`Usage::service_ms`]): from the moment
//! it forwards the request (after the held latency) to the answer's last byte — what the
//! emulator adds to the model's latency, per operation.
//!
//! `GET /__meter` answers the totals as JSON ([`Usage`]); `POST /__meter/reset` zeroes them;
//! `POST /__meter/service` answers the service times' summary per operation
//! ([`Usage::service_summary`]) and starts them again (a reader takes them per run).
//! Clients in other processes (the Python side of the benchmark) read them there.
//!
//! It can also play an outage of the endpoint behind it, for the clients of this proxy only:
//! `POST /__meter/outage` starts one (every request is answered `500 InternalServerError`, in
//! DynamoDB's JSON error format, without reaching the endpoint), `DELETE /__meter/outage` ends
//! it; both answer `{"outage": bool, "refused": n}`, `n` counting the requests refused so far.
//!
//! Caveats, the same for every client: the proxy rewrites the request body, so it suits
//! endpoints that do not check SigV4 signatures (local emulators).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::latency::Delays;
pub use crate::latency::Latency;

/// What the proxy has counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Requests forwarded.
    pub requests: u64,
    /// Write request units consumed by writes that succeeded, as the endpoint reports them
    /// (`WriteCapacityUnits`, or `CapacityUnits` of a write).
    pub write_units: f64,
    /// Write request units of conditional writes whose condition failed, computed from the
    /// request: the item's size in 1 KB units, at least 1 (DynamoDB bills these).
    pub failed_write_units: f64,
    /// Conditional single-item writes whose condition failed.
    pub failed_writes: u64,
    /// Write request units of cancelled transactions had they been billed as attempted: 2 per
    /// 1 KB of each item, at least 2 per item. Not in `write_units`: DynamoDB does not document
    /// whether it bills them.
    pub cancelled_write_units: f64,
    /// `TransactWriteItems` cancelled (`TransactionCanceledException`).
    pub cancelled_transactions: u64,
    /// The most writes (single-item writes and transactions) in flight at once.
    pub peak_in_flight: u64,
    /// Writes that arrived while another write in flight held one of their items.
    pub shared_in_flight: u64,
    /// Read request units consumed.
    pub read_units: f64,
    /// Requests by operation (`TransactWriteItems`, `UpdateItem`, …).
    pub by_operation: BTreeMap<String, u64>,
    /// The IAM actions the requests needed (`dynamodb:UpdateItem`, `sqs:SendMessage`), each with
    /// the names of the tables or queues it was needed on.
    pub actions: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// The partition key values the requests named, per table, for the tables given with
    /// [`Meter::record_keys`] only: each single-item request's `Key` or `Item`, each item of a
    /// transaction or batch (a `Query` or `Scan` names none).
    pub leading_keys: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// The endpoint's own time per request, by operation, in milliseconds: from forwarding the
    /// request (the held latency over) to the answer's last byte; since the last
    /// `POST /__meter/service` (or reset).
    pub service_ms: BTreeMap<String, Vec<f64>>,
}

impl Usage {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({"requests": self.requests, "write_units": self.write_units,
               "failed_write_units": self.failed_write_units, "failed_writes": self.failed_writes,
               "cancelled_write_units": self.cancelled_write_units,
               "cancelled_transactions": self.cancelled_transactions,
               "peak_in_flight": self.peak_in_flight, "shared_in_flight": self.shared_in_flight,
               "read_units": self.read_units, "by_operation": self.by_operation,
               "actions": self.actions, "leading_keys": self.leading_keys,
               "service_ms": self.service_summary()})
    }

    /// The service times' summary: per operation, its requests and the p50 and mean of their
    /// service time, in milliseconds.
    pub fn service_summary(&self) -> Value {
        let summary: serde_json::Map<String, Value> = self
            .service_ms
            .iter()
            .filter(|(_, xs)| !xs.is_empty())
            .map(|(op, xs)| {
                let mut sorted = xs.clone();
                sorted.sort_by(f64::total_cmp);
                let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
                let p50 = sorted[sorted.len() / 2];
                (
                    op.clone(),
                    json!({"requests": sorted.len(), "p50_ms": p50, "mean_ms": mean}),
                )
            })
            .collect();
        Value::Object(summary)
    }
}

/// A running proxy.
#[derive(Debug)]
pub struct Meter {
    addr: SocketAddr,
    usage: Arc<Mutex<Usage>>,
    keyed: Keyed,
}

/// The tables whose partition keys are recorded, each with its partition key attribute.
type Keyed = Arc<Mutex<HashMap<String, String>>>;

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

/// Writes in flight: how many, and the items they hold (with how many hold each).
#[derive(Debug, Default)]
struct Flight {
    count: u64,
    items: HashMap<String, u64>,
}

/// What every connection of one proxy shares.
#[derive(Debug)]
struct Shared {
    usage: Arc<Mutex<Usage>>,
    outage: Outage,
    delays: Delays,
    flight: Mutex<Flight>,
    /// Key attribute names per table, from the `CreateTable` requests seen.
    schemas: Mutex<HashMap<String, Vec<String>>>,
    keyed: Keyed,
}

impl Meter {
    /// Starts a proxy to `upstream` (`http://host:port`) on a free loopback port, on a thread of
    /// its own, adding `delay` before each request is forwarded.
    pub fn start(upstream: &str, delay: Duration) -> Result<Self, String> {
        let latency = if delay.is_zero() {
            Latency::None
        } else {
            Latency::Flat(delay)
        };
        Self::start_with(upstream, latency)
    }

    /// Like [`start`](Self::start), holding each request as `latency` says.
    pub fn start_with(upstream: &str, latency: Latency) -> Result<Self, String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("no free loopback port: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let usage = Arc::new(Mutex::new(Usage::default()));
        let keyed = Keyed::default();
        let shared = Arc::new(Shared {
            keyed: keyed.clone(),
            usage: usage.clone(),
            outage: Outage::default(),
            delays: Delays::new(latency),
            flight: Mutex::new(Flight::default()),
            schemas: Mutex::new(HashMap::new()),
        });
        let upstream = upstream.trim_end_matches('/').to_owned();
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
                        let (http, shared, upstream) =
                            (http.clone(), shared.clone(), upstream.clone());
                        tokio::spawn(async move {
                            let _ = connection(socket, &http, &upstream, &shared).await;
                        });
                    }
                });
            })
            .map_err(|e| e.to_string())?;
        Ok(Self { addr, usage, keyed })
    }

    /// Records from now on the partition key values (attribute `partition_key`) that requests
    /// name on `table` ([`Usage::leading_keys`]): what an IAM `dynamodb:LeadingKeys` condition
    /// is evaluated on.
    pub fn record_keys(&self, table: &str, partition_key: &str) {
        self.keyed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(table.to_owned(), partition_key.to_owned());
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
    shared: &Shared,
) -> Option<()> {
    let (usage, outage) = (&*shared.usage, &shared.outage);
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
        } else if req.path.starts_with("/__meter/service") {
            let mut u = usage.lock().unwrap_or_else(|e| e.into_inner());
            let body = u.service_summary().to_string().into_bytes();
            if req.method == "POST" {
                u.service_ms.clear();
            }
            (200, json_type(), body)
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
            forward(http, upstream, shared, req).await
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
    shared: &Shared,
    req: Request,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let target = req
        .headers
        .iter()
        .find(|(k, _)| k == "x-amz-target")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let operation = target.rsplit('.').next().unwrap_or("").to_owned();
    let parsed = serde_json::from_slice::<Value>(&req.body).ok();
    let needed = parsed
        .as_ref()
        .map(|v| needs(&target, &operation, v))
        .unwrap_or_default();
    let dynamodb = target.starts_with("DynamoDB_");
    let named_keys = match (&parsed, dynamodb) {
        (Some(v), true) => {
            let keyed = shared.keyed.lock().unwrap_or_else(|e| e.into_inner());
            if keyed.is_empty() {
                Vec::new()
            } else {
                leading_keys(&operation, v, &keyed)
            }
        }
        _ => Vec::new(),
    };
    let writes = match (&parsed, dynamodb) {
        (Some(v), true) => {
            if operation == "CreateTable" {
                learn_schema(&shared.schemas, v);
            }
            let schemas = shared.schemas.lock().unwrap_or_else(|e| e.into_inner());
            written(&operation, v, &schemas)
        }
        _ => Vec::new(),
    };
    let items = parsed.as_ref().map_or(1, |v| item_count(&operation, v));
    let delay = if dynamodb {
        shared.delays.next(&operation, items)
    } else {
        Duration::ZERO
    };
    // In flight from its arrival to its answer, as its client sees it.
    let is_write = !writes.is_empty();
    if is_write {
        let mut f = shared.flight.lock().unwrap_or_else(|e| e.into_inner());
        let clash = writes.iter().any(|w| f.items.contains_key(&w.key));
        f.count += 1;
        for w in &writes {
            *f.items.entry(w.key.clone()).or_default() += 1;
        }
        let mut u = shared.usage.lock().unwrap_or_else(|e| e.into_inner());
        u.peak_in_flight = u.peak_in_flight.max(f.count);
        u.shared_in_flight += u64::from(clash);
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut body = req.body;
    if let Some(mut v) = parsed
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
    // The endpoint's own time: from here (the held latency over) to the answer's last byte.
    let forwarded = std::time::Instant::now();
    let sent = out.send().await;
    if is_write {
        let mut f = shared.flight.lock().unwrap_or_else(|e| e.into_inner());
        f.count -= 1;
        for w in &writes {
            if let Some(n) = f.items.get_mut(&w.key) {
                *n -= 1;
                if *n == 0 {
                    f.items.remove(&w.key);
                }
            }
        }
    }
    let Ok(resp) = sent else {
        return (502, Vec::new(), b"meter: upstream unreachable".to_vec());
    };
    let status = resp.status().as_u16();
    let headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let bytes = resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    let service_ms = forwarded.elapsed().as_secs_f64() * 1000.0;
    let answer = serde_json::from_slice::<Value>(&bytes).ok();
    let (write, read) = answer
        .as_ref()
        .map(|v| capacity(&operation, &v["ConsumedCapacity"]))
        .unwrap_or((0.0, 0.0));
    let error = answer
        .as_ref()
        .and_then(|v| v["__type"].as_str())
        .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned());
    let mut u = shared.usage.lock().unwrap_or_else(|e| e.into_inner());
    u.requests += 1;
    u.write_units += write;
    u.read_units += read;
    match error.as_deref() {
        Some("ConditionalCheckFailedException") if status >= 400 => {
            u.failed_writes += 1;
            u.failed_write_units += writes.iter().map(|w| w.units).sum::<f64>().max(1.0);
        }
        Some("TransactionCanceledException") if status >= 400 => {
            u.cancelled_transactions += 1;
            u.cancelled_write_units += writes.iter().map(|w| 2.0 * w.units).sum::<f64>();
        }
        _ => {}
    }
    u.service_ms
        .entry(operation.clone())
        .or_default()
        .push(service_ms);
    *u.by_operation.entry(operation).or_default() += 1;
    for (action, resource) in needed {
        u.actions.entry(action).or_default().insert(resource);
    }
    for (table, key) in named_keys {
        u.leading_keys.entry(table).or_default().insert(key);
    }
    (status, headers, bytes)
}

/// One item a write request writes: which (table and key), and its write units (1 per KB of
/// the item, or of the key and values for an update, at least 1).
struct Written {
    key: String,
    units: f64,
}

/// Records a `CreateTable` request's key attributes.
fn learn_schema(schemas: &Mutex<HashMap<String, Vec<String>>>, body: &Value) {
    let (Some(table), Some(keys)) = (body["TableName"].as_str(), body["KeySchema"].as_array())
    else {
        return;
    };
    let names = keys
        .iter()
        .filter_map(|k| k["AttributeName"].as_str().map(str::to_owned))
        .collect();
    schemas
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(table.to_owned(), names);
}

/// The items a request writes (none for reads and control-plane operations).
fn written(operation: &str, body: &Value, schemas: &HashMap<String, Vec<String>>) -> Vec<Written> {
    let one = |kind: &str, w: &Value| -> Option<Written> {
        let table = w["TableName"].as_str()?;
        let (key, size) = if kind == "Put" {
            let item = w["Item"].as_object()?;
            let key: BTreeMap<&String, &Value> = match schemas.get(table) {
                Some(names) => item.iter().filter(|(k, _)| names.contains(k)).collect(),
                None => item.iter().collect(),
            };
            (json!(key).to_string(), map_size(item))
        } else {
            let key = w["Key"].as_object()?;
            let values = w["ExpressionAttributeValues"]
                .as_object()
                .map_or(0, map_size);
            let sorted: BTreeMap<&String, &Value> = key.iter().collect();
            (json!(sorted).to_string(), map_size(key) + values)
        };
        Some(Written {
            key: format!("{table}\u{0}{key}"),
            units: (size as f64 / 1024.0).ceil().max(1.0),
        })
    };
    match operation {
        "PutItem" => one("Put", body).into_iter().collect(),
        "UpdateItem" | "DeleteItem" => one("Key", body).into_iter().collect(),
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                ["Put", "Update", "Delete", "ConditionCheck"]
                    .into_iter()
                    .find(|k| item.get(*k).is_some())
                    .and_then(|k| one(if k == "Put" { "Put" } else { "Key" }, &item[k]))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Items a request carries, for the latency model: a transaction's, a batch's keys or
/// requests, 1 otherwise.
fn item_count(operation: &str, body: &Value) -> usize {
    let per_table = |v: &Value, k: &str| -> usize {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(_, t)| {
                let list = if k.is_empty() { t } else { &t[k] };
                list.as_array().map_or(0, Vec::len)
            })
            .sum()
    };
    match operation {
        "TransactWriteItems" | "TransactGetItems" => {
            body["TransactItems"].as_array().map_or(1, Vec::len)
        }
        "BatchGetItem" => per_table(&body["RequestItems"], "Keys"),
        "BatchWriteItem" => per_table(&body["RequestItems"], ""),
        _ => 1,
    }
}

/// An attribute value's size as DynamoDB counts it, from its JSON form (strings and binaries
/// their bytes, numbers about one byte per two digits plus one, a few bytes per element of a
/// list or map).
fn value_size(v: &Value) -> usize {
    let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
        return 1;
    };
    let text = |x: &Value| x.as_str().map_or(0, str::len);
    let number = |x: &Value| text(x).div_ceil(2) + 1;
    let binary = |x: &Value| text(x) * 3 / 4;
    let list = |f: &dyn Fn(&Value) -> usize| {
        3 + inner
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| f(x) + 1)
            .sum::<usize>()
    };
    match kind.as_str() {
        "S" => text(inner),
        "N" => number(inner),
        "B" => binary(inner),
        "SS" => list(&text),
        "NS" => list(&number),
        "BS" => list(&binary),
        "L" => list(&value_size),
        "M" => 3 + inner.as_object().map_or(0, |m| map_size(m) + m.len()),
        _ => 1,
    }
}

fn map_size(m: &serde_json::Map<String, Value>) -> usize {
    m.iter().map(|(k, v)| k.len() + value_size(v)).sum()
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

/// The partition key values a request names on the tables of `keyed` (table → partition key
/// attribute): `(table, value)`, a string value as it is, another type as its JSON.
fn leading_keys(
    operation: &str,
    body: &Value,
    keyed: &HashMap<String, String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |table: &str, item: &Value| {
        if let Some(attr) = keyed.get(table) {
            let v = &item[attr.as_str()];
            if !v.is_null() {
                let text = v["S"].as_str().map_or_else(|| v.to_string(), str::to_owned);
                out.push((table.to_owned(), text));
            }
        }
    };
    let table = |v: &Value| v["TableName"].as_str().unwrap_or_default().to_owned();
    match operation {
        "PutItem" => add(&table(body), &body["Item"]),
        "GetItem" | "UpdateItem" | "DeleteItem" => add(&table(body), &body["Key"]),
        "TransactWriteItems" | "TransactGetItems" => {
            for item in body["TransactItems"].as_array().into_iter().flatten() {
                if let Some(put) = item.get("Put") {
                    add(&table(put), &put["Item"]);
                }
                for k in ["Update", "Delete", "ConditionCheck", "Get"] {
                    if let Some(x) = item.get(k) {
                        add(&table(x), &x["Key"]);
                    }
                }
            }
        }
        "BatchWriteItem" => {
            for (t, requests) in body["RequestItems"].as_object().into_iter().flatten() {
                for r in requests.as_array().into_iter().flatten() {
                    add(t, &r["PutRequest"]["Item"]);
                    add(t, &r["DeleteRequest"]["Key"]);
                }
            }
        }
        "BatchGetItem" => {
            for (t, request) in body["RequestItems"].as_object().into_iter().flatten() {
                for k in request["Keys"].as_array().into_iter().flatten() {
                    add(t, k);
                }
            }
        }
        _ => {}
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The service time is the endpoint's alone: a request held 300 ms by the model is timed
    /// from its forwarding, per operation, and `POST /__meter/service` answers and clears it.
    #[test]
    fn the_service_time_excludes_the_held_latency() {
        let ddb = lambda_dedup_testkit::dynamodb::LocalDynamoDb::start().expect("local DynamoDB");
        let held = Duration::from_millis(300);
        let meter = Meter::start(&ddb.endpoint(), held).expect("meter");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let http = reqwest::Client::new();
        let table = json!({"TableName": "timed", "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "k", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "k", "KeyType": "HASH"}]});
        let put = json!({"TableName": "timed", "Item": {"k": {"S": "a"}}});
        let began = std::time::Instant::now();
        let summary = rt.block_on(async {
            let ep = meter.endpoint();
            crate::call(&http, &ep, "DynamoDB_20120810.CreateTable", &table)
                .await
                .expect("create");
            crate::call(&http, &ep, "DynamoDB_20120810.PutItem", &put)
                .await
                .expect("put");
            let taken: Value = http
                .post(format!("{ep}/__meter/service"))
                .send()
                .await
                .expect("service")
                .json()
                .await
                .expect("json");
            taken
        });
        assert!(began.elapsed() >= held * 2, "both requests were held");
        let put_ms = summary["PutItem"]["p50_ms"].as_f64().expect("timed");
        assert_eq!(summary["PutItem"]["requests"], 1);
        assert!(
            put_ms > 0.0 && put_ms < 300.0,
            "held latency excluded: {put_ms} ms"
        );
        assert!(summary["CreateTable"]["mean_ms"].as_f64().is_some());
        assert!(meter.usage().service_ms.is_empty(), "taken and cleared");
    }

    /// The keys a request names, on the recorded tables only: a single item's `Key` or `Item`,
    /// each item of a transaction.
    #[test]
    fn leading_keys_are_read_from_single_items_and_transactions() {
        let keyed = HashMap::from([("marks".to_owned(), "pk".to_owned())]);
        let put = json!({"TableName": "marks", "Item": {"pk": {"S": "p#c#1"}, "x": {"S": "y"}}});
        assert_eq!(
            leading_keys("PutItem", &put, &keyed),
            vec![("marks".to_owned(), "p#c#1".to_owned())]
        );
        let tx = json!({"TransactItems": [
            {"Put": {"TableName": "marks", "Item": {"pk": {"S": "p#c#2"}}}},
            {"Update": {"TableName": "balances", "Key": {"account": {"S": "a"}}}},
            {"Update": {"TableName": "marks", "Key": {"pk": {"S": "p#c#3"}}}}
        ]});
        let named: Vec<String> = leading_keys("TransactWriteItems", &tx, &keyed)
            .into_iter()
            .map(|(_, k)| k)
            .collect();
        assert_eq!(named, ["p#c#2", "p#c#3"]);
        let update = json!({"TableName": "balances", "Key": {"account": {"S": "a"}}});
        assert!(leading_keys("UpdateItem", &update, &keyed).is_empty());
    }
}
