//! Project automation. Run with `cargo xtask <command>`:
//!
//! - `test [ARGS]`: install what is missing, start the local stack, run
//!   `cargo test --workspace [ARGS]` against it (unit, integration and end-to-end tests), then,
//!   unless ARGS pick packages or tests, the chaos runs (`kill -9` of functions mid-batch, the local DynamoDB
//!   restarted mid-run; see `chaos.rs`), and stop it.
//! - `demo`: start the local stack and run the main job end to end: a realistic workload through
//!   the SQS emulator, the local trigger and the functions; then the final state against a
//!   single-pass expectation, the accounting, and the DLQs. Exits non-zero if any check fails.
//! - `chaos`: just the chaos runs, on a fresh stack.
//! - `audit`: against a running `cargo xtask up`, whether the account closes (S14).
//! - `check-infra`: check `infra/template.yaml` against the invariants the functions rely on
//!   (retention horizon, TTL, partial batch responses, DLQs, least privilege, alarms) and run
//!   cfn-lint. `test` runs it first.
//! - `soak [N]`: many more model-based fault schedules than `test` runs; writes `docs/RELIABILITY.md`.
//! - `bench [N]`: the benchmark against Powertools (not a test); writes `docs/BENCHMARKS.md`.
//! - `package`: `cargo lambda build --release --arm64` for every function, zip sizes reported.
//! - `up`: start the local stack and keep it running until Enter, for manual work.
//! - `dynamodb`: start the local DynamoDB (Dynoxide, embedded in xtask) alone until Enter.

mod audit;
mod bench;
mod chaos;
mod demo;
mod dynamodb;
mod functions;
mod infra;
mod package;
mod process;
mod signals;
mod soak;
mod stack;
mod tools;
mod trigger;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

type Result<T, E = String> = std::result::Result<T, E>;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let cmd = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    if cmd == "serve-dynamodb" {
        // The local DynamoDB's own process (see `dynamodb.rs`): it stops on a signal by itself.
        return exit_code(dynamodb::serve(&rest).await);
    }
    STARTED.get_or_init(std::time::Instant::now);
    signals::install();
    let outcome = match cmd.as_str() {
        "test" => test(&rest).await,
        "demo" => demo::run(&root()).await,
        "chaos" => chaos_only().await,
        "up" => up().await,
        "check-infra" => infra::run(&root()),
        "audit" => audit::run(&root()).await,
        "package" => package::run(&root()),
        "soak" => {
            let n = rest.first().and_then(|n| n.parse().ok()).unwrap_or(500);
            soak::run(&root(), n)
        }
        "bench" => {
            let n = rest.first().and_then(|n| n.parse().ok()).unwrap_or(2000);
            bench::run(&root(), n)
        }
        "dynamodb" => dynamodb_foreground(),
        "" | "help" | "-h" | "--help" => {
            print_help();
            Ok(())
        }
        other => Err(format!("unknown command `{other}`; see `cargo xtask help`")),
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

fn print_help() {
    println!(
        "cargo xtask <command>\n\n\
         commands:\n  \
         demo          run the whole system end to end on local services and check the result\n  \
         test [ARGS]   start the local stack and run `cargo test --workspace [ARGS]` against it\n  \
         chaos         only the chaos runs of `test`: kill -9 of functions mid-batch, the local DynamoDB restarted\n  \
         audit         against a running `cargo xtask up`: does the account close (S14)?\n  \
         check-infra   refuse infra/template.yaml if it breaks a guarded invariant; run cfn-lint\n  \
         soak [N]      N model-based fault schedules (default 500) against the local DynamoDB; writes docs/RELIABILITY.md\n  \
         bench [N]     benchmark against AWS Powertools (N messages per workload, default 2000); writes docs/BENCHMARKS.md\n  \
         package       build every function for arm64 in release (cargo lambda) and report zip sizes\n  \
         up            start the local stack and keep it running until Enter (prints where to send)\n  \
         dynamodb      start the local DynamoDB (Dynoxide) alone and keep it running (prints the endpoint)\n"
    );
}

/// For `map_err`: an AWS SDK error with its causes, after `context`.
fn sdk_error<E: std::error::Error + 'static>(
    context: impl std::fmt::Display,
) -> impl FnOnce(E) -> String {
    move |e| format!("{context}: {}", aws_sdk_sqs::error::DisplayErrorContext(&e))
}

/// The workspace root (this crate lives in `<root>/xtask`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

async fn test(args: &[String]) -> Result<()> {
    let root = root();
    infra::run(&root)?;
    let mut stack = stack::Stack::up(&root).await?;
    // The whole workspace unless the caller names packages.
    let named = args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-p" || a.starts_with("--package"));
    let mut test_args = vec!["test".to_owned()];
    if !named {
        test_args.push("--workspace".into());
    }
    test_args.extend(args.iter().cloned());
    step(format!("running cargo {}", test_args.join(" ")));
    let mut cmd = std::process::Command::new(cargo());
    cmd.current_dir(&root).args(&test_args).envs(stack.env());
    let status = tokio::task::spawn_blocking(move || process::run(&mut cmd))
        .await
        .map_err(|e| format!("could not run cargo: {e}"))?
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !status.success() {
        stack.print_logs();
        return Err(format!("tests failed ({status})"));
    }
    if !stack.functions_alive() {
        stack.print_logs();
        return Err("cargo lambda watch exited during the tests".into());
    }
    // The chaos runs belong to the full suite: they are skipped when ARGS pick packages or tests.
    let picked = args
        .iter()
        .any(|a| a == "--" || a == "-p" || a.starts_with("--package") || !a.starts_with('-'));
    if !picked {
        if let Err(e) = chaos::run(&mut stack).await {
            stack.print_logs();
            return Err(e);
        }
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
    println!("Send CloudEvents to the queues above (any SQS client, endpoint DEDUP_SQS_ENDPOINT).");
    println!("Functions' log: .cache/logs/functions.log. Press Enter (or Ctrl-C) to stop.");
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)
    })
    .await;
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
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    Ok(())
}
