//! The AWS SDK configuration with the settings' timeouts ([`sdk_config`]): every client a
//! function builds (its DynamoDB store and tables, its side queues, Secrets Manager) and the
//! operators' tool's have them. The settings crate ([`lambda_dedup_config`]) reads the timeouts
//! and builds nothing; this crate builds the configuration from them, in one place.

use lambda_dedup_config::SdkTimeouts;

/// The AWS SDK configuration with `timeouts` (`DEDUP_SDK_*_TIMEOUT_MS`), the rest from the
/// environment as the SDK loads it.
pub async fn sdk_config(timeouts: &SdkTimeouts) -> aws_config::SdkConfig {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .operation_timeout(timeouts.operation)
        .operation_attempt_timeout(timeouts.attempt)
        .build();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(timeouts)
        .load()
        .await
}
