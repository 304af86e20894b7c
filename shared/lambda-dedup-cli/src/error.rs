//! Why a command could not do its work (exit status 2): each cause its own variant, so the
//! message names what to fix.

use std::path::PathBuf;

use lambda_dedup_cli::template::TemplateError;
use lambda_dedup_config::{KeySpecTextError, SettingsError};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The template is unreadable, lacks the function, or is ambiguous.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The function's settings are refused, as the function itself would refuse them.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A `--key-spec` (or `Metadata.LambdaDedupKeySpec`) text that is not a key spec.
    #[error(transparent)]
    KeySpecText(#[from] KeySpecTextError),
    /// Neither `--key-spec` nor the template gives the function's key spec.
    #[error(
        "no key spec for {0}: give --template with its Metadata.LambdaDedupKeySpec, or --key-spec cloudevents:<tenant extension>[:<fingerprint pointer>,…] as its code declares"
    )]
    NoKeySpec(String),
    /// No `--function`, and no template with exactly one function.
    #[error("which function? give --function (or a --template with exactly one function)")]
    NoFunction,
    /// A file that could not be read or written.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Standard input could not be read.
    #[error("stdin: {0}")]
    Stdin(std::io::Error),
    /// The mark store answered with an error (a read, forget, the account's scan).
    #[error("the mark store: {0}")]
    Store(#[from] lambda_dedup::StoreError),
    /// An SQS call failed: what the tool was doing, and the SDK's error with its context.
    #[error("{what}: {detail}")]
    Sqs {
        /// What the tool was doing.
        what: String,
        /// The SDK's error, with its whole context.
        detail: String,
    },
    /// An `--attribute` that is not `NAME=VALUE`.
    #[error("--attribute {0:?}: expected NAME=VALUE")]
    Attribute(String),
    /// A `--since` or `--until` that is not an RFC 3339 time.
    #[error("{0:?} is not an RFC 3339 time")]
    Time(String),
    /// `explain` was given nothing to explain.
    #[error("give a file (or - for stdin), --queue with --message-id, or --key")]
    NoMessage,
    /// `explain --queue`: the message is not in the queue.
    #[error("no message {id} in {queue}")]
    NotInQueue {
        /// The message id looked for.
        id: String,
        /// The queue.
        queue: String,
    },
    /// `explain --queue` on a queue with a redrive policy, without `--live-queue`.
    #[error(
        "{queue} has a redrive policy ({policy}): receiving its messages raises the receive count that dead-letters them, and hides them from the function while held; pass --live-queue to read it anyway"
    )]
    LiveQueue {
        /// The queue.
        queue: String,
        /// Its redrive policy, as SQS gives it.
        policy: String,
    },
    /// `forget --reason` (or `redrive --reason`) says nothing.
    #[error("--reason must say why")]
    NoReason,
    /// `forget` off a terminal without `--yes`: nobody to confirm it.
    #[error(
        "forget changes the mark table for good: give --yes to confirm (standard input is not a terminal to ask on), or --dry-run to see what it would do"
    )]
    NotConfirmed,
    /// Who is calling could not be established: an audit item names the caller as AWS
    /// authenticated it, so nothing is forgotten without it.
    #[error(
        "who is calling could not be established (STS GetCallerIdentity: {0}): forget records the caller as AWS authenticated it, so nothing was forgotten"
    )]
    Identity(String),
    /// The report could not be rendered.
    #[error("report: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// An SQS call that failed, as the tool reports it: what it was doing, then the SDK's
    /// error with its whole context.
    pub(crate) fn sqs(what: impl std::fmt::Display, e: impl std::error::Error) -> Self {
        Error::Sqs {
            what: what.to_string(),
            detail: aws_sdk_sqs::error::DisplayErrorContext(e).to_string(),
        }
    }

    /// A file that could not be read or written.
    pub(crate) fn file(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::File {
            path: path.to_owned(),
            source,
        }
    }
}
