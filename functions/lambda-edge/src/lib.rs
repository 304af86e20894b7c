//! The Lambda edge that every function shares: the only library that knows `aws_lambda_events`
//! and `lambda_runtime`. It converts SQS events to the library's [`dedup::Message`]s and the
//! [`dedup_batch::BatchReport`] back to a partial batch response, reads the configuration every
//! function has from the environment (refusing to start on a bad one), and logs the account.
//!
//! # Layout
//! - [`settings`]: [`Settings`] from `DEDUP_*` variables, including the S9 retention check.
//! - [`sqs`]: [`run_sqs`]: one SQS invocation, from event to `SqsBatchResponse`.

pub mod settings;
pub mod sqs;

pub use settings::{Settings, optional, required};
pub use sqs::{messages, response, run_sqs};

/// Sets up JSON or text logging as the Lambda environment asks (`AWS_LAMBDA_LOG_FORMAT`,
/// `AWS_LAMBDA_LOG_LEVEL`, or `RUST_LOG`).
pub fn init_tracing() {
    lambda_runtime::tracing::init_default_subscriber();
}
