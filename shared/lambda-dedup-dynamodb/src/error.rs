//! Classifying the SDK's errors into the core's typed [`StoreError`](lambda_dedup::StoreError): by
//! error code and HTTP status, never by message text.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_types::error::display::DisplayErrorContext;
use lambda_dedup::DedupKey;
pub use lambda_dedup::{FaultKind, StoreError as Error};

/// Classifies an SDK error that is not one the caller handles itself.
pub(crate) fn from_sdk<E>(err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let kind = match &err {
        SdkError::TimeoutError(_) => FaultKind::Timeout,
        SdkError::DispatchFailure(d) if d.is_timeout() => FaultKind::Timeout,
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => FaultKind::Network,
        SdkError::ServiceError(se) => classify_code(se.err().code(), se.raw().status().as_u16()),
        SdkError::ConstructionFailure(_) => FaultKind::Refused,
        _ => FaultKind::Network,
    };
    Error::store(kind, DisplayErrorContext(&err).to_string())
}

/// Classifies the SDK error of a request that held only `key`'s writes: a validation
/// refusal is that event's own ([`Error::Refused`]); anything else as [`from_sdk`].
pub(crate) fn from_sdk_for<E>(key: &DedupKey, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err.as_service_error().and_then(|e| e.code()) {
        Some(code) if refuses_content(code) => Error::Refused {
            key: key.clone(),
            code: code.to_owned(),
            position: None,
        },
        _ => from_sdk(err),
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
