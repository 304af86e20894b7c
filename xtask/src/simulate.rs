//! `cargo xtask simulate [--seeds N | --seed S | --minutes M] [--planted NAME|all]`: the
//! deterministic simulation of the protocol (`shared/lambda-dedup-sim`). The real flows run on
//! one seeded, paused executor against the simulated store, provider and broker; a seed
//! replays exactly (`--seed S` prints its trace and `trace digest: <hex>`). `--planted` builds
//! the simulation with the planted bugs (`simulation-planted`, never in a function's build)
//! and says, per bug, which seed and invariant caught it.

use std::path::Path;

use crate::Result;

/// What to simulate.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Options {
    /// Seeds 0..N.
    pub(crate) seeds: Option<u64>,
    /// One seed, with its trace.
    pub(crate) seed: Option<u64>,
    /// Seeds until this many minutes have passed.
    pub(crate) minutes: Option<f64>,
    /// A planted bug, or `all`.
    pub(crate) planted: Option<String>,
}

/// The `cargo` arguments that run the simulator for `o`.
pub(crate) fn cargo_args(o: &Options) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--locked", "-q", "-p", "lambda-dedup-sim"]
        .map(String::from)
        .to_vec();
    if o.planted.is_some() {
        args.extend(["--features".into(), "simulation-planted".into()]);
    }
    args.push("--".into());
    let flags = [
        ("--seeds", o.seeds.map(|n| n.to_string())),
        ("--seed", o.seed.map(|n| n.to_string())),
        ("--minutes", o.minutes.map(|m| m.to_string())),
        ("--planted", o.planted.clone()),
    ];
    for (flag, value) in flags {
        if let Some(v) = value {
            args.extend([flag.to_owned(), v]);
        }
    }
    args
}

/// Runs the simulator in `root`.
pub(crate) fn run(root: &Path, o: &Options) -> Result<()> {
    crate::cargo_run(root, &cargo_args(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planted_runs_build_the_planted_feature_and_others_do_not() {
        let plain = cargo_args(&Options {
            seeds: Some(200),
            ..Options::default()
        });
        assert!(!plain.iter().any(|a| a == "simulation-planted"));
        assert!(plain.ends_with(&["--seeds".to_owned(), "200".to_owned()]));
        let planted = cargo_args(&Options {
            planted: Some("all".into()),
            ..Options::default()
        });
        assert!(planted.iter().any(|a| a == "simulation-planted"));
        assert!(planted.ends_with(&["--planted".to_owned(), "all".to_owned()]));
    }
}
