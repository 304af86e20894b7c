//! The rule a setting breaks: why a function refuses to start on a value that parses
//! ([`SettingsError::Refused`](crate::SettingsError::Refused)), typed, so that a caller or a
//! test tells the cases apart while the operator reads which variable and why.

use std::fmt;

/// A rule a variable's value breaks. Values are in the variable's own unit (as its name says:
/// `_MS`, `_SECONDS`, `_BYTES`), as it is set or defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingRule {
    /// Zero, where only a value above zero can work (a count, a size, a duration).
    Zero,
    /// Over the most it may be.
    AboveMaximum {
        /// Its value.
        value: u64,
        /// The most it may be.
        max: u64,
        /// What the bound protects.
        why: &'static str,
    },
    /// Under the least it may be.
    BelowMinimum {
        /// Its value.
        value: u64,
        /// The least it may be.
        min: u64,
        /// What the bound protects.
        why: &'static str,
    },
    /// Not longer than the variable `other`, which it must exceed.
    NotLongerThan {
        /// Its value.
        value: u64,
        /// The other variable.
        other: &'static str,
        /// The other variable's value, in its own unit.
        other_value: u64,
        /// What goes wrong otherwise.
        why: &'static str,
    },
    /// Not shorter than the variable `other`, which it must stay under.
    NotShorterThan {
        /// Its value.
        value: u64,
        /// The other variable.
        other: &'static str,
        /// The other variable's value, in its own unit.
        other_value: u64,
    },
    /// Longer than the variable `other`, which it may not exceed.
    LongerThan {
        /// Its value.
        value: u64,
        /// The other variable.
        other: &'static str,
        /// The other variable's value, in its own unit.
        other_value: u64,
    },
    /// Neither it nor the alternative `or` is set, and one must be.
    NeitherSet {
        /// The alternative (a variable, or a variable and the value it takes).
        or: &'static str,
        /// What each gives.
        why: &'static str,
    },
    /// It names a webhook identity that the scheme `scheme` does not sign, so a captured
    /// delivery could be sent again under another identity (S8).
    NotSigned {
        /// The scheme's name.
        scheme: &'static str,
    },
    /// Unset, for a webhook scheme that signs no id header nor timestamp (`scheme`): there is no
    /// signed identity to default to, and an unsigned one would let a captured delivery be
    /// recorded again under a new id.
    IdentityNeeded {
        /// The scheme's name.
        scheme: &'static str,
    },
    /// Not in a form the variable takes, or refused by what reads it: that reader's reason,
    /// which never quotes a secret.
    Malformed(String),
    /// The variable is set, and this build lacks the runtime's feature `feature` that would act
    /// on it (`why`: what would silently happen instead).
    NotInThisBuild {
        /// The runtime's feature.
        feature: &'static str,
        /// What would happen without it.
        why: &'static str,
    },
    /// Set beside `other`, which gives the same thing another way (`why`).
    BothSet {
        /// The other variable.
        other: &'static str,
        /// Why only one may be set.
        why: &'static str,
    },
    /// It names a secret that only the asynchronous load reads at init (with the runtime's
    /// feature `feature`); the synchronous reading of the settings calls no AWS service.
    ReadAtInit {
        /// The runtime's feature.
        feature: &'static str,
    },
    /// A plain-text connection (`plain`: `PG_TLS=disabled`, `redis://`) to a server that is not
    /// on loopback (127.0.0.0/8, `::1`, `localhost`, a unix socket): its password and data
    /// would cross the network unencrypted.
    PlainTextOffLoopback {
        /// The plain-text choice.
        plain: &'static str,
        /// How to reach the server encrypted instead.
        instead: &'static str,
    },
    /// The variable is no longer read: `instead` is (its value's meaning, `why`).
    Retired {
        /// The variable to set instead.
        instead: &'static str,
        /// What it means.
        why: &'static str,
    },
}

impl SettingRule {
    /// How the refusal of `var` for this rule reads (after "refusing to start: "): the variable
    /// with its value and unit, the rule, and why.
    pub(crate) fn shown(&self, var: &'static str) -> Shown<'_> {
        Shown { var, rule: self }
    }
}

/// A refusal as the operator reads it: [`SettingRule::shown`].
#[derive(Debug)]
pub(crate) struct Shown<'a> {
    var: &'static str,
    rule: &'a SettingRule,
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let var = self.var;
        let why = |f: &mut fmt::Formatter<'_>, why: &str| {
            if why.is_empty() {
                Ok(())
            } else {
                write!(f, ": {why}")
            }
        };
        match self.rule {
            SettingRule::Zero => write!(f, "{var} must be above 0"),
            SettingRule::AboveMaximum { value, max, why: w } => {
                let u = unit(var);
                write!(
                    f,
                    "{var} ({value}{u}) is over the most it may be ({max}{u})"
                )?;
                why(f, w)
            }
            SettingRule::BelowMinimum { value, min, why: w } => {
                let u = unit(var);
                write!(
                    f,
                    "{var} ({value}{u}) is under the least it may be ({min}{u})"
                )?;
                why(f, w)
            }
            SettingRule::NotLongerThan {
                value,
                other,
                other_value,
                why: w,
            } => {
                write!(
                    f,
                    "{var} ({value}{}) must be longer than {other} ({other_value}{})",
                    unit(var),
                    unit(other)
                )?;
                why(f, w)
            }
            SettingRule::NotShorterThan {
                value,
                other,
                other_value,
            } => write!(
                f,
                "{var} ({value}{}) must be shorter than {other} ({other_value}{})",
                unit(var),
                unit(other)
            ),
            SettingRule::LongerThan {
                value,
                other,
                other_value,
            } => write!(
                f,
                "{var} ({value}{}) must not exceed {other} ({other_value}{})",
                unit(var),
                unit(other)
            ),
            SettingRule::NeitherSet { or, why: w } => {
                write!(f, "set {var} or {or}")?;
                why(f, w)
            }
            SettingRule::NotSigned { scheme } => write!(
                f,
                "{var}: {scheme} does not sign that identity; the identity must be signed \
                 (json:</pointer> into the signed body, such as json:/id for Stripe's event id)"
            ),
            SettingRule::IdentityNeeded { scheme } => write!(
                f,
                "{var} must be set for {scheme}: it signs the body only, not its delivery id \
                 header, so the identity must be the event's own id in the signed body \
                 (json:</pointer>)"
            ),
            SettingRule::Malformed(reason) => write!(f, "{var}: {reason}"),
            SettingRule::BothSet { other, why: w } => {
                write!(f, "{var} and {other} are both set")?;
                why(f, w)
            }
            SettingRule::ReadAtInit { feature } => write!(
                f,
                "{var} names a Secrets Manager secret, which webhook::webhook_config reads at init \
                 (lambda-dedup-runtime's feature {feature}); this reading calls no AWS service"
            ),
            SettingRule::NotInThisBuild { feature, why: w } => {
                write!(
                    f,
                    "{var} is set, and this build lacks lambda-dedup-runtime's feature {feature}"
                )?;
                why(f, w)
            }
            SettingRule::PlainTextOffLoopback { plain, instead } => write!(
                f,
                "{var} names a server that is not on loopback (127.0.0.0/8, ::1, localhost, a \
                 unix socket), and {plain} is plain text: {instead}"
            ),
            SettingRule::Retired { instead, why: w } => {
                write!(f, "{var} is no longer read: set {instead}")?;
                why(f, w)
            }
        }
    }
}

/// The unit a variable's name gives its value: `ms`, `s`, or none.
fn unit(var: &str) -> &'static str {
    if var.ends_with("_MS") {
        "ms"
    } else if var.ends_with("_SECONDS") {
        "s"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal names the variables, their values in their units, and why.
    #[test]
    fn a_refusal_names_the_variables_their_values_and_why() {
        let lease = SettingRule::NotLongerThan {
            value: 5,
            other: "PROVIDER_TIMEOUT_MS",
            other_value: 5000,
            why: "a second process would call again",
        };
        assert_eq!(
            lease.shown("DEDUP_LEASE_SECONDS").to_string(),
            "DEDUP_LEASE_SECONDS (5s) must be longer than PROVIDER_TIMEOUT_MS (5000ms): \
             a second process would call again"
        );
        assert_eq!(
            SettingRule::Zero.shown("DEDUP_MAX_CONCURRENCY").to_string(),
            "DEDUP_MAX_CONCURRENCY must be above 0"
        );
        let max = SettingRule::AboveMaximum {
            value: 7200,
            max: 3600,
            why: "",
        };
        assert_eq!(
            max.shown("WEBHOOK_TOLERANCE_SECONDS").to_string(),
            "WEBHOOK_TOLERANCE_SECONDS (7200s) is over the most it may be (3600s)"
        );
    }
}
