//! What the simulation's test files share.

use std::ops::Range;

use lambda_dedup_sim::run_seed;

/// Runs every seed of `seeds` and asserts each holds every invariant (the failing seed's
/// violations and trace in the message).
pub(crate) fn assert_every_invariant_holds(seeds: Range<u64>) {
    for seed in seeds {
        let r = run_seed(seed);
        assert!(
            r.violations.is_empty(),
            "seed {seed}: {:?}\n{}",
            r.violations,
            r.trace.join("\n")
        );
    }
}
