//! The per-relay part: what a stream record is to a relay ([`Read`]) and its action ([`Act`],
//! failing as a [`Failure`]).

use std::future::Future;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup::Item;

/// What a stream record is to a relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read<T> {
    /// Not for the relay: its own settle updates, TTL or manual deletions. Nothing to do.
    Ignored,
    /// An item whose image is already settled: nothing to do (`AlreadySettled`).
    Settled,
    /// No new image naming the item: the stream's view type carries no new images. A
    /// configuration fault, so retried, never guessed around.
    NoImage,
    /// An item that no retry could act on as it is (S16): parked with this reason code.
    Park {
        /// The item's key.
        key: String,
        /// Why (a code).
        reason: &'static str,
    },
    /// An item to act on.
    Act {
        /// The item's key.
        key: String,
        /// What the action needs of it.
        item: T,
    },
}

/// Why an action did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It may succeed later (5xx, 429, timeouts, a queue down): the stream retries from this
    /// record. The reason is for the log.
    Transient(String),
    /// It never will, as the item is (a 4xx, a message the queue refuses): the item is parked
    /// with this code (S15).
    Permanent(String),
}

/// The per-relay part: how to read a record, and the action on one item.
pub trait Act: Send + Sync + 'static {
    /// What the action needs of an item, read from its stream image.
    type Item: Send + Sync;

    /// What `record` is to the relay.
    fn read(&self, record: &EventRecord) -> Read<Self::Item>;

    /// The action on the item `key`: the attributes to settle it with (besides its status), or
    /// why not.
    fn act(
        &self,
        key: &str,
        item: &Self::Item,
    ) -> impl Future<Output = Result<Item, Failure>> + Send;

    /// The longest the action may take by its own bound, and the variable that sets it (an
    /// HTTP call's `PROVIDER_TIMEOUT_MS`), if it has one: a record budget not longer than it
    /// could not finish one record, and refuses the start ([`RelayService::new`](super::RelayService::new)).
    fn time_limit(&self) -> Option<(&'static str, Duration)> {
        None
    }
}
