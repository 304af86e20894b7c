//! Configuration shared by every function, from the environment.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DEDUP_NAMESPACE` | environment namespace of keys (`prod`, `dev`), S1 | required |
//! | `DEDUP_CONSUMER` | consumer name in keys, S1 | the function's name |
//! | `DEDUP_MARK_TABLE` | the mark table | required |
//! | `DEDUP_RETENTION_SECONDS` | how long marks are kept, S9 | 1209600 (14 days) |
//! | `DEDUP_QUEUE_RETENTION_SECONDS` | the source queue's message retention | 345600 (4 days) |
//! | `DEDUP_MAX_RECEIVE_COUNT` | the redrive policy's maxReceiveCount | 5 |
//! | `DEDUP_VISIBILITY_TIMEOUT_SECONDS` | the queue's visibility timeout | 180 |
//! | `DEDUP_REPLAY_WINDOW_SECONDS` | how long after an event operators may replay it | 259200 (3 days) |
//! | `DEDUP_MAX_CONCURRENCY` | messages of a batch processed at once, S12 | 10 |
//! | `DEDUP_LEASE_SECONDS` | longest lease of the leased flow, S6 | 60 |
//!
//! A retention that does not exceed queue retention + maxReceiveCount × visibility timeout +
//! replay window is refused at start (S9): the function does not run with it.

use std::time::Duration;

use dedup::{RedeliveryHorizon, Retention, Scope};
use dedup_dynamodb::{Client, MarkStore};

/// A required variable, or an error naming it.
pub fn required(name: &str) -> Result<String, String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(format!("environment variable {name} must be set")),
    }
}

/// An optional variable parsed as `T`, or `default`; an unparsable value is an error, not the
/// default.
pub fn optional<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| format!("environment variable {name}={v:?} is not valid")),
        _ => Ok(default),
    }
}

/// What every function reads from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace and consumer of the keys.
    pub scope: Scope,
    /// The mark table.
    pub mark_table: String,
    /// Mark retention, checked against the redelivery horizon.
    pub retention: Retention,
    /// Bound on concurrent messages in a batch.
    pub max_concurrency: usize,
    /// Longest lease of the leased flow.
    pub lease: Duration,
}

impl Settings {
    /// Reads the settings; `function` is the default consumer name.
    pub fn from_env(function: &str) -> Result<Self, String> {
        let secs = |name: &str, default: u64| optional(name, default).map(Duration::from_secs);
        let namespace = required("DEDUP_NAMESPACE")?;
        let consumer = optional("DEDUP_CONSUMER", function.to_owned())?;
        let scope = Scope::new(&namespace, &consumer).map_err(|e| e.to_string())?;
        let horizon = RedeliveryHorizon {
            queue_retention: secs("DEDUP_QUEUE_RETENTION_SECONDS", 4 * 86_400)?,
            max_receive_count: optional("DEDUP_MAX_RECEIVE_COUNT", 5)?,
            visibility_timeout: secs("DEDUP_VISIBILITY_TIMEOUT_SECONDS", 180)?,
            replay_window: secs("DEDUP_REPLAY_WINDOW_SECONDS", 3 * 86_400)?,
        };
        let retention =
            Retention::covering(secs("DEDUP_RETENTION_SECONDS", 14 * 86_400)?, &horizon)
                .map_err(|e| format!("refusing to start: {e}"))?;
        Ok(Self {
            scope,
            mark_table: required("DEDUP_MARK_TABLE")?,
            retention,
            max_concurrency: optional("DEDUP_MAX_CONCURRENCY", 10)?,
            lease: secs("DEDUP_LEASE_SECONDS", 60)?,
        })
    }

    /// The mark store these settings describe.
    pub fn mark_store(&self, client: Client) -> MarkStore {
        MarkStore::new(client, self.mark_table.clone(), self.retention).with_lease(self.lease)
    }
}
