//! The stores the builder runs on, as types: [`Dedup`](crate::Dedup) is generic over its store,
//! so a builder without one has no services (a compile error, not a run-time refusal), and a
//! mode a store cannot do is a method its builder does not have.
//!
//! | store | chosen with | effects committed with the mark | create-once, sequence |
//! | --- | --- | --- | --- |
//! | DynamoDB (`OnDynamoDb`, feature `dynamodb`) | `.dynamodb().await` | [`Effect`]s, one `TransactWriteItems` | yes |
//! | memory (feature `memory`) | `.store(MemoryStore)` (tests) | [`Effect`]s, all or nothing | yes |
//! | memory, any effect type (`Recording`) | `.on(Recording)` (tests) | recorded, not executed | no |
//! | any [`Marks`] of your own | `.on(store)` | its [`Marks::Effect`] | if it implements [`CreateOnceMarks`] |
//! | PostgreSQL (feature `postgres`) | `.postgres()?` | `SqlEffect`s, one SQL transaction | no |
//! | Valkey (feature `valkey`) | `.valkey()?` | `ValkeyEffect`s, one server-side script | no |
//!
//! DynamoDB and memory are both [`Items`], the builder's default store type, so a function's
//! `service(dedup: Dedup)` runs on DynamoDB in `main` and on memory in its tests. Both also hold
//! the function's own tables as items ([`ItemTables`]: `DynamoItems` on the same client, or the
//! memory store's tables), where a relay's items — each its own mark — live.
//!
//! The leased external call ([`crate::flow::calls`]) and every guard — the retention checked against the
//! redelivery horizon at start (S9), the deadline cutoff, late events to reconciliation (S10),
//! the EMF account (S14) — are the same on each.

use std::sync::Arc;

use lambda_dedup::{CreateOnceStore, Effect, ItemStore, LatestStore, MarkStore, SequenceStore};

#[cfg(feature = "dynamodb")]
use crate::aws::FromSettings as _;
use crate::config::{Settings, SettingsError};

/// A store the builder's services run on: where the marks of the function's mark table live,
/// and what kind of effect ([`Marks::Effect`]) commits atomically with them.
pub trait Marks: Send + Sync + 'static {
    /// The effects this store commits with a mark in one atomic step: [`Effect`] (DynamoDB
    /// items) for DynamoDB and memory, SQL statements for PostgreSQL, commands for Valkey.
    type Effect: Send + Sync + 'static;

    /// The mark store of a service built with `settings` (on DynamoDB, the mark table
    /// `DEDUP_MARK_TABLE` names, required then).
    fn mark_store(
        &self,
        settings: &Settings,
    ) -> Result<Arc<dyn MarkStore<Self::Effect>>, SettingsError>;
}

/// Capability: an item created once per event is its own mark (create-once mode: one
/// conditional `Put`, no mark item). DynamoDB and memory have it; asking a store without it for
/// [`crate::flow::create_once`] or `webhook` does not compile. Its stores are the core's
/// [`CreateOnceStore`]s, which the create-once flow takes.
pub trait CreateOnceMarks: Marks<Effect = Effect> {
    /// [`Marks::mark_store`] with create-once mode: the store of a service built with
    /// `settings` (on DynamoDB, on the mark table `DEDUP_MARK_TABLE` names, required then).
    fn create_once_marks(
        &self,
        settings: &Settings,
    ) -> Result<Arc<dyn CreateOnceStore>, SettingsError>;

    /// The store whose marks are the items of `table` that create-once mode writes (a webhook
    /// receiver's inbox): no mark table is read.
    fn create_once_store(&self, settings: &Settings, table: &str) -> Arc<dyn CreateOnceStore>;
}

/// Capability: an aggregate's item keeps its high-water sequence, so one conditional write is
/// both the effect and the mark (sequence mode, [`crate::flow::sequence`]). DynamoDB and memory
/// have it; asking a store without it for the flow does not compile.
pub trait SequenceMarks: Marks<Effect = Effect> {
    /// The sequence store of a service built with `settings`.
    fn sequence_marks(&self, settings: &Settings) -> Result<Arc<dyn SequenceStore>, SettingsError>;
}

/// Capability: the function's own tables as items (the core's [`ItemStore`]: conditional
/// writes, consistent reads, scans), through the store's own connection. A relay's items live
/// there, each its own mark (its settle status), so a relay needs no mark table
/// ([`Dedup::relay`](crate::Dedup::relay)). DynamoDB (`DynamoItems`) and memory have it.
pub trait ItemTables: Marks {
    /// The tables, as items.
    fn item_store(&self) -> Arc<dyn ItemStore>;
}

/// Capability: an object's high-water sequencer is an item committed with each event's mark and
/// effects, so an event older than one applied for its object is superseded (latest-wins mode,
/// [`crate::flow::latest_wins`], the S3 door). DynamoDB and memory have it; asking a store
/// without it for the flow does not compile.
#[diagnostic::on_unimplemented(
    message = "the store `{Self}` keeps no per-object high-water (latest-wins mode)",
    note = "latest_wins and the S3 door need the DynamoDB or the memory store"
)]
pub trait LatestMarks: Marks<Effect = Effect> {
    /// The latest-wins store of a service built with `settings`.
    fn latest_marks(&self, settings: &Settings) -> Result<Arc<dyn LatestStore>, SettingsError>;
}

/// Every capability of a store of item effects: what [`Items`] holds.
pub trait ItemMarks: CreateOnceMarks + SequenceMarks + LatestMarks + ItemTables {}

impl<M: CreateOnceMarks + SequenceMarks + LatestMarks + ItemTables> ItemMarks for M {}

/// A store of item effects ([`Effect`]) with every capability, whichever it is: DynamoDB in
/// `main`, the memory store in tests. The builder's default (`Dedup` is `Dedup<Items>`), so a
/// function's `service(dedup: Dedup)` runs on either.
#[derive(Clone)]
pub struct Items(Arc<dyn ItemMarks>);

impl Items {
    /// `store`, its type forgotten.
    pub fn new(store: impl ItemMarks) -> Self {
        Self(Arc::new(store))
    }
}

impl std::fmt::Debug for Items {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Items")
    }
}

impl Marks for Items {
    type Effect = Effect;

    fn mark_store(&self, settings: &Settings) -> Result<Arc<dyn MarkStore>, SettingsError> {
        self.0.mark_store(settings)
    }
}

impl CreateOnceMarks for Items {
    fn create_once_marks(
        &self,
        settings: &Settings,
    ) -> Result<Arc<dyn CreateOnceStore>, SettingsError> {
        self.0.create_once_marks(settings)
    }

    fn create_once_store(&self, settings: &Settings, table: &str) -> Arc<dyn CreateOnceStore> {
        self.0.create_once_store(settings, table)
    }
}

impl SequenceMarks for Items {
    fn sequence_marks(&self, settings: &Settings) -> Result<Arc<dyn SequenceStore>, SettingsError> {
        self.0.sequence_marks(settings)
    }
}

#[cfg(feature = "dynamodb")]
impl SequenceMarks for OnDynamoDb {
    fn sequence_marks(&self, settings: &Settings) -> Result<Arc<dyn SequenceStore>, SettingsError> {
        Ok(Arc::new(settings.mark_store(self.0.clone())?))
    }
}

#[cfg(feature = "memory")]
impl SequenceMarks for lambda_dedup_memory::MemoryStore {
    fn sequence_marks(&self, _: &Settings) -> Result<Arc<dyn SequenceStore>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }
}

impl LatestMarks for Items {
    fn latest_marks(&self, settings: &Settings) -> Result<Arc<dyn LatestStore>, SettingsError> {
        self.0.latest_marks(settings)
    }
}

#[cfg(feature = "dynamodb")]
impl LatestMarks for OnDynamoDb {
    fn latest_marks(&self, settings: &Settings) -> Result<Arc<dyn LatestStore>, SettingsError> {
        Ok(Arc::new(settings.mark_store(self.0.clone())?))
    }
}

#[cfg(feature = "memory")]
impl LatestMarks for lambda_dedup_memory::MemoryStore {
    fn latest_marks(&self, _: &Settings) -> Result<Arc<dyn LatestStore>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }
}

impl ItemTables for Items {
    fn item_store(&self) -> Arc<dyn ItemStore> {
        self.0.item_store()
    }
}

/// No store chosen yet: a `Dedup<NoStore>` configures keys and settings but builds no service
/// until [`dynamodb`](crate::Dedup::dynamodb), [`store`](crate::Dedup::store) (or, with their
/// features, `postgres` or `valkey`) chooses one.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStore;

/// Marks in DynamoDB through the adapter's client: the mark table of the settings, or, for a
/// webhook receiver, its inbox table; a relay's items in its own table (`DynamoItems`).
#[cfg(feature = "dynamodb")]
#[derive(Debug, Clone)]
pub struct OnDynamoDb(pub(crate) lambda_dedup_dynamodb::Client);

#[cfg(feature = "dynamodb")]
impl Marks for OnDynamoDb {
    type Effect = Effect;

    fn mark_store(&self, settings: &Settings) -> Result<Arc<dyn MarkStore>, SettingsError> {
        Ok(Arc::new(settings.mark_store(self.0.clone())?))
    }
}

#[cfg(feature = "dynamodb")]
impl CreateOnceMarks for OnDynamoDb {
    fn create_once_marks(
        &self,
        settings: &Settings,
    ) -> Result<Arc<dyn CreateOnceStore>, SettingsError> {
        Ok(Arc::new(settings.mark_store(self.0.clone())?))
    }

    fn create_once_store(&self, settings: &Settings, table: &str) -> Arc<dyn CreateOnceStore> {
        Arc::new(settings.create_once_store(self.0.clone(), table))
    }
}

#[cfg(feature = "dynamodb")]
impl ItemTables for OnDynamoDb {
    fn item_store(&self) -> Arc<dyn ItemStore> {
        Arc::new(lambda_dedup_dynamodb::DynamoItems::new(self.0.clone()))
    }
}

#[cfg(feature = "memory")]
impl Marks for lambda_dedup_memory::MemoryStore {
    type Effect = Effect;

    fn mark_store(&self, _: &Settings) -> Result<Arc<dyn MarkStore>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }
}

#[cfg(feature = "memory")]
impl CreateOnceMarks for lambda_dedup_memory::MemoryStore {
    fn create_once_marks(&self, _: &Settings) -> Result<Arc<dyn CreateOnceStore>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }

    fn create_once_store(&self, _: &Settings, _: &str) -> Arc<dyn CreateOnceStore> {
        Arc::new(self.clone())
    }
}

#[cfg(feature = "memory")]
impl ItemTables for lambda_dedup_memory::MemoryStore {
    fn item_store(&self) -> Arc<dyn ItemStore> {
        Arc::new(self.clone())
    }
}

#[cfg(feature = "memory")]
impl<E: Clone + Send + Sync + std::fmt::Debug + 'static> Marks
    for lambda_dedup_memory::Recording<E>
{
    type Effect = E;

    fn mark_store(&self, _: &Settings) -> Result<Arc<dyn MarkStore<E>>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }
}

#[cfg(feature = "postgres")]
impl Marks for lambda_dedup_postgres::PgStore {
    type Effect = lambda_dedup_postgres::SqlEffect;

    fn mark_store(&self, _: &Settings) -> Result<Arc<dyn MarkStore<Self::Effect>>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }
}

#[cfg(feature = "valkey")]
impl Marks for lambda_dedup_valkey::ValkeyStore {
    type Effect = lambda_dedup_valkey::ValkeyEffect;

    fn mark_store(&self, _: &Settings) -> Result<Arc<dyn MarkStore<Self::Effect>>, SettingsError> {
        Ok(Arc::new(self.clone()))
    }
}

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "valkey")]
pub(crate) mod valkey;
