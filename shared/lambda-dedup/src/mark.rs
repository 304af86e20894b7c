//! Marks, leases and the outcomes of claiming and committing (S4–S6, S8, S11).

use std::time::SystemTime;

use crate::fingerprint::Fingerprint;
use crate::key::DedupKey;

/// The state of a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkStatus {
    /// Claimed under a lease; the effect may or may not have happened yet (S6).
    InProgress,
    /// The effect is done; later deliveries are duplicates (S8).
    Completed,
}

impl MarkStatus {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkStatus::InProgress => "IN_PROGRESS",
            MarkStatus::Completed => "COMPLETED",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IN_PROGRESS" => Some(MarkStatus::InProgress),
            "COMPLETED" => Some(MarkStatus::Completed),
            _ => None,
        }
    }
}

/// A random token naming the holder of a claim, for fencing (S6).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerToken(String);

impl OwnerToken {
    /// A fresh random token (128 bits from the OS).
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        // The OS RNG failing is not recoverable in any useful way; fall back to time + address
        // entropy rather than panic, since uniqueness (not secrecy) is what fencing needs.
        if getrandom::fill(&mut bytes).is_err() {
            let t = crate::clock::epoch_millis(SystemTime::now()).to_be_bytes();
            let a = (&bytes as *const _ as usize).to_be_bytes();
            bytes[..8].copy_from_slice(&t);
            bytes[8..8 + a.len().min(8)].copy_from_slice(&a[..a.len().min(8)]);
        }
        Self(hex::encode(bytes))
    }

    /// Rebuilds a token from its stored form.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }

    /// The stored form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A mark as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The key.
    pub key: DedupKey,
    /// In progress or completed.
    pub status: MarkStatus,
    /// The holder of an in-progress claim.
    pub owner: Option<OwnerToken>,
    /// When an in-progress claim's lease runs out.
    pub lease_expires_at: Option<SystemTime>,
    /// The TTL: after this the mark counts as absent, whether or not DynamoDB has deleted it (S9).
    pub expires_at: SystemTime,
    /// The payload fingerprint, if the consumer records one (S11).
    pub fingerprint: Option<Fingerprint>,
    /// The stored result of the first processing, returned to duplicates (S8).
    pub result: Option<String>,
    /// When the event was first claimed or committed.
    pub first_seen_at: SystemTime,
    /// When it completed.
    pub completed_at: Option<SystemTime>,
}

impl Mark {
    /// Whether the mark still counts at `now` (its TTL has not passed).
    pub fn is_live(&self, now: SystemTime) -> bool {
        crate::clock::epoch_secs(self.expires_at) > crate::clock::epoch_secs(now)
    }

    /// Whether an in-progress claim's lease is still running at `now`.
    pub fn lease_is_live(&self, now: SystemTime) -> bool {
        self.status == MarkStatus::InProgress
            && self
                .lease_expires_at
                .is_some_and(|l| crate::clock::epoch_millis(l) > crate::clock::epoch_millis(now))
    }

    /// Whether this is an in-progress mark whose lease has ended at `now` (released by its
    /// holder, or run out): nothing of its holder's committed with it (S5), so a request may
    /// take it over, and its fingerprint holds nothing yet.
    pub fn is_released(&self, now: SystemTime) -> bool {
        self.status == MarkStatus::InProgress && !self.lease_is_live(now)
    }

    /// What a delivery with `offered` fingerprint finds in this mark at `now`, or `None` if the
    /// mark does not stand in its way (absent by TTL, or an expired lease with a matching
    /// fingerprint). This mirrors the store's claim condition, so that a failed conditional write
    /// can be explained from the old item it returns.
    pub fn classify(self, offered: Option<&Fingerprint>, now: SystemTime) -> Option<Seen> {
        if !self.is_live(now) {
            return None;
        }
        // S11: a conflict takes precedence over duplicate and in-progress.
        if let (Some(stored), Some(offered)) = (&self.fingerprint, offered)
            && stored != offered
        {
            return Some(Seen::Conflict {
                stored: stored.clone(),
                offered: offered.clone(),
                mark: Box::new(self),
            });
        }
        match self.status {
            MarkStatus::Completed => Some(Seen::Duplicate(Box::new(self))),
            MarkStatus::InProgress if self.lease_is_live(now) => Some(Seen::InProgress {
                lease_expires_at: self.lease_expires_at,
            }),
            MarkStatus::InProgress => None,
        }
    }
}

/// A claim held on an event (S6). Complete or release it before `expires_at`; after that another
/// process may take the event over, and this lease is fenced off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The key claimed.
    pub key: DedupKey,
    /// This holder's token.
    pub owner: OwnerToken,
    /// When the lease runs out.
    pub expires_at: SystemTime,
    /// The fingerprint claimed with.
    pub fingerprint: Option<Fingerprint>,
    /// When the event was first claimed: now for a first claim, the earlier claim's time for a
    /// takeover of an expired lease (whose holder may have called out already). A provider that
    /// forgets idempotency keys after a while may have forgotten this one since (S9, S16).
    pub first_attempt_at: SystemTime,
}

impl Lease {
    /// The idempotency key to send to the external system (same on every retry and process).
    pub fn idempotency_key(&self) -> String {
        self.key.idempotency_key()
    }
}

/// What a delivery finds when the event's mark stands in its way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Already completed: acknowledge, log and count; never an error (S8).
    Duplicate(Box<Mark>),
    /// Claimed by someone whose lease is live: do not process, do not acknowledge; report the
    /// message as failed so it comes back later (S8).
    InProgress {
        /// When the holder's lease runs out.
        lease_expires_at: Option<SystemTime>,
    },
    /// Same key, different payload: not applied, not a duplicate; count, log, dead-letter (S11).
    Conflict {
        /// The fingerprint stored with the mark.
        stored: Fingerprint,
        /// The fingerprint of this delivery.
        offered: Fingerprint,
        /// The mark that stands, as the failed write found it (the old item its condition
        /// returned, never a second read): completed (holding its answer), in flight under a
        /// live lease, or released ([`Mark::is_released`]) — which a caller that may take a
        /// key over tells apart with no further request.
        mark: Box<Mark>,
    },
}

/// The outcome of a claim (S4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This caller owns the event until the lease runs out.
    Claimed(Lease),
    /// Someone got there first.
    Seen(Seen),
}

/// The outcome of committing a mark together with effects (S5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commit {
    /// Mark and effects are written, atomically.
    Applied,
    /// The mark stood in the way; nothing was written.
    Seen(Seen),
    /// The effect at `index` (in the order given) failed its condition; nothing was written, not
    /// even the mark, so the event can be retried or dead-lettered as the caller decides.
    EffectRejected {
        /// Position of the failing effect.
        index: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Scope;
    use std::time::Duration;

    fn mark(status: MarkStatus, now: SystemTime) -> Mark {
        Mark {
            key: DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &["x"]),
            status,
            owner: Some(OwnerToken::random()),
            lease_expires_at: Some(now + Duration::from_secs(10)),
            expires_at: now + Duration::from_secs(3600),
            fingerprint: Some(Fingerprint::of_bytes(b"a")),
            result: None,
            first_seen_at: now,
            completed_at: None,
        }
    }

    #[test]
    fn classify_mirrors_the_claim_condition() {
        let now = SystemTime::now();
        let a = Fingerprint::of_bytes(b"a");
        let b = Fingerprint::of_bytes(b"b");
        let done = mark(MarkStatus::Completed, now);
        assert!(matches!(
            done.clone().classify(Some(&a), now),
            Some(Seen::Duplicate(_))
        ));
        assert!(matches!(
            done.clone().classify(None, now),
            Some(Seen::Duplicate(_))
        ));
        match done.clone().classify(Some(&b), now) {
            Some(Seen::Conflict {
                stored,
                offered,
                mark,
            }) => {
                assert_eq!((stored, offered), (a.clone(), b.clone()));
                assert_eq!(*mark, done, "the conflict carries the mark that stands");
            }
            other => panic!("{other:?}"),
        }
        assert!(!done.is_released(now));
        // S9: past its TTL it is absent, conflict or not.
        let later = now + Duration::from_secs(3601);
        assert_eq!(done.classify(Some(&b), later), None);

        let held = mark(MarkStatus::InProgress, now);
        assert!(matches!(
            held.clone().classify(Some(&a), now),
            Some(Seen::InProgress { .. })
        ));
        assert!(matches!(
            held.clone().classify(Some(&b), now),
            Some(Seen::Conflict { .. })
        ));
        let expired_lease = now + Duration::from_secs(11);
        assert_eq!(held.clone().classify(Some(&a), expired_lease), None);
        assert!(!held.is_released(now));
        assert!(held.is_released(expired_lease));
        match held.classify(Some(&b), expired_lease) {
            Some(Seen::Conflict { mark, .. }) => assert!(mark.is_released(expired_lease)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn owner_tokens_are_unique() {
        let tokens: std::collections::HashSet<_> =
            (0..1000).map(|_| OwnerToken::random()).collect();
        assert_eq!(tokens.len(), 1000);
    }
}
