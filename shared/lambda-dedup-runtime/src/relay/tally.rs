//! One invocation's account ([`Tally`]: every record ends in exactly one count, S14) and what
//! it answers ([`Handled`]).

use aws_lambda_events::event::streams::DynamoDbEventResponse;

use super::layout::{Layout, Repeats};

/// How one record ended, when it did not fail transiently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    Settled,
    Parked,
    AlreadySettled,
    Ignored,
}

/// The account of one invocation: every record ends in exactly one of these counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Records in the batch.
    pub records: u64,
    /// Items acted on and settled now.
    pub settled: u64,
    /// Items parked (never actionable, or refused for good): alarmed on.
    pub parked: u64,
    /// Items not acted on because they were already settled ([`Repeats::Answered`] only).
    pub already_settled: u64,
    /// Records that are not for the relay.
    pub ignored: u64,
    /// The record that failed transiently (0 or 1): the stream retries from it.
    pub transient: u64,
    /// Records not attempted: behind a transient failure, or not reached before the deadline.
    pub deferred: u64,
}

impl Tally {
    /// Whether every record has exactly one ending.
    pub fn closes(&self) -> bool {
        self.records
            == self.settled
                + self.parked
                + self.already_settled
                + self.ignored
                + self.transient
                + self.deferred
    }

    /// One CloudWatch EMF record of this tally for `function` (namespace `lambda-dedup`,
    /// dimension `Function`), the settled count named as `layout` says; `AlreadySettled` only
    /// where repeats are answered. Its names are not the SQS functions' outcomes, so `cargo
    /// xtask audit` leaves it alone.
    pub fn emf_line(&self, function: &str, layout: &Layout) -> String {
        let mut metrics = vec![
            ("Records", "Count", self.records),
            (layout.settled_metric.name(), "Count", self.settled),
            ("Parked", "Count", self.parked),
        ];
        if layout.repeats == Repeats::Answered {
            metrics.push(("AlreadySettled", "Count", self.already_settled));
        }
        metrics.extend([
            ("Ignored", "Count", self.ignored),
            ("Transient", "Count", self.transient),
            ("Deferred", "Count", self.deferred),
        ]);
        crate::emf::line(function, &metrics)
    }
}

/// What one stream invocation answers and counted.
#[derive(Debug)]
pub struct Handled {
    /// The partial batch response: empty, or the one record the stream retries from.
    pub response: DynamoDbEventResponse,
    /// The account, also printed as an EMF line.
    pub tally: Tally,
}
