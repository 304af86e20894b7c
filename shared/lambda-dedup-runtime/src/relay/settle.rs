//! One record's step: read, checked still waiting where repeats are answered, acted on, then
//! settled or parked on the item — each write one conditional update.

use std::time::SystemTime;

use aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup::{Effect, Item};

use super::act::{Act, FAILURE_REASON, Failure, Read, Repeats};
use super::service::Running;
use super::tally::Ending;

impl<A: Act> Running<A> {
    /// One record: `Err` is a transient failure (the stream retries from this record).
    pub(super) async fn step(&self, record: &EventRecord) -> Result<Ending, String> {
        let layout = &self.relay.layout;
        let (key, item) = match self.relay.act.read(record) {
            Read::Ignored => return Ok(Ending::Ignored),
            Read::Settled => return Ok(Ending::AlreadySettled),
            Read::NoImage => {
                return Err(format!(
                    "the record has no new image with an {}: the stream must carry new \
                     images (NEW_IMAGE or NEW_AND_OLD_IMAGES)",
                    layout.key
                ));
            }
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
            Err(Failure::Transient(reason)) => Err(reason),
        }
    }

    /// Whether the item `key` still waits, read strongly consistently.
    async fn still_waiting(&self, key: &str) -> Result<bool, String> {
        let layout = &self.relay.layout;
        let item = self
            .items
            .read(&self.relay.table, &Item::new().with(layout.key, key))
            .await
            .map_err(|e| format!("reading the item: {e}"))?;
        Ok(item.is_some_and(|i| layout.waits(&i)))
    }

    /// An update of the item `key` by `expression`, conditioned on the item existing and, when
    /// `waiting` (or repeats are answered), on it still waiting.
    pub(super) fn update(&self, key: &str, expression: &str, waiting: bool) -> Effect {
        let layout = &self.relay.layout;
        let update = Effect::update(&self.relay.table, Item::new().with(layout.key, key))
            .expression(expression)
            .name("#key", layout.key);
        if !(waiting || layout.repeats == Repeats::Answered) {
            return update.condition("attribute_exists(#key)");
        }
        let update = update.name("#status", layout.status);
        match layout.waiting {
            Some(value) => update
                .condition("attribute_exists(#key) AND #status = :waiting")
                .value(":waiting", value),
            None => update.condition("attribute_exists(#key) AND attribute_not_exists(#status)"),
        }
    }

    /// Settles the item `key`: its status and the action's attributes `settle`. Bookkeeping
    /// only: the action is done; the condition makes a repeat a no-op.
    async fn settle(&self, key: &str, settle: Item) -> Result<Ending, String> {
        let layout = &self.relay.layout;
        let mut set = vec!["#status = :settled".to_owned()];
        set.extend((0..settle.0.len()).map(|i| format!("#a{i} = :a{i}")));
        let mut update = self
            .update(key, &format!("SET {}", set.join(", ")), false)
            .name("#status", layout.status)
            .value(":settled", layout.settled);
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
            Err(e) if answered => Err(format!("settling the item: {e}")),
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
    async fn park(&self, key: &str, reason: &str) -> Result<Ending, String> {
        let layout = &self.relay.layout;
        let now = lambda_dedup::clock::epoch_millis(SystemTime::now());
        let park = self
            .update(
                key,
                "SET #status = :parked, #reason = :reason, #parked_at = :now",
                false,
            )
            .name("#status", layout.status)
            .name("#reason", FAILURE_REASON)
            .name("#parked_at", layout.parked_at)
            .value(":parked", layout.parked)
            .value(":reason", reason)
            .value(":now", now);
        match self.items.write(&[park]).await {
            Ok(true) => {
                tracing::warn!(key, reason, "refused for good; parked");
                Ok(Ending::Parked)
            }
            Ok(false) if layout.repeats == Repeats::Answered => Ok(Ending::AlreadySettled),
            Ok(false) => Ok(Ending::Parked),
            Err(e) => Err(format!("parking the item: {e}")),
        }
    }
}
