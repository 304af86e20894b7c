//! Dedup keys and the explicit extractors that derive them (S1–S3).
//!
//! A key is `(namespace, consumer, tenant, event identity)`. The namespace and consumer are
//! configuration and stay readable in the partition key; the tenant and the event identity come
//! from the message and only ever appear hashed, so no personal data reaches the table or the logs
//! in clear (S3).
//!
//! The event identity is what the producer declares, chosen explicitly with [`IdentitySource`].
//! There is no default: the SQS `messageId` and a body hash exist only as named variants with their
//! caveats documented (S1).
//!
//! # Layout
//! - `scope`: [`Scope`] and the [`DedupKey`] it scopes.
//! - `message`: [`Message`], one delivery in the library's own terms.
//! - `spec`: [`IdentitySource`], [`TenantSource`] and the [`KeySpec`] that derives a message's
//!   [`Derived`] key, fingerprint and body.
//! - `checks`: the checks every identity and tenant value passes, and the JSON helpers.
//! - `cloudevents`: reading structured CloudEvents attributes.
//! - `time`: [`EventTimeSource`], where the event's own time is read from (S10).
//! - `rejection`: why a message has no key ([`Rejection`]).

mod checks;
mod cloudevents;
mod message;
mod rejection;
mod scope;
mod spec;
#[cfg(test)]
mod tests;
mod time;

pub use checks::MAX_IDENTITY_BYTES;
pub use message::{
    AttributeValue, DEFAULT_MAX_BODY_BYTES, ENVELOPE_ID_ATTRIBUTE, Message,
    VERIFIED_SENDER_ATTRIBUTE,
};
pub use rejection::{MAX_CLOCK_SKEW, Rejection};
pub use scope::{DedupKey, MAX_SCOPE_NAME, Scope};
pub use spec::{Derived, IdentitySource, KeySpec, Provenance, TenantSource};
pub use time::{EventTimeSource, TimeFormat};
