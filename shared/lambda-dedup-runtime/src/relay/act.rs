//! The per-relay part: how a relay's items look ([`Layout`], [`Repeats`]), what a stream record
//! is to it ([`Read`]) and its action ([`Act`], failing as a [`Failure`]).

use std::future::Future;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup::Item;
use lambda_dedup::items::text;

/// The attribute the sweep stamps on an item it re-drives (epoch milliseconds).
pub const REDRIVE: &str = "redrive_requested_at";

/// The attribute naming why an item was parked (a code, never a value from the payload).
pub const FAILURE_REASON: &str = "failure_reason";

/// How the other side takes a repeat of the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeats {
    /// A repeat is answered as a replay: the other side deduplicates by the item's key, sent as
    /// its idempotency key (`intent-relay`'s provider, S6). The item is read strongly
    /// consistently before acting (an item settled since its record was written is not acted on
    /// again: `AlreadySettled`), every write is conditioned on it still waiting (a lost
    /// condition is `AlreadySettled` too), and a settle write that fails is retried: the
    /// action again, answered as a replay.
    Answered,
    /// A repeat is a second effect (a message sent again to a standard queue). Once the action
    /// is done nothing is retried (S16): a settle write that fails is logged, not retried, and
    /// the writes are conditioned only on the item existing. Delivery is at least once: a retry
    /// from an earlier checkpoint acts again.
    Effected,
}

/// How a relay's items look in their table, and the names of its metrics.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The item's key attribute (a string): it names the item in every write.
    pub key: &'static str,
    /// When the item was written (epoch milliseconds): the sweep's age; an item without it
    /// counts as old.
    pub created: &'static str,
    /// The attribute that says whether the item is settled.
    pub status: &'static str,
    /// What `status` holds while the item waits; `None`: it is absent.
    pub waiting: Option<&'static str>,
    /// `status` once the action is done.
    pub settled: &'static str,
    /// `status` once parked (with [`FAILURE_REASON`] and the time in `parked_at`).
    pub parked: &'static str,
    /// When the item was parked (epoch milliseconds).
    pub parked_at: &'static str,
    /// How the other side takes a repeat.
    pub repeats: Repeats,
    /// The metric of the items settled now (`Confirmed`, `Forwarded`).
    pub settled_metric: &'static str,
    /// The sweep's metric of the items still waiting (`PendingIntents`, `Pending`).
    pub waiting_metric: &'static str,
}

impl Layout {
    /// Whether `item` (an image or a stored item) still waits.
    pub fn waits(&self, item: &Item) -> bool {
        match self.waiting {
            Some(value) => text(item, self.status) == Some(value),
            None => !item.0.contains_key(self.status),
        }
    }
}

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
    /// could not finish one record, and refuses the start ([`Dedup::relay`](crate::Dedup::relay)).
    fn time_limit(&self) -> Option<(&'static str, Duration)> {
        None
    }
}
