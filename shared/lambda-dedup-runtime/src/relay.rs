//! The recorded-intent and inbox pattern (S7), written once (feature `dynamodb-streams`): a
//! DynamoDB stream of a table whose items carry their own settle status, one action per new
//! item, and a scheduled sweep. `intent-relay` (an HTTP call to the collections provider with
//! the intent's idempotency key) and the inbox's forwarder ([`forward`], feature `inbox`: an SQS send) are
//! each an [`Act`] — how to read a record, what to do with the item — on this walk:
//!
//! - records in shard order (`in_order::walk`); the first that fails transiently is the
//!   checkpoint the stream retries from, and a record is started only with the time one record
//!   needs (its record budget) left before the invocation's deadline, and one still not done
//!   `DEDUP_DEADLINE_MARGIN_MS` before it is abandoned (S12, S13);
//! - an item that can never succeed as it is — unreadable, or refused for good by the other
//!   side — is **parked** on the item (its status, `failure_reason` and the time), counted
//!   (`Parked`, alarmed on), and the shard moves on (S15, S16);
//! - an action that succeeds **settles** the item: its status and what the action returned, in
//!   one conditional update;
//! - a record without a new image is a stream misconfiguration: retried, never guessed around;
//! - every record ends in exactly one count of the [`Tally`], printed as one EMF line (S14);
//! - the sweep ([`RelayService::sweep`], any event without `Records`): every item still
//!   waiting longer than `redrive_after` (or of unknown age) is stamped `redrive_requested_at`,
//!   conditioned on it still waiting; the stamp comes back on the stream as a modification and
//!   the item is acted on then. The oldest waiting item's age is emitted as
//!   `OldestPendingSeconds`, alarmed on.
//!
//! How the other side takes a repeat of the action decides the rest ([`Repeats`]). The items are
//! read and written through the core's [`ItemStore`](lambda_dedup::ItemStore): DynamoDB in Lambda, the memory store in
//! tests, with the same wiring.
//!
//! A relay is built from the builder: [`RelayService::new`] takes the builder, the
//! relay's [`RelayVars`](lambda_dedup_config::RelayVars) (its table and the prefix of its own
//! variables), its [`Layout`] and its [`Act`], reads its settings from the builder's own `Env`
//! (the record budget, the sweep's age; the deadline margin is the function's one
//! `DEDUP_DEADLINE_MARGIN_MS`), and runs it on the items of the store chosen (its
//! [`Items`](crate::store::Items): `DynamoItems` on the function's DynamoDB client in
//! `main`, the memory store in tests). The [`RelayService`] takes both the stream's and the
//! schedule's events, and `lambda_runtime::run_concurrent` takes it directly.
//!
//! The item is its own mark (its settle status), so a relay reads no mark table: none of the
//! mark table's settings (table, lease, key spec) apply, and a relay's role grants no mark
//! table.
//!
//! # Layout
//! - `forward`: the inbox's forwarder, an SQS send (feature `inbox`);
//! - `layout`: how a relay's items look ([`Layout`]: its [`Attributes`], [`Waiting`] and
//!   [`StatusValue`] values, [`Repeats`], [`Metric`] names);
//! - `act`: the per-relay part ([`Read`], [`Act`], [`Failure`]);
//! - `service`: the [`RelayService`] and its walk of one stream batch;
//! - `settle`: one record's step, its settle and park writes;
//! - `sweep`: the scheduled sweep;
//! - `tally`: the account of one invocation ([`Tally`], [`Handled`]);
//! - `builder`: the relay built from the builder (`RelayService::new`), bound to its settings.

mod act;
mod builder;
#[cfg(feature = "inbox")]
pub mod forward;
mod layout;
mod service;
mod settle;
mod sweep;
mod tally;

pub use crate::in_order::{Swept, image_part};
pub use act::{Act, Failure, Read};
pub use layout::{Attribute, Attributes, Layout, Metric, REDRIVE, Repeats, StatusValue, Waiting};
pub(crate) use service::Relay;
pub use service::RelayService;
pub use tally::{Handled, Tally};

#[cfg(test)]
pub(crate) mod tests;
