//! A gate that lets an action through at most once per interval ([`RefreshGate`]): a forger
//! flooding the webhook receiver with bad signatures makes each of them a verification failure,
//! and each failure may ask Secrets Manager whether the secret was rotated; the gate bounds those
//! reads to one per interval, however many requests fail and however many run at once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one pass per `every`, counted from the last pass (or from when it was made).
#[derive(Debug)]
pub(crate) struct RefreshGate {
    every: Duration,
    last: Mutex<Instant>,
}

impl RefreshGate {
    /// A gate opened at `since` (the secret was just read): the next pass is `every` later.
    pub(crate) fn new(every: Duration, since: Instant) -> Self {
        Self {
            every,
            last: Mutex::new(since),
        }
    }

    /// Whether to act at `now`: true at most once per interval; a pass moves the interval on.
    pub(crate) fn pass(&self, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(*last) >= self.every {
            *last = now;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However many ask within an interval, one passes; the next interval lets one more.
    #[test]
    fn one_pass_per_interval_however_many_ask() {
        let t0 = Instant::now();
        let gate = RefreshGate::new(Duration::from_secs(30), t0);
        let early = (0..1000)
            .filter(|i| gate.pass(t0 + Duration::from_millis(*i)))
            .count();
        assert_eq!(early, 0, "the read at init counts as the interval's pass");
        let later = t0 + Duration::from_secs(30);
        let passed = (0..1000)
            .filter(|i| gate.pass(later + Duration::from_millis(*i)))
            .count();
        assert_eq!(passed, 1);
        assert!(gate.pass(later + Duration::from_secs(30)));
    }
}
