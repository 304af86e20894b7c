//! A relay's settings ([`RelayConfig`]): its table, the time one record needs (its budget) and
//! how long an item may wait before the sweep re-drives it, read under the relay's own names
//! ([`RelayVars`]). The deadline margin is not among them: it is the function's one
//! `DEDUP_DEADLINE_MARGIN_MS` ([`Settings::deadline_margin`](super::Settings::deadline_margin)).

use std::time::Duration;

use super::SettingsError;
use super::env::{Lookup, millis_in, optional_in, required_in, retired};

/// The longest record budget accepted: Lambda's longest timeout (15 minutes).
const MAX_BUDGET: Duration = Duration::from_secs(900);

/// Where a relay's settings are: the variable naming its table, the prefix of its own two
/// variables (`{prefix}_RECORD_BUDGET_MS`, `{prefix}_REDRIVE_AFTER_SECONDS`) and its budget when
/// unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayVars {
    /// The variable naming the relay's table (`INTENTS_TABLE`, `INBOX_TABLE`).
    pub table: &'static str,
    /// The prefix of the relay's own variables (`RELAY`, `FORWARDER`).
    pub prefix: &'static str,
    /// The record budget when `{prefix}_RECORD_BUDGET_MS` is unset.
    pub default_budget: Duration,
}

impl RelayVars {
    /// The variable of the record budget: `{prefix}_RECORD_BUDGET_MS`.
    pub fn budget_var(&self) -> String {
        format!("{}_RECORD_BUDGET_MS", self.prefix)
    }

    /// The variable of the sweep's age: `{prefix}_REDRIVE_AFTER_SECONDS`.
    pub fn redrive_var(&self) -> String {
        format!("{}_REDRIVE_AFTER_SECONDS", self.prefix)
    }

    /// The variable that was the record budget under a margin's name,
    /// `{prefix}_DEADLINE_MARGIN_MS`: refused at start.
    pub fn retired_margin_var(&self) -> String {
        format!("{}_DEADLINE_MARGIN_MS", self.prefix)
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
            &vars.retired_margin_var(),
            &format!(
                "the time one record needs, whole (its action and the writes around it), is \
                 {budget} (default {}ms); the time kept before the deadline is \
                 {} for every function",
                vars.default_budget.as_millis(),
                super::MARGIN_VAR
            ),
        )?;
        let record_budget = millis_in(
            env,
            &budget,
            vars.default_budget,
            MAX_BUDGET,
            "any Lambda timeout",
        )?;
        if record_budget.is_zero() {
            return Err(SettingsError::Refused(format!("{budget} must be above 0")));
        }
        let redrive_after = Duration::from_secs(optional_in(env, &vars.redrive_var(), 3_600u64)?);
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

    const VARS: RelayVars = RelayVars {
        table: "ITEMS_TABLE",
        prefix: "TEST",
        default_budget: Duration::from_millis(4_000),
    };

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
                Err(SettingsError::Refused(why)) if !invalid => {
                    assert!(why.contains("TEST_RECORD_BUDGET_MS"), "{why}")
                }
                other => panic!("{value}: {other:?}"),
            }
        }
        let Err(SettingsError::Refused(why)) = read(&[("TEST_DEADLINE_MARGIN_MS", "2000")]) else {
            panic!("the retired margin was accepted");
        };
        assert!(
            why.contains("TEST_DEADLINE_MARGIN_MS")
                && why.contains("TEST_RECORD_BUDGET_MS")
                && why.contains("DEDUP_DEADLINE_MARGIN_MS"),
            "{why}"
        );
    }
}
