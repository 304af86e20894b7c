//! What the two stream sources — Kinesis ([`crate::kinesis`]) and DynamoDB Streams
//! ([`crate::dynamodb_stream`]) — do the same way (Kafka, [`crate::kafka`], shares the records
//! and their parking, and answers per partition): an invocation's records as messages through
//! the work, accounted for by record, the records before the checkpoint that can never apply
//! parked, and the first record neither done nor parked named in the response. Each source
//! says only what one of its records is ([`StreamRecord`]): its id and message, what parking
//! it sends, and the source's response.

use std::collections::HashMap;
use std::future::Future;

use lambda_dedup::Message;
use lambda_dedup_engine::BatchReport;

use crate::parking::{Letter, Parked, Parking};

/// A record of a stream source: what the sources do differently.
pub(crate) trait StreamRecord: Sync {
    /// The source's partial batch response.
    type Response;

    /// The id the record is reported by (its sequence number).
    fn id(&self) -> String;

    /// The record as a library message.
    fn message(&self) -> Message;

    /// What parking the record with `code` sends: the whole record (see [`Parking`]).
    fn parked(&self, function: &str, code: &str) -> Letter;

    /// What parking sends instead when the whole record is too large for the parking queue:
    /// a body of at most `room` bytes naming the record and digesting its bytes (its attributes
    /// are the whole letter's, set by [`Parking::letter`]).
    fn parked_by_reference(&self, function: &str, code: &str, room: usize) -> Letter;

    /// The response naming `checkpoint`, or no record.
    fn respond(checkpoint: Option<String>) -> Self::Response;
}

/// The records as library messages, in the batch's order.
pub(crate) fn messages<R: StreamRecord>(records: &[R]) -> Vec<Message> {
    records.iter().map(R::message).collect()
}

/// Names `checkpoint`, if any, in a response's `failures`: one failure `F` whose identifier
/// (reached by `identifier`) is the checkpoint. Both sources' responses have this shape.
#[cfg_attr(
    not(any(feature = "kinesis", feature = "dynamodb-streams", test)),
    allow(dead_code)
)]
pub(crate) fn name_checkpoint<F: Default>(
    failures: &mut Vec<F>,
    checkpoint: Option<String>,
    identifier: impl FnOnce(&mut F) -> &mut Option<String>,
) {
    if let Some(id) = checkpoint {
        let mut failure = F::default();
        *identifier(&mut failure) = Some(id);
        failures.push(failure);
    }
}

impl Parking {
    /// [`Parking::park_each`] over an invocation's `records`: those before the checkpoint that
    /// can never apply parked as their source parks them, whole, or by reference when whole
    /// they would not fit the queue.
    pub(crate) async fn park_records<R: StreamRecord>(
        &self,
        function: &str,
        records: &[R],
        report: &BatchReport,
    ) -> Parked {
        let by_id: HashMap<String, &R> = records.iter().map(|r| (r.id(), r)).collect();
        self.park_each(function, report, |id, code| {
            let r = by_id.get(id)?;
            let whole = r.parked(function, code);
            Some(self.letter(whole, |room| r.parked_by_reference(function, code, room)))
        })
        .await
    }
}

/// Runs one stream invocation: converts its `records`, hands them to `process` (usually
/// `run_batch` with a flow, which keeps each group's order), rebuilds the report by record,
/// prints the account as one EMF line in `namespace` ([`crate::sqs::accounted`]), parks the
/// records before the checkpoint that can never apply, and answers with the first record
/// neither done nor parked. Parked records stay `rejected` or `conflict` in the account (S14).
#[cfg_attr(
    not(any(feature = "kinesis", feature = "dynamodb-streams", test)),
    allow(dead_code)
)]
pub(crate) async fn run<R, F, Fut>(
    namespace: &str,
    function: &str,
    margin: std::time::Duration,
    context: &lambda_runtime::Context,
    records: &[R],
    parking: &Parking,
    process: F,
) -> Result<R::Response, lambda_runtime::Error>
where
    R: StreamRecord,
    F: FnOnce(Vec<Message>) -> Fut,
    Fut: Future<Output = BatchReport>,
{
    let batch = messages(records);
    let report = crate::sqs::accounted(namespace, function, margin, context, batch, process).await;
    let parked = parking.park_records(function, records, &report).await;
    Ok(R::respond(parked.checkpoint))
}

/// What an invocation of a door that parks (Kafka, Amazon MQ) runs with, besides its records
/// and work.
#[cfg(any(feature = "kafka", feature = "mq", test))]
pub(crate) struct Invocation<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) function: &'a str,
    pub(crate) margin: std::time::Duration,
    pub(crate) context: &'a lambda_runtime::Context,
    pub(crate) parking: &'a Parking,
    pub(crate) max_concurrency: usize,
}

/// The outcome of a record whose body travels in base64 and is not base64: rejected, no key
/// derived (S2).
#[cfg(any(feature = "kafka", feature = "mq", test))]
pub fn not_base64() -> lambda_dedup_engine::Outcome {
    lambda_dedup_engine::Outcome::Rejected {
        code: lambda_dedup::Reason::BodyNotBase64,
        reason: "the record's data is not base64".into(),
        key: None,
        invalid: None,
    }
}

/// `records` through `process` (`run_batch`: each group in order, bounded), those whose id is
/// in `undecodable` rejected without it ([`not_base64`]), the report rebuilt by record and its
/// account printed ([`crate::sqs::accounted`]).
#[cfg(any(feature = "kafka", feature = "mq", test))]
pub(crate) async fn accounted_records<R, F, Fut>(
    at: &Invocation<'_>,
    records: &[R],
    undecodable: &std::collections::HashSet<String>,
    process: F,
) -> BatchReport
where
    R: StreamRecord,
    F: Fn(Message) -> Fut,
    Fut: Future<Output = lambda_dedup_engine::Outcome>,
{
    let process = &process;
    let work = |batch| {
        lambda_dedup_engine::run_batch(batch, at.max_concurrency, move |m: Message| async move {
            if undecodable.contains(&m.message_id) {
                return not_base64();
            }
            process(m).await
        })
    };
    let batch = messages(records);
    crate::sqs::accounted(
        at.namespace,
        at.function,
        at.margin,
        at.context,
        batch,
        work,
    )
    .await
}
