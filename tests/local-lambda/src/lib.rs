//! A local stand-in for AWS Lambda around `cargo lambda watch`, for a project's end-to-end tests
//! and demos on loopback: what Lambda does with a function's instances and invocations that
//! `cargo lambda watch` (cargo-lambda 1.9) does not.
//!
//! What it emulates:
//!
//! - **The plan** ([`plan`]): the tables, queues, Kinesis streams, event source mappings and
//!   function environments a SAM / CloudFormation template declares, with the caller's local
//!   settings ([`plan::Local`]); [`resources`] creates them in a local DynamoDB (Dynoxide, see
//!   the `local-dynamodb` crate), an SQS emulator and a Kinesis emulator.
//! - **Execution environments** ([`functions`]): one instance of each function, a program the
//!   caller built, polling `cargo lambda watch --only-lambda-apis`'s runtime API; an instance
//!   that dies is replaced by a fresh one, as Lambda starts a new environment after a crash
//!   (cargo-lambda does not: every later invocation of that function hangs).
//! - **Deadlines** ([`runtime_api`]): a proxy in front of that runtime API hands each invocation
//!   Lambda's deadline (`Lambda-Runtime-Deadline-Ms`, from the function's timeout) and ends an
//!   invocation not answered by then as Lambda does: its instance killed, a `Sandbox.Timedout`
//!   error, a late answer refused. `cargo lambda watch` sends a fixed timeout and waits forever.
//! - **Event source mappings** ([`trigger`]): SQS (batch size, batching window,
//!   `ReportBatchItemFailures`, the emulator's redrive policy), DynamoDB Streams and Kinesis
//!   (shard order, retry from the reported record, `MaximumRetryAttempts`,
//!   `MaximumRecordAgeInSeconds`, an on-failure destination written as Lambda writes it).
//! - **Several invocations at once in one environment** ([`concurrent`]), as Lambda Managed
//!   Instances run them: a runtime API serving many workers' long polls, each invocation with its
//!   own deadline, for a test of one function process under concurrent invocations.
//! - **Processes that never outlive their starter** ([`process`], [`signals`]): services behind
//!   a watchdog shell, children tracked and stopped on SIGTERM, SIGINT or SIGHUP.
//!
//! What it does not: IAM (no permission is checked; a caller can meter the calls itself),
//! scaling (one instance per function, one invocation at a time per mapping; only [`concurrent`]
//! runs several at once in one process),
//! cold starts, memory limits, bisection on error (`BisectBatchOnFunctionError`), tumbling
//! windows, filter criteria on mappings, retries of asynchronous invocations, layers, and
//! anything deployed: it never talks to AWS.
//!
//! It knows nothing of the project using it: function names, timeouts, environments and the
//! template are its inputs.

pub mod concurrent;
pub mod functions;
pub mod plan;
pub mod process;
pub mod resources;
pub mod runtime_api;
pub mod signals;
pub mod trigger;

/// Errors are messages for a person running the stack.
pub type Result<T, E = String> = std::result::Result<T, E>;

/// For `map_err`: an AWS SDK error with its causes, after `context`.
pub fn sdk_error<E: std::error::Error + 'static>(
    context: impl std::fmt::Display,
) -> impl FnOnce(E) -> String {
    move |e| format!("{context}: {}", aws_sdk_sqs::error::DisplayErrorContext(&e))
}
