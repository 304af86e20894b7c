//! Simulated time: tokio's paused clock, seen by each instance through its own skew.

use std::time::{Duration, SystemTime};

use lambda_dedup::Clock;
use tokio::time::Instant;

/// The wall-clock time the simulation starts at, in seconds since the Unix epoch.
pub const EPOCH_SECS: u64 = 1_780_000_000;

/// The wall-clock time the simulation starts at.
pub fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_SECS)
}

/// An instance's clock: the simulated time plus its skew (milliseconds, either way).
#[derive(Debug, Clone, Copy)]
pub struct SimClock {
    start: Instant,
    skew_ms: i64,
}

impl SimClock {
    /// The clock of an instance skewed by `skew_ms`, from the run's `start`.
    pub fn new(start: Instant, skew_ms: i64) -> Self {
        Self { start, skew_ms }
    }

    /// Milliseconds of simulated time since the start (the true time, no skew).
    pub fn true_ms(start: Instant) -> u64 {
        u64::try_from(Instant::now().duration_since(start).as_millis()).unwrap_or(u64::MAX)
    }
}

impl Clock for SimClock {
    fn now(&self) -> SystemTime {
        let t = epoch() + Instant::now().duration_since(self.start);
        let skew = Duration::from_millis(self.skew_ms.unsigned_abs());
        if self.skew_ms >= 0 {
            t + skew
        } else {
            t - skew
        }
    }
}
