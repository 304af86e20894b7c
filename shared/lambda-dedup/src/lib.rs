//! The deduplication core of lambda-dedup: everything that decides *what* an event is and *what*
//! happened to it, with no I/O and no AWS SDK. The DynamoDB adapter (`lambda-dedup-dynamodb`) turns these
//! types into conditional writes and transactions.
//!
//! The behaviour promised here is the contract in `docs/CONTRACT.md` (rules S1–S16); items below cite
//! the rule they implement.
//!
//! # Layout
//! - [`key`]: the dedup key `(namespace, consumer, tenant, event identity)` and the explicit
//!   extractors that derive it from a message, or a typed [`Rejection`] (S1–S3).
//! - [`fingerprint`]: the payload fingerprint stored with a mark, to tell a duplicate from a
//!   conflicting reuse of one key (S11).
//! - [`mark`]: the mark record, leases with owner tokens, and the outcomes of claiming and
//!   committing (S4–S6, S8).
//! - [`effect`]: DynamoDB effect items (put/update/delete/condition-check) in the library's own
//!   terms, so callers never touch the SDK (S5).
//! - [`retention`]: the retention window and the redelivery horizon it must exceed (S9).
//! - [`cache`]: a bounded LRU of completed marks, so a warm container answers duplicates it has
//!   seen without a DynamoDB call; its lock comes from `sync` (std's, or shuttle's under
//!   `--cfg shuttle` for the exploring scheduler's tests).
//! - [`store`]: the [`MarkStore`] trait (claim, commit, batch commit, complete, release, get)
//!   and its typed [`StoreError`]; implemented on DynamoDB and in memory.
//! - [`items`]: the [`ItemStore`] trait: a function's own tables (write with conditions, read,
//!   scan), outside the mark table; implemented on DynamoDB and in memory too.
//! - [`sequence`]: sequence mode for ordered sources: the mark is the effect item's high-water
//!   sequence, one conditional write per message.
//! - [`create_once`]: create-once mode for effects that create an item once per event: the item
//!   is the mark, one conditional `Put`.
//! - [`clock`]: the source of "now", injectable so tests can move time.

#![warn(missing_docs)]

pub mod cache;
pub mod clock;
pub mod create_once;
pub mod effect;
pub mod fingerprint;
pub mod items;
pub mod key;
pub mod latest;
pub mod mark;
#[cfg(feature = "simulation-planted")]
pub mod planted;
pub mod pointer;
pub mod reason;
pub mod retention;
pub mod sequence;
pub mod store;
mod sync;

pub use cache::MarkCache;
pub use clock::{Clock, ManualClock, SystemClock};
pub use create_once::CreateOnce;
pub use effect::{Effect, Item, Value};
pub use fingerprint::{Fingerprint, FingerprintSource};
pub use items::ItemStore;
pub use key::{
    AttributeValue, DEFAULT_MAX_BODY_BYTES, DedupKey, Derived, ENVELOPE_ID_ATTRIBUTE,
    EventTimeSource, IdentitySource, KeySpec, MAX_CLOCK_SKEW, Message, Provenance, Rejection,
    Scope, TenantSource, TimeFormat, VERIFIED_SENDER_ATTRIBUTE,
};
pub use latest::{Latest, LatestWrite, Sequencer, SequencerError};
pub use mark::{Claim, Commit, Lease, Mark, MarkStatus, OwnerToken, Seen};
pub use reason::Reason;
pub use retention::{ConfigError, RedeliveryHorizon, Retention};
pub use sequence::{SequenceOutcome, SequenceSource, SequencedWrite};
pub use store::{
    CommitRequest, CreateOnceStore, FaultKind, LatestStore, MarkStore, SequenceStore, StoreError,
    StoreOptions,
};

use sha2::{Digest, Sha256};

/// The id of an effect item within one tenant's data (S1: tenants stay apart in the effects
/// too): `<tenant>/<id>`, with `%` and `/` in the tenant percent-encoded, so no two
/// (tenant, id) pairs give the same string and one tenant's message can never name another
/// tenant's item, whatever its payload says.
///
/// ```
/// assert_eq!(lambda_dedup::tenant_scoped("acme", "credito-17"), "acme/credito-17");
/// assert_ne!(lambda_dedup::tenant_scoped("a/b", "c"), lambda_dedup::tenant_scoped("a", "b/c"));
/// ```
pub fn tenant_scoped(tenant: &str, id: &str) -> String {
    let tenant = tenant.replace('%', "%25").replace('/', "%2F");
    format!("{tenant}/{id}")
}

/// SHA-256 over length-prefixed parts: unambiguous (`["ab","c"]` and `["a","bc"]` differ) and
/// stable across processes and releases. Every derived identifier in the crate goes through here.
pub(crate) fn hash_parts<'a>(
    domain: &'a str,
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in std::iter::once(domain.as_bytes()).chain(parts) {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}
