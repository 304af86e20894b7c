//! A relay's settings ([`RelayConfig`]): its table, the time one record needs (its budget) and
//! how long an item may wait before the sweep re-drives it, read under the relay's own names
//! ([`RelayVars`]). The deadline margin is not among them: it is the function's one
//! `DEDUP_DEADLINE_MARGIN_MS` ([`Settings::deadline_margin`](crate::Settings::deadline_margin)).

use std::time::Duration;

use crate::env::{Lookup, millis_in, optional_in, required_in, retired};
use crate::{SettingRule, SettingsError};

/// The longest record budget accepted: Lambda's longest timeout (15 minutes).
const MAX_BUDGET: Duration = Duration::from_secs(900);

/// Where a relay's settings are: the variable naming its table, its own variables under one
/// prefix (`{prefix}_RECORD_BUDGET_MS`, `{prefix}_REDRIVE_AFTER_SECONDS`, the retired
/// `{prefix}_DEADLINE_MARGIN_MS`) and its budget when unset. Written with
/// [`relay_vars!`](crate::relay_vars), which spells the names from the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayVars {
    /// The variable naming the relay's table (`INTENTS_TABLE`, `INBOX_TABLE`).
    pub table: &'static str,
    /// `{prefix}_RECORD_BUDGET_MS`: the time one record needs, whole.
    pub budget: &'static str,
    /// `{prefix}_REDRIVE_AFTER_SECONDS`: the sweep's age.
    pub redrive: &'static str,
    /// `{prefix}_DEADLINE_MARGIN_MS`: the budget's old name, refused at start.
    pub retired_margin: &'static str,
    /// The record budget when unset.
    pub default_budget: Duration,
}

/// The [`RelayVars`] of the relay whose variables start `$prefix` and whose table `$table`
/// names, its budget `$ms` milliseconds when unset.
#[macro_export]
macro_rules! relay_vars {
    ($table:literal, $prefix:literal, $ms:expr) => {
        $crate::RelayVars {
            table: $table,
            budget: concat!($prefix, "_RECORD_BUDGET_MS"),
            redrive: concat!($prefix, "_REDRIVE_AFTER_SECONDS"),
            retired_margin: concat!($prefix, "_DEADLINE_MARGIN_MS"),
            default_budget: ::std::time::Duration::from_millis($ms),
        }
    };
}

impl RelayVars {
    /// The variable of the record budget: `{prefix}_RECORD_BUDGET_MS`.
    pub fn budget_var(&self) -> &'static str {
        self.budget
    }

    /// The variable of the sweep's age: `{prefix}_REDRIVE_AFTER_SECONDS`.
    pub fn redrive_var(&self) -> &'static str {
        self.redrive
    }

    /// The variable that was the record budget under a margin's name,
    /// `{prefix}_DEADLINE_MARGIN_MS`: refused at start.
    pub fn retired_margin_var(&self) -> &'static str {
        self.retired_margin
    }
}

/// A relay's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// The table whose items the relay acts on and settles.
    pub table: String,
    /// The time one record needs, whole (its action and the writes around it): a record is
    /// started only with this much left before the invocation's deadline.
    pub record_budget: Duration,
    /// How long an item may wait before the sweep re-drives it.
    pub redrive_after: Duration,
}

impl RelayConfig {
    /// The settings `env` gives the relay `vars` describes: its table (required), its record
    /// budget (milliseconds, above 0 and at most 15 minutes) and its sweep's age (seconds,
    /// default an hour). `{prefix}_DEADLINE_MARGIN_MS`, which was the budget under a margin's
    /// name, refuses the start, naming the budget's variable.
    pub fn read(env: Lookup<'_>, vars: &RelayVars) -> Result<Self, SettingsError> {
        let budget = vars.budget_var();
        retired(
            env,
            vars.retired_margin_var(),
            budget,
            "the time one record needs, whole (its action and the writes around it); the time \
             kept before the deadline is DEDUP_DEADLINE_MARGIN_MS, one for every function",
        )?;
        let record_budget = millis_in(
            env,
            budget,
            vars.default_budget,
            MAX_BUDGET,
            "longer than any Lambda timeout",
        )?;
        if record_budget.is_zero() {
            return Err(SettingsError::refused(budget, SettingRule::Zero));
        }
        let redrive_after = Duration::from_secs(optional_in(env, vars.redrive_var(), 3_600u64)?);
        Ok(Self {
            table: required_in(env, vars.table)?,
            record_budget,
            redrive_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    const VARS: RelayVars = crate::relay_vars!("ITEMS_TABLE", "TEST", 4_000);

    fn read(pairs: &[(&str, &str)]) -> Result<RelayConfig, SettingsError> {
        let env = Env::from_pairs([("ITEMS_TABLE", "items")]);
        let env = pairs.iter().fold(env, |env, (k, v)| env.with(k, *v));
        RelayConfig::read(&env, &VARS)
    }

    /// The table is required; the budget and the sweep's age default and are read under the
    /// relay's own names.
    #[test]
    fn a_relays_settings_are_read_under_its_own_names() {
        assert_eq!(
            read(&[]),
            Ok(RelayConfig {
                table: "items".into(),
                record_budget: Duration::from_millis(4_000),
                redrive_after: Duration::from_secs(3_600),
            })
        );
        let set = read(&[
            ("TEST_RECORD_BUDGET_MS", "750"),
            ("TEST_REDRIVE_AFTER_SECONDS", "90"),
        ])
        .expect("set");
        assert_eq!(set.record_budget, Duration::from_millis(750));
        assert_eq!(set.redrive_after, Duration::from_secs(90));
        assert_eq!(
            RelayConfig::read(&Env::from_pairs([("X", "y")]), &VARS),
            Err(SettingsError::Missing("ITEMS_TABLE".into()))
        );
    }

    /// A budget that cannot work is refused, naming its variable; the old margin's name is
    /// refused too, naming the budget's and the deadline margin's, never silently ignored.
    #[test]
    fn a_budget_that_cannot_work_and_the_retired_margin_are_refused() {
        for (value, invalid) in [("0", false), ("900001", false), ("1.5s", true)] {
            match read(&[("TEST_RECORD_BUDGET_MS", value)]) {
                Err(SettingsError::Invalid { name, .. }) if invalid => {
                    assert_eq!(name, "TEST_RECORD_BUDGET_MS")
                }
                Err(SettingsError::Refused { var, .. }) if !invalid => {
                    assert_eq!(var, "TEST_RECORD_BUDGET_MS")
                }
                other => panic!("{value}: {other:?}"),
            }
        }
        let Err(e @ SettingsError::Refused { .. }) = read(&[("TEST_DEADLINE_MARGIN_MS", "2000")])
        else {
            panic!("the retired margin was accepted");
        };
        assert!(matches!(
            &e,
            SettingsError::Refused {
                var: "TEST_DEADLINE_MARGIN_MS",
                rule: SettingRule::Retired {
                    instead: "TEST_RECORD_BUDGET_MS",
                    ..
                }
            }
        ));
        let why = e.to_string();
        assert!(
            why.contains("TEST_DEADLINE_MARGIN_MS")
                && why.contains("TEST_RECORD_BUDGET_MS")
                && why.contains("DEDUP_DEADLINE_MARGIN_MS"),
            "{why}"
        );
    }
}
