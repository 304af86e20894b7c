//! What a function's `main` returns. A `main` that returns `Err(e)` prints `Error: {e:?}`, the
//! `Debug` form (std's `Termination`), so a refusal at start read as
//! `Error: Refused { var: "PG_CA_BUNDLE", rule: NeitherSet { .. } }`. Returned through
//! [`MainError`], the same refusal prints its message:
//! `Error: refusing to start: set PG_CA_BUNDLE or PG_TLS=disabled (…)`.

use std::fmt;

/// Whatever a function's `main` stops on — a refusal at start, the Lambda runtime's own error —
/// printed as its message, followed by each cause's message that it does not already include.
/// `?` converts any error into it:
///
/// ```no_run
/// # async fn run() -> Result<(), lambda_dedup_runtime::lambda_runtime::Error> { Ok(()) }
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
///     let dedup = lambda_dedup_runtime::Dedup::from_env("credit")?;
///     # let _ = dedup;
///     Ok(run().await?)
/// }
/// ```
///
/// It is no `std::error::Error` itself (that would conflict with the conversion from every
/// error): only the end of `main`.
pub struct MainError(lambda_runtime::Error);

impl<E: Into<lambda_runtime::Error>> From<E> for MainError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

impl fmt::Display for MainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !shown.contains(&text) {
                shown = format!("{shown}: {text}");
            }
            cause = c.source();
        }
        f.write_str(&shown)
    }
}

/// The message, not the value's fields: what `main` prints on returning it.
impl fmt::Debug for MainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::MainError;
    use lambda_dedup_config::{SettingRule, SettingsError};

    /// What `main` prints for a refusal: its message, no field names.
    #[test]
    fn a_refusal_prints_its_message_not_its_fields() {
        let refusal = SettingsError::refused(
            "PG_CA_BUNDLE",
            SettingRule::NeitherSet {
                or: "PG_TLS=disabled",
                why: "a way to reach the server",
            },
        );
        let printed = format!("{:?}", MainError::from(refusal.clone()));
        assert_eq!(printed, refusal.to_string());
        assert!(
            printed.contains("set PG_CA_BUNDLE or PG_TLS=disabled"),
            "{printed}"
        );
        assert!(!printed.contains("Refused"), "{printed}");
    }

    /// An error's causes follow its message, each once: one its message already includes is
    /// not repeated.
    #[test]
    fn causes_follow_the_message_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("could not connect")]
        struct Outer(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("could not connect: {0}")]
        struct Quoting(#[source] std::io::Error);
        let cause = || std::io::Error::other("connection refused");
        assert_eq!(
            format!("{:?}", MainError::from(Outer(cause()))),
            "could not connect: connection refused"
        );
        assert_eq!(
            format!("{:?}", MainError::from(Quoting(cause()))),
            "could not connect: connection refused"
        );
        assert_eq!(format!("{:?}", MainError::from("plain text")), "plain text");
    }
}
