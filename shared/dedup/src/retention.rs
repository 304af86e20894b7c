//! Retention (S9): how long a mark is kept, and the redelivery horizon it must exceed.
//!
//! A mark is only useful while a duplicate can still arrive. The latest a duplicate can arrive is
//! the source's redelivery horizon: the queue's message retention, plus every redelivery
//! (`maxReceiveCount` × visibility timeout), plus the window in which operators replay from a
//! dead-letter queue or archive. A retention shorter than that silently turns late duplicates into
//! second effects, so it is refused at construction, never warned about.

use std::time::Duration;

/// A configuration the library refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Mark retention does not exceed the redelivery horizon (S9).
    #[error(
        "mark retention of {retention_secs}s does not exceed the redelivery horizon of {horizon_secs}s \
         (queue retention + maxReceiveCount x visibility timeout + replay window); raise the retention"
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
    /// How long after an event operators may still replay it (DLQ redrive, archive replay).
    pub replay_window: Duration,
}

impl RedeliveryHorizon {
    /// queue retention + maxReceiveCount × visibility timeout + replay window.
    pub fn total(&self) -> Duration {
        self.queue_retention
            .saturating_add(
                self.visibility_timeout
                    .saturating_mul(self.max_receive_count),
            )
            .saturating_add(self.replay_window)
    }
}

/// How long marks are kept, proven to exceed a redelivery horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(Duration);

impl Retention {
    /// A retention that covers `horizon`, or [`ConfigError::RetentionTooShort`].
    pub fn covering(retention: Duration, horizon: &RedeliveryHorizon) -> Result<Self, ConfigError> {
        let h = horizon.total();
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
        if retention < Duration::from_secs(1) {
            return Err(ConfigError::Invalid(
                "retention must be at least one second".into(),
            ));
        }
        Ok(Self(retention))
    }

    /// The duration.
    pub fn duration(&self) -> Duration {
        self.0
    }
}
