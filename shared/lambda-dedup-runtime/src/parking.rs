//! Parking (S15): the records of a stream that can never apply go, whole, to an SQS queue
//! before the checkpoint passes them, so an ordered stream is never held by a poison record and
//! nothing is lost when the stream's retention ends. Kinesis ([`crate::kinesis`]) and DynamoDB
//! Streams ([`crate::dynamodb_stream`]) each say what a parked record looks like.
//!
//! A record too large to park whole is parked **by reference** instead, never left as the
//! checkpoint: a Kinesis record's data travels in base64 inside JSON, so a record near Kinesis's
//! 1 MiB limit parks as about 1.37 MB, over what SQS accepts (1 MiB, body and attributes
//! together), and a refused parking holds the shard until the record reaches its maximum age
//! (hours). A record's parked form is measured as SQS measures it before it is sent; over
//! the queue's largest message it becomes the record's metadata, its size and the SHA-256
//! digest of its bytes, with as much of its head as fits, and the attribute
//! `dedup-parked-by: reference`. The bytes themselves stay in the stream for its retention,
//! where the sequence number finds them (each source's module says how); the digest proves that
//! what an operator fetches is what was parked. Why not S3: a second store, bucket and
//! permission on every stream function for what is rare and, within the stream's retention,
//! still readable where it is.

use lambda_dedup_engine::{BatchReport, Pass};

use crate::queue::Queue;
use lambda_dedup_config::{Settings, SettingsError};

/// SQS's largest message, body and attributes together (1 MiB): the default of
/// the queue's largest message.
pub(crate) const SQS_MAX_MESSAGE_BYTES: usize = 1_048_576;

/// The attribute saying how a record was parked: `whole` or `reference`.
pub(crate) const PARKED_BY_ATTRIBUTE: &str = "dedup-parked-by";

/// One message for the parking queue: its body and string attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Letter {
    pub(crate) body: String,
    pub(crate) attributes: Vec<(String, String)>,
}

impl Letter {
    /// Its size as SQS counts it against the queue's maximum: the body's bytes and, for each
    /// attribute, its name, its data type (`String`) and its value.
    pub(crate) fn size(&self) -> usize {
        let attributes: usize = self
            .attributes
            .iter()
            .map(|(name, value)| name.len() + "String".len() + value.len())
            .sum();
        self.body.len() + attributes
    }

    /// Whether it is a record parked by reference (see the module docs).
    fn by_reference(&self) -> bool {
        self.attributes
            .iter()
            .any(|(n, v)| n == PARKED_BY_ATTRIBUTE && v == "reference")
    }
}

/// The SHA-256 digest of `bytes`, in lower-case hex: how a record parked by reference names
/// its bytes.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// How many bytes of a head, sent in base64, fit in `room` bytes of a message (base64 is 4
/// bytes for every 3), less a little for the JSON around it.
#[cfg(any(feature = "kinesis", feature = "broker"))]
pub(crate) fn head_room(room: usize) -> usize {
    room.saturating_sub(64) / 4 * 3
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
/// without parsing the body, and `dedup-parked-by` (`whole`, or `reference` for a record too
/// large to park whole: see the module docs).
#[derive(Debug)]
pub struct Parking {
    pub(crate) queue: Queue,
    max_message_bytes: usize,
}

/// How the parking of one invocation went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Parked {
    /// Records parked (now passed by the checkpoint).
    pub parked: u64,
    /// Of those, records too large to park whole, parked by reference (see the module docs).
    pub by_reference: u64,
    /// Records whose parking failed (the checkpoint: Lambda retries from them).
    pub failed: u64,
    /// The first record not done, neither acknowledged nor parked: the checkpoint.
    pub checkpoint: Option<String>,
}

impl Parking {
    /// The parking queue of `settings` (`DEDUP_PARKING_QUEUE_URL`, sent to with its SDK
    /// timeouts); without one a stream function refuses to start (see the module docs for why).
    pub(crate) fn from_settings(settings: &Settings) -> Result<Self, SettingsError> {
        let url = settings.queues.required_parking()?;
        Ok(Self::new(Queue::new(url, settings.sdk_timeouts)))
    }

    /// Parking in `queue`, which accepts messages of up to `SQS_MAX_MESSAGE_BYTES`.
    pub fn new(queue: Queue) -> Self {
        Self {
            queue,
            max_message_bytes: SQS_MAX_MESSAGE_BYTES,
        }
    }

    /// Parking in a queue configured to accept less than SQS's maximum (its
    /// `MaximumMessageSize`, at least 1,024 bytes): records whose parked form is larger are
    /// parked by reference (see the module docs). A value over SQS's maximum is read as it.
    #[cfg(test)]
    pub(crate) fn with_max_message_bytes(mut self, max: usize) -> Self {
        self.max_message_bytes = max.min(SQS_MAX_MESSAGE_BYTES);
        self
    }

    /// What parking sends for a record: `whole`, when it fits the queue; otherwise what
    /// `by_reference(room)` makes of it in `room` bytes of body. Never a message the queue
    /// refuses for its size, so a large record cannot hold its shard.
    pub(crate) fn letter(
        &self,
        mut whole: Letter,
        by_reference: impl FnOnce(usize) -> Letter,
    ) -> Letter {
        if whole.size() <= self.max_message_bytes {
            whole
                .attributes
                .push((PARKED_BY_ATTRIBUTE.to_owned(), "whole".to_owned()));
            return whole;
        }
        let mut attributes = whole.attributes;
        attributes.push((PARKED_BY_ATTRIBUTE.to_owned(), "reference".to_owned()));
        let fixed = Letter {
            body: String::new(),
            attributes: attributes.clone(),
        };
        let mut letter = by_reference(self.max_message_bytes.saturating_sub(fixed.size()));
        letter.attributes = attributes;
        letter
    }

    /// Goes through the invocation's outcomes in order ([`BatchReport::passage`], the
    /// library's one rule of a stream's checkpoint): acknowledged ones are passed, those
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
        F: Fn(&str, &str) -> Option<Letter>,
    {
        let mut out = Parked::default();
        let passage = report.passage();
        out.checkpoint = passage.checkpoint.map(str::to_owned);
        for (id, pass) in passage.passed {
            let Pass::Park(code) = pass else {
                continue;
            };
            let Some(letter) = message(id, code) else {
                out.checkpoint = Some(id.to_owned());
                break;
            };
            let by_reference = letter.by_reference();
            match self.queue.send(letter.body, &letter.attributes).await {
                Ok(()) if by_reference => {
                    out.parked += 1;
                    out.by_reference += 1;
                    tracing::warn!(
                        function,
                        sequence_number = %id,
                        code,
                        max_message_bytes = self.max_message_bytes,
                        "parked a record that can never apply by reference, too large to park \
                         whole: its bytes are in the stream until its retention ends (S15)"
                    );
                }
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
                    out.checkpoint = Some(id.to_owned());
                    break;
                }
            }
        }
        if out.parked + out.failed > 0 {
            crate::emf::emit(crate::emf::line(
                function,
                &[
                    ("Parked", "Count", out.parked),
                    ("ParkedByReference", "Count", out.by_reference),
                    ("ParkingFailed", "Count", out.failed),
                ],
            ));
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

    /// Parking into an SQS on loopback that, as SQS does, refuses messages over SQS's maximum
    /// (1 MiB, body and attributes) and keeps the others: the parking, and what it took.
    pub(crate) fn refusing_over_sqs_maximum() -> (Self, crate::queue::Taken) {
        let (client, url, taken) = crate::queue::sqs_on_loopback(SQS_MAX_MESSAGE_BYTES);
        (Parking::new(Queue::with_client(url, client)), taken)
    }
}
