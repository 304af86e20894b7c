//! The built functions refusing to start on durable settings that cannot work: a
//! `DURABLE_RETENTION_DAYS` Lambda does not take (0, 91, not a number), marks that do not outlive
//! an execution's replays (S9), an idempotency key kept longer than Lambda keeps the execution's
//! name (S16). Each binary runs with its settings and nothing else of this environment; each is
//! refused before it connects to anything or asks Lambda's runtime API for an invocation.

use std::process::{Command, Output};

/// The environment both functions share: the settings of `lambda_dedup_config`, a region
/// (no instance metadata asked for one).
fn with_settings(exe: &str) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env_clear()
        .env("DEDUP_NAMESPACE", "example")
        .env("DEDUP_MARK_TABLE", "marks")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    cmd
}

/// `order-dispatcher`, starting executions of the workflow's alias.
fn dispatcher() -> Command {
    let mut cmd = with_settings(env!("CARGO_BIN_EXE_order-dispatcher"));
    cmd.env("DURABLE_FUNCTION", "durable-order:live");
    cmd
}

/// `durable-order`, the workflow: its stock table, its payments API at a port nothing
/// listens on.
fn workflow() -> Command {
    let mut cmd = with_settings(env!("CARGO_BIN_EXE_example-durable-order"));
    cmd.env("STOCK_TABLE", "stock")
        .env("PAYMENTS_API_URL", "http://127.0.0.1:9");
    cmd
}

/// What the function printed on refusing to start with `vars`: its last line.
fn refused(mut function: Command, vars: &[(&str, &str)]) -> String {
    let out: Output = function
        .envs(vars.iter().copied())
        .output()
        .expect("the function's binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "refused at start: {stderr}");
    stderr
        .trim_end()
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}

/// Lambda keeps a closed execution 1 to 90 days: anything else is refused by both functions,
/// naming the variable.
#[test]
fn a_retention_lambda_does_not_take_is_refused_at_start() {
    for function in [dispatcher, workflow] {
        for (days, says) in [
            (
                "0",
                "DURABLE_RETENTION_DAYS (0) is under the least it may be (1)",
            ),
            (
                "91",
                "DURABLE_RETENTION_DAYS (91) is over the most it may be (90)",
            ),
            ("x", "DURABLE_RETENTION_DAYS=\"x\" is not valid"),
        ] {
            let printed = refused(function(), &[("DURABLE_RETENTION_DAYS", days)]);
            assert!(printed.starts_with("Error: "), "{printed}");
            assert!(printed.contains(says), "{days}: {printed}");
        }
    }
}

/// S9: marks kept no longer than an execution runs would let a step replayed late apply its
/// effect again.
#[test]
fn marks_that_do_not_outlive_an_execution_are_refused_at_start() {
    for function in [dispatcher, workflow] {
        let printed = refused(
            function(),
            &[
                ("DEDUP_RETENTION_SECONDS", "2592000"),
                ("DURABLE_EXECUTION_TIMEOUT_SECONDS", "2592000"),
            ],
        );
        assert!(
            printed.starts_with(
                "Error: refusing to start: DEDUP_RETENTION_SECONDS (2592000s) must be longer \
                 than DURABLE_EXECUTION_TIMEOUT_SECONDS (2592000s)"
            ),
            "{printed}"
        );
    }
}

/// S16: the dispatcher's starts are idempotent at Lambda only while it keeps the execution's
/// name; a takeover after that must not start the event again.
#[test]
fn a_key_kept_past_the_names_life_is_refused_at_start() {
    for function in [dispatcher, workflow] {
        let printed = refused(
            function(),
            &[
                ("DURABLE_RETENTION_DAYS", "1"),
                ("DURABLE_EXECUTION_TIMEOUT_SECONDS", "3600"),
                ("PROVIDER_KEY_RETENTION_SECONDS", "604800"),
            ],
        );
        assert_eq!(
            printed,
            "Error: refusing to start: PROVIDER_KEY_RETENTION_SECONDS (604800s) must not exceed \
             DURABLE_RETENTION_DAYS + DURABLE_EXECUTION_TIMEOUT_SECONDS (90000s)"
        );
    }
}

/// The same functions with settings that work get past their settings (and stop where
/// Lambda's runtime API is missing): the refusals above are the settings', nothing else's.
#[test]
fn settings_that_work_start() {
    for function in [dispatcher, workflow] {
        let out = function()
            .env("DURABLE_RETENTION_DAYS", "14")
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("refusing to start"), "{stderr}");
        assert!(stderr.contains("AWS_LAMBDA_FUNCTION_NAME"), "{stderr}");
    }
}
