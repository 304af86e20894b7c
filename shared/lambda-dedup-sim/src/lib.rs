//! A deterministic simulation of the protocol (issue 35). The library's real flows —
//! transactional, leased with fencing, create-once, and sequence mode on 2–4 Kinesis shards —
//! and the runtime's relay, webhook receiver and inbox forwarder — run (the flows through
//! `run_batch`) on one current-thread tokio runtime with paused time, against the
//! memory store behind a fault-injecting [`store::SimStore`], a simulated [`provider`] and
//! [`broker`], on several instances with skewed clocks and several invocations at once, with
//! handler panics ([`panics`]) and sequences redriven out of order into their FIFO group (issue
//! 46). Every choice comes from the seed's [`rng::Rng`], so a seed replays exactly (its trace
//! digest). The [`invariants`] are checked after every invocation and at the end.
//!
//! # Layout
//! `rng` (the seed's generator), `trace` (lines and digest), `clock` (paused time with skew),
//! `world` (the shared state), `invariants` (the ledger and its checks), `provider`, `broker`
//! (SQS queue, Kinesis shards), `events` (the producers' bodies and key spec), `store` (the
//! simulated store), `sqs` and `kinesis` (the lanes), `relay_store` (a relay's table and its
//! stream), `relay` (the relay lane), `inbox` (webhook senders, receiver, forwarder),
//! `durable_steps` (durable executions replaying their steps under the step guard, crashing
//! between a step's effect and its checkpoint), `dispatcher` (deliveries and producer retries
//! of an event starting its one durable execution), `durable_lane` (what those two share: their
//! own table and generator, and the one crash-and-replay loop), `panics` (handler panics), `run` (one
//! seed), `planted` (which planted bugs the seeds must catch, in the `simulation-planted`
//! build); `model` the exhaustive model of claim / lease / takeover / complete / release / TTL
//! on the real memory store.

pub mod broker;
pub mod clock;
pub mod dispatcher;
pub(crate) mod durable_lane;
pub mod durable_steps;
pub mod events;
pub mod inbox;
pub mod invariants;
pub mod kinesis;
pub mod model;
pub mod panics;
#[cfg(feature = "simulation-planted")]
pub mod planted;
pub mod provider;
pub mod relay;
pub mod relay_store;
pub mod rng;
pub mod run;
pub mod sqs;
pub mod store;
pub mod trace;
pub mod world;

#[cfg(feature = "simulation-planted")]
pub use run::run_seed_planted;
pub use run::{SeedReport, run_seed};
