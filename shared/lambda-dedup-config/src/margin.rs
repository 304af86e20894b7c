//! The one deadline margin (`DEDUP_DEADLINE_MARGIN_MS`, [`DeadlineMargin`]): the time every
//! service keeps before the invocation's deadline to answer, a relay's too. Read once, with the
//! [`Settings`](crate::Settings); every service takes it from there.

use std::time::Duration;

use crate::env::{Lookup, millis};
use crate::{SettingRule, SettingsError};

/// The variable of the one deadline margin, in milliseconds.
pub const MARGIN_VAR: &str = "DEDUP_DEADLINE_MARGIN_MS";

/// The time kept before the invocation's deadline to answer: work not done by then is abandoned
/// and reported for redelivery (a webhook: 503 with `retry-after`). At most 15 minutes, longer
/// than any Lambda timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeadlineMargin(Duration);

impl Default for DeadlineMargin {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl From<DeadlineMargin> for Duration {
    fn from(margin: DeadlineMargin) -> Self {
        margin.0
    }
}

impl DeadlineMargin {
    /// The margin when `DEDUP_DEADLINE_MARGIN_MS` is unset: 1.5 s.
    pub const DEFAULT: Self = Self(Duration::from_millis(1500));
    /// The most it may be: 15 minutes, longer than any Lambda timeout.
    pub const MAX: Duration = Duration::from_secs(900);

    /// `margin`, refused over [`MAX`](Self::MAX) (tests, and a service built without settings).
    pub fn new(margin: Duration) -> Result<Self, SettingsError> {
        if margin > Self::MAX {
            return Err(SettingsError::refused(
                MARGIN_VAR,
                SettingRule::AboveMaximum {
                    value: millis(margin),
                    max: millis(Self::MAX),
                    why: "longer than any Lambda timeout",
                },
            ));
        }
        Ok(Self(margin))
    }

    /// `DEDUP_DEADLINE_MARGIN_MS` in `env` (default [`DEFAULT`](Self::DEFAULT)).
    pub(crate) fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        Self::from_text(env.get(MARGIN_VAR).as_deref())
    }

    fn from_text(value: Option<&str>) -> Result<Self, SettingsError> {
        let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Self::DEFAULT);
        };
        let ms = text.parse().map_err(|_| SettingsError::Invalid {
            name: MARGIN_VAR.to_owned(),
            value: text.to_owned(),
        })?;
        Self::new(Duration::from_millis(ms))
    }

    /// The margin as a duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_setting_is_read_in_milliseconds_and_refused_when_it_cannot_work() {
        let margin = |v| DeadlineMargin::from_text(v).map(DeadlineMargin::get);
        assert_eq!(margin(None), Ok(Duration::from_millis(1500)));
        assert_eq!(margin(Some(" ")), Ok(Duration::from_millis(1500)));
        assert_eq!(margin(Some("250")), Ok(Duration::from_millis(250)));
        assert_eq!(margin(Some("0")), Ok(Duration::ZERO));
        assert!(matches!(
            margin(Some("1.5s")),
            Err(SettingsError::Invalid { name, .. }) if name == MARGIN_VAR
        ));
        assert!(matches!(
            margin(Some("900001")),
            Err(SettingsError::Refused {
                var: MARGIN_VAR,
                rule: SettingRule::AboveMaximum { .. }
            })
        ));
    }
}
