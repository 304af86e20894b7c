//! Retention (S9): how long a mark is kept, and the redelivery horizon it must exceed.
//!
//! A mark is only useful while a duplicate can still arrive. The latest a duplicate can arrive is
//! the source's redelivery horizon: the queue's message retention, plus every redelivery
//! (`maxReceiveCount` × visibility timeout), plus the time a message may wait in the dead-letter
//! queue and then be redriven to the source (the DLQ's retention, and the redeliveries the
//! redriven copy gets), plus the window in which operators replay from an archive. A retention shorter than that silently turns late duplicates into
//! second effects, so it is refused at construction, never warned about.

use std::time::Duration;

/// A configuration the library refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Mark retention does not exceed the redelivery horizon (S9).
    #[error(
        "mark retention of {retention_secs}s does not exceed the redelivery horizon of {horizon_secs}s \
         (queue retention + 2 x maxReceiveCount x visibility timeout + DLQ retention + replay window); \
         raise the retention"
    )]
    RetentionTooShort {
        /// Configured retention, seconds.
        retention_secs: u64,
        /// Computed horizon, seconds.
        horizon_secs: u64,
    },
    /// A namespace or consumer name is empty, too long or has characters outside `A-Za-z0-9._-`.
    #[error("{what} {name:?} must be 1-64 characters of A-Z a-z 0-9 . _ -")]
    BadName {
        /// `namespace` or `consumer`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// Any other invalid setting.
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// The latest a duplicate of an event can arrive after its first delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedeliveryHorizon {
    /// The queue's `MessageRetentionPeriod`.
    pub queue_retention: Duration,
    /// The redrive policy's `maxReceiveCount`.
    pub max_receive_count: u32,
    /// The queue's `VisibilityTimeout`.
    pub visibility_timeout: Duration,
    /// The dead-letter queue's `MessageRetentionPeriod`: a message may wait there that long and
    /// then be redriven to the source (SQS's default for a DLQ made by the console is 14 days,
    /// longer than most replay windows).
    pub dlq_retention: Duration,
    /// How long after an event operators may still replay it from elsewhere (an archive).
    pub replay_window: Duration,
}

impl RedeliveryHorizon {
    /// queue retention + maxReceiveCount × visibility timeout (the first life) + DLQ retention +
    /// maxReceiveCount × visibility timeout (the life of a copy redriven from the DLQ) + replay
    /// window. Saturates instead of overflowing.
    pub fn total(&self) -> Duration {
        let receives = self
            .visibility_timeout
            .saturating_mul(self.max_receive_count);
        self.queue_retention
            .saturating_add(receives)
            .saturating_add(self.dlq_retention)
            .saturating_add(receives)
            .saturating_add(self.replay_window)
    }
}

/// The longest retention accepted: 100 years. Anything longer is a misconfiguration, and a
/// retention near `u64::MAX` seconds would make `now + retention` (a mark's TTL) overflow.
pub const MAX_RETENTION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Refuses a retention outside 1 second ..= [`MAX_RETENTION`].
fn in_range(retention: Duration) -> Result<(), ConfigError> {
    if retention < Duration::from_secs(1) {
        return Err(ConfigError::Invalid(
            "retention must be at least one second".into(),
        ));
    }
    if retention > MAX_RETENTION {
        return Err(ConfigError::Invalid(format!(
            "retention of {}s is over the {}s (100 years) accepted",
            retention.as_secs(),
            MAX_RETENTION.as_secs()
        )));
    }
    Ok(())
}

/// How long marks are kept, proven to exceed a redelivery horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(Duration);

impl Retention {
    /// A retention that covers `horizon`, or [`ConfigError::RetentionTooShort`].
    pub fn covering(retention: Duration, horizon: &RedeliveryHorizon) -> Result<Self, ConfigError> {
        in_range(retention)?;
        let h = horizon.total();
        #[cfg(feature = "simulation-planted")]
        if crate::planted::Planted::RetentionBelowHorizonAccepted.is_on() {
            return Ok(Self(retention));
        }
        if retention <= h {
            return Err(ConfigError::RetentionTooShort {
                retention_secs: retention.as_secs(),
                horizon_secs: h.as_secs(),
            });
        }
        Ok(Self(retention))
    }

    /// A retention with no horizon check, for sources with no redelivery horizon to state
    /// (direct invocations, tests). Must be at least one second.
    pub fn unchecked(retention: Duration) -> Result<Self, ConfigError> {
        in_range(retention)?;
        Ok(Self(retention))
    }

    /// The duration.
    pub fn duration(&self) -> Duration {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn horizon(visibility_secs: u64, receives: u32) -> RedeliveryHorizon {
        RedeliveryHorizon {
            queue_retention: Duration::from_secs(3600),
            max_receive_count: receives,
            visibility_timeout: Duration::from_secs(visibility_secs),
            dlq_retention: Duration::from_secs(3600),
            replay_window: Duration::from_secs(3600),
        }
    }

    /// S9: a redrive from the dead-letter queue is part of the horizon: a retention that covers
    /// the queue and the replay window but not a message's wait in the DLQ is refused.
    #[test]
    fn s9_the_horizon_counts_a_redrive_from_the_dlq() {
        let mut h = horizon(30, 5);
        h.dlq_retention = Duration::from_secs(14 * 86_400);
        assert_eq!(
            h.total(),
            Duration::from_secs(3600 + 150 + 14 * 86_400 + 150 + 3600)
        );
        let err = Retention::covering(Duration::from_secs(7 * 86_400), &h)
            .expect_err("a week does not cover 14 days in the DLQ");
        assert!(err.to_string().contains("DLQ retention"), "{err}");
        assert!(Retention::covering(Duration::from_secs(15 * 86_400), &h).is_ok());
    }

    /// S9: a retention so long that `now + retention` would overflow is refused, not accepted.
    #[test]
    fn s9_an_overflowing_retention_is_refused() {
        let err = Retention::covering(Duration::from_secs(u64::MAX), &horizon(30, 5))
            .expect_err("u64::MAX seconds");
        assert!(err.to_string().contains("100 years"), "{err}");
        assert!(Retention::unchecked(Duration::from_secs(u64::MAX)).is_err());
        let longest = Retention::covering(MAX_RETENTION, &horizon(30, 5)).expect("100 years");
        assert!(
            std::time::SystemTime::now()
                .checked_add(longest.duration())
                .is_some()
        );
    }

    /// S9: a zero retention is refused, with or without a horizon.
    #[test]
    fn s9_a_zero_retention_is_refused() {
        assert!(Retention::covering(Duration::ZERO, &horizon(0, 0)).is_err());
        assert!(Retention::unchecked(Duration::ZERO).is_err());
    }

    /// S9: a horizon whose arithmetic overflows saturates, so no finite retention covers it.
    #[test]
    fn s9_an_overflowing_horizon_is_never_covered() {
        let mut h = horizon(u64::MAX, u32::MAX);
        h.dlq_retention = Duration::MAX;
        assert_eq!(h.total(), Duration::MAX);
        assert!(Retention::covering(MAX_RETENTION, &h).is_err());
    }
}
