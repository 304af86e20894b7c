//! The functions of this workspace, which the local stack runs (through `local_lambda`).

/// Every function of the workspace: SQS-, stream- and HTTP-triggered.
pub(crate) const ALL: [&str; 9] = [
    "ledger-projector",
    "fine-notices",
    "payment-dispatcher",
    "intent-relay",
    "mark-auditor",
    "ledger-stream",
    "webhook-receiver",
    "inbox-forwarder",
    "orders-api",
];

/// Further configurations of a function, for the local stack only: a function's own `main.rs`
/// built under another name (a crate in `tests/`), so that `cargo lambda watch` serves it at a
/// Function URL of its own; its variables over the shared ones are in `stack::FunctionEnvs`.
pub(crate) const LOCAL_CONFIGURATIONS: [&str; 1] = [STRIPE_RECEIVER];

/// The second configuration of `webhook-receiver`: its own `main.rs` under another name
/// (`tests/webhook-receiver-stripe`), serving a Stripe account (`WEBHOOK_SCHEME=stripe`) at its
/// own Function URL.
pub(crate) const STRIPE_RECEIVER: &str = "webhook-receiver-stripe";
