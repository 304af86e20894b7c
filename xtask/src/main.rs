//! Project automation, run as `cargo xtask <command>`: the commands and what each does are
//! [`Cmd`]'s variants (`cargo xtask --help`); the guide's "This repository" page
//! (docs/book/src/repository.md) walks through them.

mod audit;
mod bench;
mod book;
mod chaos;
mod demo;
mod demo_doors;
mod demo_http;
mod deny;
mod dynamodb;
mod explore;
mod fanout;
mod functions;
mod infra;
mod local;
mod mutants;
mod package;
mod postgres;
mod simulate;
mod soak;
mod stack;
mod tools;
mod valkey;
mod workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use local_lambda::sdk_error;

type Result<T, E = String> = std::result::Result<T, E>;

/// Project automation: set-up, local stack, tests, demo and benchmarks.
#[derive(Debug, clap::Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Run the whole system end to end on local services and check the result.
    Demo,
    /// Start the local stack and run `cargo test --workspace [ARGS]` against it, then the chaos
    /// runs (skipped when ARGS pick packages or tests).
    Test {
        /// Passed on to `cargo test` (e.g. `-p dedup-tests`).
        #[arg(allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
        /// After `--`: passed on to the test binaries (e.g. `-- lease --nocapture`).
        #[arg(last = true)]
        test_args: Vec<String>,
    },
    /// Only the chaos runs of `test`: kill -9 of functions mid-batch, the local DynamoDB restarted.
    Chaos,
    /// Against a running `cargo xtask up`: does the account close (S14)?
    Audit,
    /// Refuse infra/template.yaml if it breaks a guarded invariant; run cfn-lint.
    CheckInfra,
    /// The supply chain: `cargo deny check licenses bans sources` with deny.toml.
    Deny,
    /// Build the guide (docs/book) with mdbook into target/book and check its links.
    Book,
    /// The runtime checked with no feature and with each feature a function can name alone
    /// (about 15 `cargo check`s; `test` checks the stores alone).
    Features,
    /// Model-based fault schedules against the local DynamoDB; writes docs/RELIABILITY.md.
    Soak {
        /// Schedules per flow on the local DynamoDB.
        #[arg(default_value_t = 500)]
        n: u64,
        /// Schedules per flow on the memory store (0: none).
        #[arg(long, default_value_t = 100_000)]
        memory: u64,
    },
    /// Benchmark against AWS Powertools (not a test); writes docs/BENCHMARKS.md.
    Bench {
        /// Messages per workload and run.
        #[arg(default_value_t = 1000)]
        n: usize,
        /// The simulated round trip added to every DynamoDB request, in milliseconds, for the
        /// runs with a simulated network (the others have none).
        #[arg(long, default_value_t = bench::SIMULATED_RTT_MS)]
        delay_ms: u64,
        /// Runs of each side per configuration (alternating which side goes first).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Only the PostgreSQL and Valkey rows (quick: a debug build, the rest of the report kept).
        #[arg(long)]
        stores_only: bool,
        /// Only the modelled bed (quick: a debug build, in process, no emulator and no Python;
        /// its section of the report rewritten, the rest kept).
        #[arg(long)]
        modelled_only: bool,
        /// Only the hedging rows of the single-write modes on the modelled bed (a debug build;
        /// their section rewritten, the rest kept).
        #[arg(long)]
        hedge_only: bool,
        /// Only the HTTP door beside Powertools' on the modelled bed (a debug build; N
        /// requests; its section rewritten, the rest kept).
        #[arg(long)]
        http_only: bool,
        /// Only the CPU per message under `run_concurrent` (a release build: CPU time is the
        /// figure; N messages per row; its section rewritten, the rest kept).
        #[arg(long)]
        cpu_only: bool,
    },
    /// The deterministic simulation of the protocol (lambda-dedup-sim): seeds, a seed's
    /// trace and digest, the planted-bug check.
    Simulate {
        /// Seeds 0..N (200 when nothing else is given).
        #[arg(long)]
        seeds: Option<u64>,
        /// One seed: its trace and `trace digest: <hex>`.
        #[arg(long)]
        seed: Option<u64>,
        /// Seeds until this many minutes have passed.
        #[arg(long)]
        minutes: Option<f64>,
        /// A planted bug's name, or `all`: each must be caught.
        #[arg(long)]
        planted: Option<String>,
        /// Instead: the concurrency tests under the exploring scheduler (shuttle), those whose
        /// name has FILTER only when one is given.
        #[arg(long, value_name = "FILTER", num_args = 0..=1, default_missing_value = "",
              conflicts_with_all = ["seeds", "seed", "minutes", "planted"])]
        explore: Option<String>,
    },
    /// Mutation testing of the ownership paths (cargo-mutants, installed on first use; not a CI
    /// stage): scopes memory, engine (the default two), dynamodb, postgres, valkey.
    Mutants {
        /// The scopes to run.
        scopes: Vec<String>,
        /// After `--`: passed on to `cargo mutants` (e.g. `-- --list`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Build every function for arm64 in release (cargo lambda), each alone, and report zip sizes.
    Package {
        /// One build of every function, features unified, in the dev profile (what CI runs: it
        /// proves each compiles and links for arm64 in a fraction of the time; its zips carry
        /// the union of the features, unoptimised, so deploy the ones built alone).
        #[arg(long)]
        together: bool,
    },
    /// Start the local stack and keep it running until Enter (prints where to send).
    Up,
    /// Start the local DynamoDB (Dynoxide) alone and keep it running (prints the endpoint).
    Dynamodb,
    /// The local DynamoDB's own process (run by xtask itself, see `dynamodb.rs`).
    #[command(hide = true)]
    ServeDynamodb {
        #[arg(long)]
        port: u16,
        /// A SQLite file to keep the data in; in memory without it.
        #[arg(long)]
        data: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match <Cli as clap::Parser>::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with success; mistakes to stderr with failure.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if let Cmd::ServeDynamodb { port, data } = cli.command {
        // It stops on a signal by itself.
        return exit_code(dynamodb::serve(port, data).await);
    }
    STARTED.get_or_init(std::time::Instant::now);
    local_lambda::signals::install();
    let outcome = match cli.command {
        Cmd::Test { args, test_args } => test(&args, &test_args).await,
        Cmd::Demo => demo::run(&root()).await,
        Cmd::Chaos => chaos_only().await,
        Cmd::Up => up().await,
        Cmd::CheckInfra => infra::run(&root(), true),
        Cmd::Deny => deny::run(&root()),
        Cmd::Book => book::run(&root()),
        Cmd::Features => checks_alone(&RUNTIME_FEATURES)
            .iter()
            .try_for_each(|check| cargo_run(&root(), check)),
        Cmd::Audit => audit::run(&root()).await,
        Cmd::Package { together } => package::run(&root(), together),
        Cmd::Mutants { scopes, args } => mutants::run(&root(), &scopes, &args),
        Cmd::Simulate {
            explore: Some(filter),
            ..
        } => explore::run(&root(), &filter),
        Cmd::Simulate {
            seeds,
            seed,
            minutes,
            planted,
            explore: None,
        } => simulate::run(
            &root(),
            &simulate::Options {
                seeds,
                seed,
                minutes,
                planted,
            },
        ),
        Cmd::Soak { n, memory } => soak::run(&root(), n, memory),
        Cmd::Bench {
            n,
            stores_only: true,
            ..
        } => bench::stores_only(&root(), n),
        Cmd::Bench {
            n,
            modelled_only: true,
            ..
        } => bench::modelled_only(&root(), n),
        Cmd::Bench {
            n,
            hedge_only: true,
            ..
        } => bench::hedge_only(&root(), n),
        Cmd::Bench {
            n, http_only: true, ..
        } => bench::http_only(&root(), n),
        Cmd::Bench {
            n, cpu_only: true, ..
        } => bench::cpu_only(&root(), n),
        Cmd::Bench {
            n, delay_ms, runs, ..
        } => bench::run(&root(), n, delay_ms, runs),
        Cmd::Dynamodb => dynamodb_foreground(),
        Cmd::ServeDynamodb { .. } => Ok(()),
    };
    exit_code(outcome)
}

fn exit_code(outcome: Result<()>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// When xtask started, for the elapsed time on each step.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Prints a step of the run with the time since xtask started: `xtask [  12.3s] what`.
pub(crate) fn step(what: impl std::fmt::Display) {
    let secs = STARTED
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64();
    println!("xtask [{secs:6.1}s] {what}");
}

/// The checkout xtask runs in, found at run time: the current directory or the nearest one above
/// it holding `xtask/Cargo.toml` and `infra/template.yaml`. Never the directory xtask was
/// compiled in: with a target directory shared between two checkouts, one binary serves both.
fn root() -> PathBuf {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match find_root(&here) {
        Some(root) => root,
        None => {
            eprintln!(
                "xtask: error: {} is not inside a lambda-dedup checkout (no xtask/Cargo.toml and infra/template.yaml here or above); run cargo xtask from the checkout",
                here.display()
            );
            std::process::exit(2)
        }
    }
}

/// The nearest of `start` and its ancestors that is a checkout of this workspace.
fn find_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| d.join("xtask/Cargo.toml").is_file() && d.join("infra/template.yaml").is_file())
        .map(Path::to_path_buf)
}

/// Where cargo builds: `CARGO_TARGET_DIR`, or the checkout's `target`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// The end-to-end tests that freeze what every other test uses (the local DynamoDB): named
/// `e2e_alone_*`, run on their own after the others.
const ALONE: &str = "e2e_alone_";
/// Their full names, for telling whether a caller's filter picks one.
const ALONE_TESTS: [&str; 1] =
    ["e2e_deadline::e2e_alone_a_store_hung_past_the_deadline_is_answered_in_time_and_applied_once"];

/// The `cargo test` runs for `cargo xtask test ARGS [-- HARNESS]`: the tests as asked (the whole
/// workspace unless ARGS name packages) with the `e2e_alone_*` ones skipped, then, when no filter
/// or a filter picking one of them was given, those alone (`-p dedup-tests`, one thread). And
/// whether this is the full suite (nothing picks packages or tests), which the chaos runs end.
fn passes(args: &[String], harness: &[String]) -> (Vec<Vec<String>>, bool) {
    // ARGS take hyphen values, so `--` and what follows it may come among them.
    let (args, harness) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], [&args[i + 1..], harness].concat()),
        None => (args, harness.to_vec()),
    };
    let mut filters: Vec<&str> = Vec::new();
    let mut flags = Vec::new();
    let named = picks_packages(args);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-p" | "--package" => {
                it.next();
            }
            a if a.starts_with("--package=") => {}
            "--workspace" => {}
            a if a.starts_with('-') => flags.push(a.to_owned()),
            a => filters.push(a),
        }
    }
    filters.extend(
        harness
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('-')),
    );
    let mut first = vec!["test".to_owned()];
    if !named {
        first.push("--workspace".into());
    }
    first.extend(args.iter().cloned());
    first.push("--".into());
    first.extend(harness.iter().cloned());
    first.extend(["--skip".to_owned(), ALONE.to_owned()]);
    let mut runs = vec![first];
    let wanted = filters.is_empty()
        || filters
            .iter()
            .any(|f| ALONE_TESTS.iter().any(|t| t.contains(f)));
    if wanted {
        // On the workspace, the integration target of the same workspace-wide build: `-p
        // dedup-tests` alone would unify other features (a member's tokio `test-util`) and
        // rebuild the dependency tree for one test.
        let mut alone = if named {
            vec!["test".to_owned(), "-p".into(), "dedup-tests".into()]
        } else {
            vec![
                "test".to_owned(),
                "--workspace".into(),
                "--test".into(),
                "integration".into(),
            ]
        };
        alone.extend(flags);
        alone.extend(["--".to_owned(), ALONE.to_owned(), "--test-threads=1".into()]);
        alone.extend(harness.iter().filter(|a| a.starts_with('-')).cloned());
        runs.push(alone);
    }
    let full = !named && filters.is_empty() && harness.is_empty();
    (runs, full)
}

/// Whether `cargo xtask test ARGS` picks packages (`-p`, `--package`) rather than the workspace;
/// only ARGS before a `--` are cargo's.
fn picks_packages(args: &[String]) -> bool {
    let args = match args.iter().position(|a| a == "--") {
        Some(i) => &args[..i],
        None => args,
    };
    let mut it = args.iter();
    let mut named = false;
    while let Some(a) = it.next() {
        match a.as_str() {
            "-p" | "--package" => named = it.next().is_some(),
            a if a.starts_with("--package=") => named = true,
            _ => {}
        }
    }
    named
}

/// The runtime's features a function names. With `cargo xtask test`, the runtime is checked
/// with none (`--no-default-features`) and with each store alone ([`CHECKED_ALONE`]): every
/// other build unifies the features with the workspace's, so a `cfg` that needs another feature
/// would pass there and break the one function that names only this one. The doors' features
/// are checked alone by `cargo xtask features` (about 15 checks: a report, not a CI stage) and
/// in their functions' own builds by `cargo xtask package`. The internal ones (`aws`,
/// `parking`, `checkpoint`, `shards`, `broker`) come with these.
const RUNTIME_FEATURES: [&str; 15] = [
    "dynamodb",
    "postgres",
    "valkey",
    "memory",
    "sqs-client",
    "secrets-manager",
    "kinesis",
    "dynamodb-streams",
    "kafka",
    "mq",
    "s3",
    "webhook",
    "http",
    "inbox",
    "durable",
];

/// The runtime's builds with no feature and with each store alone ([`CHECKED_ALONE`]), as a
/// function that names only that one makes: checked with the workspace's tests, so they cannot
/// rot while every other build unifies the features; then [`TESTED_ALONE`]. Nothing when ARGS
/// pick packages.
fn feature_checks(args: &[String]) -> Vec<Vec<String>> {
    if picks_packages(args) {
        return Vec::new();
    }
    let mut checks = checks_alone(&CHECKED_ALONE);
    checks.push(TESTED_ALONE.map(String::from).to_vec());
    checks
}

/// A function's start-up refusals, its binary built alone (without the feature `sqs-client`
/// the workspace's other functions name): a reconciliation queue refused where there is no SQS
/// client to send to it.
const TESTED_ALONE: [&str; 5] = ["test", "-p", "example-pg-credit", "--test", "refusal"];

/// The stores, each checked alone with every `cargo xtask test`.
const CHECKED_ALONE: [&str; 4] = ["dynamodb", "postgres", "valkey", "memory"];

/// `cargo check` of the runtime with no feature, then with each of `features` alone.
fn checks_alone(features: &[&str]) -> Vec<Vec<String>> {
    let check = [
        "check",
        "-p",
        "lambda-dedup-runtime",
        "--no-default-features",
    ];
    std::iter::once(check.map(String::from).to_vec())
        .chain(features.iter().map(|feature| {
            (check.iter().chain(&["--features", feature]))
                .map(|a| (*a).to_owned())
                .collect()
        }))
        .collect()
}

/// Runs `cargo ARGS` in `root`, failing when it fails.
fn cargo_run(root: &Path, args: &[String]) -> Result<()> {
    step(format!("running cargo {}", args.join(" ")));
    let mut cmd = std::process::Command::new(cargo());
    cmd.current_dir(root).args(args);
    let status =
        local_lambda::process::run(&mut cmd).map_err(|e| format!("could not run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo {} failed ({status})", args.join(" ")));
    }
    Ok(())
}

async fn test(args: &[String], harness: &[String]) -> Result<()> {
    let root = root();
    for check in feature_checks(args) {
        cargo_run(&root, &check)?;
    }
    infra::run(&root, false)?;
    deny::run(&root)?;
    let mut stack = stack::Stack::up(&root).await?;
    let venv = tools::venv(&root)?;
    let pg = postgres::LocalPostgres::start(venv.clone())?;
    let vk = valkey::LocalValkey::start(&venv)?;
    let (runs, full) = passes(args, harness);
    for pass in runs {
        step(format!("running cargo {}", pass.join(" ")));
        let mut cmd = std::process::Command::new(cargo());
        cmd.current_dir(&root)
            .args(&pass)
            .envs(stack.env())
            .envs(pg.env())
            .envs(vk.env());
        let status = tokio::task::spawn_blocking(move || local_lambda::process::run(&mut cmd))
            .await
            .map_err(|e| format!("could not run cargo: {e}"))?
            .map_err(|e| format!("could not run cargo: {e}"))?;
        if !status.success() {
            stack.print_logs();
            return Err(format!("tests failed ({status})"));
        }
    }
    if !stack.functions_alive() {
        stack.print_logs();
        return Err("cargo lambda watch exited during the tests".into());
    }
    // The chaos runs belong to the full suite: they are skipped when ARGS pick packages or tests.
    if full {
        if let Err(e) = chaos::run(&mut stack).await {
            stack.print_logs();
            return Err(e);
        }
        // Every function has run by now (end-to-end tests, chaos): its calls against its role.
        stack.check_privileges(&root, true)?;
    } else {
        println!("xtask: chaos runs skipped (ARGS pick packages or tests)");
    }
    drop(stack);
    step("all tests passed");
    Ok(())
}

async fn chaos_only() -> Result<()> {
    let mut stack = stack::Stack::up(&root()).await?;
    let outcome = chaos::run(&mut stack).await;
    if outcome.is_err() {
        stack.print_logs();
    }
    outcome
}

async fn up() -> Result<()> {
    let stack = stack::Stack::up(&root()).await?;
    println!("The local stack is running:");
    for (k, v) in stack.env() {
        println!("  {k}={v}");
    }
    println!(
        "Send CloudEvents to the queues above (any SQS client, endpoint DEDUP_SQS_ENDPOINT), \
         or publish them to the topics (DEDUP_TOPIC_*: SNS at the same endpoint)."
    );
    println!("Functions' log: .cache/logs/functions.log. Press Enter (or Ctrl-C) to stop.");
    let _ = tokio::task::spawn_blocking(wait_for_enter).await;
    Ok(())
}

fn dynamodb_foreground() -> Result<()> {
    let ddb = dynamodb::LocalDynamo::start(&root())?;
    println!(
        "The local DynamoDB (Dynoxide, in memory, pid {}) is running. Point a client at it with:",
        ddb.pid().unwrap_or_default()
    );
    println!("  export AWS_ENDPOINT_URL_DYNAMODB={}", ddb.endpoint());
    println!("  export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local");
    println!("Press Enter (or Ctrl-C) to stop.");
    wait_for_enter();
    Ok(())
}

fn wait_for_enter() {
    let _ = std::io::stdin().read_line(&mut String::new());
}

#[cfg(test)]
mod cli_tests {
    use super::*;
    use clap::Parser;
    use std::collections::{BTreeMap, BTreeSet};

    /// The `cargo test` runs `cargo xtask ARGV` makes, and whether the chaos runs follow.
    fn runs(argv: &[&str]) -> (Vec<Vec<String>>, bool) {
        let cli = Cli::try_parse_from(std::iter::once("xtask").chain(argv.iter().copied()))
            .expect("parses");
        match cli.command {
            Cmd::Test { args, test_args } => passes(&args, &test_args),
            other => panic!("not test: {other:?}"),
        }
    }

    /// `cargo xtask test ARGS` hands ARGS to `cargo test` as written, `--` included; the tests
    /// that freeze the store run alone, after the rest, when they are picked; the chaos runs
    /// follow the full suite only.
    #[test]
    fn test_arguments_reach_cargo_test_and_the_tests_that_freeze_the_store_run_alone() {
        assert_eq!(
            runs(&["test", "--locked"]),
            (
                vec![
                    vec!["test", "--workspace", "--locked", "--", "--skip", ALONE],
                    vec![
                        "test",
                        "--workspace",
                        "--test",
                        "integration",
                        "--locked",
                        "--",
                        ALONE,
                        "--test-threads=1"
                    ],
                ]
                .into_iter()
                .map(|r| r.into_iter().map(String::from).collect())
                .collect(),
                true
            ),
            "what CI runs: the whole suite, then the chaos runs"
        );
        let (lease, full) = runs(&["test", "-p", "dedup-tests", "--", "lease"]);
        assert_eq!(
            lease,
            [vec![
                "test",
                "-p",
                "dedup-tests",
                "--",
                "lease",
                "--skip",
                ALONE
            ]]
        );
        assert!(!full);
        assert_eq!(
            runs(&["test", "e2e"]).0[0][..3],
            ["test", "--workspace", "e2e"]
        );
        assert!(!runs(&["test", "e2e"]).1);
        assert!(!runs(&["test", "--", "--nocapture"]).1);
        let (deadline, _) = runs(&["test", "-p", "dedup-tests", "--", "deadline", "--nocapture"]);
        assert_eq!(deadline.len(), 2);
        assert_eq!(
            deadline[1],
            [
                "test",
                "-p",
                "dedup-tests",
                "--",
                ALONE,
                "--test-threads=1",
                "--nocapture"
            ]
        );
    }

    /// The runtime with no feature and with each store alone is checked, and pg-credit's
    /// refusals tested alone, with every run of the workspace's tests, and not when ARGS pick
    /// packages.
    #[test]
    fn the_runtime_with_each_store_alone_is_checked_with_the_workspace() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let checks = feature_checks(&args(&["--locked"]));
        let base = [
            "check",
            "-p",
            "lambda-dedup-runtime",
            "--no-default-features",
        ];
        assert_eq!(checks.len(), 2 + CHECKED_ALONE.len());
        assert_eq!(checks[0], args(&base));
        assert_eq!(checks.last(), Some(&args(&TESTED_ALONE)));
        for (check, feature) in checks[1..].iter().zip(CHECKED_ALONE) {
            let mut want = args(&base);
            want.extend(args(&["--features", feature]));
            assert_eq!(check, &want);
        }
        assert_eq!(feature_checks(&args(&["e2e"])).len(), checks.len());
        assert!(feature_checks(&args(&["-p", "dedup-tests"])).is_empty());
        assert!(feature_checks(&args(&["--package=xtask"])).is_empty());
        assert_eq!(
            feature_checks(&args(&["--", "-p"])).len(),
            checks.len(),
            "the harness's"
        );
    }

    /// Every feature of the runtime's Cargo.toml is checked alone by `cargo xtask features`,
    /// but the default, the simulation's and the internal ones the others enable: a new door's
    /// feature cannot be left out.
    #[test]
    fn every_feature_a_function_can_name_is_checked() {
        let manifest = root().join("shared/lambda-dedup-runtime/Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("the runtime's Cargo.toml");
        let section = text.split("\n[features]\n").nth(1).expect("[features]");
        let section = section.split("\n[").next().unwrap_or(section);
        let internal = [
            "default",
            "simulation-planted",
            "aws",
            "parking",
            "checkpoint",
            "shards",
            "broker",
        ];
        let named: BTreeSet<&str> = section
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(" = ").map(|(name, _)| name.trim()))
            .filter(|name| !internal.contains(name))
            .collect();
        assert_eq!(named, RUNTIME_FEATURES.into_iter().collect());
    }

    /// No two of xtask's modules use each other (issue 20's `audit` ↔ `stack` and `demo` ↔
    /// `demo_doors`, and any new one): read from the sources, outside their tests.
    #[test]
    fn no_two_modules_use_each_other() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for entry in std::fs::read_dir(&src).expect("xtask/src") {
            let path = entry.expect("an entry").path();
            let module = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_owned();
            let text = std::fs::read_to_string(&path).expect("a source");
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let mut used = BTreeSet::new();
            // `crate::m::…`, and `use crate::{m::…, …}`.
            for part in code.split("crate::").skip(1) {
                let groups = match part.strip_prefix('{') {
                    Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
                    None => vec![part],
                };
                for g in groups {
                    let name: String = g
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if g.trim()[name.len()..].starts_with("::") && name != module {
                        used.insert(name);
                    }
                }
            }
            uses.insert(module, used);
        }
        let circles: Vec<(&String, &String)> = uses
            .iter()
            .flat_map(|(a, used)| used.iter().map(move |b| (a, b)))
            .filter(|(a, b)| a < b && uses.get(*b).is_some_and(|u| u.contains(*a)))
            .collect();
        assert!(uses.len() > 10, "read the modules: {uses:?}");
        assert!(
            circles.is_empty(),
            "modules that use each other: {circles:?}"
        );
    }

    #[test]
    fn numbers_default_and_parse() {
        let soak = |argv: &[&str]| match Cli::try_parse_from(argv).expect("parses").command {
            Cmd::Soak { n, memory } => (n, memory),
            other => panic!("{other:?}"),
        };
        assert_eq!(soak(&["xtask", "soak"]), (500, 100_000));
        assert_eq!(soak(&["xtask", "soak", "20"]), (20, 100_000));
        assert_eq!(soak(&["xtask", "soak", "20", "--memory", "0"]), (20, 0));
        assert!(Cli::try_parse_from(["xtask", "soak", "many"]).is_err());
    }

    #[test]
    fn simulate_takes_seeds_a_seed_minutes_and_a_planted_bug() {
        let parse = |argv: &[&str]| match Cli::try_parse_from(argv).expect("parses").command {
            Cmd::Simulate {
                seeds,
                seed,
                minutes,
                planted,
                ..
            } => (seeds, seed, minutes, planted),
            other => panic!("{other:?}"),
        };
        assert_eq!(parse(&["xtask", "simulate"]), (None, None, None, None));
        assert_eq!(
            parse(&["xtask", "simulate", "--seeds", "200"]),
            (Some(200), None, None, None)
        );
        assert_eq!(
            parse(&["xtask", "simulate", "--seed", "7"]),
            (None, Some(7), None, None)
        );
        assert_eq!(
            parse(&["xtask", "simulate", "--minutes", "2.5", "--planted", "all"]),
            (None, None, Some(2.5), Some("all".to_owned()))
        );
        assert!(Cli::try_parse_from(["xtask", "simulate", "--seeds", "many"]).is_err());
    }

    #[test]
    fn simulate_explore_takes_an_optional_filter_and_nothing_else() {
        let explore = |argv: &[&str]| match Cli::try_parse_from(argv).expect("parses").command {
            Cmd::Simulate { explore, .. } => explore,
            other => panic!("{other:?}"),
        };
        assert_eq!(explore(&["xtask", "simulate"]), None);
        assert_eq!(
            explore(&["xtask", "simulate", "--explore"]),
            Some(String::new())
        );
        assert_eq!(
            explore(&["xtask", "simulate", "--explore", "fifo"]),
            Some("fifo".to_owned())
        );
        assert!(Cli::try_parse_from(["xtask", "simulate", "--explore", "--seeds", "9"]).is_err());
    }
}
