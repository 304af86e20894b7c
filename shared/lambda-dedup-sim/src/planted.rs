//! Which planted bugs ([`Planted`], compiled into the library only with `simulation-planted`)
//! the seeds must catch, which the exploring scheduler catches instead, and the command line's
//! choice of them.

use std::str::FromStr;

use lambda_dedup::planted::{Planted, UnknownPlanted};

/// The planted bugs a run of seeds catches, each by an invariant of [`crate::invariants`].
pub const SIMULATED: &[Planted] = &[
    Planted::CompleteIgnoresOwner,
    Planted::ReleaseIgnoresOwner,
    Planted::ClaimIgnoresLiveLease,
    Planted::CommitNotAtomic,
    Planted::FingerprintNotCompared,
    Planted::CreateOnceOverwrites,
    Planted::SequenceOlderApplied,
    Planted::FifoGroupNotBlocked,
    Planted::LeasedCompletesBeforeCall,
    Planted::StoreFaultAcknowledged,
    Planted::CheckpointPassesUnsettled,
    Planted::CacheSharedAcrossTenants,
    Planted::PanicAcknowledged,
    Planted::RetentionBelowHorizonAccepted,
    Planted::RelaySettlesBeforeCall,
    Planted::WebhookConflictAcknowledged,
    Planted::DurableStepKeyedPerAttempt,
    Planted::DispatcherNamesByMessageId,
];

/// The planted bugs that break only some interleavings, which the seeded executor does not
/// reach: `cargo xtask simulate --explore` (lambda-dedup-shuttle's tests/planted.rs) catches
/// them.
pub const EXPLORED: &[Planted] = &[
    Planted::CheckThenAct,
    Planted::FifoGroupPipelined,
    Planted::CacheFilledBeforeCommit,
    Planted::KeyIgnoresTenant,
];

/// What `--planted` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Every bug of [`SIMULATED`].
    All,
    /// One bug.
    One(Planted),
}

/// A `--planted` value the seeds cannot check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// No such bug.
    #[error("{0} (or all)")]
    Unknown(#[from] UnknownPlanted),
    /// A bug only the exploring scheduler meets.
    #[error(
        "planted {0} breaks only some interleavings: `cargo xtask simulate --explore` catches it, not the seeds"
    )]
    Explored(Planted),
}

impl FromStr for Choice {
    type Err = ChoiceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "all" {
            return Ok(Choice::All);
        }
        let bug: Planted = s.parse()?;
        if EXPLORED.contains(&bug) {
            return Err(ChoiceError::Explored(bug));
        }
        Ok(Choice::One(bug))
    }
}

impl Choice {
    /// The bugs chosen.
    pub fn bugs(self) -> Vec<Planted> {
        match self {
            Choice::All => SIMULATED.to_vec(),
            Choice::One(bug) => vec![bug],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_planted_bug_is_checked_by_the_seeds_or_the_explorer_once() {
        for bug in Planted::ALL {
            let places = usize::from(SIMULATED.contains(bug)) + usize::from(EXPLORED.contains(bug));
            assert_eq!(places, 1, "{bug}");
        }
        assert_eq!(SIMULATED.len() + EXPLORED.len(), Planted::ALL.len());
    }

    #[test]
    fn names_parse_into_the_choice_and_a_misspelt_one_lists_the_valid_ones() {
        assert_eq!("all".parse::<Choice>(), Ok(Choice::All));
        assert_eq!(
            "commit-not-atomic".parse::<Choice>(),
            Ok(Choice::One(Planted::CommitNotAtomic))
        );
        let msg = match "commit-not-atomik".parse::<Choice>() {
            Ok(c) => panic!("a misspelt name parsed as {c:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            msg.contains("commit-not-atomic") && msg.contains("or all"),
            "{msg}"
        );
        assert_eq!(
            "check-then-act".parse::<Choice>(),
            Err(ChoiceError::Explored(Planted::CheckThenAct))
        );
    }
}
