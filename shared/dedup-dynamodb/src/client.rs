//! Building a client and writing effects without a mark, for callers that must not name the SDK.

use aws_sdk_dynamodb::Client;

use crate::codec;
use crate::error::Error;

/// A DynamoDB client configured from the environment the way every AWS SDK is: region and
/// credentials from the Lambda environment (or `AWS_REGION`, `AWS_ACCESS_KEY_ID`, …), and an
/// endpoint override from `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL` (a local DynamoDB).
/// Build it once per process, outside the handler.
pub async fn connect() -> Client {
    let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    Client::new(&conf)
}

/// Writes `effects` in one transaction with no mark: for follow-up bookkeeping that is itself
/// idempotent by its conditions (e.g. marking an intent confirmed only while it is pending).
/// Returns `Ok(false)` when a condition failed and nothing was written.
pub async fn write_effects(client: &Client, effects: &[dedup::Effect]) -> Result<bool, Error> {
    if effects.is_empty() || effects.len() > 100 {
        return Err(Error::Invalid(format!(
            "{} effects; a transaction holds 1 to 100",
            effects.len()
        )));
    }
    let items = effects
        .iter()
        .map(codec::effect)
        .collect::<Result<Vec<_>, _>>()?;
    match client
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(err) => {
            use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
            if let Some(E::TransactionCanceledException(tc)) = err.as_service_error()
                && tc
                    .cancellation_reasons()
                    .iter()
                    .any(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Ok(false);
            }
            Err(Error::from_sdk(err))
        }
    }
}
