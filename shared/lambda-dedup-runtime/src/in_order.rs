//! The never-stall rules of a DynamoDB Streams consumer that works record by record (feature
//! `dynamodb-streams`), under the relays ([`crate::relay`]):
//!
//! - [`walk`]: the records of a batch in shard order; the first one that fails transiently is the
//!   checkpoint the stream retries from, and a record is started only with the time one record
//!   needs left before the invocation's deadline;
//! - [`Swept`]: what the scheduled sweep over items a stream gave up found and did
//!   ([`crate::relay`]), its EMF line and its answer;
//! - [`image_part`]: one part of a stream image, read with `serde_dynamo` into a derived struct.

use std::future::Future;
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

/// One part of a stream image, each part read on its own so that one field of the wrong type
/// says which part is wrong; `None` when it is absent or malformed.
pub fn image_part<T: serde::de::DeserializeOwned>(image: &serde_dynamo::Item) -> Option<T> {
    serde_dynamo::from_item(image.clone()).ok()
}

/// Whether one more record fits before `deadline`: at least `per_record` must be left.
pub(crate) fn time_for_one_more(
    deadline: SystemTime,
    now: SystemTime,
    per_record: Duration,
) -> bool {
    deadline
        .duration_since(now)
        .is_ok_and(|left| left >= per_record)
}

/// How a walk over one batch went.
#[derive(Debug)]
pub(crate) struct Walk<E> {
    /// The endings of the records done, in order.
    pub done: Vec<E>,
    /// The record that failed transiently (0 or 1): the stream retries from it.
    pub transient: u64,
    /// Records not attempted: behind a transient failure, or not reached before the deadline.
    pub deferred: u64,
    /// The partial batch response: empty, or the one record the stream retries from.
    pub response: DynamoDbEventResponse,
}

/// Applies `apply` to `records` one at a time, in order. It stops at the first record that
/// fails transiently (`Err`, its reason displayed in the log), or before the first record it has
/// less than `per_record` left for (`deadline`: the invocation's; `None` for no limit), or at a
/// record still not done at the cutoff (the deadline less `margin`, the function's
/// `DEDUP_DEADLINE_MARGIN_MS`, or less a quarter of `per_record` when that is shorter), and names
/// that record in the response: the stream retries from it, so order is kept and nothing is
/// skipped (S12). Permanent refusals are the caller's endings (parked), and do not stop it (S15).
pub(crate) async fn walk<'a, E, R, F, Fut>(
    records: &'a [EventRecord],
    per_record: Duration,
    margin: Duration,
    deadline: Option<SystemTime>,
    mut apply: F,
) -> Walk<E>
where
    R: std::fmt::Display,
    F: FnMut(&'a EventRecord) -> Fut,
    Fut: Future<Output = Result<E, R>>,
{
    let mut walk = Walk {
        done: Vec::with_capacity(records.len()),
        transient: 0,
        deferred: 0,
        response: DynamoDbEventResponse::default(),
    };
    let mut retry_from: Option<&EventRecord> = None;
    for (i, record) in records.iter().enumerate() {
        let rest = (records.len() - i - 1) as u64;
        if let Some(deadline) = deadline
            && !time_for_one_more(deadline, SystemTime::now(), per_record)
        {
            if i == 0 {
                tracing::error!(
                    per_record_ms = per_record.as_millis() as u64,
                    "not one record fits in the time left: the function's timeout must exceed \
                     the time one record needs"
                );
            }
            tracing::warn!(
                sequence_number = record.change.sequence_number.as_deref().unwrap_or(""),
                not_reached = rest + 1,
                "stopping before the invocation deadline; the stream retries from this record"
            );
            walk.deferred += rest + 1;
            retry_from = Some(record);
            break;
        }
        // A call that hangs is cut off before the deadline too: the record is then retried. The
        // cutoff is the margin before the deadline, or a quarter of `per_record` when that is
        // shorter (a record started with `per_record` left keeps most of it).
        let cutoff = crate::bound::cutoff_at(deadline, margin.min(per_record / 4));
        let reason = match crate::bound::within(cutoff, apply(record)).await {
            Some(Ok(ending)) => {
                walk.done.push(ending);
                continue;
            }
            Some(Err(reason)) => reason.to_string(),
            None => crate::bound::ABANDONED.to_owned(),
        };
        tracing::warn!(event_id = %record.event_id, reason = %reason,
            "record not done; the stream retries from this record");
        walk.transient += 1;
        walk.deferred += rest;
        retry_from = Some(record);
        break;
    }
    if let Some(record) = retry_from {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = record.change.sequence_number.clone();
        walk.response.batch_item_failures.push(failure);
    }
    walk
}

/// What one sweep found and did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Items still pending.
    pub pending: u64,
    /// Of those, re-driven now (pending longer than the bound).
    pub redriven: u64,
    /// How long the oldest pending item has waited (0 without any); alarmed on.
    pub oldest_pending: Duration,
}

impl Swept {
    /// One CloudWatch EMF record of this sweep, its pending count named `pending_metric`.
    pub fn emf_line(&self, function: &str, pending_metric: &str) -> String {
        crate::emf::line(
            function,
            &[
                (pending_metric, "Count", self.pending),
                ("Redriven", "Count", self.redriven),
                (
                    "OldestPendingSeconds",
                    "Seconds",
                    self.oldest_pending.as_secs(),
                ),
            ],
        )
    }

    /// The answer of a scheduled invocation.
    pub fn answer(&self) -> serde_json::Value {
        serde_json::json!({
            "pending": self.pending,
            "redriven": self.redriven,
            "oldest_pending_seconds": self.oldest_pending.as_secs(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::time_for_one_more;
    use std::time::{Duration, SystemTime};

    /// A record is started only with a whole provider call plus the margin left.
    #[test]
    fn a_record_is_started_only_with_time_for_a_whole_call() {
        let now = SystemTime::now();
        let per_record = Duration::from_millis(700);
        assert!(time_for_one_more(
            now + Duration::from_secs(1),
            now,
            per_record
        ));
        assert!(time_for_one_more(now + per_record, now, per_record));
        assert!(!time_for_one_more(
            now + Duration::from_millis(699),
            now,
            per_record
        ));
        assert!(!time_for_one_more(
            now - Duration::from_secs(1),
            now,
            per_record
        ));
    }
}
