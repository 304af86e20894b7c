//! Standard Webhooks' two header families: the specification's `webhook-id`,
//! `webhook-timestamp`, `webhook-signature`, and Svix's `svix-id`, `svix-timestamp`,
//! `svix-signature` (the same scheme: Svix wrote the specification, and the senders that deliver
//! through Svix send its names). A request may use either; one that sends a part under both names
//! with two different values is refused ([`SignatureError::ConflictingHeaders`]): which copy was
//! verified and which one names the event would be ambiguous. (Svix's own library silently
//! prefers `svix-*`; refusing is the stricter reading, and no sender sends two values.)

use super::{Headers, SignatureError};

/// Standard Webhooks' header naming the event (signed).
pub const WEBHOOK_ID_HEADER: &str = "webhook-id";
/// Standard Webhooks' header carrying the signature's timestamp (Unix seconds).
pub const WEBHOOK_TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Standard Webhooks' header carrying the signatures, `v1,<base64>`, separated by spaces.
pub const WEBHOOK_SIGNATURE_HEADER: &str = "webhook-signature";
/// Svix's name of `webhook-id`.
pub const SVIX_ID_HEADER: &str = "svix-id";
/// Svix's name of `webhook-timestamp`.
pub const SVIX_TIMESTAMP_HEADER: &str = "svix-timestamp";
/// Svix's name of `webhook-signature`.
pub const SVIX_SIGNATURE_HEADER: &str = "svix-signature";

/// One part of a Standard Webhooks request, under either family's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The event id (`webhook-id` / `svix-id`).
    Id,
    /// The timestamp (`webhook-timestamp` / `svix-timestamp`).
    Timestamp,
    /// The signatures (`webhook-signature` / `svix-signature`).
    Signature,
}

impl Part {
    /// The part's two names: the specification's, then Svix's.
    pub fn names(self) -> [&'static str; 2] {
        match self {
            Self::Id => [WEBHOOK_ID_HEADER, SVIX_ID_HEADER],
            Self::Timestamp => [WEBHOOK_TIMESTAMP_HEADER, SVIX_TIMESTAMP_HEADER],
            Self::Signature => [WEBHOOK_SIGNATURE_HEADER, SVIX_SIGNATURE_HEADER],
        }
    }
}

/// The value of `part`, under whichever name it was sent; refused when sent under both names
/// with different values (the same value under both is one value).
pub fn standard_header<'h>(
    headers: Headers<'h, '_>,
    part: Part,
) -> Result<Option<&'h str>, SignatureError> {
    let [spec, svix] = part.names();
    match (headers(spec)?, headers(svix)?) {
        (Some(a), Some(b)) if a != b => Err(SignatureError::ConflictingHeaders),
        (Some(a), _) | (None, Some(a)) => Ok(Some(a)),
        (None, None) => Ok(None),
    }
}
