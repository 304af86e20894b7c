use std::fmt;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_types::error::display::DisplayErrorContext;
use dedup::{DedupKey, Mark};

/// Why the store could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Throttling or exceeded provisioned throughput.
    Throttled,
    /// DynamoDB cancelled a transaction because another one touched the same item.
    TransactionConflict,
    /// No answer in time.
    Timeout,
    /// The connection failed or broke.
    Network,
    /// DynamoDB answered with a server error (5xx).
    ServerError,
    /// DynamoDB refused the request (validation, access, missing table): retrying will not help.
    /// When the refusal is of one event's own writes, the error is [`Error::Refused`], which
    /// carries this kind too.
    Refused,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::Throttled => "throttled",
            FaultKind::TransactionConflict => "transaction conflict",
            FaultKind::Timeout => "timeout",
            FaultKind::Network => "network",
            FaultKind::ServerError => "server error",
            FaultKind::Refused => "refused",
        })
    }
}

/// An error of the mark store. None of these means "processed": the caller must not acknowledge
/// the message (S13).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lease no longer owns the claim: it expired and another process took the event over, or
    /// the claim was released (S6 fencing). `current` is the mark as it now stands.
    #[error("fenced: this lease no longer owns {key}")]
    Fenced {
        /// The key.
        key: DedupKey,
        /// The mark as it now stands, if any.
        current: Option<Box<Mark>>,
    },
    /// DynamoDB could not be used.
    #[error("mark store {kind}: {message}")]
    Store {
        /// What kind of fault.
        kind: FaultKind,
        /// The SDK's description.
        message: String,
    },
    /// A conditional write failed, yet the old item it returned does not explain it (it changed
    /// in between). Transient: retry.
    #[error("the mark for {0} changed while it was being written")]
    Contended(DedupKey),
    /// DynamoDB refused one event's own writes as they are: a permanent cancellation reason
    /// (`ValidationError`, `ItemCollectionSizeLimitExceeded`) at one of the event's positions in
    /// a transaction, or a `ValidationException` for a request that held only this event's
    /// writes (a malformed expression, an item or a transaction over its size limit). Nothing was
    /// written. Permanent (S15): the same writes are refused again, so the event is the one to
    /// dead-letter, and no other event of a shared transaction is blamed for it (S12). Only
    /// DynamoDB's error code is kept: its message may quote values (S3).
    #[error("DynamoDB refused the writes of {key}: {code}{}", at_position(.position))]
    Refused {
        /// The event's key.
        key: DedupKey,
        /// DynamoDB's code (`ValidationError`, `ValidationException`, …).
        code: String,
        /// The refused write among the event's own, when DynamoDB named one: 0 is the mark,
        /// 1.. the effects.
        position: Option<usize>,
    },
    /// The request is invalid (too many effects, result too large, no time left for a lease).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A stored mark could not be decoded.
    #[error("stored mark {key} is malformed: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// Whether the same call may succeed later (SQS redelivery is the usual retry).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store { kind, .. } => *kind != FaultKind::Refused,
            Error::Contended(_) => true,
            Error::Fenced { .. }
            | Error::Refused { .. }
            | Error::Invalid(_)
            | Error::Corrupt { .. } => false,
        }
    }

    /// The fault kind, for store errors ([`FaultKind::Refused`] for [`Error::Refused`]).
    pub fn fault_kind(&self) -> Option<FaultKind> {
        match self {
            Error::Store { kind, .. } => Some(*kind),
            Error::Refused { .. } => Some(FaultKind::Refused),
            _ => None,
        }
    }

    pub(crate) fn store(kind: FaultKind, message: impl Into<String>) -> Self {
        Error::Store {
            kind,
            message: message.into(),
        }
    }

    /// Classifies an SDK error that is not one the caller handles itself.
    pub(crate) fn from_sdk<E>(err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let kind = match &err {
            SdkError::TimeoutError(_) => FaultKind::Timeout,
            SdkError::DispatchFailure(d) if d.is_timeout() => FaultKind::Timeout,
            SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => FaultKind::Network,
            SdkError::ServiceError(se) => {
                classify_code(se.err().code(), se.raw().status().as_u16())
            }
            SdkError::ConstructionFailure(_) => FaultKind::Refused,
            _ => FaultKind::Network,
        };
        Error::store(kind, DisplayErrorContext(&err).to_string())
    }

    /// Classifies the SDK error of a request that held only `key`'s writes: a validation
    /// refusal is that event's own ([`Error::Refused`]); anything else as [`Error::from_sdk`].
    pub(crate) fn from_sdk_for<E>(key: &DedupKey, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match err.as_service_error().and_then(|e| e.code()) {
            Some(code) if refuses_content(code) => Error::Refused {
                key: key.clone(),
                code: code.to_owned(),
                position: None,
            },
            _ => Error::from_sdk(err),
        }
    }
}

fn at_position(position: &Option<usize>) -> String {
    match position {
        Some(0) => " (the mark)".into(),
        Some(p) => format!(" (effect {})", p - 1),
        None => String::new(),
    }
}

/// Whether a top-level error code says DynamoDB refused the content of the request itself (as
/// opposed to the table, the credentials or the service): a request that holds one event's
/// writes is refused for that event's sake, and would be refused again (S15).
pub(crate) fn refuses_content(code: &str) -> bool {
    matches!(
        code,
        "ValidationException" | "ItemCollectionSizeLimitExceededException"
    )
}

/// Maps an AWS error code (or, without one, the HTTP status) to a fault kind.
pub(crate) fn classify_code(code: Option<&str>, status: u16) -> FaultKind {
    match code {
        Some(
            "ThrottlingException"
            | "ProvisionedThroughputExceededException"
            | "RequestLimitExceeded"
            | "ThrottlingError"
            | "ProvisionedThroughputExceeded",
        ) => FaultKind::Throttled,
        Some("TransactionConflictException" | "TransactionConflict") => {
            FaultKind::TransactionConflict
        }
        Some("TransactionInProgressException") => FaultKind::TransactionConflict,
        Some("InternalServerError" | "ServiceUnavailable") => FaultKind::ServerError,
        _ if status >= 500 => FaultKind::ServerError,
        _ => FaultKind::Refused,
    }
}
