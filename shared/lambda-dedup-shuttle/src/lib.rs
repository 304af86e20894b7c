//! Concurrency tests under an exploring scheduler ([shuttle](https://docs.rs/shuttle), issue 35
//! item 5): the memory store, the warm cache and FIFO order, each check run over thousands of
//! schedules that shuttle chooses, with a failing schedule printed for replay.
//!
//! Built only with `RUSTFLAGS="--cfg shuttle"` (`cargo xtask simulate --explore`, in a target
//! directory of its own): under that flag the library's locks are shuttle's (`sync` in
//! `lambda-dedup` and `lambda-dedup-memory`), so every lock taken is a point where shuttle may
//! switch to another thread or task. In a normal build this crate is empty.
//!
//! # Layout
//! - `explore`: running one check under seeded random and PCT schedulers (or replaying one
//!   schedule), and, in the `simulation-planted` build, whether a planted bug is caught.
//! - `world`: what every check starts from: a memory store on a manual clock, the key spec,
//!   CloudEvents messages, the credit they make.
//! - `yielding`: `yielding::Yielding`, a store that yields to the scheduler before and after
//!   each call (every store call boundary of a flow a preemption point) and records the commits
//!   that landed, in order.
//! - `store_checks`: the memory store: one winner of N claims, fencing of complete and
//!   release against a takeover, all-or-nothing commits, create-once.
//! - `cache_checks`: the warm cache through `Deduplicator::with_cache`: the effect once, no
//!   duplicate before its commit, tenants apart.
//! - `leased_checks`: the leased flow: the provider called once, no duplicate before the call.
//! - `fifo_checks`: `run_batch` with message groups: order within a group, a group stopped
//!   at its first failure.
#![cfg(shuttle)]

pub mod cache_checks;
pub mod explore;
pub mod fifo_checks;
pub mod leased_checks;
pub mod store_checks;
pub mod world;
pub mod yielding;
