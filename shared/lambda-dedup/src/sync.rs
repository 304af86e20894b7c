//! The lock of the warm cache ([`crate::cache`]): `std`'s, or under `--cfg shuttle` the
//! exploring scheduler's, so that every lock taken is a point where shuttle may switch to
//! another invocation (the tests of `lambda-dedup-shuttle`; never a normal build).

#[cfg(shuttle)]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};
#[cfg(not(shuttle))]
pub(crate) use std::sync::{Mutex, MutexGuard};
