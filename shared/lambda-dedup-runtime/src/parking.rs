//! Parking (S15): the records of a stream that can never apply go, whole, to an SQS queue
//! before the checkpoint passes them, so an ordered stream is never held by a poison record and
//! nothing is lost when the stream's retention ends. Kinesis ([`crate::kinesis`]) and DynamoDB
//! Streams ([`crate::dynamodb_stream`]) each say what a parked record looks like.

use lambda_dedup_batch::{BatchReport, Outcome};

use crate::queue::Queue;
use crate::settings::{Env, SettingsError};

/// The variable naming the parking queue of a stream function (Kinesis, DynamoDB Streams) (required).
pub const PARKING_QUEUE_VARIABLE: &str = "DEDUP_PARKING_QUEUE_URL";

/// The code a record is parked with, if its outcome says it can never apply: a rejection's own
/// code, or `conflict`. `None` for what is done or may yet be done (a retry).
pub(crate) fn never_applies(outcome: &Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Rejected { code, .. } | Outcome::Reconciled { code, .. } => Some(code.code()),
        Outcome::Conflict => Some("conflict"),
        _ => None,
    }
}

/// Where a stream function parks the records that can never apply: an SQS queue
/// (`DEDUP_PARKING_QUEUE_URL`), its client built on the first record parked.
///
/// What is parked, as one JSON message: `{"function", "code", "streamArn", "record"}` (and
/// `"shardId"` for Kinesis), where `record` is the record exactly as Lambda delivered it
/// (Kinesis: `kinesis.data` the base64 data as received, `partitionKey`, `sequenceNumber`,
/// `eventID`, `eventSourceARN`…; DynamoDB Streams: `eventName`, `dynamodb` with its keys,
/// images and `SequenceNumber`…); with the message attributes `dedup-reason` (the code),
/// `dedup-sequence-number` (and `dedup-shard-id` for Kinesis), so a reader can deduplicate
/// without parsing the body.
#[derive(Debug)]
pub struct Parking {
    pub(crate) queue: Queue,
}

/// How the parking of one invocation went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parked {
    /// Records parked (now passed by the checkpoint).
    pub parked: u64,
    /// Records whose parking failed (the checkpoint: Lambda retries from them).
    pub failed: u64,
    /// The first record not done, neither acknowledged nor parked: the checkpoint.
    pub checkpoint: Option<String>,
}

impl Parking {
    /// The parking queue `DEDUP_PARKING_QUEUE_URL`; without one the function refuses to start
    /// (see the module docs for why).
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::read(&Env::process())
    }

    /// The parking queue named in `env` (see [`from_env`](Self::from_env)).
    pub fn read(env: &Env) -> Result<Self, SettingsError> {
        env.required(PARKING_QUEUE_VARIABLE).map(|url| Self {
            queue: Queue::new(url.trim()),
        })
    }

    /// Parking in `queue`.
    pub fn new(queue: Queue) -> Self {
        Self { queue }
    }

    /// Goes through the invocation's outcomes in order: acknowledged ones are passed, those
    /// that can never apply are parked as `message(id, code)` says (body and attributes; `None`
    /// for an id not in the invocation), and passed once SQS has them; the first record that is
    /// neither — a retry, or a record whose parking failed — is the checkpoint, and nothing
    /// after it is parked (it all comes again). Counts and logs what it parked, never the data.
    pub(crate) async fn park_each<F>(
        &self,
        function: &str,
        report: &BatchReport,
        message: F,
    ) -> Parked
    where
        F: Fn(&str, &str) -> Option<(String, Vec<(String, String)>)>,
    {
        let mut out = Parked::default();
        for (id, outcome) in report.outcomes() {
            if outcome.acknowledged() {
                continue;
            }
            let Some((code, (body, attributes))) =
                never_applies(outcome).and_then(|code| Some((code, message(id, code)?)))
            else {
                out.checkpoint = Some(id.clone());
                break;
            };
            match self.queue.send(body, &attributes).await {
                Ok(()) => {
                    out.parked += 1;
                    tracing::warn!(
                        function,
                        sequence_number = %id,
                        code,
                        "parked a record that can never apply (S15)"
                    );
                }
                Err(e) => {
                    out.failed += 1;
                    tracing::error!(function, sequence_number = %id, code, error = %e,
                        "could not park a record that can never apply; the stream retries from it");
                    out.checkpoint = Some(id.clone());
                    break;
                }
            }
        }
        if out.parked + out.failed > 0 {
            println!(
                "{}",
                crate::emf::line(
                    function,
                    &[
                        ("Parked", "Count", out.parked),
                        ("ParkingFailed", "Count", out.failed)
                    ]
                )
            );
        }
        out
    }
}

#[cfg(test)]
impl Parking {
    /// Parking into a queue whose endpoint refuses connections (a real loopback port nobody
    /// listens on), so every send fails.
    pub(crate) fn unreachable() -> Self {
        let (client, port) = crate::queue::unreachable_client();
        Parking::new(Queue::with_client(
            format!("http://127.0.0.1:{port}/000000000000/parking"),
            client,
        ))
    }
}
