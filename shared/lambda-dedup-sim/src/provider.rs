//! The simulated external provider: idempotent by key while it remembers the key, forgets keys
//! after its retention, sometimes applies and then answers 500, sometimes slow.

use std::collections::BTreeMap;

/// What a call to the provider answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The effect happened now, or had happened under this key: its result.
    Done(String),
    /// The effect happened, then the provider answered 500.
    AppliedThenFailed,
}

/// The provider's keys and the effects it applied, per event.
#[derive(Debug, Default)]
pub struct Provider {
    /// Idempotency key → when it was first used (true ms) and the result.
    keys: BTreeMap<String, (u64, String)>,
    /// Event id → times its effect was applied.
    applied: BTreeMap<String, u32>,
    /// How long keys are kept, in ms.
    pub retention_ms: u64,
    /// Until when (true ms) the provider is in an incident: slow, often failing.
    pub incident_until: u64,
}

impl Provider {
    /// A provider keeping keys `retention_ms`.
    pub fn new(retention_ms: u64) -> Self {
        Self {
            retention_ms,
            ..Self::default()
        }
    }

    /// One call with `key` for `event` at `now_ms`; `fail` says whether it answers 500 after
    /// applying.
    pub fn call(&mut self, key: &str, event: &str, now_ms: u64, fail: bool) -> Answer {
        if let Some((at, result)) = self.keys.get(key)
            && now_ms.saturating_sub(*at) <= self.retention_ms
        {
            return Answer::Done(result.clone());
        }
        *self.applied.entry(event.to_owned()).or_default() += 1;
        let result = format!("charge-{event}");
        self.keys.insert(key.to_owned(), (now_ms, result.clone()));
        if fail {
            Answer::AppliedThenFailed
        } else {
            Answer::Done(result)
        }
    }

    /// Times the effect of `event` was applied.
    pub fn applied(&self, event: &str) -> u32 {
        self.applied.get(event).copied().unwrap_or(0)
    }

    /// Every event the provider applied, with its count.
    pub fn all(&self) -> impl Iterator<Item = (&String, &u32)> {
        self.applied.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_idempotent_while_remembered_and_applies_again_once_forgotten() {
        let mut p = Provider::new(1_000);
        assert_eq!(p.call("k", "e", 0, true), Answer::AppliedThenFailed);
        assert_eq!(
            p.call("k", "e", 1_000, false),
            Answer::Done("charge-e".into())
        );
        assert_eq!(p.applied("e"), 1);
        p.call("k", "e", 2_001, false);
        assert_eq!(
            p.applied("e"),
            2,
            "a forgotten key applies the effect again"
        );
    }
}
