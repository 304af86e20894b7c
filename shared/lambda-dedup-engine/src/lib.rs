//! Processing a batch of queue deliveries so that each event's effect happens once, and every
//! delivery is accounted for.
//!
//! The functions turn their Lambda event into [`lambda_dedup::Message`]s, hand them to [`run_batch`]
//! with a per-message closure built on a [`Deduplicator`] flow, and turn the [`BatchReport`] back
//! into a partial batch response. This crate knows neither `aws_lambda_events` nor the AWS SDK.
//!
//! # Layout
//! - [`outcome`]: the five ends of a delivery ([`Outcome`]) and the per-invocation [`Account`]
//!   that must close (S14), with its CloudWatch Embedded Metric Format line: every count, the
//!   retries by [`RetryCause`], the rejections by [`Reason`], and the work's refusals by
//!   [`InvalidCause`] and [`TransientCause`].
//! - `handler_error`: [`HandlerError`], why the work refuses an event, typed: [`Invalid`] (never:
//!   dead-lettered) or [`Transient`] (not now: retried), each the library's own cause (a payload
//!   that does not fit, a call given up…) or the work's own rule or reason
//!   ([`HandlerError::invalid`], [`HandlerError::transient`]).
//! - [`provider`]: [`CallError`], a failed call to an external provider, and its
//!   [`Permanence`], which a refusal carries (classified by `lambda_dedup_http`).
//! - [`passage`]: [`BatchReport::passage`]: how a stream's checkpoint passes an invocation's
//!   records (acknowledged, or parked when they can never apply) and where it stops.
//! - [`runner`]: [`run_batch`]: bounded concurrency, FIFO order per message group, panics caught,
//!   the list of messages to redeliver (S12).
//! - [`explain`]: [`Deduplicator::explain`]: the [`Verdict`] a delivery of a message would get
//!   now (would apply, duplicate, conflict, late, no identity…), read and never written, for
//!   operators' tools.
//! - `deduplicator`: [`Deduplicator`]: the transactional flow (mark and effects in one transaction,
//!   S5) and the leased flow (claim, external call with the idempotency key, complete, S6), each
//!   mapping every store answer to an outcome; a store fault is always a retry (S13). Batch-
//!   transaction mode ([`run_batch_transactional`]) commits a whole batch in as few transactions
//!   as possible, and a warm cache ([`Deduplicator::with_cache`]) answers known duplicates with no
//!   DynamoDB call. Sequence and create-once modes are flows of their own deduplicators,
//!   [`SequencedDeduplicator`] and [`CreateOnceDeduplicator`], built only on a store with the
//!   capability.
//!
//! # Example
//!
//! A credit applied once however often it is delivered, on the in-memory store (in a Lambda,
//! `lambda_dedup_dynamodb::DynamoStore` takes its place):
//!
//! ```
//! use std::time::Duration;
//! use lambda_dedup::{Effect, Item, KeySpec, Message, Retention, Scope};
//! use lambda_dedup_engine::{Deduplicator, Outcome, Plan};
//! use lambda_dedup_memory::MemoryStore;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).unwrap());
//! store.create_table("balances", "account");
//! let spec = KeySpec::cloudevents(Scope::new("bank", "ledger").unwrap(), "tenantid");
//! let dedup = Deduplicator::new(spec, store.clone());
//! let message = Message {
//!     message_id: "m-1".into(),
//!     body: br#"{"specversion":"1.0","type":"credit","source":"/bank","id":"e-1",
//!              "tenantid":"acme","data":{"amount":5}}"#.to_vec(),
//!     ..Message::default()
//! };
//! let plan = |_: &lambda_dedup::Derived| {
//!     let credit = Effect::update("balances", Item::new().with("account", "acme/a-1"))
//!         .expression("ADD balance :amount")
//!         .value(":amount", 5);
//!     Ok(Plan { effects: vec![credit], result: None })
//! };
//! assert_eq!(dedup.transactional(&message, plan).await, Outcome::Applied);
//! // The same event again (an SQS redelivery): a duplicate, and the balance moves once.
//! assert!(matches!(dedup.transactional(&message, plan).await, Outcome::Duplicate { .. }));
//! let balance = store.item("balances", &Item::new().with("account", "acme/a-1")).unwrap();
//! assert_eq!(balance.0["balance"], lambda_dedup::Value::N("5".into()));
//! # });
//! ```

#![warn(missing_docs)]

mod deduplicator;
mod emf;
pub mod explain;
mod handler_error;
mod late;
mod layer_error;
pub mod outcome;
pub mod passage;
pub mod provider;
pub mod retry;
pub mod runner;

pub use deduplicator::{
    CreateOnceDeduplicator, Deduplicator, LatestDeduplicator, LeasedDeduplicator, Plan,
    SequencedDeduplicator,
};
pub use emf::emf_line;
pub use explain::{Explanation, Verdict};
pub use handler_error::{HandlerError, Invalid, InvalidCause, Transient, TransientCause};
pub use late::late_attributes;
pub use outcome::{Account, Outcome, Reason};
pub use passage::{Pass, Passage, never_applies};
pub use provider::{CallError, Permanence};
pub use retry::RetryCause;
pub use runner::{BatchReport, run_batch, run_batch_transactional};
