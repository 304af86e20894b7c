//! The latest-wins flow ([`latest_wins`]): the transactional flow with the object's high-water
//! sequencer in the same transaction, so an event older than one applied for its object is
//! superseded (acknowledged, counted, not applied). Only on a store with the capability
//! ([`Items`]: DynamoDB, memory); the S3 door (`source::S3`) is its source.

use std::sync::Arc;
use std::time::SystemTime;

use lambda_dedup::{AttributeValue, Effect, Message, Reason, Sequencer};
use lambda_dedup_engine::{LatestDeduplicator, Outcome};
use serde::de::DeserializeOwned;

use super::seal::{On, Ordered, Step};
use super::{BuildError, Event, Flow, IntoPlan, TypedWork, typed_work};
use crate::store::Items;

/// The attribute naming a record's object (the S3 door's): a digest of bucket and decoded key.
pub(crate) const OBJECT_ATTRIBUTE: &str = "dedup-latest-object";
/// The attribute carrying a record's sequencer, padded ([`Sequencer::as_str`]).
pub(crate) const SEQUENCER_ATTRIBUTE: &str = "dedup-latest-sequencer";

super::step_debug!(LatestStep);

/// The flow of events that may arrive out of order, each newer than the last for its object:
/// `work` says what one event writes (as [`transact`](super::transact)), and the writes commit
/// with the event's mark and the object's new high-water sequencer in one transaction. A
/// redelivery is a duplicate; an event older than one applied for its object is `superseded`
/// (acknowledged, nothing written, counted among the duplicates and as `Superseded`). The
/// object and sequencer are the ones the S3 door reads (`crate::source::s3`). The warm cache
/// (`DEDUP_CACHE_SIZE`, `DEDUP_CACHE_SECONDS`) holds the marks this container committed or
/// found, by their whole key, so a redelivery to the same container costs no request; an older
/// event of the object (its own key) and a superseded one (no mark) are the store's to judge.
pub fn latest_wins<T, F, P>(work: F) -> LatestWins<F>
where
    F: Fn(Event<T>) -> P,
{
    LatestWins(work)
}

/// The latest-wins flow ([`latest_wins`]).
#[derive(Debug, Clone)]
pub struct LatestWins<F>(F);

/// The latest-wins step.
pub struct LatestStep {
    dedup: LatestDeduplicator,
    work: Arc<TypedWork<Effect>>,
}

fn attribute<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    match m.attributes.get(name)? {
        AttributeValue::String(s) => Some(s),
        AttributeValue::Binary(_) => None,
    }
}

impl Step for LatestStep {
    type State = ();

    async fn message(&self, m: Message, _: Option<SystemTime>, _: &()) -> Outcome {
        let object = attribute(&m, OBJECT_ATTRIBUTE);
        let sequencer = attribute(&m, SEQUENCER_ATTRIBUTE).and_then(|s| Sequencer::parse(s).ok());
        let (Some(object), Some(sequencer)) = (object, sequencer) else {
            return Outcome::Rejected {
                code: Reason::EnvelopeMalformed,
                reason: "no object or sequencer: latest-wins reads the S3 door's".into(),
                key: None,
                invalid: None,
            };
        };
        self.dedup
            .latest(&m, object, &sequencer, |d| (self.work)(d))
            .await
    }
}

impl Ordered for LatestStep {}
impl super::seal::Admits<super::seal::LatestOnly> for LatestStep {}

impl<T, F, P> Flow<Items, (Event<T>, P, Sequencer)> for LatestWins<F>
where
    T: DeserializeOwned + 'static,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan,
{
    type Step = LatestStep;

    fn build(self, on: On<'_, Items>) -> Result<LatestStep, BuildError> {
        let spec = super::once::item_spec(on.dedup)?;
        Ok(LatestStep {
            dedup: LatestDeduplicator::with_store(spec, on.dedup.store.latest()?).with_cache_for(
                on.dedup.settings.cache_size,
                on.dedup.settings.cache_max_age,
            ),
            work: typed_work(on, self.0),
        })
    }
}
