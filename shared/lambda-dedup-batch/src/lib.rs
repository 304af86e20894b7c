//! Processing a batch of queue deliveries so that each event's effect happens once, and every
//! delivery is accounted for.
//!
//! The functions turn their Lambda event into [`lambda_dedup::Message`]s, hand them to [`run_batch`]
//! with a per-message closure built on a [`Deduplicator`] flow, and turn the [`BatchReport`] back
//! into a partial batch response. This crate knows neither `aws_lambda_events` nor the AWS SDK.
//!
//! # Layout
//! - [`outcome`]: the five ends of a delivery ([`Outcome`]) and the per-invocation [`Account`]
//!   that must close (S14), with its CloudWatch Embedded Metric Format line.
//! - [`runner`]: [`run_batch`]: bounded concurrency, FIFO order per message group, panics caught,
//!   the list of messages to redeliver (S12).
//! - [`flows`]: [`Deduplicator`]: the transactional flow (mark and effects in one transaction,
//!   S5) and the leased flow (claim, external call with the idempotency key, complete, S6), each
//!   mapping every store answer to an outcome; a store fault is always a retry (S13). Batch-
//!   transaction mode ([`run_batch_transactional`]) commits a whole batch in as few transactions
//!   as possible, and a warm cache ([`Deduplicator::with_cache`]) answers known duplicates with no
//!   DynamoDB call.

pub mod flows;
pub mod outcome;
pub mod runner;

pub use flows::{Deduplicator, HandlerError, PROVIDER_KEY_EXPIRED, Plan};
pub use outcome::{Account, Outcome};
pub use runner::{BatchReport, run_batch, run_batch_transactional};
