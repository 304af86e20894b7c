//! How long the functions' AWS SDK calls (DynamoDB, SQS) may take ([`SdkTimeouts`]): without
//! these the SDK has a connect timeout only, and a call to a store that accepts the connection
//! and never answers hangs past the invocation's deadline (issue 19). A call that times out is a
//! transient fault (`FaultKind::Timeout`): a retry, never an acknowledgement.

use std::time::Duration;

use crate::env::{Lookup, millis};
use crate::{SettingRule, SettingsError};

/// The variable bounding one SDK call, retries included (`DEDUP_SDK_OPERATION_TIMEOUT_MS`).
pub const OPERATION_TIMEOUT_VAR: &str = "DEDUP_SDK_OPERATION_TIMEOUT_MS";
/// The variable bounding one attempt of an SDK call (`DEDUP_SDK_ATTEMPT_TIMEOUT_MS`).
pub const ATTEMPT_TIMEOUT_VAR: &str = "DEDUP_SDK_ATTEMPT_TIMEOUT_MS";

/// The operation and attempt timeouts of every AWS SDK client a function builds (its DynamoDB
/// store and item tables, its side queues, the inbox forwarder's queue): one of the
/// [`Settings`](crate::Settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdkTimeouts {
    /// One call, all its attempts and backoff included.
    pub operation: Duration,
    /// One attempt (the SDK's retry strategy makes up to three).
    pub attempt: Duration,
}

impl Default for SdkTimeouts {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl SdkTimeouts {
    /// The defaults: 10 s a call, 3 s an attempt (DynamoDB and SQS answer in milliseconds; an
    /// attempt that takes seconds is a hung connection, and the retry goes elsewhere).
    pub const DEFAULT: Self = Self {
        operation: Duration::from_millis(10_000),
        attempt: Duration::from_millis(3_000),
    };

    /// The timeouts `env` sets, each defaulting when unset; refuses zero, a value that is not
    /// milliseconds, and an attempt longer than the call, naming the variable.
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let ms = |name: &'static str, default: Duration| match env.get(name) {
            Some(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
                Ok(0) => Err(SettingsError::refused(name, SettingRule::Zero)),
                Ok(ms) => Ok(Duration::from_millis(ms)),
                Err(_) => Err(SettingsError::Invalid {
                    name: name.to_owned(),
                    value: v,
                }),
            },
            _ => Ok(default),
        };
        let t = Self {
            operation: ms(OPERATION_TIMEOUT_VAR, Self::DEFAULT.operation)?,
            attempt: ms(ATTEMPT_TIMEOUT_VAR, Self::DEFAULT.attempt)?,
        };
        if t.attempt > t.operation {
            return Err(SettingsError::refused(
                ATTEMPT_TIMEOUT_VAR,
                SettingRule::LongerThan {
                    value: millis(t.attempt),
                    other: OPERATION_TIMEOUT_VAR,
                    other_value: millis(t.operation),
                },
            ));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    /// Unset, the defaults; set, milliseconds; zero, text or an attempt longer than its call
    /// refused, naming the variable.
    #[test]
    fn the_sdk_timeouts_are_read_in_milliseconds_or_refused() {
        let read = |pairs: &[(&str, &str)]| SdkTimeouts::read(&Env::from_pairs(pairs.to_vec()));
        assert_eq!(read(&[]), Ok(SdkTimeouts::DEFAULT));
        assert_eq!(
            read(&[
                (OPERATION_TIMEOUT_VAR, "4000"),
                (ATTEMPT_TIMEOUT_VAR, "1000")
            ]),
            Ok(SdkTimeouts {
                operation: Duration::from_millis(4000),
                attempt: Duration::from_millis(1000)
            })
        );
        assert!(matches!(
            read(&[(OPERATION_TIMEOUT_VAR, "ten")]),
            Err(SettingsError::Invalid { name, .. }) if name == OPERATION_TIMEOUT_VAR
        ));
        for refused in [
            vec![(ATTEMPT_TIMEOUT_VAR, "0")],
            vec![(OPERATION_TIMEOUT_VAR, "1000")],
        ] {
            assert!(
                matches!(read(&refused), Err(SettingsError::Refused { var, .. }) if var == ATTEMPT_TIMEOUT_VAR),
                "{refused:?}"
            );
        }
    }
}
