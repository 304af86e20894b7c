//! The simulation itself: a seed replays exactly, the seeds hold every invariant, and (in the
//! `simulation-planted` build) every planted bug is caught.

mod support;

use lambda_dedup_sim::run_seed;

#[test]
fn a_seed_replays_to_the_same_trace_and_digest() {
    let (a, b) = (run_seed(7), run_seed(7));
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.trace, b.trace);
    assert!(a.trace.len() > 20, "a run has steps: {}", a.trace.len());
    assert_ne!(a.digest, run_seed(8).digest, "another seed, another run");
}

#[test]
fn forty_seeds_hold_every_invariant() {
    support::assert_every_invariant_holds(0..40);
}

#[test]
fn the_runs_meet_the_faults_they_claim_to_inject() {
    let lines: Vec<String> = (0..40).flat_map(|s| run_seed(s).trace).collect();
    for needle in [
        "crashed",
        "dlq ",
        "replay of",
        "AppliedThenFailed",
        " retry",
        " duplicate",
        " conflict",
        "stream",
        "shard 3 ",
        " 1 parked,",
        " relay ",
        " sweep inbox: ",
        " sweep intents: ",
        "webhook ",
        " Duplicate",
        " 409 Conflict",
        "relay stream skipped",
        "handler panicked",
        "redrive of fifo-",
        " in group ",
        "crashed between effect and checkpoint",
        "crashed between start and mark",
        "name taken, duplicate start",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "no step with {needle:?} in 40 seeds"
        );
    }
}

#[cfg(feature = "simulation-planted")]
#[test]
fn every_planted_bug_is_caught() {
    for bug in lambda_dedup_sim::planted::SIMULATED {
        let caught = (0..300).any(|s| {
            !lambda_dedup_sim::run_seed_planted(s, *bug)
                .violations
                .is_empty()
        });
        assert!(caught, "planted {bug}: missed in 300 seeds");
    }
}
