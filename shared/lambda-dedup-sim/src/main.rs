//! `lambda-dedup-sim`: run seeds of the simulation (`cargo xtask simulate` calls it).

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use lambda_dedup_sim::{SeedReport, run_seed};

/// Deterministic simulation of the dedup protocol.
#[derive(Debug, Parser)]
struct Args {
    /// Run seeds 0..N.
    #[arg(long)]
    seeds: Option<u64>,
    /// Run one seed and print its trace.
    #[arg(long)]
    seed: Option<u64>,
    /// Run seeds until this many minutes have passed.
    #[arg(long)]
    minutes: Option<f64>,
    /// A planted bug's name, or `all` (needs the `simulation-planted` build).
    #[arg(long)]
    planted: Option<String>,
    /// Seeds tried per planted bug before it counts as missed.
    #[arg(long, default_value_t = 300)]
    planted_seeds: u64,
}

fn print_violation(r: &SeedReport) {
    for v in &r.violations {
        println!("seed {}: VIOLATION {}: {}", r.seed, v.invariant, v.detail);
    }
    println!(
        "shortened trace of seed {} (replay: cargo xtask simulate --seed {}):",
        r.seed, r.seed
    );
    for line in r.trace.iter().rev().take(25).rev() {
        println!("  {line}");
    }
}

/// Runs each planted bug of `choice` (a `--planted` value) over up to `seeds` seeds.
#[cfg(feature = "simulation-planted")]
fn planted(choice: &str, seeds: u64) -> ExitCode {
    use lambda_dedup_sim::planted::Choice;
    let choice: Choice = match choice.parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut missed = 0;
    for bug in choice.bugs() {
        let caught = (0..seeds)
            .map(|s| lambda_dedup_sim::run_seed_planted(s, bug))
            .find(|r| !r.violations.is_empty());
        match caught {
            Some(r) => println!(
                "planted {bug}: caught (seed {}, {})",
                r.seed, r.violations[0].invariant
            ),
            None => {
                missed += 1;
                println!("planted {bug}: MISSED in {seeds} seeds");
            }
        }
    }
    if missed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(not(feature = "simulation-planted"))]
fn planted(_: &str, _: u64) -> ExitCode {
    eprintln!(
        "--planted needs the simulation-planted build (cargo xtask simulate --planted adds it)"
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(p) = &args.planted {
        return planted(p, args.planted_seeds);
    }
    if let Some(seed) = args.seed {
        let r = run_seed(seed);
        for line in &r.trace {
            println!("{line}");
        }
        println!("trace digest: {}", r.digest);
        if !r.violations.is_empty() {
            print_violation(&r);
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let budget = args
        .minutes
        .map(|m| std::time::Duration::from_secs_f64(m * 60.0));
    let limit = args
        .seeds
        .unwrap_or(if budget.is_some() { u64::MAX } else { 200 });
    let (mut ran, mut violations) = (0u64, 0u64);
    for seed in 0..limit {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        let r = run_seed(seed);
        ran += 1;
        if !r.violations.is_empty() {
            violations += 1;
            print_violation(&r);
        }
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "simulated {ran} seeds, {violations} violations ({:.0} seeds per minute)",
        ran as f64 * 60.0 / secs
    );
    if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
