//! Why the work refuses an event: [`HandlerError`], whose [`Invalid`] (never, as it is) and
//! [`Transient`] (not now) say the cause typed — each cause the library itself finds (a body that
//! is not JSON, a payload that does not fit the work's type, a call given up at its time limit,
//! a provider's refusal) and the work's own rule or reason — so a caller, a test or a metric
//! tells them apart without reading text. Each cause has a label ([`InvalidCause`],
//! [`TransientCause`]): its stable code in logs and the EMF metric the account counts it by.
//! Every `Display` names fields, never their values (S3).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use lambda_dedup::Derived;

use crate::provider::{CallError, Permanence};

/// A handler's failure: why the work refuses an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerError {
    /// The event can never be handled as it is: rejected (`invalid_payload`), dead-lettered.
    Invalid(Invalid),
    /// It may work later: retried ([`RetryCause::Transient`](crate::RetryCause::Transient)).
    Transient(Transient),
}

impl HandlerError {
    /// The work's own rule refuses the event for good ([`Invalid::Rule`]): `reason` names the
    /// fields, never their values (`"amount must be positive"`).
    pub fn invalid(reason: impl Into<Cow<'static, str>>) -> Self {
        HandlerError::Invalid(Invalid::Rule(reason.into()))
    }

    /// The work refuses the event for now, for its own `reason` ([`Transient::Work`]: a
    /// dependency down).
    pub fn transient(reason: impl Into<Cow<'static, str>>) -> Self {
        HandlerError::Transient(Transient::Work(reason.into()))
    }

    /// The CloudEvents `data` member of `event`'s JSON body, or [`Invalid::NoData`] for a payload
    /// without one.
    pub fn data(event: &Derived) -> Result<&serde_json::Value, Self> {
        event
            .body
            .as_ref()
            .and_then(|b| b.get("data"))
            .ok_or(HandlerError::Invalid(Invalid::NoData))
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandlerError::Invalid(invalid) => invalid.fmt(f),
            HandlerError::Transient(transient) => transient.fmt(f),
        }
    }
}

impl std::error::Error for HandlerError {}

impl From<Invalid> for HandlerError {
    fn from(invalid: Invalid) -> Self {
        HandlerError::Invalid(invalid)
    }
}

impl From<Transient> for HandlerError {
    fn from(transient: Transient) -> Self {
        HandlerError::Transient(transient)
    }
}

/// A failed call as the flows take it (S15): a permanent one is [`Invalid::Provider`], a
/// transient or misconfigured one [`Transient::Provider`] (retried). A handler of the leased
/// flow returns a failed call with `?`.
impl From<CallError> for HandlerError {
    fn from(e: CallError) -> Self {
        match e.permanence() {
            Permanence::Permanent => HandlerError::Invalid(Invalid::Provider(e)),
            Permanence::Transient | Permanence::Misconfigured => {
                HandlerError::Transient(Transient::Provider(e))
            }
        }
    }
}

/// Why an event can never be handled as it is: rejected as `invalid_payload` and dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Invalid {
    /// The body is not JSON, where the work reads a JSON payload.
    NotJson,
    /// The body is not UTF-8, where the work reads text (a webhook's body).
    NotUtf8,
    /// The CloudEvent has no `data` member, where the work reads it.
    NoData,
    /// A field the work's type requires is absent.
    MissingField {
        /// Its path in the payload (`amount`, `customer.name`).
        field: String,
    },
    /// The payload does not fit the work's type: a field has the wrong type, or a value the type
    /// does not take.
    Misfit {
        /// Where, as a path in the payload (`amount`, `lines[2].sku`; empty: the payload as a
        /// whole). A map key that does not look like a field name is shown as `?`.
        path: String,
    },
    /// The provider refused the call for good (a permanent answer: 400, 410, 422…): no retry
    /// under the same key can change it.
    Provider(CallError),
    /// The work's own rule: the reason it gives, naming fields, never their values.
    Rule(Cow<'static, str>),
}

impl Invalid {
    /// Its cause, for counting and logs.
    pub fn cause(&self) -> InvalidCause {
        match self {
            Invalid::NotJson => InvalidCause::NotJson,
            Invalid::NotUtf8 => InvalidCause::NotUtf8,
            Invalid::NoData => InvalidCause::NoData,
            Invalid::MissingField { .. } => InvalidCause::MissingField,
            Invalid::Misfit { .. } => InvalidCause::Misfit,
            Invalid::Provider(_) => InvalidCause::Provider,
            Invalid::Rule(_) => InvalidCause::Rule,
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::NotJson => f.write_str("the body is not JSON"),
            Invalid::NotUtf8 => f.write_str("the body is not UTF-8"),
            Invalid::NoData => f.write_str("data missing"),
            Invalid::MissingField { field } => {
                write!(f, "the payload does not fit: missing field `{field}`")
            }
            Invalid::Misfit { path } if path.is_empty() => {
                f.write_str("the payload does not fit its type (wrong type or value)")
            }
            Invalid::Misfit { path } => write!(
                f,
                "the payload does not fit its type at `{path}` (wrong type or value)"
            ),
            Invalid::Provider(e) => write!(f, "provider call failed: {e}"),
            Invalid::Rule(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for Invalid {}

/// Why an event cannot be handled now, but may be later: retried
/// ([`RetryCause::Transient`](crate::RetryCause::Transient)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transient {
    /// The call took longer than the time it is given (the runtime's `PROVIDER_TIMEOUT_MS`) and
    /// was given up; the retry makes it again under the same key.
    CallTimeout {
        /// The time it was given.
        limit: Duration,
    },
    /// The provider failed the call in a way a retry may pass: busy, down, slow or still working
    /// on the same key — or, where [`CallError::is_misconfigured`], pointed at the wrong place or
    /// holding the wrong credentials, a configuration to fix
    /// ([`TransientCause::ProviderMisconfigured`]).
    Provider(CallError),
    /// The work's own reason (a dependency down), naming fields, never their values.
    Work(Cow<'static, str>),
    /// An error of a layer around the call (a `tower` timeout, a rate limit, a load shed): its
    /// message, from the layer's own library.
    Layer(String),
}

impl Transient {
    /// Its cause, for counting and logs.
    pub fn cause(&self) -> TransientCause {
        match self {
            Transient::CallTimeout { .. } => TransientCause::CallTimeout,
            Transient::Provider(e) if e.is_misconfigured() => TransientCause::ProviderMisconfigured,
            Transient::Provider(_) => TransientCause::Provider,
            Transient::Work(_) => TransientCause::Work,
            Transient::Layer(_) => TransientCause::Layer,
        }
    }
}

impl fmt::Display for Transient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transient::CallTimeout { limit } => write!(
                f,
                "the call took over {} ms (PROVIDER_TIMEOUT_MS)",
                limit.as_millis()
            ),
            Transient::Provider(e) if e.is_misconfigured() => {
                write!(f, "provider call failed, configuration ({}): {e}", e.code())
            }
            Transient::Provider(e) => write!(f, "provider call failed: {e}"),
            Transient::Work(reason) => f.write_str(reason),
            Transient::Layer(e) => write!(f, "a layer of the call failed: {e}"),
        }
    }
}

impl std::error::Error for Transient {}

/// The cause of an [`Invalid`], as a label: its stable code in logs and the EMF metric the
/// account counts rejections by (`Invalid<Cause>`, which sum to `RejectedInvalidPayload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidCause {
    /// [`Invalid::NotJson`].
    NotJson,
    /// [`Invalid::NotUtf8`].
    NotUtf8,
    /// [`Invalid::NoData`].
    NoData,
    /// [`Invalid::MissingField`].
    MissingField,
    /// [`Invalid::Misfit`].
    Misfit,
    /// [`Invalid::Provider`].
    Provider,
    /// [`Invalid::Rule`].
    Rule,
}

impl InvalidCause {
    /// Every cause, in the order of the account's counters.
    pub const ALL: [InvalidCause; 7] = [
        InvalidCause::NotJson,
        InvalidCause::NotUtf8,
        InvalidCause::NoData,
        InvalidCause::MissingField,
        InvalidCause::Misfit,
        InvalidCause::Provider,
        InvalidCause::Rule,
    ];

    /// The stable code in logs: `not_json`, `misfit`, `rule`, …
    pub fn code(self) -> &'static str {
        match self {
            InvalidCause::NotJson => "not_json",
            InvalidCause::NotUtf8 => "not_utf8",
            InvalidCause::NoData => "no_data",
            InvalidCause::MissingField => "missing_field",
            InvalidCause::Misfit => "misfit",
            InvalidCause::Provider => "provider_rejected",
            InvalidCause::Rule => "rule",
        }
    }

    /// The EMF metric that counts it: `InvalidNotJson`, `InvalidMisfit`, `InvalidRule`, …
    pub fn metric(self) -> &'static str {
        match self {
            InvalidCause::NotJson => "InvalidNotJson",
            InvalidCause::NotUtf8 => "InvalidNotUtf8",
            InvalidCause::NoData => "InvalidNoData",
            InvalidCause::MissingField => "InvalidMissingField",
            InvalidCause::Misfit => "InvalidMisfit",
            InvalidCause::Provider => "InvalidProvider",
            InvalidCause::Rule => "InvalidRule",
        }
    }

    /// Its position in [`ALL`](Self::ALL).
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for InvalidCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The cause of a [`Transient`], as a label: its stable code in logs and the EMF metric the
/// account counts retries by (`Transient<Cause>`, which sum to `RetryTransient`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransientCause {
    /// [`Transient::CallTimeout`].
    CallTimeout,
    /// [`Transient::Provider`], the provider busy, down or slow.
    Provider,
    /// [`Transient::Provider`] whose answer says the configuration is wrong
    /// ([`CallError::is_misconfigured`]).
    ProviderMisconfigured,
    /// [`Transient::Work`].
    Work,
    /// [`Transient::Layer`].
    Layer,
}

impl TransientCause {
    /// Every cause, in the order of the account's counters.
    pub const ALL: [TransientCause; 5] = [
        TransientCause::CallTimeout,
        TransientCause::Provider,
        TransientCause::ProviderMisconfigured,
        TransientCause::Work,
        TransientCause::Layer,
    ];

    /// The stable code in logs: `call_timeout`, `provider`, `provider_misconfigured`, `work`,
    /// `layer`.
    pub fn code(self) -> &'static str {
        match self {
            TransientCause::CallTimeout => "call_timeout",
            TransientCause::Provider => "provider",
            TransientCause::ProviderMisconfigured => "provider_misconfigured",
            TransientCause::Work => "work",
            TransientCause::Layer => "layer",
        }
    }

    /// The EMF metric that counts it: `TransientCallTimeout`, `TransientProvider`, …
    pub fn metric(self) -> &'static str {
        match self {
            TransientCause::CallTimeout => "TransientCallTimeout",
            TransientCause::Provider => "TransientProvider",
            TransientCause::ProviderMisconfigured => "TransientProviderMisconfigured",
            TransientCause::Work => "TransientWork",
            TransientCause::Layer => "TransientLayer",
        }
    }

    /// Its position in [`ALL`](Self::ALL).
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TransientCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::tests::assert_each_cause_is_its_own;

    /// Every cause sits at its own index, with its own code and metric.
    #[test]
    fn each_cause_has_its_own_index_code_and_metric() {
        let (code, metric, index) = (
            InvalidCause::code,
            InvalidCause::metric,
            InvalidCause::index,
        );
        assert_each_cause_is_its_own(&InvalidCause::ALL, code, metric, index);
        let (code, metric, index) = (
            TransientCause::code,
            TransientCause::metric,
            TransientCause::index,
        );
        assert_each_cause_is_its_own(&TransientCause::ALL, code, metric, index);
    }

    /// A failed call is refused by its permanence, typed: the call itself is kept, so a caller
    /// tells a 422 from a 503 from a misconfigured 404 without reading the reason.
    #[test]
    fn a_failed_call_is_refused_by_its_permanence_and_keeps_the_call() {
        assert_eq!(
            HandlerError::from(CallError::Status(422)),
            HandlerError::Invalid(Invalid::Provider(CallError::Status(422)))
        );
        let HandlerError::Transient(unavailable) = HandlerError::from(CallError::Status(503))
        else {
            panic!("a 503 is retried");
        };
        assert_eq!(unavailable, Transient::Provider(CallError::Status(503)));
        assert_eq!(unavailable.cause(), TransientCause::Provider);
        let HandlerError::Transient(misconfigured) = HandlerError::from(CallError::Status(404))
        else {
            panic!("a 404 is retried");
        };
        assert_eq!(misconfigured.cause(), TransientCause::ProviderMisconfigured);
        let reason = misconfigured.to_string();
        assert!(
            reason.contains("configuration") && reason.contains("provider_misconfigured_404"),
            "{reason}"
        );
    }

    /// The short constructors are the work's own causes.
    #[test]
    fn the_constructors_are_the_works_own_rule_and_reason() {
        let invalid = HandlerError::invalid("amount must be positive");
        assert_eq!(
            invalid,
            HandlerError::Invalid(Invalid::Rule("amount must be positive".into()))
        );
        assert_eq!(invalid.to_string(), "amount must be positive");
        let transient = HandlerError::transient(format!("{} down", "ledger"));
        assert!(matches!(
            &transient,
            HandlerError::Transient(t) if t.cause() == TransientCause::Work
        ));
        assert_eq!(transient.to_string(), "ledger down");
        let timeout = Transient::CallTimeout {
            limit: Duration::from_millis(200),
        };
        assert_eq!(timeout.cause(), TransientCause::CallTimeout);
        assert!(timeout.to_string().contains("200 ms"), "{timeout}");
    }
}
