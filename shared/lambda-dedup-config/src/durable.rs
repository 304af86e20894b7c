//! Lambda durable functions' settings ([`DurableConfig`]): how long an execution may run and
//! how long Lambda keeps it once closed, and the S9 horizon they set for the step guard's marks
//! and the dispatcher's starts.

use std::time::Duration;

use crate::env::{Lookup, optional_in};
use crate::{SettingRule, Settings, SettingsError};

/// The execution history's retention, in days (`DurableConfig.RetentionPeriodInDays`).
pub const DURABLE_RETENTION_VAR: &str = "DURABLE_RETENTION_DAYS";
/// The longest an execution runs, in seconds (`DurableConfig.ExecutionTimeout`).
pub const DURABLE_TIMEOUT_VAR: &str = "DURABLE_EXECUTION_TIMEOUT_SECONDS";
/// Lambda keeps a closed execution's history 1 to 90 days.
const RETENTION_DAYS: (u64, u64) = (1, 90);
/// An execution runs at most a year (366 days).
const MAX_TIMEOUT_SECS: u64 = 366 * 86_400;

/// A durable function's execution limits, as its template's `DurableConfig` sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableConfig {
    /// How long Lambda keeps a closed execution, and so its name (`DURABLE_RETENTION_DAYS`).
    pub history_retention: Duration,
    /// The longest an execution runs: a step may be replayed that long after it first ran
    /// (`DURABLE_EXECUTION_TIMEOUT_SECONDS`).
    pub execution_timeout: Duration,
}

impl DurableConfig {
    /// The settings in `env`, checked against the function's `settings` (S9): a step's mark must
    /// outlive every replay of the step, so the marks' retention must exceed the execution
    /// timeout; and the dispatcher's starts are idempotent at Lambda for as long as it keeps
    /// an execution's name (at least the history's retention), so `PROVIDER_KEY_RETENTION_SECONDS`
    /// may not exceed it (S16: a takeover after Lambda forgot the name is not started again).
    pub fn read(env: Lookup<'_>, settings: &Settings) -> Result<Self, SettingsError> {
        let days: u64 = optional_in(env, DURABLE_RETENTION_VAR, 14)?;
        let (min, max) = RETENTION_DAYS;
        if days < min {
            return Err(SettingsError::refused(
                DURABLE_RETENTION_VAR,
                SettingRule::BelowMinimum {
                    value: days,
                    min,
                    why: "Lambda keeps a closed execution 1 to 90 days",
                },
            ));
        }
        if days > max {
            return Err(SettingsError::refused(
                DURABLE_RETENTION_VAR,
                SettingRule::AboveMaximum {
                    value: days,
                    max,
                    why: "Lambda keeps a closed execution 1 to 90 days",
                },
            ));
        }
        let timeout: u64 = optional_in(env, DURABLE_TIMEOUT_VAR, 86_400)?;
        if timeout == 0 {
            return Err(SettingsError::refused(
                DURABLE_TIMEOUT_VAR,
                SettingRule::Zero,
            ));
        }
        if timeout > MAX_TIMEOUT_SECS {
            return Err(SettingsError::refused(
                DURABLE_TIMEOUT_VAR,
                SettingRule::AboveMaximum {
                    value: timeout,
                    max: MAX_TIMEOUT_SECS,
                    why: "an execution runs at most a year",
                },
            ));
        }
        let retention = settings.retention.duration();
        if retention.as_secs() <= timeout {
            return Err(SettingsError::refused(
                "DEDUP_RETENTION_SECONDS",
                SettingRule::NotLongerThan {
                    value: retention.as_secs(),
                    other: DURABLE_TIMEOUT_VAR,
                    other_value: timeout,
                    why: "a step replayed after its mark expired would apply its effect again",
                },
            ));
        }
        let history_retention = Duration::from_secs(days * 86_400);
        let names_life = history_retention + Duration::from_secs(timeout);
        if settings.provider_key_retention > names_life {
            return Err(SettingsError::refused(
                "PROVIDER_KEY_RETENTION_SECONDS",
                SettingRule::LongerThan {
                    value: settings.provider_key_retention.as_secs(),
                    // Lambda keeps a name for the execution's life and the history's retention:
                    // the bound is their sum, said in seconds.
                    other: "DURABLE_RETENTION_DAYS + DURABLE_EXECUTION_TIMEOUT_SECONDS",
                    other_value: names_life.as_secs(),
                },
            ));
        }
        Ok(Self {
            history_retention,
            execution_timeout: Duration::from_secs(timeout),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    fn read(pairs: &[(&str, &str)]) -> Result<DurableConfig, SettingsError> {
        let mut all = vec![("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")];
        all.extend_from_slice(pairs);
        let env = Env::from_pairs(all);
        let settings = Settings::read(&env, "orders").expect("settings");
        DurableConfig::read(&env, &settings)
    }

    #[test]
    fn the_defaults_hold() {
        let c = read(&[]).expect("read");
        assert_eq!(c.history_retention, Duration::from_secs(14 * 86_400));
        assert_eq!(c.execution_timeout, Duration::from_secs(86_400));
    }

    #[test]
    fn a_history_retention_outside_1_to_90_days_is_refused() {
        for days in ["0", "91"] {
            let err = read(&[(DURABLE_RETENTION_VAR, days)]).expect_err(days);
            assert!(err.to_string().contains(DURABLE_RETENTION_VAR), "{err}");
        }
        assert!(read(&[(DURABLE_RETENTION_VAR, "90")]).is_ok());
    }

    /// S9: a step's mark outlives every replay of the step.
    #[test]
    fn s9_marks_kept_no_longer_than_an_execution_runs_are_refused() {
        let err = read(&[(DURABLE_TIMEOUT_VAR, "2592000")]).expect_err("refused");
        assert!(err.to_string().contains("DEDUP_RETENTION_SECONDS"), "{err}");
        let longer = [
            (DURABLE_TIMEOUT_VAR, "2592000"),
            ("DEDUP_RETENTION_SECONDS", "5184000"),
        ];
        assert!(read(&longer).is_ok());
    }

    /// S16: the dispatcher's provider is Lambda, which forgets a name after the history's
    /// retention.
    #[test]
    fn s16_a_provider_key_retention_past_the_names_life_is_refused() {
        let err = read(&[
            (DURABLE_RETENTION_VAR, "1"),
            (DURABLE_TIMEOUT_VAR, "3600"),
            ("PROVIDER_KEY_RETENTION_SECONDS", "604800"),
        ])
        .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "refusing to start: PROVIDER_KEY_RETENTION_SECONDS (604800s) must not exceed \
             DURABLE_RETENTION_DAYS + DURABLE_EXECUTION_TIMEOUT_SECONDS (90000s)"
        );
    }
}
