//! Building a client and writing effects without a mark, for callers that must not name the
//! SDK (reads and scans of a function's own tables: [`crate::DynamoItems`]).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::codec;
use crate::error::Error;

/// A DynamoDB connection: the SDK's client behind the library's own type, so that the crates
/// above this one hold and pass a connection without naming the SDK (only this crate depends on
/// it). Build one per process with [`connect`]; a caller that has an SDK client of its own (a
/// test, a local tool) converts it with `From`. Cloning is cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct Client(pub(crate) aws_sdk_dynamodb::Client);

impl From<aws_sdk_dynamodb::Client> for Client {
    fn from(client: aws_sdk_dynamodb::Client) -> Self {
        Self(client)
    }
}

impl From<&aws_sdk_dynamodb::Client> for Client {
    fn from(client: &aws_sdk_dynamodb::Client) -> Self {
        Self(client.clone())
    }
}

impl From<&Client> for Client {
    fn from(client: &Client) -> Self {
        client.clone()
    }
}

impl Client {
    /// The SDK client, for this crate's own calls.
    pub(crate) fn sdk(&self) -> &aws_sdk_dynamodb::Client {
        &self.0
    }
}

/// The variable bounding one SDK call, retries included (`DEDUP_SDK_OPERATION_TIMEOUT_MS`).
pub const OPERATION_TIMEOUT_VAR: &str = "DEDUP_SDK_OPERATION_TIMEOUT_MS";
/// The variable bounding one attempt of an SDK call (`DEDUP_SDK_ATTEMPT_TIMEOUT_MS`).
pub const ATTEMPT_TIMEOUT_VAR: &str = "DEDUP_SDK_ATTEMPT_TIMEOUT_MS";

/// How long the functions' AWS SDK calls (DynamoDB, SQS) may take: without these the SDK has a
/// connect timeout only, and a call to a store that accepts the connection and never answers
/// hangs past the invocation's deadline (issue 19). A call that times out is a transient fault
/// (`FaultKind::Timeout`): a retry, never an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdkTimeouts {
    /// One call, all its attempts and backoff included.
    pub operation: std::time::Duration,
    /// One attempt (the SDK's retry strategy makes up to three).
    pub attempt: std::time::Duration,
}

/// A timeout setting that cannot work, naming its variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutsError {
    /// Not a number of milliseconds.
    #[error("environment variable {name}={value:?} is not a number of milliseconds")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// Zero: no call could finish.
    #[error("{name} must be above 0")]
    Zero {
        /// The variable.
        name: &'static str,
    },
    /// An attempt longer than the whole call.
    #[error(
        "{ATTEMPT_TIMEOUT_VAR} ({}ms) must not exceed {OPERATION_TIMEOUT_VAR} ({}ms)",
        attempt.as_millis(),
        operation.as_millis()
    )]
    AttemptOverOperation {
        /// `DEDUP_SDK_ATTEMPT_TIMEOUT_MS`.
        attempt: std::time::Duration,
        /// `DEDUP_SDK_OPERATION_TIMEOUT_MS`.
        operation: std::time::Duration,
    },
}

impl SdkTimeouts {
    /// The defaults: 10 s a call, 3 s an attempt (DynamoDB and SQS answer in milliseconds; an
    /// attempt that takes seconds is a hung connection, and the retry goes elsewhere).
    pub const DEFAULT: Self = Self {
        operation: std::time::Duration::from_millis(10_000),
        attempt: std::time::Duration::from_millis(3_000),
    };

    /// From the variables as `env` gives them, each defaulting when unset; refuses zero, a value
    /// that is not milliseconds, and an attempt longer than the call.
    pub fn from_lookup(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, TimeoutsError> {
        let ms = |name: &'static str, default: std::time::Duration| match env(name) {
            Some(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
                Ok(0) => Err(TimeoutsError::Zero { name }),
                Ok(ms) => Ok(std::time::Duration::from_millis(ms)),
                Err(_) => Err(TimeoutsError::Invalid { name, value: v }),
            },
            _ => Ok(default),
        };
        let t = Self {
            operation: ms(OPERATION_TIMEOUT_VAR, Self::DEFAULT.operation)?,
            attempt: ms(ATTEMPT_TIMEOUT_VAR, Self::DEFAULT.attempt)?,
        };
        if t.attempt > t.operation {
            return Err(TimeoutsError::AttemptOverOperation {
                attempt: t.attempt,
                operation: t.operation,
            });
        }
        Ok(t)
    }

    /// From the process environment; a bad value (refused at start by the functions' settings)
    /// falls back to [`SdkTimeouts::DEFAULT`] here, logged.
    pub fn from_env() -> Self {
        Self::from_lookup(&|name| std::env::var(name).ok()).unwrap_or_else(|e| {
            tracing::error!(error = %e, "using the default SDK timeouts");
            Self::DEFAULT
        })
    }

    /// As the SDK takes them.
    pub fn config(&self) -> aws_config::timeout::TimeoutConfig {
        aws_config::timeout::TimeoutConfig::builder()
            .operation_timeout(self.operation)
            .operation_attempt_timeout(self.attempt)
            .build()
    }
}

/// The AWS SDK configuration every client of the functions is built from: the environment, as
/// every AWS SDK reads it, with [`SdkTimeouts::from_env`] on top.
pub async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(SdkTimeouts::from_env().config())
        .load()
        .await
}

/// A DynamoDB client configured from the environment the way every AWS SDK is: region and
/// credentials from the Lambda environment (or `AWS_REGION`, `AWS_ACCESS_KEY_ID`, …), and an
/// endpoint override from `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL` (a local DynamoDB),
/// with the operation and attempt timeouts of [`SdkTimeouts`] ([`sdk_config`]).
/// Build it once per process, outside the handler.
pub async fn connect() -> Client {
    Client(aws_sdk_dynamodb::Client::new(&sdk_config().await))
}

/// Writes `effects` in one transaction with no mark: for follow-up bookkeeping that is itself
/// idempotent by its conditions (e.g. marking an intent confirmed only while it is pending).
/// Returns `Ok(false)` when a condition failed and nothing was written.
pub async fn write_effects(
    client: impl Into<Client>,
    effects: &[lambda_dedup::Effect],
) -> Result<bool, Error> {
    let client: &Client = &client.into();
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
        .sdk()
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
            Err(crate::error::from_sdk(err))
        }
    }
}

/// An item's string and number attributes, by name (numbers in their decimal text).
pub type Attributes = BTreeMap<String, String>;

/// The items of `table` that `filter` (over the name `#n` and the value `:v`) keeps, read
/// strongly consistently, every page.
pub(crate) async fn scan_raw(
    client: &Client,
    table: &str,
    filter: &str,
    name: &str,
    value: Option<AttributeValue>,
) -> Result<Vec<std::collections::HashMap<String, AttributeValue>>, Error> {
    let mut found = Vec::new();
    let mut start = None;
    loop {
        let mut req = client
            .sdk()
            .scan()
            .table_name(table)
            .filter_expression(filter)
            .expression_attribute_names("#n", name)
            .consistent_read(true)
            .set_exclusive_start_key(start);
        if let Some(v) = &value {
            req = req.expression_attribute_values(":v", v.clone());
        }
        let out = req.send().await.map_err(crate::error::from_sdk)?;
        found.extend(out.items().iter().cloned());
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(found);
        }
    }
}
