//! The mark store: the six operations every flow is built on, and the errors they share.
//!
//! [`MarkStore`] is implemented twice: on DynamoDB (`lambda-dedup-dynamodb`), which is what runs in
//! Lambda, and in memory (`lambda-dedup-memory`), for fast tests of flows and handlers. Both pass one
//! conformance suite (`lambda-dedup-conformance`, run in each store's `tests/conformance.rs`), so
//! a behaviour a test shows on the memory store is the behaviour the DynamoDB store has.
//!
//! Every implementation keeps these promises:
//! - **claim** is exclusive (S4): of any number of concurrent claims of one key, one wins.
//! - **commit** writes the completed mark and every effect, or nothing (S5); the mark is written
//!   only where a claim could have been taken.
//! - **complete** and **release** are fenced by the lease's owner token (S6).
//! - a mark past its TTL counts as absent, whether or not it has been deleted yet (S9).
//! - a stored fingerprint that differs from the offered one is a conflict (S11).
//! - a fault is typed: [`StoreError::is_retryable`] tells transient from permanent (S13, S15).
//!
//! # The store's own effect type
//! The trait is generic over the effects a store commits with a mark: `MarkStore<E = Effect>`.
//! The default, [`Effect`], is DynamoDB writes in the library's own terms (the DynamoDB and memory
//! stores); a store whose effects are something else — SQL statements for PostgreSQL — implements
//! `MarkStore<ItsEffect>`, and the flows, generic over `E` where they hold effects, run on it
//! unchanged. `dyn MarkStore` still means `dyn MarkStore<Effect>`, so code written for the
//! DynamoDB store does not change.
//!
//! # Options
//! What every store is configured with — retention, lease, result bound, clock — is one
//! [`StoreOptions`]: the store holds it and answers [`MarkStore::options`] with it; the
//! builders are [`store_options_builders!`](crate::store_options_builders), invoked in the
//! store's `impl` block.
//!
//! # Implementing the traits
//! Each trait comes in two forms. A store implements the native one — [`MarkStoreImpl`],
//! [`SequenceStoreImpl`], [`CreateOnceStoreImpl`], [`LatestStoreImpl`] — with plain `async fn`s
//! (their futures must be `Send`); one blanket impl per trait then gives it the object-safe
//! one — [`MarkStore`], [`SequenceStore`], [`CreateOnceStore`], [`LatestStore`] — whose methods
//! box those futures. Code that holds or calls a store names the object-safe trait
//! (`Arc<dyn MarkStore>`, `S: MarkStore<E> + ?Sized`) and imports only it; the `…Impl` traits
//! are imported only where a store is implemented, so a method call never has two traits to
//! choose from. The object-safe traits are sealed: the blanket impls are their only ones, so a
//! store outside this crate can implement the `…Impl` form only (see [`MarkStore`]).
//!
//! # Capabilities
//! Sequence mode and create-once mode are defined on DynamoDB items (the high-water lives in the
//! effect item; the created item is the mark). Each is a trait of its own over
//! `MarkStore<Effect>` — [`SequenceStore`] and [`CreateOnceStore`] — that a store implements
//! where it has the mode (the DynamoDB and memory stores both; the PostgreSQL and Valkey stores
//! neither). A flow of the mode takes the capability's trait object, so asking a store for a
//! mode it cannot do does not compile: there is no run-time "unsupported" answer to handle.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::clock::{Clock, SystemClock};
use crate::create_once::CreateOnce;
use crate::effect::Effect;
use crate::fingerprint::Fingerprint;
use crate::key::DedupKey;
use crate::latest::{Latest, LatestWrite};
use crate::mark::{Claim, Commit, Lease, Mark, MarkStatus};
use crate::retention::Retention;
use crate::sequence::{SequenceOutcome, SequencedWrite};

/// Default lease on a claim: long enough for one external call with retries, short enough that a
/// crashed holder's event is picked up again within a typical SQS visibility timeout.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// Default clock-skew allowance: how far ahead another instance's clock may run without taking
/// over a live lease. Lambda's hosts keep their clocks by the Amazon Time Sync Service, well
/// within this.
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(1);
/// Default bound on the stored result (DynamoDB items are limited to 400 KB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 64 * 1024;
/// DynamoDB allows 100 items in one transaction; the mark takes one.
pub const MAX_EFFECTS: usize = 99;

/// When a lease taken at `now` for `lease` ends: cut to `deadline` (pass the invocation's, so a
/// lease never outlives the process that holds it), refused when no time is left before it.
/// What every store's claim computes first.
pub fn lease_end(
    now: SystemTime,
    lease: Duration,
    deadline: Option<SystemTime>,
) -> Result<SystemTime, StoreError> {
    match deadline {
        Some(deadline) if deadline <= now => Err(StoreError::Invalid(
            "no time left before the deadline to hold a lease".into(),
        )),
        Some(deadline) => Ok((now + lease).min(deadline)),
        None => Ok(now + lease),
    }
}

/// What every store is configured with, whatever it keeps marks in: how long marks are kept,
/// how long a claim's lease runs, the bound on a stored result, and the clock its TTLs and
/// leases are written and judged by. A store holds one, answers [`MarkStore::options`] with it
/// (the trait's [`now`](MarkStore::now), [`retention`](MarkStore::retention) and
/// [`max_result_bytes`](MarkStore::max_result_bytes) read it), and gets its builders from
/// [`store_options_builders!`](crate::store_options_builders).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long marks are kept (S9).
    pub retention: Retention,
    /// The longest lease a claim takes (default [`DEFAULT_LEASE`]); it is also cut to the
    /// claim's deadline.
    pub lease: Duration,
    /// The largest result stored (default [`DEFAULT_MAX_RESULT_BYTES`]).
    pub max_result_bytes: usize,
    /// The source of "now" (default the system clock; tests move a
    /// [`ManualClock`](crate::ManualClock)).
    pub clock: Arc<dyn Clock>,
    /// The clock-skew allowance (default [`DEFAULT_CLOCK_SKEW`]): a lease is recorded this long
    /// past the end its owner is given ([`lease_held_until`](Self::lease_held_until)), so an
    /// instance whose clock runs ahead by up to this much still finds it live while its owner
    /// may act (S6).
    pub clock_skew: Duration,
}

impl StoreOptions {
    /// Marks kept for `retention`; the default lease and result bound, on the system clock.
    pub fn new(retention: Retention) -> Self {
        Self {
            retention,
            lease: DEFAULT_LEASE,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            clock: Arc::new(SystemClock),
            clock_skew: DEFAULT_CLOCK_SKEW,
        }
    }

    /// Until when a lease whose owner was given `end` is recorded as held: `end` plus the
    /// clock-skew allowance. The owner works to `end` by its own clock; another instance takes
    /// the claim over only once the recorded end has passed by its clock, so a clock ahead by
    /// up to the allowance never takes over a lease its owner still acts under. Every store
    /// records this, and returns `end` in the [`Lease`].
    pub fn lease_held_until(&self, end: SystemTime) -> SystemTime {
        end + self.clock_skew
    }

    /// "Now" by the store's clock.
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// When a lease taken at `now` ends ([`lease_end`] with this lease).
    pub fn lease_end(
        &self,
        now: SystemTime,
        deadline: Option<SystemTime>,
    ) -> Result<SystemTime, StoreError> {
        lease_end(now, self.lease, deadline)
    }

    /// When a mark written at `now` expires, before it is cut to the store's whole seconds:
    /// its retention and 999 ms more, so that the TTL in whole seconds is rounded up and a mark
    /// never expires before its full retention.
    pub fn expires_at(&self, now: SystemTime) -> SystemTime {
        now + self.retention.duration() + Duration::from_millis(999)
    }

    /// Refuses a result over the bound ([`StoreError::Invalid`]).
    pub fn check_result(&self, result: Option<&str>) -> Result<(), StoreError> {
        match result {
            Some(r) if r.len() > self.max_result_bytes => Err(StoreError::Invalid(format!(
                "result is {} bytes, over the {}-byte bound",
                r.len(),
                self.max_result_bytes
            ))),
            _ => Ok(()),
        }
    }
}

/// The builders of the [`StoreOptions`] a store holds, as the store's own methods (so its users
/// call them with no import): `with_retention`, `with_lease`, `with_clock_skew`, `with_clock` and
/// `with_max_result_bytes`. Invoke it inside the store's `impl` block with the name of the field
/// that holds the options:
///
/// ```
/// use lambda_dedup::Retention;
/// use lambda_dedup::store::StoreOptions;
///
/// #[derive(Debug, Clone)]
/// pub struct MyStore {
///     options: StoreOptions,
/// }
///
/// impl MyStore {
///     lambda_dedup::store_options_builders!(options);
/// }
///
/// let retention = Retention::unchecked(std::time::Duration::from_secs(3600)).unwrap();
/// let store = MyStore { options: StoreOptions::new(retention) }
///     .with_lease(std::time::Duration::from_secs(5));
/// assert_eq!(store.options.lease, std::time::Duration::from_secs(5));
/// ```
#[macro_export]
macro_rules! store_options_builders {
    ($field:ident) => {
        /// Keeps marks for `retention` instead of the one the store was built with (the HTTP
        /// door's keys, kept for their own retention on the store the settings chose).
        pub fn with_retention(mut self, retention: $crate::Retention) -> Self {
            self.$field.retention = retention;
            self
        }

        /// The longest lease a claim takes (default
        /// [`DEFAULT_LEASE`](lambda_dedup::store::DEFAULT_LEASE)); it is also cut to the
        /// claim's deadline.
        pub fn with_lease(mut self, lease: ::std::time::Duration) -> Self {
            self.$field.lease = lease;
            self
        }

        /// The largest result stored, in bytes (default
        /// [`DEFAULT_MAX_RESULT_BYTES`](lambda_dedup::store::DEFAULT_MAX_RESULT_BYTES)).
        pub fn with_max_result_bytes(mut self, max: usize) -> Self {
            self.$field.max_result_bytes = max;
            self
        }

        /// The clock-skew allowance (default
        /// [`DEFAULT_CLOCK_SKEW`](lambda_dedup::store::DEFAULT_CLOCK_SKEW)): how far ahead
        /// another instance's clock may run without taking over a live lease.
        pub fn with_clock_skew(mut self, skew: ::std::time::Duration) -> Self {
            self.$field.clock_skew = skew;
            self
        }

        /// Reads "now" from `clock` (tests move time with a
        /// [`ManualClock`](lambda_dedup::ManualClock) to expire leases and TTLs).
        pub fn with_clock(mut self, clock: ::std::sync::Arc<dyn $crate::clock::Clock>) -> Self {
            self.$field.clock = clock;
            self
        }
    };
}

/// The seals of the object-safe store traits: each is implemented only over its `…Impl` form,
/// so the blanket impls are the only impls of [`MarkStore`], [`SequenceStore`],
/// [`CreateOnceStore`], [`LatestStore`] (`items` seals its `ItemStore` the same way).
pub(crate) mod sealed {
    use super::{CreateOnceStoreImpl, LatestStoreImpl, MarkStoreImpl, SequenceStoreImpl};

    pub trait MarkStore<E> {}
    pub trait SequenceStore {}
    pub trait CreateOnceStore {}
    pub trait LatestStore {}

    impl<E: 'static, S: MarkStoreImpl<E>> MarkStore<E> for S {}
    impl<S: SequenceStoreImpl> SequenceStore for S {}
    impl<S: CreateOnceStoreImpl> CreateOnceStore for S {}
    impl<S: LatestStoreImpl> LatestStore for S {}
}

/// A boxed future of a store operation (boxed so the trait is object-safe: a flow holds any
/// store behind one pointer).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A boxed future of a batch commit: one result per request.
pub type BatchFuture<'a> =
    Pin<Box<dyn Future<Output = Vec<Result<Commit, StoreError>>> + Send + 'a>>;

/// One event to commit: its mark and its effects (of the store's effect type `E`), all or
/// nothing (S5).
#[derive(Debug)]
pub struct CommitRequest<'a, E = Effect> {
    /// The event's key.
    pub key: &'a DedupKey,
    /// Its fingerprint (S11).
    pub fingerprint: Option<&'a Fingerprint>,
    /// The result to store with the mark (S8).
    pub result: Option<&'a str>,
    /// Its effects.
    pub effects: &'a [E],
}

// By hand: a derive would require `E: Copy`, and a request only borrows its effects.
impl<E> Clone for CommitRequest<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for CommitRequest<'_, E> {}

/// Where marks are kept, committing effects of type `E` with them (the store's own; DynamoDB
/// writes by default): the object-safe form, which flows and handlers hold
/// (`Arc<dyn MarkStore>`) and call. A store does not implement it: it implements
/// [`MarkStoreImpl`] and gets this by the blanket impl. See the module documentation for the
/// promises every implementation keeps; each method's documentation says what it returns.
///
/// It is sealed: implemented directly, a store does not compile (write the same operations as
/// `async fn`s of [`MarkStoreImpl`], whose example is a whole store).
///
/// ```compile_fail,E0277
/// use std::time::SystemTime;
/// use lambda_dedup::store::{BatchFuture, StoreFuture, StoreOptions};
/// use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, Fingerprint, Lease, Mark, MarkStore};
///
/// #[derive(Debug)]
/// struct Boxed(StoreOptions);
///
/// impl MarkStore<String> for Boxed {
///     fn claim<'a>(
///         &'a self,
///         _: &'a DedupKey,
///         _: Option<&'a Fingerprint>,
///         _: Option<SystemTime>,
///     ) -> StoreFuture<'a, Claim> {
///         unimplemented!()
///     }
///     fn commit<'a>(&'a self, _: CommitRequest<'a, String>) -> StoreFuture<'a, Commit> {
///         unimplemented!()
///     }
///     fn commit_batch<'a>(&'a self, _: &'a [CommitRequest<'a, String>]) -> BatchFuture<'a> {
///         unimplemented!()
///     }
///     fn commit_batch_bounded<'a>(
///         &'a self,
///         _: &'a [CommitRequest<'a, String>],
///         _: usize,
///     ) -> BatchFuture<'a> {
///         unimplemented!()
///     }
///     fn get_many<'a>(&'a self, _: &'a [&'a DedupKey]) -> StoreFuture<'a, Vec<Option<Mark>>> {
///         unimplemented!()
///     }
///     fn complete<'a>(&'a self, _: &'a Lease, _: Option<&'a str>) -> StoreFuture<'a, ()> {
///         unimplemented!()
///     }
///     fn release<'a>(&'a self, _: &'a Lease) -> StoreFuture<'a, ()> {
///         unimplemented!()
///     }
///     fn get<'a>(&'a self, _: &'a DedupKey) -> StoreFuture<'a, Option<Mark>> {
///         unimplemented!()
///     }
///     fn options(&self) -> &StoreOptions {
///         &self.0
///     }
/// }
/// ```
pub trait MarkStore<E = Effect>: sealed::MarkStore<E> + Send + Sync + fmt::Debug {
    /// Claims `key` under a lease (S4, S6) that runs for the store's lease duration, cut to
    /// `deadline`. [`Claim::Seen`] says what stood in the way: a duplicate with its stored
    /// result, a live claim, or a conflict (S8, S11). A lease that ran out may be taken over;
    /// the takeover's [`Lease::first_attempt_at`] is the first claim's.
    fn claim<'a>(
        &'a self,
        key: &'a DedupKey,
        fp: Option<&'a Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> StoreFuture<'a, Claim>;

    /// Commits the completed mark with the request's effects, all or nothing (S5). An effect
    /// whose condition fails is [`Commit::EffectRejected`]; writes refused as they are
    /// (malformed, wrong types, over a size limit) are [`StoreError::Refused`].
    fn commit<'a>(&'a self, request: CommitRequest<'a, E>) -> StoreFuture<'a, Commit>;

    /// Commits every request, each atomically with its own effects, with the same result per
    /// request as [`commit`](Self::commit) would give: one request's refusal or failed condition
    /// never fails another (S12); only a transient fault may fail several.
    fn commit_batch<'a>(&'a self, requests: &'a [CommitRequest<'a, E>]) -> BatchFuture<'a>;

    /// Like [`commit_batch`](Self::commit_batch), with up to `max_in_flight` of its
    /// transactions in flight at once; transactions in flight together never write the same
    /// item. Stores that commit a batch in one step ignore the bound.
    fn commit_batch_bounded<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a, E>],
        max_in_flight: usize,
    ) -> BatchFuture<'a>;

    /// The live marks of `keys` (strongly consistent), one answer per key, in order; `None`
    /// for a key with no live mark. A read only: it may filter known duplicates out of a
    /// batch's writes, never decide that an event is new (S4: the conditional write does).
    fn get_many<'a>(&'a self, keys: &'a [&'a DedupKey]) -> StoreFuture<'a, Vec<Option<Mark>>>;

    /// Completes a claim with `result` (S6), only while `lease` owns it; otherwise
    /// [`StoreError::Fenced`] and nothing changes. Completing twice with one lease is harmless.
    fn complete<'a>(&'a self, lease: &'a Lease, result: Option<&'a str>) -> StoreFuture<'a, ()>;

    /// Ends a claim's lease at once, keeping the mark (and its first attempt's time, S16), only
    /// while `lease` owns it; otherwise [`StoreError::Fenced`]. Releasing twice is harmless.
    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()>;

    /// The live mark of `key` (strongly consistent), or `None`; a mark past its TTL is `None`.
    fn get<'a>(&'a self, key: &'a DedupKey) -> StoreFuture<'a, Option<Mark>>;

    /// What the store is configured with: retention, lease, result bound and clock. The
    /// getters below read it.
    fn options(&self) -> &StoreOptions;

    /// The store's "now": the clock its TTLs and leases are written and judged by.
    fn now(&self) -> SystemTime {
        self.options().now()
    }

    /// How long marks are kept (S9).
    fn retention(&self) -> Retention {
        self.options().retention
    }

    /// The largest result [`complete`](Self::complete) and [`commit`](Self::commit) store.
    fn max_result_bytes(&self) -> usize {
        self.options().max_result_bytes
    }

    /// The completed mark a successful commit of these arguments writes as of now, for a warm
    /// cache to remember.
    fn written_mark(&self, key: &DedupKey, fp: Option<&Fingerprint>, result: Option<&str>) -> Mark {
        let now = self.now();
        Mark {
            key: key.clone(),
            status: MarkStatus::Completed,
            owner: None,
            lease_expires_at: None,
            expires_at: now + self.retention().duration(),
            fingerprint: fp.cloned(),
            result: result.map(str::to_owned),
            first_seen_at: now,
            completed_at: Some(now),
        }
    }

    /// How old an event of `event_time` is by the store's clock, when that is beyond the
    /// retention window: the mark table can no longer judge it (S10).
    fn beyond_retention(&self, event_time: SystemTime) -> Option<Duration> {
        let age = self.now().duration_since(event_time).ok()?;
        (age >= self.retention().duration()).then_some(age)
    }

    /// How far ahead of the store's clock `event_time` is, when it is ahead.
    fn ahead_of_clock(&self, event_time: SystemTime) -> Option<Duration> {
        event_time.duration_since(self.now()).ok()
    }
}

/// What a store implements to be a [`MarkStore`]: the same operations as plain `async fn`s
/// (their futures `Send`), with the promises and answers [`MarkStore`]'s methods document. The
/// blanket impl below boxes them; nothing else names this trait. Each method's borrows share
/// one lifetime, as in [`MarkStore`], so a store that forwards to an `Arc<dyn MarkStore>` can
/// return its boxed future as it is; a store may write them elided (`&self, key: &DedupKey`).
///
/// ```
/// use std::time::SystemTime;
/// use lambda_dedup::store::{MarkStoreImpl, StoreOptions};
/// use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, Fingerprint, Lease, Mark, StoreError};
///
/// #[derive(Debug)]
/// struct Nowhere(StoreOptions);
///
/// impl MarkStoreImpl<String> for Nowhere {
///     async fn claim(
///         &self,
///         _: &DedupKey,
///         _: Option<&Fingerprint>,
///         _: Option<SystemTime>,
///     ) -> Result<Claim, StoreError> {
///         Err(StoreError::Invalid("nowhere".into()))
///     }
///     async fn commit(&self, _: CommitRequest<'_, String>) -> Result<Commit, StoreError> {
///         Ok(Commit::Applied)
///     }
///     async fn commit_batch(
///         &self,
///         r: &[CommitRequest<'_, String>],
///     ) -> Vec<Result<Commit, StoreError>> {
///         r.iter().map(|_| Ok(Commit::Applied)).collect()
///     }
///     async fn complete(&self, _: &Lease, _: Option<&str>) -> Result<(), StoreError> {
///         Ok(())
///     }
///     async fn release(&self, _: &Lease) -> Result<(), StoreError> {
///         Ok(())
///     }
///     async fn get(&self, _: &DedupKey) -> Result<Option<Mark>, StoreError> {
///         Ok(None)
///     }
///     fn options(&self) -> &StoreOptions {
///         &self.0
///     }
/// }
///
/// // Held and called as the object-safe trait.
/// let store: std::sync::Arc<dyn lambda_dedup::MarkStore<String>> = std::sync::Arc::new(
///     Nowhere(StoreOptions::new(
///         lambda_dedup::Retention::unchecked(std::time::Duration::from_secs(3600)).unwrap(),
///     )),
/// );
/// # let _ = store;
/// ```
pub trait MarkStoreImpl<E = Effect>: Send + Sync + fmt::Debug {
    /// [`MarkStore::claim`].
    fn claim<'a>(
        &'a self,
        key: &'a DedupKey,
        fp: Option<&'a Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// [`MarkStore::commit`].
    fn commit<'a>(
        &'a self,
        request: CommitRequest<'a, E>,
    ) -> impl Future<Output = Result<Commit, StoreError>> + Send;

    /// [`MarkStore::commit_batch`].
    fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a, E>],
    ) -> impl Future<Output = Vec<Result<Commit, StoreError>>> + Send;

    /// [`MarkStore::commit_batch_bounded`]; by default the bound is ignored (the batch is
    /// committed in one step).
    fn commit_batch_bounded<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a, E>],
        max_in_flight: usize,
    ) -> impl Future<Output = Vec<Result<Commit, StoreError>>> + Send {
        let _ = max_in_flight;
        self.commit_batch(requests)
    }

    /// [`MarkStore::get_many`]; by default one [`get`](Self::get) per key, in turn.
    fn get_many<'a>(
        &'a self,
        keys: &'a [&'a DedupKey],
    ) -> impl Future<Output = Result<Vec<Option<Mark>>, StoreError>> + Send {
        async move {
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                out.push(self.get(key).await?);
            }
            Ok(out)
        }
    }

    /// [`MarkStore::complete`].
    fn complete<'a>(
        &'a self,
        lease: &'a Lease,
        result: Option<&'a str>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// [`MarkStore::release`].
    fn release<'a>(
        &'a self,
        lease: &'a Lease,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// [`MarkStore::get`].
    fn get<'a>(
        &'a self,
        key: &'a DedupKey,
    ) -> impl Future<Output = Result<Option<Mark>, StoreError>> + Send;

    /// [`MarkStore::options`].
    fn options(&self) -> &StoreOptions;
}

impl<E: 'static, S: MarkStoreImpl<E>> MarkStore<E> for S {
    fn claim<'a>(
        &'a self,
        key: &'a DedupKey,
        fp: Option<&'a Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> StoreFuture<'a, Claim> {
        Box::pin(MarkStoreImpl::claim(self, key, fp, deadline))
    }

    fn commit<'a>(&'a self, request: CommitRequest<'a, E>) -> StoreFuture<'a, Commit> {
        Box::pin(MarkStoreImpl::commit(self, request))
    }

    fn commit_batch<'a>(&'a self, requests: &'a [CommitRequest<'a, E>]) -> BatchFuture<'a> {
        Box::pin(MarkStoreImpl::commit_batch(self, requests))
    }

    fn commit_batch_bounded<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a, E>],
        max_in_flight: usize,
    ) -> BatchFuture<'a> {
        Box::pin(MarkStoreImpl::commit_batch_bounded(
            self,
            requests,
            max_in_flight,
        ))
    }

    fn get_many<'a>(&'a self, keys: &'a [&'a DedupKey]) -> StoreFuture<'a, Vec<Option<Mark>>> {
        Box::pin(MarkStoreImpl::get_many(self, keys))
    }

    fn complete<'a>(&'a self, lease: &'a Lease, result: Option<&'a str>) -> StoreFuture<'a, ()> {
        Box::pin(MarkStoreImpl::complete(self, lease, result))
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        Box::pin(MarkStoreImpl::release(self, lease))
    }

    fn get<'a>(&'a self, key: &'a DedupKey) -> StoreFuture<'a, Option<Mark>> {
        Box::pin(MarkStoreImpl::get(self, key))
    }

    fn options(&self) -> &StoreOptions {
        MarkStoreImpl::options(self)
    }
}

/// Capability: sequence mode ([`crate::sequence`]), for a store of [`Effect`]s that writes an
/// effect and its aggregate's high-water in one conditional update of the effect item. A flow
/// of sequence mode takes `dyn SequenceStore`, so a store without it cannot be given one. The
/// object-safe form; a store implements [`SequenceStoreImpl`].
pub trait SequenceStore: sealed::SequenceStore + MarkStore<Effect> {
    /// The write's effect and the aggregate's new high-water in one conditional update of the
    /// effect item, no mark, no transaction. Judged with [`crate::sequence::judge`] from the
    /// item as it stood when the condition failed.
    fn apply_in_sequence<'a>(
        &'a self,
        write: SequencedWrite<'a>,
    ) -> StoreFuture<'a, SequenceOutcome>;
}

/// What a store implements to be a [`SequenceStore`], with a plain `async fn`.
pub trait SequenceStoreImpl: MarkStoreImpl<Effect> {
    /// [`SequenceStore::apply_in_sequence`].
    fn apply_in_sequence<'a>(
        &'a self,
        write: SequencedWrite<'a>,
    ) -> impl Future<Output = Result<SequenceOutcome, StoreError>> + Send;
}

impl<S: SequenceStoreImpl> SequenceStore for S {
    fn apply_in_sequence<'a>(
        &'a self,
        write: SequencedWrite<'a>,
    ) -> StoreFuture<'a, SequenceOutcome> {
        Box::pin(SequenceStoreImpl::apply_in_sequence(self, write))
    }
}

/// Capability: create-once mode ([`crate::create_once`]), for a store of [`Effect`]s whose
/// effect item can be its own mark. A flow of create-once mode takes `dyn CreateOnceStore`, so
/// a store without it cannot be given one. The object-safe form; a store implements
/// [`CreateOnceStoreImpl`].
pub trait CreateOnceStore: sealed::CreateOnceStore + MarkStore<Effect> {
    /// The effect's item, carrying the event's key, fingerprint and result, in one conditional
    /// `Put` that no item with its key exists — the item is the mark; no mark item, no
    /// transaction. A failed condition is judged with [`crate::create_once::judge`] from the
    /// item as it stood: [`Commit::Seen`] with a duplicate (its stored result) or a conflict
    /// (S8, S11), or [`Commit::EffectRejected`].
    fn create_once<'a>(&'a self, write: CreateOnce<'a>) -> StoreFuture<'a, Commit>;
}

/// What a store implements to be a [`CreateOnceStore`], with a plain `async fn`.
pub trait CreateOnceStoreImpl: MarkStoreImpl<Effect> {
    /// [`CreateOnceStore::create_once`].
    fn create_once<'a>(
        &'a self,
        write: CreateOnce<'a>,
    ) -> impl Future<Output = Result<Commit, StoreError>> + Send;
}

impl<S: CreateOnceStoreImpl> CreateOnceStore for S {
    fn create_once<'a>(&'a self, write: CreateOnce<'a>) -> StoreFuture<'a, Commit> {
        Box::pin(CreateOnceStoreImpl::create_once(self, write))
    }
}

/// Capability: latest-wins mode ([`crate::latest`]), for a store of [`Effect`]s that keeps an
/// object's high-water sequencer as an item of its own and commits it with the event's mark and
/// effects in one transaction. A flow of latest-wins mode takes `dyn LatestStore`, so a store
/// without it cannot be given one. The object-safe form; a store implements
/// [`LatestStoreImpl`].
#[diagnostic::on_unimplemented(
    message = "the store `{Self}` keeps no per-object high-water (latest-wins mode)",
    note = "latest-wins mode (the S3 door) needs the DynamoDB or the memory store"
)]
pub trait LatestStore: sealed::LatestStore + MarkStore<Effect> {
    /// The table the high-water items live in (the DynamoDB store's mark table), keyed by
    /// [`crate::latest::HIGH_WATER_KEY`].
    fn high_water_table(&self) -> &str;

    /// `request` committed with `write`'s high-water update as its last effect, in one
    /// transaction: [`Latest::Superseded`] when the stored sequencer is at or above the
    /// event's (nothing written), else the commit's own answer. A seen mark (a redelivery)
    /// answers before the high-water, as the store judges the mark first.
    fn commit_latest<'a>(
        &'a self,
        request: CommitRequest<'a>,
        write: LatestWrite<'a>,
    ) -> StoreFuture<'a, Latest>;
}

/// What a store implements to be a [`LatestStore`]: where its high-water items live; the
/// commit is written once here, over the store's [`MarkStoreImpl::commit`].
pub trait LatestStoreImpl: MarkStoreImpl<Effect> {
    /// [`LatestStore::high_water_table`].
    fn high_water_table(&self) -> &str;

    /// [`LatestStore::commit_latest`].
    fn commit_latest<'a>(
        &'a self,
        request: CommitRequest<'a>,
        write: LatestWrite<'a>,
    ) -> impl Future<Output = Result<Latest, StoreError>> + Send {
        async move {
            if request.effects.len() >= MAX_EFFECTS {
                return Err(StoreError::Invalid(format!(
                    "latest-wins mode takes at most {} effects",
                    MAX_EFFECTS - 1
                )));
            }
            let options = self.options();
            let expires_at = options.now() + options.retention.duration();
            let mut effects = request.effects.to_vec();
            effects.push(write.to_effect(self.high_water_table(), expires_at));
            let high_water = effects.len() - 1;
            let committed = self
                .commit(CommitRequest {
                    effects: &effects,
                    ..request
                })
                .await?;
            Ok(match committed {
                Commit::EffectRejected { index } if index == high_water => Latest::Superseded,
                other => Latest::Committed(other),
            })
        }
    }
}

impl<S: LatestStoreImpl> LatestStore for S {
    fn high_water_table(&self) -> &str {
        LatestStoreImpl::high_water_table(self)
    }

    fn commit_latest<'a>(
        &'a self,
        request: CommitRequest<'a>,
        write: LatestWrite<'a>,
    ) -> StoreFuture<'a, Latest> {
        Box::pin(LatestStoreImpl::commit_latest(self, request, write))
    }
}

impl SequencedWrite<'_> {
    /// [`SequencedWrite::to_effect`], or the [`StoreError::Invalid`] every store answers when the
    /// effect is not an update.
    pub fn effect_to_send(&self) -> Result<Effect, StoreError> {
        self.to_effect().ok_or_else(|| {
            StoreError::Invalid("sequence mode needs an update of the aggregate's item".into())
        })
    }
}

impl CreateOnce<'_> {
    /// [`CreateOnce::to_effect`] as of `now`, or the [`StoreError::Invalid`] every store answers
    /// when the effect is not a `Put` or uses one of the library's attributes.
    pub fn effect_to_send(&self, now: SystemTime) -> Result<Effect, StoreError> {
        self.to_effect(now).ok_or_else(|| {
            StoreError::Invalid(
                "create-once needs a put of an item without the library's attributes".into(),
            )
        })
    }
}

/// Why the store could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Throttling or exceeded provisioned throughput.
    Throttled,
    /// A transaction was cancelled because another one touched the same item.
    TransactionConflict,
    /// No answer in time.
    Timeout,
    /// The connection failed or broke.
    Network,
    /// The service answered with a server error (5xx).
    ServerError,
    /// The request was refused (validation, access, missing table): retrying will not help.
    /// When the refusal is of one event's own writes, the error is [`StoreError::Refused`],
    /// which carries this kind too.
    Refused,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::Throttled => "throttled",
            FaultKind::TransactionConflict => "transaction conflict",
            FaultKind::Timeout => "timeout",
            FaultKind::Network => "network",
            FaultKind::ServerError => "server error",
            FaultKind::Refused => "refused",
        })
    }
}

/// An error of a mark store. None of these means "processed": the caller must not acknowledge
/// the message (S13).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The lease no longer owns the claim: it expired and another process took the event over, or
    /// the claim was released (S6 fencing). `current` is the mark as it now stands.
    #[error("fenced: this lease no longer owns {key}")]
    Fenced {
        /// The key.
        key: DedupKey,
        /// The mark as it now stands, if any.
        current: Option<Box<Mark>>,
    },
    /// The store could not be used.
    #[error("mark store {kind}: {message}")]
    Store {
        /// What kind of fault.
        kind: FaultKind,
        /// The store's description.
        message: String,
    },
    /// A conditional write failed, yet the old item it returned does not explain it (it changed
    /// in between). Transient: retry.
    #[error("the mark for {0} changed while it was being written")]
    Contended(DedupKey),
    /// The store refused one event's own writes as they are: a permanent reason at one of the
    /// event's positions in a transaction (DynamoDB's `ValidationError`), or a refusal of a
    /// request that held only this event's writes (a malformed expression, an item or a
    /// transaction over its size limit). Nothing was written. Permanent (S15): the same writes
    /// are refused again, so the event is the one to dead-letter, and no other event of a shared
    /// transaction is blamed for it (S12). Only the error code is kept: a message may quote
    /// values (S3).
    #[error("the store refused the writes of {key}: {code}{}", at_position(.position))]
    Refused {
        /// The event's key.
        key: DedupKey,
        /// The refusal's code (`ValidationError`, `ValidationException`, …).
        code: String,
        /// The refused write among the event's own, when the store named one: 0 is the mark,
        /// 1.. the effects.
        position: Option<usize>,
    },
    /// The request is invalid (too many effects, result too large, no time left for a lease).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A stored mark could not be decoded.
    #[error("stored mark {key} is malformed: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

impl StoreError {
    /// Whether the same call may succeed later (SQS redelivery is the usual retry).
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Store { kind, .. } => *kind != FaultKind::Refused,
            StoreError::Contended(_) => true,
            StoreError::Fenced { .. }
            | StoreError::Refused { .. }
            | StoreError::Invalid(_)
            | StoreError::Corrupt { .. } => false,
        }
    }

    /// The fault kind, for store errors ([`FaultKind::Refused`] for [`StoreError::Refused`]).
    pub fn fault_kind(&self) -> Option<FaultKind> {
        match self {
            StoreError::Store { kind, .. } => Some(*kind),
            StoreError::Refused { .. } => Some(FaultKind::Refused),
            _ => None,
        }
    }

    /// A [`StoreError::Store`] of `kind`.
    pub fn store(kind: FaultKind, message: impl Into<String>) -> Self {
        StoreError::Store {
            kind,
            message: message.into(),
        }
    }
}

fn at_position(position: &Option<usize>) -> String {
    match position {
        Some(0) => " (the mark)".into(),
        Some(p) => format!(" (effect {})", p - 1),
        None => String::new(),
    }
}
