//! The store's one lock: `std`'s, or under `--cfg shuttle` the exploring scheduler's, so that
//! every store call is a point where shuttle may switch to another caller (the tests of
//! `lambda-dedup-shuttle`; never a normal build).

#[cfg(shuttle)]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};
#[cfg(not(shuttle))]
pub(crate) use std::sync::{Mutex, MutexGuard};
