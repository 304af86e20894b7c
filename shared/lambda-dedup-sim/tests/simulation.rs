//! The simulation itself: a seed replays exactly, the seeds hold every invariant, and (in the
//! `simulation-planted` build) every planted bug is caught.

use lambda_dedup_sim::run_seed;

#[test]
fn a_seed_replays_to_the_same_trace_and_digest() {
    let (a, b) = (run_seed(7, None), run_seed(7, None));
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.trace, b.trace);
    assert!(a.trace.len() > 20, "a run has steps: {}", a.trace.len());
    assert_ne!(
        a.digest,
        run_seed(8, None).digest,
        "another seed, another run"
    );
}

#[test]
fn forty_seeds_hold_every_invariant() {
    for seed in 0..40 {
        let r = run_seed(seed, None);
        assert!(
            r.violations.is_empty(),
            "seed {seed}: {:?}\n{}",
            r.violations,
            r.trace.join("\n")
        );
    }
}

#[test]
fn the_runs_meet_the_faults_they_claim_to_inject() {
    let lines: Vec<String> = (0..40).flat_map(|s| run_seed(s, None).trace).collect();
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
    for name in lambda_dedup_sim::planted::PLANTED {
        let caught = (0..300).any(|s| !run_seed(s, Some(name)).violations.is_empty());
        assert!(caught, "planted {name}: missed in 300 seeds");
    }
}

#[cfg(not(feature = "simulation-planted"))]
#[test]
fn without_the_planted_feature_no_planted_bug_is_compiled_in() {
    for name in lambda_dedup_sim::planted::PLANTED {
        let r = run_seed(0, Some(name));
        assert!(
            r.violations.is_empty(),
            "{name} changed a default build: {:?}",
            r.violations
        );
        assert_eq!(r.digest, run_seed(0, None).digest, "{name} changed the run");
    }
}
