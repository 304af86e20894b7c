//! Local stand-ins for Lambda's event source mappings, invoking functions through
//! `cargo lambda watch`'s invoke API.
//!
//! - [`sqs_trigger`]: like Lambda's SQS trigger with `ReportBatchItemFailures`: receives batches
//!   of up to 10, invokes the function, deletes what it acknowledged, and leaves the reported
//!   failures (or, if the invocation failed, the whole batch) to come back after the visibility
//!   timeout; the emulator's redrive policy moves them to the DLQ after maxReceiveCount.
//! - [`stream_trigger`]: like Lambda's DynamoDB Streams and Kinesis triggers: reads every shard
//!   of a table's stream or a Kinesis stream ([`Stream`]) in order, invokes the function, on a
//!   batch item failure retries from that record, in order, with the retry policy of
//!   `infra/template.yaml` (`MaximumRetryAttempts`, `-1` for infinite, and
//!   `MaximumRecordAgeInSeconds`) and an on-failure destination for a record past either.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use serde_json::{Value, json};
use tokio::sync::watch;

use local_dynamodb::ApiError;
use local_dynamodb::kinesis::Kinesis;

use crate::Result;
use crate::functions::Functions;
use crate::plan::{Mapping, Plan, Source};
use crate::resources::Resources;

/// Counters a trigger keeps, for progress and the chaos runs.
#[derive(Debug, Default)]
pub struct TriggerStats {
    pub invocations: AtomicU64,
    pub delivered: AtomicU64,
    pub acknowledged: AtomicU64,
    /// Invocations cut short because the function's process died.
    pub interrupted: AtomicU64,
    /// Whether an invocation is under way.
    pub in_flight: AtomicBool,
}

/// Invokes one function through the invoke API of `cargo lambda watch`.
#[derive(Debug)]
pub struct Invoker {
    pub http: reqwest::Client,
    pub invoke_url: String,
    pub function: String,
    /// Changes when an instance of the function dies (see `crate::functions`).
    pub deaths: watch::Receiver<u64>,
    pub stats: Arc<TriggerStats>,
    /// When set, the next invocation's answer is thrown away after the function ran, as when
    /// Lambda times out after the work was done: its whole batch comes again.
    pub lose_next: Arc<AtomicBool>,
}

impl Invoker {
    /// Invokes the function with `records` (counted); its answer, or `None` when the invocation
    /// failed (said). An invocation whose instance dies meanwhile fails at once, as Lambda answers
    /// `Runtime.ExitError`; whatever it did before dying stays done.
    async fn deliver<T: serde::Serialize>(&mut self, records: &[T]) -> Option<Value> {
        let Self {
            http,
            invoke_url,
            function,
            deaths,
            stats,
            lose_next,
        } = self;
        stats.invocations.fetch_add(1, Ordering::Relaxed);
        (stats.delivered).fetch_add(records.len() as u64, Ordering::Relaxed);
        deaths.mark_unchanged();
        stats.in_flight.store(true, Ordering::SeqCst);
        let died = async {
            if deaths.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let payload = json!({ "Records": records });
        let answer = tokio::select! {
            answer = invoke(http, invoke_url, function, &payload) => answer,
            () = died => {
                stats.interrupted.fetch_add(1, Ordering::SeqCst);
                Err("its process died mid-invocation (Runtime.ExitError)".to_owned())
            }
        };
        stats.in_flight.store(false, Ordering::SeqCst);
        let answer = if lose_next.swap(false, Ordering::SeqCst) {
            let n = records.len();
            Err(format!(
                "the answer to a batch of {n} was lost after it ran (as when Lambda times out after the work); all of it comes back"
            ))
        } else {
            answer
        };
        answer
            .inspect_err(|e| eprintln!("local-lambda: trigger {function}: invoke: {e}"))
            .ok()
    }
}

/// Invokes `function` with `payload` through the invoke API at `invoke_url`.
async fn invoke(
    http: &reqwest::Client,
    invoke_url: &str,
    function: &str,
    payload: &Value,
) -> Result<Value, String> {
    let url = format!("{invoke_url}/2015-03-31/functions/{function}/invocations");
    let resp = http.post(&url).json(payload).send().await;
    let resp = resp.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body: Value = (resp.json().await).map_err(|e| format!("answer is not JSON: {e}"))?;
    if !status.is_success() || body.get("errorType").is_some() {
        return Err(format!("{status} {body}"));
    }
    Ok(body)
}

/// The record identifiers an answer reports failed (`batchItemFailures`), in order.
fn reported(answer: &Value) -> Vec<&str> {
    let failures = answer["batchItemFailures"].as_array().into_iter().flatten();
    failures
        .filter_map(|f| f["itemIdentifier"].as_str())
        .collect()
}

/// Up to the mapping's batch size of messages of `queue_url`, gathered for at most its batching
/// window.
async fn receive_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    mapping: &Mapping,
    function: &str,
) -> Vec<Message> {
    let mut messages = Vec::new();
    let started = std::time::Instant::now();
    while messages.len() < mapping.batch_size {
        let want = (mapping.batch_size - messages.len()).min(10) as i32;
        let received = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(want)
            .wait_time_seconds(i32::from(messages.is_empty()))
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await;
        match received {
            Ok(out) => {
                let got = out.messages.unwrap_or_default();
                let empty = got.is_empty();
                messages.extend(got);
                // Nothing more waiting, or the window is over: invoke with what there is.
                if empty || started.elapsed() >= mapping.window {
                    break;
                }
            }
            Err(e) => {
                eprintln!("local-lambda: trigger {function}: receive failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                break;
            }
        }
    }
    messages
}

/// A message as Lambda's SQS trigger hands it on.
fn sqs_record(m: &Message, queue_arn: &str) -> Value {
    let attributes: serde_json::Map<String, Value> = (m.attributes().into_iter().flatten())
        .map(|(k, v)| (k.as_str().to_owned(), json!(v)))
        .collect();
    let message_attributes: serde_json::Map<String, Value> = (m
        .message_attributes()
        .into_iter()
        .flatten())
    .map(|(k, v)| {
        let mut attr =
            json!({"dataType": v.data_type(), "stringListValues": [], "binaryListValues": []});
        if let Some(s) = v.string_value() {
            attr["stringValue"] = s.into();
        }
        if let Some(b) = v.binary_value() {
            attr["binaryValue"] = BASE64_STANDARD.encode(b.as_ref()).into();
        }
        (k.clone(), attr)
    })
    .collect();
    json!({
        "messageId": m.message_id(),
        "receiptHandle": m.receipt_handle(),
        "body": m.body(),
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": m.md5_of_body(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    })
}

/// Polls `queue_url` and invokes the function until the task is dropped; deletes what it
/// acknowledged (with `ReportBatchItemFailures`, all but what it reported; without, the whole
/// batch), and leaves a failed invocation's whole batch to come back.
pub async fn sqs_trigger(
    sqs: aws_sdk_sqs::Client,
    mut invoker: Invoker,
    (queue_url, queue_arn): (String, String),
    mapping: Mapping,
) {
    let function = invoker.function.clone();
    let stats = invoker.stats.clone();
    loop {
        let messages = receive_batch(&sqs, &queue_url, &mapping, &function).await;
        if messages.is_empty() {
            continue;
        }
        let records: Vec<Value> = messages.iter().map(|m| sqs_record(m, &queue_arn)).collect();
        let Some(answer) = invoker.deliver(&records).await else {
            continue; // the whole batch comes back
        };
        // Without ReportBatchItemFailures, the answer's body means nothing to the trigger.
        let failed: HashSet<&str> = if mapping.partial {
            reported(&answer).into_iter().collect()
        } else {
            HashSet::new()
        };
        let entries: Vec<DeleteMessageBatchRequestEntry> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| !failed.contains(m.message_id().unwrap_or_default()))
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .set_receipt_handle(m.receipt_handle().map(str::to_owned))
                    .build()
                    .ok()
            })
            .collect();
        if entries.is_empty() {
            continue;
        }
        let n = entries.len() as u64;
        let delete = sqs.delete_message_batch().queue_url(&queue_url);
        match delete.set_entries(Some(entries)).send().await {
            Ok(_) => _ = stats.acknowledged.fetch_add(n, Ordering::Relaxed),
            Err(e) => eprintln!("local-lambda: trigger {function}: delete failed: {e}"),
        }
    }
}

impl Mapping {
    /// Why a stream record its function keeps reporting, tried `tries` times, which arrived at
    /// `arrival` (epoch seconds), is given up, as Lambda names it in the on-failure record:
    /// retried more than `MaximumRetryAttempts` times (none: `-1`, no count), or older than
    /// `MaximumRecordAgeInSeconds`. `None` while it is still retried.
    fn gives_up(&self, tries: u32, arrival: f64) -> Option<&'static str> {
        if self
            .max_age
            .is_some_and(|age| now_secs() - arrival > age.as_secs_f64())
        {
            Some("RecordAgeExceeded")
        } else if self.max_retries.is_some_and(|n| tries > n) {
            Some("RetryAttemptsExhausted")
        } else {
            None
        }
    }
}

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A stream's record as Lambda's trigger hands it on, with its sequence number and arrival
/// (epoch seconds).
#[derive(Clone)]
struct StreamRecord {
    seq: String,
    arrival: f64,
    event: Value,
}

/// Where a stream trigger reads: a table's DynamoDB stream (the local DynamoDB) or a Kinesis
/// stream (the emulator), each with its ARN.
#[derive(Debug)]
pub enum Stream {
    /// Read through the DynamoDB Streams JSON API at the local DynamoDB's `endpoint`
    /// (`local_dynamodb::get_records` says why not the SDK).
    DynamoDb { endpoint: String, arn: String },
    Kinesis {
        kinesis: local_dynamodb::kinesis::Kinesis,
        name: String,
        arn: String,
    },
}

impl Stream {
    fn arn(&self) -> &str {
        match self {
            Self::DynamoDb { arn, .. } | Self::Kinesis { arn, .. } => arn,
        }
    }

    /// `action` of the DynamoDB Streams API on this table's stream (`StreamArn` added to
    /// `request`): its answer, `Null` when it failed.
    async fn streams_call(&self, action: &str, mut request: Value) -> Value {
        let Self::DynamoDb { endpoint, arn } = self else {
            return Value::Null;
        };
        request["StreamArn"] = json!(arn);
        let target = format!("DynamoDBStreams_20120810.{action}");
        let http = reqwest::Client::new();
        let answer = local_dynamodb::call(&http, endpoint, &target, &request).await;
        answer.unwrap_or_default()
    }

    /// The shards there are now.
    async fn shards(&self) -> Vec<String> {
        match self {
            Self::DynamoDb { .. } => {
                let desc = self.streams_call("DescribeStream", json!({})).await;
                let shards = desc["StreamDescription"]["Shards"].as_array().cloned();
                let shards = shards.into_iter().flatten();
                shards
                    .filter_map(|s| s["ShardId"].as_str().map(str::to_owned))
                    .collect()
            }
            Self::Kinesis { kinesis, name, .. } => kinesis.shards(name).await.unwrap_or_default(),
        }
    }

    /// An iterator of `shard` after the record `after`, or from its start.
    async fn iterator(&self, shard: &str, after: Option<&str>) -> Option<String> {
        match self {
            Self::DynamoDb { .. } => {
                let request = match after {
                    Some(seq) => {
                        json!({"ShardId": shard, "ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": seq})
                    }
                    None => json!({"ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"}),
                };
                let answer = self.streams_call("GetShardIterator", request).await;
                answer["ShardIterator"].as_str().map(str::to_owned)
            }
            Self::Kinesis { kinesis, name, .. } => kinesis.iterator(name, shard, after).await.ok(),
        }
    }

    /// Up to `limit` records of `shard` from `iterator`, and the next iterator (`None` once the
    /// shard is closed). `Err(None)`: an iterator that expired or was trimmed, taken again.
    async fn read(
        &self,
        shard: &str,
        iterator: &str,
        limit: usize,
        function: &str,
    ) -> Result<(Vec<StreamRecord>, Option<String>), Option<String>> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        match self {
            Self::DynamoDb { endpoint, arn, .. } => {
                let http = reqwest::Client::new();
                let (records, next) = local_dynamodb::get_records(&http, endpoint, iterator, limit)
                    .await
                    .map_err(|e| match e {
                        ApiError::Service(code, _) if code == "TrimmedDataAccessException" => None,
                        e => Some(format!("GetRecords: {e}")),
                    })?;
                let records = records.into_iter().map(|mut r| {
                    r["eventSourceARN"] = json!(arn);
                    StreamRecord {
                        seq: r["dynamodb"]["SequenceNumber"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        arrival: r["dynamodb"]["ApproximateCreationDateTime"]
                            .as_f64()
                            .unwrap_or_else(now_secs),
                        event: r,
                    }
                });
                Ok((records.collect(), next))
            }
            Self::Kinesis { kinesis, arn, .. } => {
                let (records, next) = kinesis.records(iterator, limit).await.map_err(Some)?;
                let records = records.iter().map(|r| StreamRecord {
                    seq: r.sequence_number.clone(),
                    arrival: r.arrival,
                    event: kinesis_record(r, shard, arn, function),
                });
                Ok((records.collect(), next))
            }
        }
    }

    /// The on-failure record of the record `seq` of `shard`, given up for `condition` after
    /// `tries` invocations, as Lambda writes it: where it was, never its data.
    fn on_failure(
        &self,
        shard: &str,
        seq: &str,
        condition: &str,
        tries: u32,
        function: &str,
    ) -> Value {
        let info = json!({"shardId": shard, "streamArn": self.arn(), "batchSize": 1,
                          "startSequenceNumber": seq, "endSequenceNumber": seq});
        let key = match self {
            Self::DynamoDb { .. } => "DDBStreamBatchInfo",
            Self::Kinesis { .. } => "KinesisBatchInfo",
        };
        let mut record = json!({
            "requestContext": {"condition": condition, "approximateInvokeCount": tries,
                               "functionArn": format!("arn:aws:lambda:us-east-1:000000000000:function:{function}")},
        });
        record[key] = info;
        record
    }
}

/// Where one shard is read from.
#[derive(Default)]
struct Shard {
    iterator: Option<String>,
    /// The last record done (acknowledged or handed on); a new iterator starts after it.
    last_seq: Option<String>,
    closed: bool,
    /// Records read and not yet done, in order.
    pending: Vec<StreamRecord>,
    /// The record the function last failed at, and how many times in a row.
    failing: Option<(String, u32)>,
}

impl Shard {
    /// After an invocation whose first `done` pending records are done: those are dropped, and
    /// the record that failed (now the first pending one, if any) is counted. Returns it (its
    /// sequence number, why, and after how many tries) when `retry` gives it up, for the
    /// on-failure destination; `None` when nothing failed or it is still retried.
    fn after_invocation(
        &mut self,
        done: usize,
        retry: &Mapping,
    ) -> Option<(String, &'static str, u32)> {
        if done > 0 {
            self.last_seq = Some(self.pending[done - 1].seq.clone());
        }
        self.pending.drain(..done);
        let Some(head) = self.pending.first() else {
            self.failing = None;
            return None;
        };
        let tries = match &self.failing {
            Some((seq, n)) if *seq == head.seq => n + 1,
            _ => 1,
        };
        self.failing = Some((head.seq.clone(), tries));
        let condition = retry.gives_up(tries, head.arrival)?;
        Some((head.seq.clone(), condition, tries))
    }

    /// The first pending record was handed to the on-failure destination: the shard moves past it.
    fn handed_on(&mut self) {
        if !self.pending.is_empty() {
            let head = self.pending.remove(0);
            self.last_seq = Some(head.seq);
        }
        self.failing = None;
    }
}

/// A Kinesis record as Lambda's Kinesis trigger hands it on.
fn kinesis_record(
    r: &local_dynamodb::kinesis::KinesisRecord,
    shard: &str,
    arn: &str,
    function: &str,
) -> Value {
    json!({
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": format!("{shard}:{}", r.sequence_number),
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": format!("arn:aws:iam::000000000000:role/{function}"),
        "awsRegion": "us-east-1",
        "eventSourceARN": arn,
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": r.partition_key,
            "sequenceNumber": r.sequence_number,
            "data": r.data,
            "approximateArrivalTimestamp": r.arrival,
        },
    })
}

/// Like Lambda's DynamoDB Streams and Kinesis triggers with `ReportBatchItemFailures`: reads
/// every shard of `stream` from the start, invokes the function with up to the mapping's batch
/// size of records in shard order, and on a reported record retries from it, with the records
/// after it. A record the mapping's retry policy gives up on (its age, or a finite retry count)
/// goes to the on-failure destination (`destination`, as Lambda's record of it: shard and
/// sequence numbers, never the data) and the shard moves on.
pub async fn stream_trigger(
    stream: Stream,
    mut invoker: Invoker,
    destination: (aws_sdk_sqs::Client, String),
    mapping: Mapping,
) {
    let function = invoker.function.clone();
    let stats = invoker.stats.clone();
    let mut shards: std::collections::BTreeMap<String, Shard> = Default::default();
    loop {
        for id in stream.shards().await {
            shards.entry(id).or_default();
        }
        let mut idle = true;
        // A closed shard is read until what was read from it is done.
        for (id, shard) in shards
            .iter_mut()
            .filter(|(_, s)| !s.closed || !s.pending.is_empty())
        {
            if shard.pending.is_empty() {
                if shard.iterator.is_none() {
                    // An iterator that failed (expired, trimmed) is taken again after the last
                    // record done, or from the start.
                    shard.iterator = stream.iterator(id, shard.last_seq.as_deref()).await;
                }
                let Some(current) = shard.iterator.clone() else {
                    continue;
                };
                match stream
                    .read(id, &current, mapping.batch_size, &function)
                    .await
                {
                    Ok((records, next)) => {
                        shard.closed = next.is_none();
                        shard.iterator = next;
                        shard.pending = records;
                    }
                    Err(e) => {
                        if let Some(e) = e {
                            eprintln!("local-lambda: trigger {function}: {e}");
                        }
                        shard.iterator = None;
                        continue;
                    }
                }
            }
            if shard.pending.is_empty() {
                continue;
            }
            idle = false;
            let records: Vec<&Value> = shard.pending.iter().map(|r| &r.event).collect();
            // Done: the records before the first reported failure; none if the invocation failed.
            let done = invoker.deliver(&records).await.map_or(0, |answer| {
                let first = reported(&answer).first().copied();
                first.map_or(records.len(), |f| {
                    shard.pending.iter().position(|r| r.seq == f).unwrap_or(0)
                })
            });
            stats.acknowledged.fetch_add(done as u64, Ordering::Relaxed);
            let Some((seq, condition, tries)) = shard.after_invocation(done, &mapping) else {
                if !shard.pending.is_empty() {
                    // Still retried: again in a moment, from the record that failed.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                continue;
            };
            let (sqs, url) = &destination;
            let record = stream.on_failure(id, &seq, condition, tries, &function);
            let sent = sqs
                .send_message()
                .queue_url(url)
                .message_body(record.to_string());
            match sent.send().await {
                Ok(_) => shard.handed_on(),
                Err(e) => {
                    eprintln!("local-lambda: trigger {function}: on-failure destination: {e}")
                }
            }
        }
        if idle {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What the triggers read from and write to: the SQS emulator, the local DynamoDB's endpoint
/// (its tables' streams), the Kinesis emulator.
#[derive(Debug)]
pub struct Ends<'a> {
    pub sqs: &'a aws_sdk_sqs::Client,
    pub dynamodb: String,
    pub kinesis: &'a Kinesis,
}

/// The running triggers and, per function, their counters and the switch that loses the next
/// invocation's answer.
#[derive(Debug)]
pub struct Triggers {
    pub handles: Vec<tokio::task::JoinHandle<()>>,
    pub lose_next: BTreeMap<String, Arc<AtomicBool>>,
    pub stats: BTreeMap<String, Arc<TriggerStats>>,
}

/// Starts each function's event source mappings in `plan`, on the `created` resources, invoking
/// the functions through the invoke API at `invoke_url`, each invocation cut short when an
/// instance of its function dies (`functions`).
pub fn start(
    plan: &Plan,
    created: &Resources,
    functions: &Functions,
    invoke_url: &str,
    ends: &Ends<'_>,
) -> Result<Triggers> {
    // A guard only: the runtime API proxy ends an invocation at its function's timeout
    // ([`crate::runtime_api`]), and the trigger sees it fail then.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| e.to_string())?;
    let mut t = Triggers {
        handles: Vec::new(),
        lose_next: BTreeMap::new(),
        stats: BTreeMap::new(),
    };
    for (f, def) in &plan.functions {
        for m in &def.mappings {
            let stats = Arc::new(TriggerStats::default());
            t.stats.insert(f.to_owned(), stats.clone());
            let lose_next = Arc::new(AtomicBool::new(false));
            t.lose_next.insert(f.to_owned(), lose_next.clone());
            let invoker = Invoker {
                http: http.clone(),
                invoke_url: invoke_url.to_owned(),
                function: f.to_owned(),
                deaths: functions.deaths(f)?,
                stats,
                lose_next,
            };
            let stream = match &m.source {
                Source::Sqs(q) => {
                    let queue = (created.url(q)?, created.arn(f, q)?);
                    let trigger = sqs_trigger(ends.sqs.clone(), invoker, queue, m.clone());
                    t.handles.push(tokio::spawn(trigger));
                    continue;
                }
                Source::DynamoDbStream(table) => Stream::DynamoDb {
                    endpoint: ends.dynamodb.clone(),
                    arn: created.arn(f, table)?,
                },
                Source::Kinesis(name) => Stream::Kinesis {
                    kinesis: ends.kinesis.clone(),
                    name: name.clone(),
                    arn: created.arn(f, name)?,
                },
            };
            let failures = m
                .on_failure
                .as_deref()
                .ok_or_else(|| format!("{f}: its stream trigger has no on-failure destination"))?;
            let destination = (ends.sqs.clone(), created.url(failures)?);
            let trigger = stream_trigger(stream, invoker, destination, m.clone());
            t.handles.push(tokio::spawn(trigger));
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DynamoDB Streams mapping with this retry policy.
    fn mapping(max_retries: Option<u32>, max_age: Option<Duration>) -> Mapping {
        Mapping {
            source: crate::plan::Source::DynamoDbStream("T".into()),
            batch_size: 100,
            window: Duration::ZERO,
            partial: true,
            max_retries,
            max_age,
            on_failure: Some("Failures".into()),
        }
    }

    fn record(seq: &str, age_secs: f64) -> StreamRecord {
        StreamRecord {
            seq: seq.into(),
            arrival: now_secs() - age_secs,
            event: json!({"dynamodb": {"SequenceNumber": seq, "NewImage": {"secret": {"S": "data"}}}}),
        }
    }

    /// A DynamoDB Streams record its function keeps reporting, older than the mapping's
    /// `MaximumRecordAgeInSeconds` (retries unbounded, as `MaximumRetryAttempts: -1`), is handed
    /// to the on-failure destination as Lambda writes it (where it was, never its data), and the
    /// shard moves past it to the record after it.
    #[test]
    fn a_stream_record_past_its_maximum_age_is_handed_to_on_failure_and_the_shard_moves_on() {
        let retry = mapping(None, Some(Duration::from_secs(60)));
        let mut shard = Shard {
            pending: vec![record("100", 120.0), record("200", 1.0), record("300", 1.0)],
            ..Shard::default()
        };
        // The function reports the first record failed: it is past its age, so it is given up.
        let (seq, condition, tries) = shard.after_invocation(0, &retry).expect("given up");
        assert_eq!(
            (seq.as_str(), condition, tries),
            ("100", "RecordAgeExceeded", 1)
        );
        let stream = Stream::DynamoDb {
            endpoint: "http://127.0.0.1:9".into(),
            arn: "arn:aws:dynamodb:us-east-1:000000000000:table/T/stream/1".into(),
        };
        let handed = stream.on_failure("shard-1", &seq, condition, tries, "reader");
        let info = &handed["DDBStreamBatchInfo"];
        assert_eq!(
            (
                info["shardId"].as_str(),
                info["startSequenceNumber"].as_str(),
                info["endSequenceNumber"].as_str()
            ),
            (Some("shard-1"), Some("100"), Some("100"))
        );
        assert_eq!(
            info["streamArn"],
            "arn:aws:dynamodb:us-east-1:000000000000:table/T/stream/1"
        );
        assert_eq!(handed["requestContext"]["condition"], "RecordAgeExceeded");
        assert!(
            !handed.to_string().contains("secret"),
            "never the record's data: {handed}"
        );
        shard.handed_on();
        assert_eq!(shard.last_seq.as_deref(), Some("100"));
        let left: Vec<&str> = shard.pending.iter().map(|r| r.seq.as_str()).collect();
        assert_eq!(
            left,
            ["200", "300"],
            "the shard moves on to the next record"
        );

        // A young record that fails is retried (unbounded), counted, never handed on.
        for tries in 1..=5 {
            assert!(
                shard.after_invocation(0, &retry).is_none(),
                "retried, try {tries}"
            );
            assert_eq!(shard.failing, Some(("200".to_owned(), tries)));
        }
        // Once it is done, the next failure is counted afresh.
        assert!(shard.after_invocation(1, &retry).is_none());
        assert_eq!(shard.failing, Some(("300".to_owned(), 1)));
        assert_eq!(shard.last_seq.as_deref(), Some("200"));
    }

    /// With a finite `MaximumRetryAttempts`, a record is given up after that many retries.
    #[test]
    fn a_stream_record_past_its_retries_is_given_up() {
        let retry = mapping(Some(2), None);
        let mut shard = Shard {
            pending: vec![record("1", 0.0)],
            ..Shard::default()
        };
        assert!(shard.after_invocation(0, &retry).is_none());
        assert!(shard.after_invocation(0, &retry).is_none());
        let given_up = shard.after_invocation(0, &retry);
        assert_eq!(
            given_up,
            Some(("1".to_owned(), "RetryAttemptsExhausted", 3))
        );
    }
}
