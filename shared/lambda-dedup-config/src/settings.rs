//! The function's settings ([`Settings`]): what every function reads (`DEDUP_*`, the provider's
//! timeout, the SDK timeouts and the side queues), checked at start, and [`SettingsError`], why
//! any setting refuses the start. The table of every variable is the [`config`](super) module's.

use std::time::Duration;

use lambda_dedup::{EventTimeSource, RedeliveryHorizon, Retention, Scope};

use crate::env::{Env, Lookup, millis, optional_in, required_in};
use crate::keys::event_time_in;
use crate::{DeadlineMargin, SdkTimeouts, SettingRule, SideQueues};

/// The variable that names the mark table.
pub const MARK_TABLE_VAR: &str = "DEDUP_MARK_TABLE";
/// The source queue's message retention, seconds (S9's horizon).
pub const QUEUE_RETENTION_VAR: &str = "DEDUP_QUEUE_RETENTION_SECONDS";
/// The redrive policy's maxReceiveCount (S9's horizon).
pub const MAX_RECEIVE_COUNT_VAR: &str = "DEDUP_MAX_RECEIVE_COUNT";
/// The source queue's visibility timeout, seconds (S9's horizon).
pub const VISIBILITY_TIMEOUT_VAR: &str = "DEDUP_VISIBILITY_TIMEOUT_SECONDS";
/// The dead-letter queue's message retention, seconds (S9's horizon).
pub const DLQ_RETENTION_VAR: &str = "DEDUP_DLQ_RETENTION_SECONDS";

/// Why a function refuses to start: typed, so a caller (or a test) can tell the cases apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A required variable is absent or empty.
    #[error("environment variable {0} must be set")]
    Missing(String),
    /// A variable does not parse as what it must be.
    #[error("environment variable {name}={value:?} is not valid")]
    Invalid {
        /// The variable.
        name: String,
        /// Its value (configuration, never message data).
        value: String,
    },
    /// The namespace or consumer, or the retention against the horizon (S9): the core's own
    /// refusal.
    #[error("refusing to start: {0}")]
    Core(#[from] lambda_dedup::ConfigError),
    /// A value that parses but cannot work, alone or with another variable's (a zero, a lease
    /// not longer than the provider timeout…): the variable and the rule it breaks.
    #[error("refusing to start: {}", .rule.shown(.var))]
    Refused {
        /// The variable.
        var: &'static str,
        /// The rule its value breaks.
        rule: SettingRule,
    },
    /// The secret a variable names could not be read at init (missing, not readable, not text).
    #[error("refusing to start: {var}: {error}")]
    Secret {
        /// The variable naming the secret.
        var: &'static str,
        /// Why it could not be read.
        error: crate::SecretError,
    },
}

impl SettingsError {
    /// `var` breaks `rule`.
    pub fn refused(var: &'static str, rule: SettingRule) -> Self {
        SettingsError::Refused { var, rule }
    }
}

fn positive(n: usize, name: &'static str) -> Result<usize, SettingsError> {
    if n == 0 {
        return Err(SettingsError::refused(name, SettingRule::Zero));
    }
    Ok(n)
}

/// `PROVIDER_TIMEOUT_MS` in `env` (default 5000), refusing zero.
pub fn provider_timeout_in(env: Lookup<'_>) -> Result<Duration, SettingsError> {
    match optional_in(env, "PROVIDER_TIMEOUT_MS", 5_000u64)? {
        0 => Err(SettingsError::refused(
            "PROVIDER_TIMEOUT_MS",
            SettingRule::Zero,
        )),
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// What every function reads from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace and consumer of the keys.
    pub scope: Scope,
    /// The mark table; `None` when `DEDUP_MARK_TABLE` is unset, which only a function whose
    /// marks live elsewhere may be (the webhook receiver: its inbox items are its marks).
    /// A store that needs it refuses to build without it ([`required_mark_table`](Self::required_mark_table)).
    pub mark_table: Option<String>,
    /// Mark retention, checked against the redelivery horizon.
    pub retention: Retention,
    /// Bound on concurrent messages in a batch.
    pub max_concurrency: usize,
    /// Longest lease of the leased flow; longer than `provider_timeout`.
    pub lease: Duration,
    /// The clock-skew allowance of leases (`DEDUP_CLOCK_SKEW_MS`), shorter than the lease.
    pub clock_skew: Duration,
    /// How long one call to an external API may take.
    pub provider_timeout: Duration,
    /// How long the external API keeps idempotency keys.
    pub provider_key_retention: Duration,
    /// Completed marks kept in memory per container.
    pub cache_size: usize,
    /// How long a cached mark is trusted (`DEDUP_CACHE_SECONDS`).
    pub cache_max_age: Duration,
    /// Batch-transaction mode reads the batch's marks first and leaves known duplicates out.
    pub prefilter_duplicates: bool,
    /// The largest message body processed (a platform limit, so a setting).
    pub max_body_bytes: usize,
    /// Where the event's time is read (S10), when the setting overrides the key spec's own.
    pub event_time: Option<EventTimeSource>,
    /// How long a direct invocation waits for another invocation of the same event to finish
    /// before it answers `InvokeError::InProgress` (`DEDUP_IN_PROGRESS_WAIT_MS`; 0: no wait).
    pub in_progress_wait: Duration,
    /// The time kept before the invocation's deadline to answer (`DEDUP_DEADLINE_MARGIN_MS`):
    /// the one deadline margin, of every service (a relay's too), read here only.
    pub deadline_margin: DeadlineMargin,
    /// How long an AWS SDK call and its attempts may take (`DEDUP_SDK_*_TIMEOUT_MS`): every
    /// client the function builds (its DynamoDB store and tables, its side queues) has them.
    pub sdk_timeouts: SdkTimeouts,
    /// The side queues (`DEDUP_RECONCILIATION_QUEUE_URL`, `DEDUP_PARKING_QUEUE_URL`).
    pub queues: SideQueues,
}

impl Settings {
    /// Reads the settings from `env`; `function` is the default consumer name.
    pub fn read(env: &Env, function: &str) -> Result<Self, SettingsError> {
        let optional = |name: &str, default: u64| optional_in(env, name, default);
        let secs = |name: &str, default: u64| optional(name, default).map(Duration::from_secs);
        let namespace = required_in(env, "DEDUP_NAMESPACE")?;
        let consumer = optional_in(env, "DEDUP_CONSUMER", function.to_owned())?;
        let scope = Scope::new(&namespace, &consumer)?;
        let horizon = RedeliveryHorizon {
            queue_retention: secs(QUEUE_RETENTION_VAR, 4 * 86_400)?,
            max_receive_count: optional_in(env, MAX_RECEIVE_COUNT_VAR, 5)?,
            visibility_timeout: secs(VISIBILITY_TIMEOUT_VAR, 180)?,
            dlq_retention: secs(DLQ_RETENTION_VAR, 14 * 86_400)?,
            replay_window: secs("DEDUP_REPLAY_WINDOW_SECONDS", 3 * 86_400)?,
        };
        let retention =
            Retention::covering(secs("DEDUP_RETENTION_SECONDS", 30 * 86_400)?, &horizon)?;
        let provider_timeout = provider_timeout_in(env)?;
        let lease = secs("DEDUP_LEASE_SECONDS", 60)?;
        let provider_key_retention = secs("PROVIDER_KEY_RETENTION_SECONDS", 86_400)?;
        if provider_key_retention <= lease {
            return Err(SettingsError::refused(
                "PROVIDER_KEY_RETENTION_SECONDS",
                SettingRule::NotLongerThan {
                    value: provider_key_retention.as_secs(),
                    other: "DEDUP_LEASE_SECONDS",
                    other_value: lease.as_secs(),
                    why: "or no crashed call could ever be retried",
                },
            ));
        }
        let sdk_timeouts = SdkTimeouts::read(env)?;
        if lease <= provider_timeout {
            return Err(SettingsError::refused(
                "DEDUP_LEASE_SECONDS",
                SettingRule::NotLongerThan {
                    value: lease.as_secs(),
                    other: "PROVIDER_TIMEOUT_MS",
                    other_value: millis(provider_timeout),
                    why: "a lease that can expire while the call is out lets a second process \
                          call again",
                },
            ));
        }
        let clock_skew = Duration::from_millis(optional_in(env, "DEDUP_CLOCK_SKEW_MS", 1_000u64)?);
        if clock_skew >= lease {
            return Err(SettingsError::refused(
                "DEDUP_CLOCK_SKEW_MS",
                SettingRule::NotShorterThan {
                    value: millis(clock_skew),
                    other: "DEDUP_LEASE_SECONDS",
                    other_value: lease.as_secs(),
                },
            ));
        }
        Ok(Self {
            scope,
            mark_table: required_in(env, MARK_TABLE_VAR).ok(),
            retention,
            max_concurrency: positive(
                optional_in(env, "DEDUP_MAX_CONCURRENCY", 10)?,
                "DEDUP_MAX_CONCURRENCY",
            )?,
            lease,
            clock_skew,
            provider_timeout,
            provider_key_retention,
            cache_size: optional_in(env, "DEDUP_CACHE_SIZE", 10_000)?,
            cache_max_age: Duration::from_secs(optional_in(env, "DEDUP_CACHE_SECONDS", 60)?),
            prefilter_duplicates: optional_in(env, "DEDUP_PREFILTER_DUPLICATES", false)?,
            max_body_bytes: positive(
                optional_in(
                    env,
                    "DEDUP_MAX_BODY_BYTES",
                    lambda_dedup::DEFAULT_MAX_BODY_BYTES,
                )?,
                "DEDUP_MAX_BODY_BYTES",
            )?,
            event_time: event_time_in(env)?,
            in_progress_wait: Duration::from_millis(optional_in(
                env,
                "DEDUP_IN_PROGRESS_WAIT_MS",
                0,
            )?),
            deadline_margin: DeadlineMargin::read(env)?,
            sdk_timeouts,
            queues: SideQueues::read(env)?,
        })
    }

    /// The key spec these settings describe: `spec` with bodies up to `DEDUP_MAX_BODY_BYTES`
    /// and the event's time from `DEDUP_EVENT_TIME_FROM` where set.
    pub fn key_spec(&self, spec: lambda_dedup::KeySpec) -> lambda_dedup::KeySpec {
        let spec = spec.max_body_bytes(self.max_body_bytes);
        match &self.event_time {
            Some(time) => spec.event_time(time.clone()),
            None => spec,
        }
    }

    /// The mark table, or why there is none: `DEDUP_MARK_TABLE` unset.
    pub fn required_mark_table(&self) -> Result<&str, SettingsError> {
        self.mark_table
            .as_deref()
            .ok_or_else(|| SettingsError::Missing(MARK_TABLE_VAR.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::TimeFormat;
    use std::collections::HashMap;

    fn typed(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::read(&Env::from_pairs(map), "ledger-projector")
    }

    /// The settings, or the refusal as the function would print it.
    fn settings(vars: &[(&str, &str)]) -> Result<Settings, String> {
        typed(vars).map_err(|e| e.to_string())
    }

    /// The deadline margin and the SDK timeouts are checked at start, naming the variable.
    #[test]
    fn deadline_margin_and_sdk_timeouts_that_cannot_work_are_refused() {
        assert!(typed(&BASE).is_ok());
        for (name, value, invalid) in [
            ("DEDUP_DEADLINE_MARGIN_MS", "1.5s", true),
            ("DEDUP_DEADLINE_MARGIN_MS", "3600000", false),
            ("DEDUP_SDK_OPERATION_TIMEOUT_MS", "ten", true),
            ("DEDUP_SDK_OPERATION_TIMEOUT_MS", "0", false),
            ("DEDUP_SDK_ATTEMPT_TIMEOUT_MS", "20000", false),
        ] {
            let mut vars = BASE.to_vec();
            vars.push((name, value));
            match typed(&vars) {
                Err(SettingsError::Invalid { name: n, .. }) if invalid => assert_eq!(n, name),
                Err(SettingsError::Refused { var, .. }) if !invalid => assert_eq!(var, name),
                other => panic!("{name}={value}: {other:?}"),
            }
        }
    }

    /// The refusals are typed: a caller tells a missing variable, an unparsable one, the core's
    /// own refusal (S9) and an impossible combination apart without reading their text.
    #[test]
    fn refusals_are_typed() {
        assert_eq!(
            typed(&[("DEDUP_MARK_TABLE", "m")]).map(|_| ()),
            Err(SettingsError::Missing("DEDUP_NAMESPACE".into()))
        );
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_MAX_CONCURRENCY", "ten"));
        assert!(matches!(
            typed(&vars),
            Err(SettingsError::Invalid { name, .. }) if name == "DEDUP_MAX_CONCURRENCY"
        ));
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_RETENTION_SECONDS", "86400"));
        assert!(matches!(
            typed(&vars),
            Err(SettingsError::Core(
                lambda_dedup::ConfigError::RetentionTooShort { .. }
            ))
        ));
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_LEASE_SECONDS", "1"));
        assert!(matches!(
            typed(&vars),
            Err(SettingsError::Refused {
                var: "DEDUP_LEASE_SECONDS",
                rule: SettingRule::NotLongerThan {
                    other: "PROVIDER_TIMEOUT_MS",
                    ..
                }
            })
        ));
    }

    /// Each value that parses but cannot work is refused typed: the variable and the rule it
    /// breaks, with the values compared; the message names every variable in it.
    #[test]
    fn each_refusal_names_its_variable_and_the_rule_it_breaks() {
        let cases: [(&str, &str, &str, SettingRule); 6] = [
            (
                "DEDUP_MAX_CONCURRENCY",
                "0",
                "DEDUP_MAX_CONCURRENCY",
                SettingRule::Zero,
            ),
            (
                "DEDUP_MAX_BODY_BYTES",
                "0",
                "DEDUP_MAX_BODY_BYTES",
                SettingRule::Zero,
            ),
            (
                "DEDUP_DEADLINE_MARGIN_MS",
                "3600000",
                "DEDUP_DEADLINE_MARGIN_MS",
                SettingRule::AboveMaximum {
                    value: 3_600_000,
                    max: 900_000,
                    why: "longer than any Lambda timeout",
                },
            ),
            (
                "PROVIDER_KEY_RETENTION_SECONDS",
                "60",
                "PROVIDER_KEY_RETENTION_SECONDS",
                SettingRule::NotLongerThan {
                    value: 60,
                    other: "DEDUP_LEASE_SECONDS",
                    other_value: 60,
                    why: "or no crashed call could ever be retried",
                },
            ),
            (
                "DEDUP_CLOCK_SKEW_MS",
                "60000",
                "DEDUP_CLOCK_SKEW_MS",
                SettingRule::NotShorterThan {
                    value: 60_000,
                    other: "DEDUP_LEASE_SECONDS",
                    other_value: 60,
                },
            ),
            (
                "DEDUP_SDK_ATTEMPT_TIMEOUT_MS",
                "20000",
                "DEDUP_SDK_ATTEMPT_TIMEOUT_MS",
                SettingRule::LongerThan {
                    value: 20_000,
                    other: "DEDUP_SDK_OPERATION_TIMEOUT_MS",
                    other_value: 10_000,
                },
            ),
        ];
        for (name, value, var, rule) in cases {
            let mut vars = BASE.to_vec();
            vars.push((name, value));
            let err = typed(&vars).expect_err(name);
            assert_eq!(
                err,
                SettingsError::refused(var, rule.clone()),
                "{name}={value}"
            );
            let text = err.to_string();
            assert!(
                text.starts_with("refusing to start: ") && text.contains(var),
                "{text}"
            );
            if let SettingRule::NotLongerThan { other, .. }
            | SettingRule::NotShorterThan { other, .. }
            | SettingRule::LongerThan { other, .. } = rule
            {
                assert!(text.contains(other), "{text}");
            }
        }
    }

    const BASE: [(&str, &str); 2] = [("DEDUP_NAMESPACE", "prod"), ("DEDUP_MARK_TABLE", "marks")];

    #[test]
    fn defaults_cover_the_default_horizon() {
        let s = settings(&BASE).expect("defaults are consistent");
        assert_eq!(s.scope.namespace(), "prod");
        assert_eq!(s.scope.consumer(), "ledger-projector");
        assert_eq!(s.retention.duration(), Duration::from_secs(30 * 86_400));
        assert_eq!(s.max_concurrency, 10);
    }

    /// S9: a function refuses to start when its retention does not exceed the horizon its
    /// environment describes.
    #[test]
    fn s9_refuses_to_start_with_retention_below_the_horizon() {
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_RETENTION_SECONDS", "86400"));
        let err = settings(&vars).expect_err("one day < 4 days of queue retention");
        assert!(
            err.contains("refusing to start") && err.contains("redelivery horizon"),
            "{err}"
        );

        let mut vars = BASE.to_vec();
        vars.extend([
            ("DEDUP_MAX_RECEIVE_COUNT", "1000"),
            ("DEDUP_VISIBILITY_TIMEOUT_SECONDS", "900"),
        ]);
        assert!(
            settings(&vars).is_err(),
            "1000 x 900s of redeliveries exceed 30 days"
        );

        // A message may wait in the DLQ for its retention and then be redriven: 14 days of
        // retention do not cover the default 14 days in the DLQ (they used to be accepted).
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_RETENTION_SECONDS", "1209600"));
        let err = settings(&vars).expect_err("14 days < 4 + 14 + 3 days");
        assert!(err.contains("DLQ retention"), "{err}");
    }

    /// The body limit is a setting defaulting to the platform's (1 MiB since 2026), not the
    /// 256 KiB constant that dead-lettered valid messages; zero is refused.
    #[test]
    fn the_body_limit_is_a_setting_defaulting_to_the_platform_limit() {
        let s = settings(&BASE).expect("defaults");
        assert_eq!(s.max_body_bytes, 1024 * 1024);
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_MAX_BODY_BYTES", "65536"));
        assert_eq!(settings(&vars).expect("set").max_body_bytes, 65_536);
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_MAX_BODY_BYTES", "0"));
        let err = settings(&vars).expect_err("zero");
        assert!(err.contains("DEDUP_MAX_BODY_BYTES"), "{err}");
    }

    fn refused(extra: &[(&str, &str)]) -> String {
        let mut vars = BASE.to_vec();
        vars.extend_from_slice(extra);
        settings(&vars).expect_err("refused at start")
    }

    /// S6: a lease not longer than the provider timeout is refused: it could expire while the
    /// call is still out, and another process would call the provider again.
    #[test]
    fn s6_a_lease_not_longer_than_the_provider_timeout_is_refused() {
        let err = refused(&[
            ("DEDUP_LEASE_SECONDS", "5"),
            ("PROVIDER_TIMEOUT_MS", "5000"),
        ]);
        assert!(
            err.contains("DEDUP_LEASE_SECONDS") && err.contains("PROVIDER_TIMEOUT_MS"),
            "{err}"
        );
        refused(&[
            ("DEDUP_LEASE_SECONDS", "4"),
            ("PROVIDER_TIMEOUT_MS", "5000"),
        ]);
        let mut vars = BASE.to_vec();
        vars.extend([
            ("DEDUP_LEASE_SECONDS", "6"),
            ("PROVIDER_TIMEOUT_MS", "5000"),
        ]);
        let s = settings(&vars).expect("6 s > 5 s");
        assert_eq!(s.provider_timeout, Duration::from_millis(5000));
    }

    /// S16: a provider key retention not longer than the lease is refused: every takeover
    /// would then be past it, and no crashed call could be retried.
    #[test]
    fn s16_a_provider_key_retention_within_the_lease_is_refused() {
        let err = refused(&[("PROVIDER_KEY_RETENTION_SECONDS", "60")]);
        assert!(err.contains("PROVIDER_KEY_RETENTION_SECONDS"), "{err}");
        let s = settings(&BASE).expect("defaults");
        assert_eq!(s.provider_key_retention, Duration::from_secs(86_400));
    }

    /// Zero durations and counts that would stop the function from working are refused.
    #[test]
    fn zero_lease_timeout_or_concurrency_is_refused() {
        assert!(refused(&[("DEDUP_LEASE_SECONDS", "0")]).contains("DEDUP_LEASE_SECONDS"));
        assert!(refused(&[("PROVIDER_TIMEOUT_MS", "0")]).contains("PROVIDER_TIMEOUT_MS"));
        assert!(refused(&[("DEDUP_MAX_CONCURRENCY", "0")]).contains("DEDUP_MAX_CONCURRENCY"));
    }

    /// S9: a retention whose `now + retention` would overflow is refused at start.
    #[test]
    fn s9_an_overflowing_retention_is_refused_at_start() {
        let err = refused(&[("DEDUP_RETENTION_SECONDS", "18446744073709551615")]);
        assert!(err.contains("refusing to start"), "{err}");
    }

    /// S10: where the event's time is read is one setting; a value it cannot use is refused
    /// at start, never read as "no time".
    #[test]
    fn s10_the_event_time_setting_is_parsed_or_refused() {
        let with = |extra: &[(&str, &str)]| {
            let mut vars = BASE.to_vec();
            vars.extend_from_slice(extra);
            typed(&vars).map(|s| s.event_time)
        };
        assert_eq!(with(&[]), Ok(None));
        assert_eq!(
            with(&[("DEDUP_EVENT_TIME_FROM", "cloudevents")]),
            Ok(Some(EventTimeSource::CloudEvents))
        );
        assert_eq!(
            with(&[("DEDUP_EVENT_TIME_FROM", "none")]),
            Ok(Some(EventTimeSource::None))
        );
        assert_eq!(
            with(&[("DEDUP_EVENT_TIME_FROM", "json:/meta/at")]),
            Ok(Some(EventTimeSource::JsonPointer {
                pointer: "/meta/at".into(),
                format: TimeFormat::Rfc3339
            }))
        );
        assert_eq!(
            with(&[
                ("DEDUP_EVENT_TIME_FROM", "attribute:occurred-at"),
                ("DEDUP_EVENT_TIME_FORMAT", "epoch-millis")
            ]),
            Ok(Some(EventTimeSource::MessageAttribute {
                name: "occurred-at".into(),
                format: TimeFormat::EpochMillis
            }))
        );
        for (name, value) in [
            ("DEDUP_EVENT_TIME_FROM", "json:meta"),
            ("DEDUP_EVENT_TIME_FROM", "header:x"),
            ("DEDUP_EVENT_TIME_FROM", "attribute:"),
            ("DEDUP_EVENT_TIME_FORMAT", "unix"),
        ] {
            assert!(
                matches!(with(&[(name, value)]), Err(SettingsError::Invalid { name: n, .. }) if n == name),
                "{name}={value}"
            );
        }
    }

    #[test]
    fn missing_or_invalid_variables_are_named() {
        let err = settings(&[("DEDUP_MARK_TABLE", "m")]).expect_err("no namespace");
        assert!(err.contains("DEDUP_NAMESPACE"), "{err}");
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_MAX_CONCURRENCY", "ten"));
        let err = settings(&vars).expect_err("not a number");
        assert!(err.contains("DEDUP_MAX_CONCURRENCY"), "{err}");
        let mut vars = BASE.to_vec();
        vars.push(("DEDUP_NAMESPACE", "has space"));
        assert!(settings(&vars).is_err());
    }
}
