//! What the PostgreSQL and Valkey worlds of the model-based schedules (`model_postgres.rs`,
//! `model_valkey.rs`) have in common, so that `model.rs` and `model_leased/` build and read
//! either one through the same code: a fresh place for one schedule's marks on the server, the
//! stores on it (and one that is down), and a read of a mark outside the store under test.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{DedupKey, ManualClock, MarkStore, Retention};

/// One schedule's marks on a server, every store built on it reading one manual clock.
pub(crate) trait ServerWorld: Sized {
    /// The store's own effect type.
    type Effect: 'static;
    /// The store on the server.
    type Store: MarkStore<Self::Effect> + 'static;
    /// A fresh place for marks on the server of `url`.
    async fn new(url: &str, retention: Retention, clock: Arc<ManualClock>) -> Self;
    /// The clock every store built here reads.
    fn clock(&self) -> Arc<ManualClock>;
    /// A store on the schedule's marks, with leases of at most `lease`.
    fn store(&self, lease: Duration) -> Self::Store;
    /// A store on a loopback port nothing listens on: every connection is refused (S13), the
    /// closest counterpart of the DynamoDB client on a dead endpoint.
    fn unreachable(&self) -> Self::Store;
    /// Whether a mark of `key` is on the server at all, live or past its expiry, read with the
    /// server's own commands.
    async fn stored_mark(&self, key: &DedupKey) -> bool;
}
