//! Project automation. Run with `cargo xtask <command>`:
//!
//! - `test [ARGS]`: install what is missing (DynamoDB Local), start it on a free loopback port, run
//!   `cargo test --workspace [ARGS]` against it, and stop it, also when the tests fail.
//! - `dynamodb`: start DynamoDB Local and keep it running until Enter or Ctrl-C (for manual work).
//!
//! Only the standard library: this crate must build in seconds on a fresh machine.

mod dynamodb;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

type Result<T, E = String> = std::result::Result<T, E>;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let cmd = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let outcome = match cmd.as_str() {
        "test" => test(&rest),
        "dynamodb" => dynamodb_foreground(),
        "" | "help" | "-h" | "--help" => {
            print_help();
            Ok(())
        }
        other => Err(format!("unknown command `{other}`; see `cargo xtask help`")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    println!(
        "cargo xtask <command>\n\n\
         commands:\n  \
         test [ARGS]   start DynamoDB Local (installing it if needed) and run `cargo test --workspace [ARGS]`\n  \
         dynamodb      start DynamoDB Local and keep it running (prints the endpoint)\n"
    );
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

fn test(args: &[String]) -> Result<()> {
    let root = root();
    let ddb = dynamodb::DynamoLocal::start(&root)?;
    println!("xtask: DynamoDB Local ready at {}", ddb.endpoint());
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
    let mut cmd = Command::new(cargo());
    cmd.current_dir(&root)
        .args(&test_args)
        .envs(ddb.client_env());
    println!("xtask: running cargo {}", test_args.join(" "));
    let status = cmd
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !status.success() {
        ddb.print_log_tail(30);
        return Err(format!("tests failed ({status})"));
    }
    drop(ddb);
    println!("xtask: all tests passed");
    Ok(())
}

fn dynamodb_foreground() -> Result<()> {
    let ddb = dynamodb::DynamoLocal::start(&root())?;
    println!("DynamoDB Local is running. Use it with:");
    for (k, v) in ddb.client_env() {
        println!("  export {k}={v}");
    }
    println!("Press Enter (or Ctrl-C) to stop.");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    Ok(())
}
