//! What the runtime builds from the settings ([`lambda_dedup_config`], read there and checked): the
//! AWS SDK configuration of its clients with the settings' timeouts ([`sdk_config`], built in
//! `lambda_dedup_aws`, which the operators' tool shares), the DynamoDB stores of the mark table
//! and of a create-once table, and the mark deduplicator with the settings' guards on keys and
//! the warm cache ([`FromSettings`]; the deduplicators of the flows whose item is its own mark,
//! and of latest-wins, are built by their flows with the keys' guards, [`Settings::key_spec`], and
//! the same warm cache but for sequence mode, whose high-water is the item's, not the event's).
//! The settings crate builds nothing; this is the one place the runtime does.

use std::sync::Arc;

use lambda_dedup::KeySpec;
use lambda_dedup_engine::Deduplicator;

use lambda_dedup_config::Settings;
#[cfg(feature = "dynamodb")]
use lambda_dedup_config::SettingsError;

#[cfg(feature = "aws")]
pub use lambda_dedup_aws::sdk_config;

/// The stores and deduplicators the settings describe, with every guard they document applied.
pub(crate) trait FromSettings {
    /// The deduplicator on `store`: keys by [`Settings::key_spec`], the warm cache sized by
    /// `DEDUP_CACHE_SIZE` and aged by `DEDUP_CACHE_SECONDS`, the duplicate pre-filter of
    /// batch-transaction mode as `DEDUP_PREFILTER_DUPLICATES` says: the one place the settings'
    /// guards on keys and the cache are applied.
    fn deduplicator_on<E: 'static>(
        &self,
        spec: KeySpec,
        store: Arc<dyn lambda_dedup::MarkStore<E>>,
    ) -> Deduplicator<E>;

    /// The mark store: marks in the mark table (required here), kept for the checked
    /// retention (S9) under leases of `DEDUP_LEASE_SECONDS`.
    #[cfg(feature = "dynamodb")]
    fn mark_store(
        &self,
        client: lambda_dedup_dynamodb::Client,
    ) -> Result<lambda_dedup_dynamodb::DynamoStore, SettingsError>;

    /// A store on `client` whose marks are the items of `table` that create-once mode writes
    /// (the webhook receiver's inbox): no mark table is read.
    #[cfg(feature = "dynamodb")]
    fn create_once_store(
        &self,
        client: lambda_dedup_dynamodb::Client,
        table: &str,
    ) -> lambda_dedup_dynamodb::DynamoStore;
}

impl FromSettings for Settings {
    fn deduplicator_on<E: 'static>(
        &self,
        spec: KeySpec,
        store: Arc<dyn lambda_dedup::MarkStore<E>>,
    ) -> Deduplicator<E> {
        Deduplicator::with_store(self.key_spec(spec), store)
            .with_cache_for(self.cache_size, self.cache_max_age)
            .with_duplicate_prefilter(self.prefilter_duplicates)
    }

    #[cfg(feature = "dynamodb")]
    fn mark_store(
        &self,
        client: lambda_dedup_dynamodb::Client,
    ) -> Result<lambda_dedup_dynamodb::DynamoStore, SettingsError> {
        let table = self.required_mark_table()?;
        Ok(self.create_once_store(client, table))
    }

    #[cfg(feature = "dynamodb")]
    fn create_once_store(
        &self,
        client: lambda_dedup_dynamodb::Client,
        table: &str,
    ) -> lambda_dedup_dynamodb::DynamoStore {
        lambda_dedup_dynamodb::DynamoStore::new(client, table.to_owned(), self.retention)
            .with_lease(self.lease)
            .with_clock_skew(self.clock_skew)
    }
}
