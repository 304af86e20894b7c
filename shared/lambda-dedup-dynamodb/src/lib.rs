//! The mark store on DynamoDB: the one place in lambda-dedup that knows `aws-sdk-dynamodb`.
//!
//! # Layout
//! - [`DynamoStore`] (in `store`): the core's [`lambda_dedup::MarkStore`] on one DynamoDB table: claim,
//!   commit-with-effects, complete, release, get (S4–S6, S8, S9, S11).
//! - `batch`: [`DynamoStore::commit_batch`]: a whole batch's marks and effects in as few
//!   transactions as possible, each event still atomic with its own effects.
//! - `codec`: marks and effects to and from DynamoDB items.
//! - `error`: the SDK's errors classified into the core's [`Error`] ([`lambda_dedup::StoreError`]);
//!   [`Error::is_retryable`] tells a transient fault
//!   (throttling, `TransactionConflict`, timeouts, network) from a permanent one (S13).
//! - [`Client::from_conf`] builds a client from an AWS SDK configuration (the functions': the
//!   runtime's, with their SDK timeouts) and [`write_effects`] writes effects with no
//!   mark, so that functions never name the SDK themselves; [`DynamoItems`] is the core's
//!   `ItemStore` (a function's own tables: write, read, scan) on such a client.
//! - [`provision`]: creates a mark table with TTL on, for tests, demos and local development.
//!
//! # Table layout
//! One item per mark, partition key `pk` (string), no sort key. Attributes: `status`
//! (`IN_PROGRESS`/`COMPLETED`), `owner`, `lease_expires_at` (epoch ms), `expires_at` (epoch
//! seconds; **the table's TTL attribute**), `fingerprint`, `result`, `first_seen_at`,
//! `completed_at` (epoch ms).

#![warn(missing_docs)]

mod batch;
mod client;
mod codec;
mod error;
pub mod forget;
mod items;
pub mod provision;
mod store;

pub use client::{Attributes, Client, write_effects};
pub use error::{Error, FaultKind};
pub use forget::{AUDIT_PREFIX, ForgetRequest, Forgotten, MarkCounts, audit_key, count_marks};
pub use items::DynamoItems;
pub use lambda_dedup::CommitRequest;
pub use store::{DEFAULT_LEASE, DEFAULT_MAX_RESULT_BYTES, DynamoStore, MAX_EFFECTS};

/// Attribute names of a mark item.
pub mod attr {
    /// Partition key.
    pub const PK: &str = "pk";
    /// `IN_PROGRESS` or `COMPLETED`.
    pub const STATUS: &str = "status";
    /// Owner token of the claim.
    pub const OWNER: &str = "owner";
    /// Lease expiry, epoch milliseconds.
    pub const LEASE: &str = "lease_expires_at";
    /// TTL, epoch seconds: configure the table's TTL on this attribute.
    pub const EXPIRES_AT: &str = "expires_at";
    /// Payload fingerprint.
    pub const FINGERPRINT: &str = "fingerprint";
    /// Stored result.
    pub const RESULT: &str = "result";
    /// First claim or commit, epoch milliseconds.
    pub const FIRST_SEEN: &str = "first_seen_at";
    /// Completion, epoch milliseconds.
    pub const COMPLETED_AT: &str = "completed_at";
}
