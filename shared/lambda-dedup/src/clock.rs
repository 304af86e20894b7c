//! Where "now" comes from. Every time comparison the store makes (TTL passed? lease expired?) uses
//! one value of "now" taken from a [`Clock`] and sent to DynamoDB as an expression value, so the
//! decision is made by the conditional write, not by a read-then-decide (S4).

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The time an RFC 3339 text names (`2026-12-07T10:00:00Z`, offsets honoured), if it is one
/// and falls after 1970: how a setting names a moment (the settings crate reads it here, where
/// the time library already is).
pub fn rfc3339(text: &str) -> Option<SystemTime> {
    let t = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    let millis = u64::try_from(t.timestamp_millis()).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(millis))
}

/// A source of wall-clock time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to: for tests of leases and TTL without sleeping.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: SystemTime) -> Self {
        Self(Mutex::new(start))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Milliseconds since the Unix epoch (0 for times before it).
pub fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Seconds since the Unix epoch (0 for times before it): the unit of DynamoDB's TTL attribute.
pub fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The last instant a time read from outside may name, in epoch seconds: 9999-12-31T23:59:59Z,
/// the last RFC 3339 can write. A producer's time or a stored one beyond it is out of range.
pub const MAX_EPOCH_SECS: u64 = 253_402_300_799;

/// The inverse of [`epoch_millis`], saturated at [`MAX_EPOCH_SECS`] (never a panic, whatever
/// is stored). Input from a producer goes through [`checked_from_epoch_millis`] instead.
pub fn from_epoch_millis(ms: u64) -> SystemTime {
    checked_from_epoch_millis(ms).unwrap_or_else(latest)
}

/// The inverse of [`epoch_secs`], saturated at [`MAX_EPOCH_SECS`] (never a panic, whatever is
/// stored). Input from a producer goes through [`checked_from_epoch_secs`] instead.
pub fn from_epoch_secs(s: u64) -> SystemTime {
    checked_from_epoch_secs(s).unwrap_or_else(latest)
}

/// `ms` milliseconds after the Unix epoch, or `None` beyond [`MAX_EPOCH_SECS`].
pub fn checked_from_epoch_millis(ms: u64) -> Option<SystemTime> {
    if ms / 1000 > MAX_EPOCH_SECS {
        return None;
    }
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

/// `s` seconds after the Unix epoch, or `None` beyond [`MAX_EPOCH_SECS`].
pub fn checked_from_epoch_secs(s: u64) -> Option<SystemTime> {
    if s > MAX_EPOCH_SECS {
        return None;
    }
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(s))
}

/// [`MAX_EPOCH_SECS`] as a time (representable on every platform Rust supports).
fn latest() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(MAX_EPOCH_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42: no number read as a time panics. Beyond year 9999 (up to `u64::MAX` seconds,
    /// which overflows `SystemTime`) the checked forms say `None` and the plain ones saturate.
    #[test]
    fn time_from_any_epoch_number_never_panics() {
        for n in [
            0,
            1,
            MAX_EPOCH_SECS,
            MAX_EPOCH_SECS + 1,
            i64::MAX as u64,
            u64::MAX,
        ] {
            let secs = checked_from_epoch_secs(n);
            assert_eq!(secs.is_some(), n <= MAX_EPOCH_SECS, "{n}");
            assert!(from_epoch_secs(n) <= latest());
            let millis = checked_from_epoch_millis(n);
            assert_eq!(millis.is_some(), n / 1000 <= MAX_EPOCH_SECS, "{n}");
            assert!(from_epoch_millis(n) <= latest() + Duration::from_millis(999));
        }
        assert_eq!(epoch_secs(from_epoch_secs(u64::MAX)), MAX_EPOCH_SECS);
    }
}
