//! Why a delivery is rejected: one typed reason per cause, with its stable code.

/// Why a delivery was rejected: one variant per cause, each with a stable, low-cardinality code
/// for metrics and log fields ([`Reason::code`]). Code that acts on a rejection matches on this,
/// never on the code string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Reason {
    /// The body is over the function's limit (S2, S15).
    BodyTooLarge,
    /// The body is not UTF-8 where the spec reads text.
    BodyNotUtf8,
    /// The body is not JSON where the spec reads JSON.
    BodyNotJson,
    /// The identity field is absent (S2).
    IdentityMissing,
    /// The identity field is empty.
    IdentityEmpty,
    /// The identity is over the length limit.
    IdentityTooLong,
    /// The identity attribute is not UTF-8.
    IdentityNotUtf8,
    /// The identity has characters keys may not carry.
    IdentityBadCharacters,
    /// The identity has the wrong JSON type.
    IdentityWrongType,
    /// Older than the retention window: the mark table cannot judge it (S10). For reconciliation.
    LateEvent,
    /// Says it happens implausibly far in the future (S10). For reconciliation.
    ImplausibleTime,
    /// The handler said the payload can never be handled (`lambda_dedup_engine::HandlerError::Invalid`,
    /// whose typed cause the outcome keeps).
    InvalidPayload,
    /// DynamoDB refused the event's own writes for good; nothing was written (S15).
    EffectRefused,
    /// Sequence mode: not the next sequence number of its aggregate.
    SequenceGap,
    /// Sequence mode: the event carries no sequence number.
    SequenceMissing,
    /// Sequence mode: the sequence field is not a non-negative integer.
    SequenceInvalid,
    /// A takeover of an event first attempted longer ago than the provider keeps idempotency
    /// keys: not called, for reconciliation (S16).
    ProviderKeyExpired,
    /// The stored mark cannot be decoded (S15).
    MarkCorrupt,
    /// A pointer continues past a string that is not JSON ([`crate::pointer`]).
    EmbeddedNotJson,
    /// A pointer descends into more JSON-encoded strings than the bound.
    EmbeddedTooDeep,
    /// A JSON-encoded string a pointer continues past is over the bound.
    EmbeddedTooLarge,
    /// The message's envelope (SNS, EventBridge) is malformed.
    EnvelopeMalformed,
    /// The body travels in base64 (a Kafka record's `value`) and is not base64: there are no
    /// bytes to judge (S2).
    BodyNotBase64,
    /// A verified sender's message names another tenant ([`crate::Provenance::Sender`]): a
    /// sender writes only within its own tenant (S1).
    TenantNotSender,
}

impl Reason {
    /// Every reason, for documentation and exhaustive tests.
    pub const ALL: [Reason; 24] = [
        Reason::BodyTooLarge,
        Reason::BodyNotUtf8,
        Reason::BodyNotJson,
        Reason::IdentityMissing,
        Reason::IdentityEmpty,
        Reason::IdentityTooLong,
        Reason::IdentityNotUtf8,
        Reason::IdentityBadCharacters,
        Reason::IdentityWrongType,
        Reason::LateEvent,
        Reason::ImplausibleTime,
        Reason::InvalidPayload,
        Reason::EffectRefused,
        Reason::SequenceGap,
        Reason::SequenceMissing,
        Reason::SequenceInvalid,
        Reason::ProviderKeyExpired,
        Reason::MarkCorrupt,
        Reason::EmbeddedNotJson,
        Reason::EmbeddedTooDeep,
        Reason::EmbeddedTooLarge,
        Reason::EnvelopeMalformed,
        Reason::BodyNotBase64,
        Reason::TenantNotSender,
    ];

    /// The stable code: the metric and log label (`late_event`, `effect_refused`, …).
    pub fn code(self) -> &'static str {
        match self {
            Reason::BodyTooLarge => "body_too_large",
            Reason::BodyNotUtf8 => "body_not_utf8",
            Reason::BodyNotJson => "body_not_json",
            Reason::IdentityMissing => "identity_missing",
            Reason::IdentityEmpty => "identity_empty",
            Reason::IdentityTooLong => "identity_too_long",
            Reason::IdentityNotUtf8 => "identity_not_utf8",
            Reason::IdentityBadCharacters => "identity_bad_characters",
            Reason::IdentityWrongType => "identity_wrong_type",
            Reason::LateEvent => "late_event",
            Reason::ImplausibleTime => "implausible_time",
            Reason::InvalidPayload => "invalid_payload",
            Reason::EffectRefused => "effect_refused",
            Reason::SequenceGap => "sequence_gap",
            Reason::SequenceMissing => "sequence_missing",
            Reason::SequenceInvalid => "sequence_invalid",
            Reason::ProviderKeyExpired => "provider_key_expired",
            Reason::MarkCorrupt => "mark_corrupt",
            Reason::EmbeddedNotJson => "embedded_not_json",
            Reason::EmbeddedTooDeep => "embedded_too_deep",
            Reason::EmbeddedTooLarge => "embedded_too_large",
            Reason::EnvelopeMalformed => "envelope_malformed",
            Reason::BodyNotBase64 => "body_not_base64",
            Reason::TenantNotSender => "tenant_not_sender",
        }
    }

    /// The reason whose code is `code`, for reading a code back (a reconciliation message's
    /// attribute, an operator's filter).
    pub fn from_code(code: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.code() == code)
    }

    /// Whether the event goes to the reconciliation queue rather than the dead-letter queue:
    /// the mark table cannot judge it (S10), or the provider may have forgotten its key (S16).
    pub fn for_reconciliation(self) -> bool {
        matches!(
            self,
            Reason::LateEvent | Reason::ImplausibleTime | Reason::ProviderKeyExpired
        )
    }
}

impl From<&crate::sequence::SequenceError> for Reason {
    fn from(e: &crate::sequence::SequenceError) -> Self {
        use crate::sequence::SequenceError as E;
        match e {
            E::Missing { .. } => Reason::SequenceMissing,
            E::NotASequence { .. } => Reason::SequenceInvalid,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

impl From<&crate::Rejection> for Reason {
    fn from(r: &crate::Rejection) -> Self {
        use crate::Rejection as R;
        match r {
            R::BodyTooLarge { .. } => Reason::BodyTooLarge,
            R::BodyNotUtf8 => Reason::BodyNotUtf8,
            R::BodyNotJson { .. } => Reason::BodyNotJson,
            R::Missing { .. } => Reason::IdentityMissing,
            R::Empty { .. } => Reason::IdentityEmpty,
            R::TooLong { .. } => Reason::IdentityTooLong,
            R::NotUtf8 { .. } => Reason::IdentityNotUtf8,
            R::BadCharacters { .. } => Reason::IdentityBadCharacters,
            R::WrongType { .. } => Reason::IdentityWrongType,
            R::Late { .. } => Reason::LateEvent,
            R::FromTheFuture { .. } => Reason::ImplausibleTime,
            R::Embedded { error, .. } => match error {
                crate::pointer::PointerError::NotJson { .. } => Reason::EmbeddedNotJson,
                crate::pointer::PointerError::TooDeep { .. } => Reason::EmbeddedTooDeep,
                crate::pointer::PointerError::TooLarge { .. } => Reason::EmbeddedTooLarge,
            },
            R::Envelope { .. } => Reason::EnvelopeMalformed,
            R::NotTheSender { .. } => Reason::TenantNotSender,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn every_reason_has_its_own_code_and_reads_back() {
        let mut codes: Vec<&str> = Reason::ALL.iter().map(|r| r.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Reason::ALL.len(), "codes are unique");
        for r in Reason::ALL {
            assert_eq!(Reason::from_code(r.code()), Some(r));
            assert_eq!(r.to_string(), r.code());
        }
        assert_eq!(Reason::from_code("no_such_code"), None);
    }

    /// S10, S16: exactly the events the mark table cannot judge, and takeovers the provider
    /// may have forgotten, go to reconciliation; every other rejection to the DLQ.
    #[test]
    fn only_late_future_and_forgotten_events_go_to_reconciliation() {
        let to_reconciliation: Vec<Reason> = Reason::ALL
            .into_iter()
            .filter(|r| r.for_reconciliation())
            .collect();
        assert_eq!(
            to_reconciliation,
            [
                Reason::LateEvent,
                Reason::ImplausibleTime,
                Reason::ProviderKeyExpired
            ]
        );
    }
}
