//! Why a delivery goes back to its queue: each retry has a typed cause, its stable code, and a
//! metric of its own in the account's EMF line, so retries can be counted and alarmed on by
//! cause (a store outage is not a provider outage is not a deadline too short).

use std::fmt;

/// Why a delivery was not finished now and is reported for redelivery (S8, S12, S13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryCause {
    /// Another delivery of the same event holds a live lease (S8: in progress).
    InProgress,
    /// The mark store failed or could not be reached, transiently (S13).
    Store,
    /// An effect's condition failed; nothing of the event was written.
    EffectCondition,
    /// The work refused the event for now ([`HandlerError::Transient`](crate::HandlerError):
    /// a provider down, a call over its timeout); the account counts these by their
    /// [`TransientCause`](crate::TransientCause) too.
    Transient,
    /// The work, or the plan it returned, panicked.
    Panicked,
    /// The invocation's deadline came before the delivery was finished.
    Deadline,
    /// The runner ended without an outcome for it (fail closed, S14).
    NotProcessed,
    /// An earlier message of its FIFO group (or record of its shard) was not acknowledged, so
    /// it waits to keep the order (S12).
    Blocked,
}

impl RetryCause {
    /// Every cause, in the order of the account's counters.
    pub const ALL: [RetryCause; 8] = [
        RetryCause::InProgress,
        RetryCause::Store,
        RetryCause::EffectCondition,
        RetryCause::Transient,
        RetryCause::Panicked,
        RetryCause::Deadline,
        RetryCause::NotProcessed,
        RetryCause::Blocked,
    ];

    /// The stable code in logs: `in_progress`, `store`, …
    pub fn code(self) -> &'static str {
        match self {
            RetryCause::InProgress => "in_progress",
            RetryCause::Store => "store",
            RetryCause::EffectCondition => "effect_condition",
            RetryCause::Transient => "transient",
            RetryCause::Panicked => "panicked",
            RetryCause::Deadline => "deadline",
            RetryCause::NotProcessed => "not_processed",
            RetryCause::Blocked => "blocked",
        }
    }

    /// The EMF metric that counts it: `RetryInProgress`, `RetryStore`, …
    pub fn metric(self) -> &'static str {
        match self {
            RetryCause::InProgress => "RetryInProgress",
            RetryCause::Store => "RetryStore",
            RetryCause::EffectCondition => "RetryEffectCondition",
            RetryCause::Transient => "RetryTransient",
            RetryCause::Panicked => "RetryPanicked",
            RetryCause::Deadline => "RetryDeadline",
            RetryCause::NotProcessed => "RetryNotProcessed",
            RetryCause::Blocked => "RetryBlocked",
        }
    }

    /// Its position in [`ALL`](Self::ALL).
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for RetryCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every cause of `all` (a cause type's `ALL`) sits at its own index, with its own code and
    /// metric.
    pub(crate) fn assert_each_cause_is_its_own<C: Copy + fmt::Display>(
        all: &[C],
        code: fn(C) -> &'static str,
        metric: fn(C) -> &'static str,
        index: fn(C) -> usize,
    ) {
        let codes: HashSet<_> = all.iter().map(|c| code(*c)).collect();
        let metrics: HashSet<_> = all.iter().map(|c| metric(*c)).collect();
        assert_eq!(codes.len(), all.len());
        assert_eq!(metrics.len(), all.len());
        for (i, c) in all.iter().enumerate() {
            assert_eq!(index(*c), i, "{c}");
        }
    }

    /// Every cause sits at its own index, with its own code and metric.
    #[test]
    fn each_cause_has_its_own_index_code_and_metric() {
        let all = RetryCause::ALL;
        assert_each_cause_is_its_own(
            &all,
            RetryCause::code,
            RetryCause::metric,
            RetryCause::index,
        );
    }
}
