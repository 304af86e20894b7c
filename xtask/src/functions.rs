//! The functions of this workspace, which the local stack runs (through `local_lambda`).

/// Every function of the workspace: SQS-, stream- and HTTP-triggered.
pub(crate) const ALL: [&str; 10] = [
    "ledger-projector",
    "ledger-fanout",
    "fine-notices",
    "payment-dispatcher",
    "intent-relay",
    "mark-auditor",
    "ledger-stream",
    "webhook-receiver",
    "inbox-forwarder",
    "orders-api",
];

/// Examples the end-to-end tests run as built binaries (`DEDUP_FUNCTIONS_DIR`), each as Lambda
/// would, through a runtime API of the test's own (`tests/integration/invoke_door.rs`: the direct
/// invoke door; `e2e_kafka.rs`, `e2e_mq.rs`, `e2e_eventbridge.rs`): built with the functions, never started by the stack.
pub(crate) const EXAMPLES_RUN: [&str; 6] = [
    "example-eventbridge-ledger",
    "example-invoke-charge",
    "example-kafka-ledger",
    "example-mq-ledger",
    "example-rabbitmq-ledger",
    "example-s3-catalog",
];

/// Functions of `infra/template.yaml` the local stack does not run, so that the full run's
/// least-privilege check (`infra::privileges`) has no recorded calls of theirs and skips them:
/// their roles are checked by the rules and `check-infra` only. `examples/durable-order`'s two
/// binaries: a durable execution needs Lambda's checkpoint API, which nothing local serves (the
/// example's tests run the workflow on the SDK's local runner and the dispatcher with a
/// `Starter` of their own, on the local DynamoDB).
pub(crate) const NOT_RUN: [&str; 2] = ["order-dispatcher", "example-durable-order"];

/// Further configurations of a function, for the local stack only: a function's own `main.rs`
/// built under another name (a crate in `tests/`), so that `cargo lambda watch` serves it at a
/// Function URL of its own; its variables over the shared ones are in `stack::FunctionEnvs`.
pub(crate) const LOCAL_CONFIGURATIONS: [&str; 2] = [STRIPE_RECEIVER, GITHUB_RECEIVER];

/// The second configuration of `webhook-receiver`: its own `main.rs` under another name
/// (`tests/webhook-receiver-stripe`), serving a Stripe account (`WEBHOOK_SCHEME=stripe`) at its
/// own Function URL.
pub(crate) const STRIPE_RECEIVER: &str = "webhook-receiver-stripe";

/// The third configuration of `webhook-receiver` (`tests/webhook-receiver-github`), serving a
/// GitHub organisation (`WEBHOOK_SCHEME=github`, the identity from the signed body) at its own
/// Function URL.
pub(crate) const GITHUB_RECEIVER: &str = "webhook-receiver-github";
