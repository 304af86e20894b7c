//! Planted bugs for the checkers (the deterministic simulation `lambda-dedup-sim` and the
//! exploring scheduler `lambda-dedup-shuttle`): compiled only with the `simulation-planted`
//! feature, which no function's build enables. Each mutation in the library is guarded by
//! `Planted::….is_on()`, so one checker build holds them all and switches one on at a
//! time, on the checking thread only. The bugs are one enum: a misspelt bug does not compile.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

/// Declares [`Planted`] with each bug's name, and [`Planted::ALL`], from one list.
macro_rules! planted {
    ($($(#[doc = $doc:literal])* $bug:ident = $name:literal,)*) => {
        /// A planted bug: a mutation of the library that a checker must catch.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Planted {
            $($(#[doc = $doc])* $bug,)*
        }

        impl Planted {
            /// Every planted bug, in declaration order.
            pub const ALL: &'static [Planted] = &[$(Planted::$bug,)*];

            /// The bug's name on the command line (`cargo xtask simulate --planted <name>`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Planted::$bug => $name,)*
                }
            }
        }
    };
}

planted! {
    /// Memory store: `complete` succeeds for a lease the caller no longer owns (S6 fencing).
    CompleteIgnoresOwner = "complete-ignores-owner",
    /// Memory store: `release` frees a claim the caller no longer owns (S6 fencing).
    ReleaseIgnoresOwner = "release-ignores-owner",
    /// Memory store: a claim takes over an in-progress mark whose lease is still live.
    ClaimIgnoresLiveLease = "claim-ignores-live-lease",
    /// Memory store: a commit refused by the mark writes its effects all the same (S5).
    CommitNotAtomic = "commit-not-atomic",
    /// Memory store: a duplicate's fingerprint is not compared with the stored one (S11).
    FingerprintNotCompared = "fingerprint-not-compared",
    /// Memory store: a create-once put over an existing item answers applied.
    CreateOnceOverwrites = "create-once-overwrites",
    /// Memory store: a claim or commit judges a copy of the mark read under an earlier lock
    /// (check, then act: S4). Only an exploring scheduler meets it.
    CheckThenAct = "check-then-act",
    /// Memory store: a sequenced write refused because the stored high-water is newer is
    /// written anyway, over the newer state (an old sequence redriven days later).
    SequenceOlderApplied = "sequence-older-applied",
    /// Engine: a FIFO group goes on after a message that was not acknowledged.
    FifoGroupNotBlocked = "fifo-group-not-blocked",
    /// Engine: a FIFO group's messages run two at a time. Only an exploring scheduler meets it.
    FifoGroupPipelined = "fifo-group-pipelined",
    /// Engine: the leased flow completes its mark before the call.
    LeasedCompletesBeforeCall = "leased-completes-before-call",
    /// Engine: a retryable store failure is answered applied (S13).
    StoreFaultAcknowledged = "store-fault-acknowledged",
    /// Engine: a stream's checkpoint passes a record that was not settled.
    CheckpointPassesUnsettled = "checkpoint-passes-unsettled",
    /// Engine: the warm cache keys a mark without its tenant (S1).
    CacheSharedAcrossTenants = "cache-shared-across-tenants",
    /// Engine: the warm cache is filled before the commit. Only an exploring scheduler meets it.
    CacheFilledBeforeCommit = "cache-filled-before-commit",
    /// Engine: a handler that panicked is answered applied, not retried.
    PanicAcknowledged = "panic-acknowledged",
    /// Core: a retention shorter than the redelivery horizon is accepted (S9).
    RetentionBelowHorizonAccepted = "retention-below-horizon-accepted",
    /// Core: the key is derived without the tenant (S1). Only an exploring scheduler meets it.
    KeyIgnoresTenant = "key-ignores-tenant",
    /// Runtime: the relay settles an intent before the provider's call.
    RelaySettlesBeforeCall = "relay-settles-before-call",
    /// Runtime: the webhook receiver acknowledges a conflicting delivery (S11).
    WebhookConflictAcknowledged = "webhook-conflict-acknowledged",
    /// Simulated durable step guard (the simulation's model of the runtime's `durable::Steps`,
    /// whose SDK the simulation does not build): a step's mark keyed by the attempt, not by
    /// the execution and the step alone, so a replay after a crash between the effect and the
    /// checkpoint applies the effect again.
    DurableStepKeyedPerAttempt = "durable-step-keyed-per-attempt",
    /// Simulated dispatcher (the simulation's model of the runtime's `durable::starts`): the
    /// execution's name derived from the delivery's message id, not the event's key, so a
    /// producer's retry under a new message id starts a second execution.
    DispatcherNamesByMessageId = "dispatcher-names-by-message-id",
}

impl fmt::Display for Planted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no planted bug; its message lists the valid names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no planted bug {name:?}; the planted bugs are: {}", valid_names())]
pub struct UnknownPlanted {
    /// The name given.
    pub name: String,
}

fn valid_names() -> String {
    Planted::ALL
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Planted {
    type Err = UnknownPlanted;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Planted::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPlanted { name: s.to_owned() })
    }
}

thread_local! {
    static ACTIVE: Cell<Option<Planted>> = const { Cell::new(None) };
}

/// Switches the planted bug `bug` on for this thread (`None`: every bug off).
pub fn set(bug: Option<Planted>) {
    ACTIVE.with(|a| a.set(bug));
}

impl Planted {
    /// Whether this planted bug is on for this thread.
    pub fn is_on(self) -> bool {
        ACTIVE.with(|a| a.get() == Some(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_bug_and_names_are_unique() {
        for p in Planted::ALL {
            assert_eq!(p.name().parse::<Planted>(), Ok(*p));
        }
        let mut names: Vec<_> = Planted::ALL.iter().map(|p| p.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Planted::ALL.len());
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_valid_ones() {
        let msg = match "commit-not-atomik".parse::<Planted>() {
            Ok(p) => panic!("a misspelt name parsed as {p}"),
            Err(e) => e.to_string(),
        };
        assert!(msg.contains("commit-not-atomik"), "{msg}");
        assert!(msg.contains("commit-not-atomic"), "{msg}");
        assert!(msg.contains("webhook-conflict-acknowledged"), "{msg}");
    }

    #[test]
    fn a_bug_is_on_only_once_set_and_on_this_thread_only() {
        assert!(!Planted::CommitNotAtomic.is_on());
        set(Some(Planted::CommitNotAtomic));
        assert!(Planted::CommitNotAtomic.is_on());
        assert!(!Planted::CheckThenAct.is_on());
        let elsewhere = std::thread::spawn(|| Planted::CommitNotAtomic.is_on())
            .join()
            .unwrap_or(true);
        assert!(!elsewhere);
        set(None);
        assert!(!Planted::CommitNotAtomic.is_on());
    }
}
