//! The built function refusing to start: what it prints is the refusal's message, not the
//! error's fields (`Error: Refused { var: "PG_CA_BUNDLE", rule: NeitherSet { .. } }`), since
//! `main` returns `lambda_dedup_runtime::MainError`.

use std::process::Command;

#[test]
fn a_refusal_at_start_prints_its_message() {
    // Neither PG_CA_BUNDLE nor PG_TLS=disabled: refused before any connection or invocation.
    let out = Command::new(env!("CARGO_BIN_EXE_example-pg-credit"))
        .env_clear()
        .env("DEDUP_NAMESPACE", "example")
        .env("DEDUP_MARK_TABLE", "marks")
        .env("BALANCES_TABLE", "balances")
        .env("DATABASE_URL", "postgresql://u@127.0.0.1:9/db")
        .output()
        .expect("the example's binary runs");
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
