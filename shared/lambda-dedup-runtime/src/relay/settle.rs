//! One record's step: read, checked still waiting where repeats are answered, acted on, then
//! settled or parked on the item — each write one conditional update.

use std::time::SystemTime;

use aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup::{Effect, Item, StoreError};

use super::act::{Act, Failure, Read};
use super::layout::{Attribute, FAILURE_REASON, Repeats, Waiting};
use super::service::Running;
use super::tally::Ending;

/// Why one record is not done: a transient failure, the stream retries from the record.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotDone {
    /// A record without a new image: the stream's view type is wrong.
    #[error(
        "the record has no new image with an {}: the stream must carry new images \
         (NEW_IMAGE or NEW_AND_OLD_IMAGES)",
        .0.name()
    )]
    NoImage(Attribute),
    /// The action failed for now ([`Failure::Transient`], its reason for the log).
    #[error("{0}")]
    Action(String),
    /// The item could not be read before acting.
    #[error("reading the item: {0}")]
    Reading(#[source] StoreError),
    /// The settle write failed where repeats are answered (the action is done again).
    #[error("settling the item: {0}")]
    Settling(#[source] StoreError),
    /// The park write failed.
    #[error("parking the item: {0}")]
    Parking(#[source] StoreError),
}

impl<A: Act> Running<A> {
    /// One record: `Err` is a transient failure (the stream retries from this record).
    pub(super) async fn step(&self, record: &EventRecord) -> Result<Ending, NotDone> {
        let layout = &self.relay.layout;
        let (key, item) = match self.relay.act.read(record) {
            Read::Ignored => return Ok(Ending::Ignored),
            Read::Settled => return Ok(Ending::AlreadySettled),
            Read::NoImage => return Err(NotDone::NoImage(layout.attributes.key)),
            Read::Park { key, reason } => return self.park(&key, reason).await,
            Read::Act { key, item } => (key, item),
        };
        // The stream replays records (a retried or bisected batch, an invocation that died
        // after settling): the image says waiting, the table may not. Checked strongly
        // consistently before acting, so a settled or parked item is never acted on again.
        if layout.repeats == Repeats::Answered && !self.still_waiting(&key).await? {
            tracing::info!(key = %key, "already settled; not acted on");
            return Ok(Ending::AlreadySettled);
        }
        #[cfg(feature = "simulation-planted")]
        if lambda_dedup::planted::Planted::RelaySettlesBeforeCall.is_on() {
            let settled = self.settle(&key, Item::new()).await;
            let _ = self.relay.act.act(&key, &item).await;
            return settled;
        }
        match self.relay.act.act(&key, &item).await {
            Ok(settle) => self.settle(&key, settle).await,
            Err(Failure::Permanent(code)) => self.park(&key, &code).await,
            Err(Failure::Transient(reason)) => Err(NotDone::Action(reason)),
        }
    }

    /// Whether the item `key` still waits, read strongly consistently.
    async fn still_waiting(&self, key: &str) -> Result<bool, NotDone> {
        let layout = &self.relay.layout;
        let item = self
            .items
            .read(
                &self.relay.table,
                &Item::new().with(layout.attributes.key.name(), key),
            )
            .await
            .map_err(NotDone::Reading)?;
        Ok(item.is_some_and(|i| layout.waits(&i)))
    }

    /// An update of the item `key` by `expression`, conditioned on the item existing and, when
    /// `waiting` (or repeats are answered), on it still waiting.
    pub(super) fn update(&self, key: &str, expression: &str, waiting: bool) -> Effect {
        let layout = &self.relay.layout;
        let key_name = layout.attributes.key.name();
        let update = Effect::update(&self.relay.table, Item::new().with(key_name, key))
            .expression(expression)
            .name("#key", key_name);
        if !(waiting || layout.repeats == Repeats::Answered) {
            return update.condition("attribute_exists(#key)");
        }
        let update = update.name("#status", layout.attributes.status.name());
        match layout.waiting {
            Waiting::Holds(value) => update
                .condition("attribute_exists(#key) AND #status = :waiting")
                .value(":waiting", value.value()),
            Waiting::Absent => {
                update.condition("attribute_exists(#key) AND attribute_not_exists(#status)")
            }
        }
    }

    /// Settles the item `key`: its status and the action's attributes `settle`. Bookkeeping
    /// only: the action is done; the condition makes a repeat a no-op.
    async fn settle(&self, key: &str, settle: Item) -> Result<Ending, NotDone> {
        let layout = &self.relay.layout;
        let mut set = vec!["#status = :settled".to_owned()];
        set.extend((0..settle.0.len()).map(|i| format!("#a{i} = :a{i}")));
        let mut update = self
            .update(key, &format!("SET {}", set.join(", ")), false)
            .name("#status", layout.attributes.status.name())
            .value(":settled", layout.settled.value());
        for (i, (name, value)) in settle.0.into_iter().enumerate() {
            update = update
                .name(&format!("#a{i}"), &name)
                .value(&format!(":a{i}"), value);
        }
        let answered = layout.repeats == Repeats::Answered;
        match self.items.write(&[update]).await {
            Ok(true) => {
                tracing::info!(key, "settled");
                Ok(Ending::Settled)
            }
            Ok(false) if answered => Ok(Ending::AlreadySettled),
            Ok(false) => Ok(Ending::Settled),
            Err(e) if answered => Err(NotDone::Settling(e)),
            // S16: nothing may fail after the effect. The status is for people and sweeps; a
            // failure to write it is logged, not retried (a retry would act again).
            Err(e) => {
                tracing::warn!(key, error = %e, "acted on, but the item's status was not written");
                Ok(Ending::Settled)
            }
        }
    }

    /// Parks the item `key` with `reason` (a code, never a value from the payload or an
    /// answer).
    async fn park(&self, key: &str, reason: &str) -> Result<Ending, NotDone> {
        let layout = &self.relay.layout;
        let now = lambda_dedup::clock::epoch_millis(SystemTime::now());
        let park = self
            .update(
                key,
                "SET #status = :parked, #reason = :reason, #parked_at = :now",
                false,
            )
            .name("#status", layout.attributes.status.name())
            .name("#reason", FAILURE_REASON.name())
            .name("#parked_at", layout.attributes.parked_at.name())
            .value(":parked", layout.parked.value())
            .value(":reason", reason)
            .value(":now", now);
        match self.items.write(&[park]).await {
            Ok(true) => {
                tracing::warn!(key, reason, "refused for good; parked");
                Ok(Ending::Parked)
            }
            Ok(false) if layout.repeats == Repeats::Answered => Ok(Ending::AlreadySettled),
            Ok(false) => Ok(Ending::Parked),
            Err(e) => Err(NotDone::Parking(e)),
        }
    }
}
