//! The functions of this workspace, which the local stack runs (through `local_lambda`).

/// Every function of the workspace: SQS-, stream- and HTTP-triggered.
pub(crate) const ALL: [&str; 9] = [
    "ledger-projector",
    "ledger-fanout",
    "fine-notices",
    "payment-dispatcher",
    "intent-relay",
    "mark-auditor",
    "ledger-stream",
    "webhook-receiver",
    "inbox-forwarder",
];

/// Examples the end-to-end tests run as built binaries, as Lambda would, outside the stack
/// (`tests/integration/invoke_door.rs`: the direct invoke door under a concurrent runtime API):
/// built with the functions into `DEDUP_FUNCTIONS_DIR`, not started by the stack.
pub(crate) const EXAMPLES_RUN_AS_BUILT: [&str; 1] = ["example-invoke-charge"];

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
