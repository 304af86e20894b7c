//! A function's own tables, outside the mark table: the items a relay settles (intents, an
//! inbox), the correlation items a function reads back. [`ItemStore`] is the seam between that
//! code and a store, as [`crate::MarkStore`] is for marks: implemented on DynamoDB
//! (`lambda-dedup-dynamodb`'s `DynamoItems`) and in memory (`lambda-dedup-memory`'s
//! `MemoryStore`, on the same tables its effects write), so a function's tests run on the memory
//! store with the wiring `main` runs.
//!
//! Every implementation keeps these promises:
//! - [`ItemStore::write`] writes its effects all or nothing, each judged on its condition; a
//!   condition that fails is an answer (`Ok(false)`, nothing written), not an error;
//! - [`ItemStore::read`] and [`ItemStore::scan`] read strongly consistently: what a write
//!   answered before them is what they see;
//! - a fault is a typed [`StoreError`] ([`StoreError::is_retryable`]), never a silent miss.
//!
//! A store implements [`ItemStoreImpl`] with plain `async fn`s; the blanket impl gives it the
//! object-safe [`ItemStore`] that callers hold, as for [`crate::store::MarkStoreImpl`].

use std::future::Future;
use std::pin::Pin;

use crate::effect::{Effect, Item, Value};
use crate::store::StoreError;

/// A boxed future of an item operation (boxed so the trait is object-safe).
pub type ItemFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Which items a [`ItemStore::scan`] keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// The string attribute `.0` holds `.1` (`status = PENDING`).
    Equals(String, String),
    /// The item has no attribute `.0` (not yet forwarded).
    Missing(String),
}

impl Filter {
    /// Whether `item` is kept.
    pub fn keeps(&self, item: &Item) -> bool {
        match self {
            Filter::Equals(name, value) => text(item, name) == Some(value.as_str()),
            Filter::Missing(name) => !item.0.contains_key(name),
        }
    }
}

/// The string attribute `name` of `item`, if it is one.
pub fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.0.get(name) {
        Some(Value::S(s)) => Some(s),
        _ => None,
    }
}

/// The number attribute `name` of `item` as an integer, if it is one.
pub fn number(item: &Item, name: &str) -> Option<u64> {
    match item.0.get(name) {
        Some(Value::N(n)) => n.parse().ok(),
        _ => None,
    }
}

/// Where a function's own items are kept: the object-safe form, which a function holds
/// (`Arc<dyn ItemStore>`) and calls. A store implements [`ItemStoreImpl`] and gets this by the
/// blanket impl; it is sealed, so that is the only way. See the module documentation for the promises every implementation keeps.
pub trait ItemStore: sealed::ItemStore + Send + Sync + std::fmt::Debug {
    /// Writes `effects` (1 to 100) all or nothing, with no mark: bookkeeping that is idempotent
    /// by its own conditions (an intent confirmed only while it is pending). `Ok(false)` when a
    /// condition failed and nothing was written.
    fn write<'a>(&'a self, effects: &'a [Effect]) -> ItemFuture<'a, bool>;

    /// The item at `key` in `table`, read strongly consistently, or `None`.
    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> ItemFuture<'a, Option<Item>>;

    /// Every item of `table` that `filter` keeps, read strongly consistently, page by page: for
    /// sweeps over small tables, not for the hot path.
    fn scan<'a>(&'a self, table: &'a str, filter: &'a Filter) -> ItemFuture<'a, Vec<Item>>;
}

/// The seal of [`ItemStore`]: implemented only over [`ItemStoreImpl`], so the blanket impl is
/// the only impl.
mod sealed {
    pub trait ItemStore {}

    impl<S: super::ItemStoreImpl> ItemStore for S {}
}

/// What a store implements to be an [`ItemStore`]: the same operations as plain `async fn`s
/// (their futures `Send`), with the promises [`ItemStore`]'s methods document.
pub trait ItemStoreImpl: Send + Sync + std::fmt::Debug {
    /// [`ItemStore::write`].
    fn write<'a>(
        &'a self,
        effects: &'a [Effect],
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// [`ItemStore::read`].
    fn read<'a>(
        &'a self,
        table: &'a str,
        key: &'a Item,
    ) -> impl Future<Output = Result<Option<Item>, StoreError>> + Send;

    /// [`ItemStore::scan`].
    fn scan<'a>(
        &'a self,
        table: &'a str,
        filter: &'a Filter,
    ) -> impl Future<Output = Result<Vec<Item>, StoreError>> + Send;
}

impl<S: ItemStoreImpl> ItemStore for S {
    fn write<'a>(&'a self, effects: &'a [Effect]) -> ItemFuture<'a, bool> {
        Box::pin(ItemStoreImpl::write(self, effects))
    }

    fn read<'a>(&'a self, table: &'a str, key: &'a Item) -> ItemFuture<'a, Option<Item>> {
        Box::pin(ItemStoreImpl::read(self, table, key))
    }

    fn scan<'a>(&'a self, table: &'a str, filter: &'a Filter) -> ItemFuture<'a, Vec<Item>> {
        Box::pin(ItemStoreImpl::scan(self, table, filter))
    }
}
