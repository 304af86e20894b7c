//! The one deadline margin (`DEDUP_DEADLINE_MARGIN_MS`): the time every service keeps before
//! the invocation's deadline to answer ([`crate::bound`]), a relay's too.

use std::time::Duration;

use super::env::{Lookup, millis};
use super::{SettingRule, SettingsError};

/// The variable that sets the deadline margin.
pub const MARGIN_VAR: &str = "DEDUP_DEADLINE_MARGIN_MS";

/// The longest margin accepted: Lambda's longest timeout (15 minutes).
const MAX_MARGIN: Duration = Duration::from_secs(900);

/// The margin as `value` (a variable's text, `None` when unset) says: milliseconds, at most 15
/// minutes. Refused, naming the variable, when it does not parse or is over that.
fn margin_from(value: Option<&str>) -> Result<Duration, SettingsError> {
    let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(crate::bound::DEFAULT_MARGIN);
    };
    let invalid = || SettingsError::Invalid {
        name: MARGIN_VAR.to_owned(),
        value: text.to_owned(),
    };
    let margin = Duration::from_millis(text.parse().map_err(|_| invalid())?);
    if margin > MAX_MARGIN {
        return Err(SettingsError::refused(
            MARGIN_VAR,
            SettingRule::AboveMaximum {
                value: millis(margin),
                max: millis(MAX_MARGIN),
                why: "longer than any Lambda timeout",
            },
        ));
    }
    Ok(margin)
}

/// `DEDUP_DEADLINE_MARGIN_MS` in `env` (default [`crate::bound::DEFAULT_MARGIN`]): the time kept
/// before the invocation's deadline to answer. Refused over 15 minutes or when it does not parse.
pub fn deadline_margin_in(env: Lookup<'_>) -> Result<Duration, SettingsError> {
    margin_from(env.get(MARGIN_VAR).as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bound::DEFAULT_MARGIN;

    /// `DEDUP_DEADLINE_MARGIN_MS`: milliseconds, at most 15 minutes.
    #[test]
    fn the_margin_setting_is_read_in_milliseconds_and_refused_when_it_cannot_work() {
        assert_eq!(margin_from(None), Ok(DEFAULT_MARGIN));
        assert_eq!(margin_from(Some(" ")), Ok(DEFAULT_MARGIN));
        assert_eq!(margin_from(Some("250")), Ok(Duration::from_millis(250)));
        assert_eq!(margin_from(Some("0")), Ok(Duration::ZERO));
        assert!(matches!(
            margin_from(Some("1.5s")),
            Err(SettingsError::Invalid { name, .. }) if name == MARGIN_VAR
        ));
        assert!(matches!(
            margin_from(Some("900001")),
            Err(SettingsError::Refused {
                var: MARGIN_VAR,
                rule: super::super::SettingRule::AboveMaximum { .. }
            })
        ));
    }
}
