//! Why a bench command failed ([`BenchError`]): each cause its own variant, with what the bench
//! was doing, so the message says what to fix.

use std::error::Error;

/// A failure as the library or tool that failed gives it.
type Source = Box<dyn Error + Send + Sync>;

/// Why a bench command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// The command line is not one of the usages, or an argument is out of range.
    #[error("{0}")]
    Usage(&'static str),
    /// An argument that must be a number is not one.
    #[error("{0} must be a number")]
    NotANumber(String),
    /// A step failed: what the bench was doing, and why.
    #[error("{what}: {source}")]
    Step {
        /// What the bench was doing (`meter`, `create marks`, a file's path).
        what: String,
        /// Why it failed.
        source: Source,
    },
    /// A call failed, its error as it gives it.
    #[error(transparent)]
    Failed(Source),
    /// What the bench read is not what it expects (a raw file's field, a function's answer).
    #[error("{0}")]
    Unexpected(String),
}

impl BenchError {
    /// `source` failed while the bench was doing `what`.
    pub(crate) fn step(what: impl Into<String>, source: impl Into<Source>) -> Self {
        BenchError::Step {
            what: what.into(),
            source: source.into(),
        }
    }

    /// A call failed with `source`.
    pub(crate) fn failed(source: impl Into<Source>) -> Self {
        BenchError::Failed(source.into())
    }
}
