//! Why a message is not processed.

/// Why a message is not processed: it has no key (S2), or it is too old to judge (S10). Messages name the field, never its value: values may be personal
/// data (S3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The body is larger than the configured limit.
    #[error("body is {len} bytes, over the {max}-byte limit")]
    BodyTooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body had to be JSON but is not UTF-8.
    #[error("body is not valid UTF-8")]
    BodyNotUtf8,
    /// The body had to be JSON but does not parse.
    #[error("body is not valid JSON: {detail}")]
    BodyNotJson {
        /// The parser's error (position and kind).
        detail: String,
    },
    /// A field the key needs is absent.
    #[error("{what} is missing")]
    Missing {
        /// The field.
        what: String,
    },
    /// A field the key needs is empty or blank.
    #[error("{what} is empty")]
    Empty {
        /// The field.
        what: String,
    },
    /// A field the key needs is too long.
    #[error("{what} is {len} bytes, over the {max}-byte limit")]
    TooLong {
        /// The field.
        what: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A binary field the key needs is not UTF-8.
    #[error("{what} is not valid UTF-8")]
    NotUtf8 {
        /// The field.
        what: String,
    },
    /// A field the key needs contains control characters.
    #[error("{what} contains control characters")]
    BadCharacters {
        /// The field.
        what: String,
    },
    /// A field the key needs has the wrong JSON type.
    #[error("{what} has the wrong type ({found})")]
    WrongType {
        /// The field.
        what: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A pointer the key needs runs into a JSON-encoded string it cannot read
    /// ([`crate::pointer`]): not JSON, nested too deep, or too large.
    #[error("{what}: {error}")]
    Embedded {
        /// The field.
        what: String,
        /// Why the string cannot be read; names the pointer, never the value.
        error: crate::pointer::PointerError,
    },
    /// The message's envelope (an SNS notification, an EventBridge event) is not one: it does
    /// not parse as that envelope, or its inner message is missing.
    #[error("the {envelope} envelope is malformed: {detail}")]
    Envelope {
        /// The envelope expected.
        envelope: &'static str,
        /// What is wrong with it (a parser's position and kind, or the field missing).
        detail: String,
    },
    /// The message carries a verified sender ([`crate::VERIFIED_SENDER_ATTRIBUTE`]) and names
    /// another tenant: a sender may only write within its own tenant (S1). Never retried.
    #[error("{what} is not the verified sender's own tenant")]
    NotTheSender {
        /// The tenant's field.
        what: String,
    },
    /// The event is older than the retention window: the mark table can no longer say whether
    /// it was handled, so it goes to reconciliation instead of being applied (S10).
    #[error("event is {age_secs} s old, beyond the {retention_secs}-second retention window")]
    Late {
        /// How old the event is, by its own time.
        age_secs: u64,
        /// The retention window.
        retention_secs: u64,
    },
    /// The event says it happens further in the future than clocks can disagree
    /// ([`MAX_CLOCK_SKEW`]). Its age cannot be trusted, so neither can the late-event rule: a
    /// replay of it after its mark expired would otherwise pass as new. It goes to
    /// reconciliation like a late event (S10).
    #[error(
        "event time is {ahead_secs} s in the future, beyond the {skew_secs}-second clock skew allowed"
    )]
    FromTheFuture {
        /// How far ahead of the store's clock the event's time is.
        ahead_secs: u64,
        /// The skew allowed.
        skew_secs: u64,
    },
}

/// How far ahead of the store's clock an event's declared time may be (clocks disagree); an
/// event further ahead is [`Rejection::FromTheFuture`] (S10).
pub const MAX_CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Rejection {
    /// A stable, low-cardinality code for metrics and log fields (its [`crate::Reason`]'s).
    pub fn code(&self) -> &'static str {
        crate::Reason::from(self).code()
    }
}
