//! Lean builds (docs/book/src/features.md): a function built alone compiles no client it never
//! calls. Read from `cargo tree` of each function alone, the build's own package set, so a default
//! feature or a dependency that drags a client back in fails here, not in a zip's size.

use std::path::Path;
use std::process::Command;

/// The packages `cargo build -p <package>` compiles: normal and build dependencies, each once.
fn packages_built_alone(package: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["tree", "--locked", "-p", package, "-e", "normal,build"])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn assert_lacks(package: &str, absent: &[&str]) {
    let built = packages_built_alone(package);
    assert!(
        built.iter().any(|p| p == "lambda-dedup-runtime"),
        "{package}: the tree was not read (no lambda-dedup-runtime in {built:?})"
    );
    let found: Vec<&&str> = absent
        .iter()
        .filter(|a| built.iter().any(|p| p == **a))
        .collect();
    assert!(found.is_empty(), "{package} built alone compiles {found:?}");
}

#[test]
fn an_sqs_function_on_dynamodb_compiles_no_sqs_client_and_no_http_stack() {
    assert_lacks(
        "example-sqs-credit",
        &["aws-sdk-sqs", "lambda_http", "tokio-postgres", "redis"],
    );
}

#[test]
fn the_http_function_compiles_no_sqs_client_and_no_other_store() {
    assert_lacks("orders-api", &["aws-sdk-sqs", "tokio-postgres", "redis"]);
}

#[test]
fn a_postgres_function_compiles_no_aws_sdk() {
    assert_lacks(
        "example-pg-credit",
        &[
            "aws-config",
            "aws-sdk-dynamodb",
            "aws-sdk-sqs",
            "aws-smithy-runtime",
        ],
    );
}

/// The durable example (its workflow and its SQS dispatcher, one package): the Lambda client
/// that starts and checkpoints executions, the DynamoDB store and the payments' HTTP client are
/// its own; no SQS client (it parks nothing, sends no late event), no HTTP door, no other store.
#[test]
fn the_durable_function_compiles_no_sqs_client_no_http_stack_and_no_other_store() {
    assert_lacks(
        "example-durable-order",
        &["aws-sdk-sqs", "lambda_http", "tokio-postgres", "redis"],
    );
}
