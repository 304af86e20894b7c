//! The stores the builder runs on, bound to the function's settings when chosen: the builder
//! holds the core's store traits ([`MarkStore`], and for a store of DynamoDB items
//! [`CreateOnceStore`], [`SequenceStore`], [`LatestStore`], [`ItemStore`]), so a builder without
//! a store has no services (a compile error, not a run-time refusal), and a mode a store cannot
//! do is a method its builder does not have.
//!
//! A store is chosen one way, [`Dedup::on`](crate::Dedup::on), with one of two forms (their one
//! path is this module, `lambda_dedup_runtime::store`):
//!
//! | form | what it holds | builder | stores | create-once, sequence, latest-wins, relay, webhook |
//! | --- | --- | --- | --- | --- |
//! | [`Items`] | a store of [`Effect`]s with every mode, and the function's own tables | `Dedup` | DynamoDB ([`Items::dynamodb`]), memory ([`Items::new`]) | yes |
//! | [`Store<E>`] | a [`MarkStore<E>`] | `Dedup<Store<E>>` | PostgreSQL (`SqlEffect`), Valkey (`ValkeyEffect`), `Recording<E>` (tests), your own ([`Store::new`]) | no |
//!
//! `.dynamodb().await`, `.postgres()?` and `.valkey()?` are the one-line `on` of the store their
//! settings describe. A function's `service(dedup: Dedup)` runs on DynamoDB in `main` and on
//! memory in its tests; `service(dedup: Dedup<Store<SqlEffect>>)` on PostgreSQL in `main` and
//! on a `Recording` in its tests: one signature per effect type, whatever the store.
//!
//! A store of marks only runs every flow that needs no mode of its own, whatever its effects:
//!
//! ```
//! use lambda_dedup_runtime::{Dedup, Effect, Event, store::Store, flow::calls};
//! fn f(dedup: impl Fn() -> Dedup<Store<Effect>>) {
//!     let _ = dedup().sqs(|_: Event<serde_json::Value>| Vec::<Effect>::new());
//!     let _ = dedup().sqs(calls(|_: Event<serde_json::Value>, _| async { Ok(None) }));
//! }
//! ```
//!
//! but not sequence mode (nor create-once or latest-wins mode), even of the same effects:
//!
//! ```compile_fail
//! use lambda_dedup_runtime::{Dedup, Effect, Event, store::Store, flow::sequence};
//! fn f(dedup: Dedup<Store<Effect>>) {
//!     let _ = dedup.sqs(sequence("/seq", |_: Event<serde_json::Value>| Vec::<Effect>::new()));
//! }
//! ```
//!
//! which [`Items`] has:
//!
//! ```
//! use lambda_dedup_runtime::{Dedup, Effect, Event, flow::sequence};
//! fn f(dedup: Dedup) {
//!     let _ = dedup.sqs(sequence("/seq", |_: Event<serde_json::Value>| Vec::<Effect>::new()));
//! }
//! ```
//!
//! The leased external call ([`crate::flow::calls`]) and every guard — the retention checked
//! against the redelivery horizon at start (S9), the deadline cutoff, late events to
//! reconciliation (S10), the EMF account (S14) — are the same on each.

use std::sync::Arc;

use lambda_dedup::{
    CreateOnceStore, Effect, ItemStore, LatestStore, MarkStore, Retention, SequenceStore,
};

use lambda_dedup_config::SettingsError;

/// A store chosen for the builder: [`Items`] or [`Store<E>`], nothing else (sealed). What the
/// builder's services need of either: the effect type committed with a mark, and the marks.
pub trait Marks: sealed::Sealed + Send + Sync + 'static {
    /// The effects committed with a mark in one atomic step: [`Effect`] (DynamoDB items) for
    /// DynamoDB and memory, SQL statements for PostgreSQL, commands for Valkey.
    type Effect: Send + Sync + 'static;

    /// The marks of the function's mark table; refused when the store has none (DynamoDB
    /// without `DEDUP_MARK_TABLE`).
    fn mark_store(&self) -> Result<Arc<dyn MarkStore<Self::Effect>>, SettingsError>;

    /// [`mark_store`](Self::mark_store) for a service that keeps its marks for `retention`
    /// rather than the settings' (the HTTP door's keys): the store the settings chose
    /// (DynamoDB, PostgreSQL, Valkey) kept for it; a store given with a retention of its own
    /// ([`Items::new`], [`Store::new`]) keeps that one.
    fn mark_store_kept_for(
        &self,
        retention: Retention,
    ) -> Result<Arc<dyn MarkStore<Self::Effect>>, SettingsError>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Items {}
    impl<E> Sealed for super::Store<E> {}
}

/// Every mode of a store of DynamoDB items, as one trait object.
trait Modes: CreateOnceStore + SequenceStore + LatestStore {}

impl<S: CreateOnceStore + SequenceStore + LatestStore + ?Sized> Modes for S {}

/// A store of DynamoDB items ([`Effect`]) with every mode — create-once, sequence,
/// latest-wins — and the function's own tables as items (a relay's, each item its own mark):
/// DynamoDB in `main` ([`Items::dynamodb`]), the memory store in tests ([`Items::new`]). The
/// builder's default store (`Dedup` is `Dedup<Items>`).
#[derive(Clone)]
pub struct Items(Kind);

#[derive(Clone)]
enum Kind {
    /// One store of every mode, whose create-once marks are the items it creates wherever they
    /// are (memory), and the tables.
    One {
        modes: Arc<dyn Modes>,
        items: Arc<dyn ItemStore>,
    },
    /// DynamoDB through one client, bound to the settings: the mark table's store (or why
    /// there is none), a create-once store per inbox table, the tables as `DynamoItems`.
    #[cfg(feature = "dynamodb")]
    DynamoDb {
        client: lambda_dedup_dynamodb::Client,
        settings: Box<lambda_dedup_config::Settings>,
        marks: Result<Arc<lambda_dedup_dynamodb::DynamoStore>, SettingsError>,
    },
}

impl Items {
    /// `store`'s marks, modes and tables (a `lambda_dedup_memory::MemoryStore`, configured
    /// with the settings' retention and lease as `testing::on_memory` does): its create-once
    /// marks are the items it creates, wherever they are.
    pub fn new<S>(store: S) -> Self
    where
        S: CreateOnceStore + SequenceStore + LatestStore + ItemStore + Clone + 'static,
    {
        Self::with_tables(store.clone(), Arc::new(store))
    }

    /// [`new`](Self::new) with the function's own tables in `items` (a simulation's view of
    /// them).
    pub fn with_tables<S>(store: S, items: Arc<dyn ItemStore>) -> Self
    where
        S: CreateOnceStore + SequenceStore + LatestStore + 'static,
    {
        Self(Kind::One {
            modes: Arc::new(store),
            items,
        })
    }

    /// DynamoDB through `client` (the Lambda function's, or the local DynamoDB in tests),
    /// bound to `settings`: the marks in the mark table `DEDUP_MARK_TABLE` names, kept for the
    /// checked retention (S9) under the settings' lease; the function's tables as
    /// `DynamoItems`; a webhook's inbox items as its marks. Without a mark table, a service
    /// that needs one is refused when it is built (a webhook receiver or a relay needs none).
    #[cfg(feature = "dynamodb")]
    pub fn dynamodb(
        client: impl Into<lambda_dedup_dynamodb::Client>,
        settings: &lambda_dedup_config::Settings,
    ) -> Self {
        use crate::aws::FromSettings as _;
        let client = client.into();
        Self(Kind::DynamoDb {
            marks: settings.mark_store(client.clone()).map(Arc::new),
            client,
            settings: Box::new(settings.clone()),
        })
    }

    /// The store of every mode, on the mark table.
    fn modes(&self) -> Result<Arc<dyn Modes>, SettingsError> {
        match &self.0 {
            Kind::One { modes, .. } => Ok(modes.clone()),
            #[cfg(feature = "dynamodb")]
            Kind::DynamoDb { marks, .. } => Ok(marks.clone()?),
        }
    }

    /// Create-once mode on the mark table.
    pub(crate) fn create_once(&self) -> Result<Arc<dyn CreateOnceStore>, SettingsError> {
        Ok(self.modes()?)
    }

    /// Sequence mode.
    pub(crate) fn sequence(&self) -> Result<Arc<dyn SequenceStore>, SettingsError> {
        Ok(self.modes()?)
    }

    /// Latest-wins mode.
    #[cfg(feature = "s3")]
    pub(crate) fn latest(&self) -> Result<Arc<dyn LatestStore>, SettingsError> {
        Ok(self.modes()?)
    }

    /// The store whose marks are the items of `table` that create-once mode writes (a webhook
    /// receiver's inbox): no mark table is read.
    #[cfg(any(feature = "webhook", feature = "http"))]
    pub(crate) fn inbox(&self, table: &str) -> Arc<dyn CreateOnceStore> {
        match &self.0 {
            Kind::One { modes, .. } => {
                // Its create-once marks are its items, whatever their table.
                let _ = table;
                modes.clone()
            }
            #[cfg(feature = "dynamodb")]
            Kind::DynamoDb {
                client, settings, ..
            } => {
                use crate::aws::FromSettings as _;
                Arc::new(settings.create_once_store(client.clone(), table))
            }
        }
    }

    /// The function's own tables, as items.
    #[cfg(feature = "dynamodb-streams")]
    pub(crate) fn items(&self) -> Arc<dyn ItemStore> {
        match &self.0 {
            Kind::One { items, .. } => items.clone(),
            #[cfg(feature = "dynamodb")]
            Kind::DynamoDb { client, .. } => {
                Arc::new(lambda_dedup_dynamodb::DynamoItems::new(client.clone()))
            }
        }
    }
}

impl std::fmt::Debug for Items {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::One { modes, items } => f
                .debug_struct("Items")
                .field("modes", modes)
                .field("items", items)
                .finish(),
            #[cfg(feature = "dynamodb")]
            Kind::DynamoDb { marks, .. } => f
                .debug_struct("Items")
                .field("dynamodb", marks)
                .finish_non_exhaustive(),
        }
    }
}

impl Marks for Items {
    type Effect = Effect;

    fn mark_store(&self) -> Result<Arc<dyn MarkStore>, SettingsError> {
        Ok(self.modes()?)
    }

    fn mark_store_kept_for(
        &self,
        retention: Retention,
    ) -> Result<Arc<dyn MarkStore>, SettingsError> {
        match &self.0 {
            #[cfg(feature = "dynamodb")]
            Kind::DynamoDb {
                client, settings, ..
            } => {
                use crate::aws::FromSettings as _;
                let mut settings = settings.as_ref().clone();
                settings.retention = retention;
                Ok(Arc::new(settings.mark_store(client.clone())?))
            }
            Kind::One { modes, .. } => {
                // Built with a retention of its own, which it keeps.
                let _ = retention;
                Ok(modes.clone())
            }
        }
    }
}

/// A store of effects `E` that has marks only, no other mode: PostgreSQL (`SqlEffect`),
/// Valkey (`ValkeyEffect`), a `lambda_dedup_memory::Recording` of either in tests, or a
/// [`MarkStore<E>`] of your own.
pub struct Store<E> {
    marks: Arc<dyn MarkStore<E>>,
    /// The same store kept for another retention, where it was built from the settings
    /// (`.postgres()`, `.valkey()`); `None` for a store given as it is ([`Store::new`]).
    kept_for: Option<KeptFor<E>>,
}

/// How a store the settings built is copied to keep its marks for another retention.
type KeptFor<E> = Arc<dyn Fn(Retention) -> Arc<dyn MarkStore<E>> + Send + Sync>;

impl<E> Store<E> {
    /// `store`, bound as it is (its table, retention and lease its own, the HTTP door's keys
    /// kept for that retention too).
    pub fn new(store: impl MarkStore<E> + 'static) -> Self {
        Self {
            marks: Arc::new(store),
            kept_for: None,
        }
    }

    /// `store`, bound to the settings: a service that keeps its marks for a retention of its
    /// own (the HTTP door's keys) gets `kept_for(store, retention)`.
    #[cfg(any(feature = "postgres", feature = "valkey"))]
    pub(crate) fn from_settings<S>(store: S, kept_for: fn(S, Retention) -> S) -> Self
    where
        S: MarkStore<E> + Clone + 'static,
    {
        let copy = store.clone();
        Self {
            marks: Arc::new(store),
            kept_for: Some(Arc::new(move |retention| {
                Arc::new(kept_for(copy.clone(), retention))
            })),
        }
    }
}

impl<E> Clone for Store<E> {
    fn clone(&self) -> Self {
        Self {
            marks: self.marks.clone(),
            kept_for: self.kept_for.clone(),
        }
    }
}

impl<E> std::fmt::Debug for Store<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Store").field(&self.marks).finish()
    }
}

impl<E: Send + Sync + 'static> Marks for Store<E> {
    type Effect = E;

    fn mark_store(&self) -> Result<Arc<dyn MarkStore<E>>, SettingsError> {
        Ok(self.marks.clone())
    }

    fn mark_store_kept_for(
        &self,
        retention: Retention,
    ) -> Result<Arc<dyn MarkStore<E>>, SettingsError> {
        Ok(match &self.kept_for {
            Some(kept_for) => kept_for(retention),
            // Given as it is, with a retention of its own, which it keeps.
            None => self.marks.clone(),
        })
    }
}

/// No store chosen yet: a `Dedup<NoStore>` configures keys and settings but builds no service
/// until [`on`](crate::Dedup::on) (or `dynamodb`, `postgres`, `valkey`) chooses one.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStore;

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "valkey")]
pub(crate) mod valkey;
/// The Valkey store [`Dedup::valkey`](crate::Dedup::valkey) chooses, bound to the settings:
/// what a test checks the key layout of (`ValkeyStore::mark_key`).
#[cfg(feature = "valkey")]
pub use valkey::from_settings as valkey;

#[cfg(all(test, feature = "dynamodb"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use lambda_dedup_config::{Env, Settings};

    fn client() -> lambda_dedup_dynamodb::Client {
        let conf = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("eu-west-1"))
            .build();
        lambda_dedup_dynamodb::Client::from_conf(&conf)
    }

    /// DynamoDB is bound to the settings when it is chosen: its marks kept for the settings'
    /// retention under their lease, the HTTP door's for the keys' own retention; without a mark
    /// table, a service that needs one is refused naming `DEDUP_MARK_TABLE`, while the webhook's
    /// inbox and the relay's tables need none.
    #[test]
    fn dynamodb_is_bound_to_the_settings_when_chosen() {
        let env = lambda_dedup_config::Env::from_pairs([
            ("DEDUP_NAMESPACE", "t"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("DEDUP_LEASE_SECONDS", "7"),
        ]);
        let settings = Settings::read(&env, "f").expect("settings");
        let items = Items::dynamodb(client(), &settings);
        let marks = items.mark_store().expect("a mark table");
        assert_eq!(marks.retention(), settings.retention);
        assert_eq!(marks.options().lease, Duration::from_secs(7));
        let day = Retention::unchecked(Duration::from_secs(86_400)).expect("a day");
        let keys = items.mark_store_kept_for(day).expect("a mark table");
        assert_eq!(keys.retention(), day);
        assert_eq!(keys.options().lease, Duration::from_secs(7));

        let without = Settings::read(&Env::from_pairs([("DEDUP_NAMESPACE", "t")]), "f")
            .expect("settings without a mark table");
        let items = Items::dynamodb(client(), &without);
        let refused = items.create_once().expect_err("no mark table");
        assert_eq!(refused, SettingsError::Missing("DEDUP_MARK_TABLE".into()));
        assert!(items.mark_store().is_err() && items.sequence().is_err());
        assert!(items.mark_store_kept_for(day).is_err());
        assert_eq!(items.inbox("inbox").retention(), without.retention);
        let _tables = items.items();
    }
}
