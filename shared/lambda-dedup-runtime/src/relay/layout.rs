//! How a relay's items look in their table ([`Layout`]): the names of their attributes
//! ([`Attributes`], each an [`Attribute`]), the values their status takes ([`StatusValue`], and
//! [`Waiting`]: a value or none), how the other side takes a repeat ([`Repeats`]) and the names
//! of the relay's metrics ([`Metric`]). Each kind of name is its own type, so an attribute is
//! never given where a status value or a metric is meant.

use lambda_dedup::Item;
use lambda_dedup::items::text;

/// The name of an attribute of a relay's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribute(&'static str);

impl Attribute {
    /// The attribute `name`.
    pub const fn new(name: &'static str) -> Self {
        Attribute(name)
    }

    /// Its name in the table.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// A value the status attribute takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusValue(&'static str);

impl StatusValue {
    /// The status `value`.
    pub const fn new(value: &'static str) -> Self {
        StatusValue(value)
    }

    /// The value as stored.
    pub const fn value(self) -> &'static str {
        self.0
    }
}

/// The name of one of a relay's CloudWatch metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric(&'static str);

impl Metric {
    /// The metric `name`.
    pub const fn new(name: &'static str) -> Self {
        Metric(name)
    }

    /// Its name in the EMF line.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// The attribute the sweep stamps on an item it re-drives (epoch milliseconds).
pub const REDRIVE: Attribute = Attribute::new("redrive_requested_at");

/// The attribute naming why an item was parked (a code, never a value from the payload).
pub(crate) const FAILURE_REASON: Attribute = Attribute::new("failure_reason");

/// The attributes a relay reads and writes on its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributes {
    /// The item's key (a string): it names the item in every write.
    pub key: Attribute,
    /// When the item was written (epoch milliseconds): the sweep's age; an item without it
    /// counts as old.
    pub created: Attribute,
    /// The attribute that says whether the item is settled.
    pub status: Attribute,
    /// When the item was parked (epoch milliseconds).
    pub parked_at: Attribute,
}

/// What the status attribute is while an item waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// The attribute is absent (the inbox: an item is written without it).
    Absent,
    /// The attribute holds this value (`PENDING`).
    Holds(StatusValue),
}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The attributes read and written.
    pub attributes: Attributes,
    /// The status while the item waits.
    pub waiting: Waiting,
    /// The status once the action is done.
    pub settled: StatusValue,
    /// The status once parked (with `FAILURE_REASON` and the time in `parked_at`).
    pub parked: StatusValue,
    /// How the other side takes a repeat.
    pub repeats: Repeats,
    /// The metric of the items settled now (`Confirmed`, `Forwarded`).
    pub settled_metric: Metric,
    /// The sweep's metric of the items still waiting (`PendingIntents`, `Pending`).
    pub waiting_metric: Metric,
}

impl Layout {
    /// Whether `item` (an image or a stored item) still waits.
    pub fn waits(&self, item: &Item) -> bool {
        let status = self.attributes.status.name();
        match self.waiting {
            Waiting::Holds(value) => text(item, status) == Some(value.value()),
            Waiting::Absent => !item.0.contains_key(status),
        }
    }
}
