//! The built function refusing to start: what it prints is the refusal's message, not the
//! error's fields (`Error: Refused { var: "PG_CA_BUNDLE", rule: NeitherSet { .. } }`), since
//! `main` returns `lambda_dedup_runtime::MainError`.

use std::process::Command;

/// The example's binary with its settings and nothing else of this environment; PostgreSQL
/// at a port nothing listens on, since each test is refused before it connects.
fn pg_credit() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_example-pg-credit"));
    cmd.env_clear()
        .env("DEDUP_NAMESPACE", "example")
        .env("DEDUP_MARK_TABLE", "marks")
        .env("BALANCES_TABLE", "balances")
        .env("DATABASE_URL", "postgresql://u@127.0.0.1:9/db");
    cmd
}

#[test]
fn a_refusal_at_start_prints_its_message() {
    // Neither PG_CA_BUNDLE nor PG_TLS=disabled: refused before any connection or invocation.
    let out = pg_credit().output().expect("the example's binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it refused to start: {stderr}");
    let printed = stderr.trim_end();
    assert!(
        printed.starts_with("Error: refusing to start: set PG_CA_BUNDLE or PG_TLS=disabled"),
        "{printed}"
    );
    assert!(!printed.contains("Refused {"), "{printed}");
    assert!(!printed.contains("NeitherSet"), "{printed}");
}

/// The function with a reconciliation queue set (`DEDUP_RECONCILIATION_QUEUE_URL`) and otherwise
/// ready to start: built alone it has no SQS client (the runtime's feature `sqs-client`, which it
/// does not name), so it refuses to start, naming the variable and the feature, rather than
/// let late events go to the DLQ. Built with the workspace, whose other functions name the
/// feature, it gets past its settings (and stops where Lambda's runtime API is missing).
/// `cargo xtask test` runs this file alone (`cargo test -p example-pg-credit --test refusal`).
#[test]
fn a_reconciliation_queue_without_the_sqs_client_refuses_the_start() {
    let out = pg_credit()
        .env("PG_TLS", "disabled")
        .env(
            "DEDUP_RECONCILIATION_QUEUE_URL",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/late",
        )
        .output()
        .expect("the example's binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no runtime API to serve: {stderr}");
    let refused =
        stderr.contains("DEDUP_RECONCILIATION_QUEUE_URL") && stderr.contains("sqs-client");
    if lambda_dedup_runtime::testing::SQS_CLIENT {
        assert!(!refused, "built with the SQS client, yet refused: {stderr}");
    } else {
        assert!(
            refused,
            "started without an SQS client for its reconciliation queue: {stderr}"
        );
        assert!(stderr.starts_with("Error: refusing to start"), "{stderr}");
    }
}
