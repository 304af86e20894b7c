//! The lookup every setting is read through ([`Env`]): the process environment in Lambda, a
//! fixed set of variables in tests, so that tests run the very wiring `main` runs; and the few
//! readings every concern shares (a required variable, an optional one with its default, a
//! number of milliseconds within bounds).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::{SettingRule, SettingsError};

/// Where a function reads its configuration: the process environment in Lambda
/// ([`Env::process`]), or a fixed set of variables ([`Env::from_pairs`]) in tests, which then run
/// the very wiring `main` runs.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `None`: the process environment.
    vars: Option<BTreeMap<String, String>>,
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self { vars: None }
    }

    /// Exactly these variables, and no others.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: Some(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }

    /// These variables with `name` set to `value` (a fixed set only; the process environment is
    /// never changed).
    #[must_use]
    pub fn with(mut self, name: &str, value: impl Into<String>) -> Self {
        self.vars
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), value.into());
        self
    }

    /// A variable's value, if set.
    pub fn get(&self, name: &str) -> Option<String> {
        match &self.vars {
            None => std::env::var(name).ok(),
            Some(vars) => vars.get(name).cloned(),
        }
    }

    /// A required variable, or an error naming it.
    pub fn required(&self, name: &str) -> Result<String, SettingsError> {
        required_in(self, name)
    }
}

/// Where variables come from.
pub(crate) type Lookup<'a> = &'a Env;

pub(crate) fn required_in(env: Lookup<'_>, name: &str) -> Result<String, SettingsError> {
    match env.get(name) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(SettingsError::Missing(name.to_owned())),
    }
}

pub(crate) fn optional_in<T: std::str::FromStr>(
    env: Lookup<'_>,
    name: &str,
    default: T,
) -> Result<T, SettingsError> {
    match env.get(name) {
        Some(v) if !v.trim().is_empty() => v.trim().parse().map_err(|_| SettingsError::Invalid {
            name: name.to_owned(),
            value: v.clone(),
        }),
        _ => Ok(default),
    }
}

/// `name` in `env` as milliseconds (`default` when unset): refused, naming it, when it does not
/// parse, and when it is over `max` ("longer than `what`").
pub(crate) fn millis_in(
    env: Lookup<'_>,
    name: &'static str,
    default: Duration,
    max: Duration,
    what: &'static str,
) -> Result<Duration, SettingsError> {
    let Some(text) = env.get(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    let invalid = || SettingsError::Invalid {
        name: name.to_owned(),
        value: text.clone(),
    };
    let value = Duration::from_millis(text.trim().parse().map_err(|_| invalid())?);
    if value > max {
        return Err(SettingsError::refused(
            name,
            SettingRule::AboveMaximum {
                value: millis(value),
                max: millis(max),
                why: what,
            },
        ));
    }
    Ok(value)
}

/// Refuses the start when `old`, a variable no longer read, is set: a setting that is silently
/// ignored is a misconfiguration nobody sees, so the refusal names the variable to set instead.
pub(crate) fn retired(
    env: Lookup<'_>,
    old: &'static str,
    instead: &'static str,
    why: &'static str,
) -> Result<(), SettingsError> {
    match env.get(old) {
        Some(_) => Err(SettingsError::refused(
            old,
            SettingRule::Retired { instead, why },
        )),
        None => Ok(()),
    }
}

/// `d` in whole milliseconds, as a `_MS` variable is written.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
