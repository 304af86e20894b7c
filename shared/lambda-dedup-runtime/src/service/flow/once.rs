//! The flows whose effect item is its own mark: [`create_once`] (the item the event creates)
//! and [`sequence`] (the aggregate's item, with its high-water sequence). Only on a store with
//! the capability ([`Items`]: DynamoDB, memory); asking another does not compile.

use std::sync::Arc;
use std::time::SystemTime;

use lambda_dedup::{Effect, KeySpec, Message, SequenceSource};
use lambda_dedup_engine::{CreateOnceDeduplicator, Outcome, SequencedDeduplicator};
use serde::de::DeserializeOwned;

use super::seal::{On, Ordered, Step};
use super::{BuildError, Dedup, Event, Flow, HandlerError, IntoPlan, TypedWork, typed_work};
use crate::store::Items;

super::step_debug!(CreateOnceStep, SequenceStep);

/// The key spec of a flow whose item is its own mark, once the builder's tenant is vouched for
/// (S1): the builder's, with the settings' guards.
pub(super) fn item_spec(dedup: &Dedup<Items>) -> Result<KeySpec, BuildError> {
    dedup.vouched()?;
    Ok(dedup.key_spec())
}

/// The flow of work that creates one item per event (an order, an inbox item, a record keyed
/// by the event): `create` says the [`Effect::put`] of that item (a
/// [`Plan`](lambda_dedup_engine::Plan) of one put, to store a result for duplicates); it is
/// written in one conditional `Put` carrying the event's key and fingerprint, and a redelivery
/// finds the item and is a duplicate (S8), another payload a conflict (S11). The item is the
/// mark for as long as it lives: there is no retention window and no late-event rule, and
/// deleting the item forgets the event (in a warm container, within `DEDUP_CACHE_SECONDS`: the
/// warm cache, `DEDUP_CACHE_SIZE`, holds the items this container created or found, by their
/// whole key, so a redelivery to the same container costs no request).
pub fn create_once<T, F, P>(create: F) -> CreateOnce<F>
where
    F: Fn(Event<T>) -> P,
{
    CreateOnce(create)
}

/// The create-once flow ([`create_once`]).
#[derive(Debug, Clone)]
pub struct CreateOnce<F>(F);

/// The create-once step.
pub struct CreateOnceStep {
    dedup: CreateOnceDeduplicator,
    create: Arc<TypedWork<Effect>>,
}

impl Step for CreateOnceStep {
    type State = ();

    async fn message(&self, m: Message, _: Option<SystemTime>, _: &()) -> Outcome {
        self.dedup.create_once(&m, |d| (self.create)(d)).await
    }
}

impl Ordered for CreateOnceStep {}

impl<T, F, P> Flow<Items, (Event<T>, P)> for CreateOnce<F>
where
    T: DeserializeOwned + 'static,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan,
{
    type Step = CreateOnceStep;

    fn build(self, on: On<'_, Items>) -> Result<CreateOnceStep, BuildError> {
        let spec = item_spec(on.dedup)?;
        Ok(CreateOnceStep {
            dedup: CreateOnceDeduplicator::with_store(spec, on.dedup.store.create_once()?)
                .with_cache_for(
                    on.dedup.settings.cache_size,
                    on.dedup.settings.cache_max_age,
                ),
            create: typed_work(on, self.0),
        })
    }
}

/// The flow of an ordered source (a Kinesis shard, a DynamoDB stream, an SQS FIFO message
/// group) whose producer stamps a sequence per aggregate at `pointer` of the body (for
/// CloudEvents, e.g. `/data/seq`; the first is 1 unless [`Sequence::first`] says): `update`
/// says the one update of the aggregate's item the event makes, written with the aggregate's
/// new high-water in one conditional write — no mark item, no transaction
/// ([`lambda_dedup::sequence`]). A sequence at or below the high-water is a duplicate; the
/// high-water's own sequence with another payload a conflict (S11); a gap is rejected (counted,
/// dead-lettered, never skipped), and the group stops there. On a standard SQS queue, which
/// keeps no order, events arrive out of sequence and are rejected as gaps: use it on FIFO.
pub fn sequence<T, F, P>(pointer: &str, update: F) -> Sequence<F>
where
    F: Fn(Event<T>) -> P,
{
    Sequence {
        source: SequenceSource::pointer(pointer),
        update,
    }
}

/// The sequence flow ([`sequence`]).
#[derive(Debug, Clone)]
pub struct Sequence<F> {
    source: SequenceSource,
    update: F,
}

impl<F> Sequence<F> {
    /// The first sequence of every aggregate (default 1).
    pub fn first(mut self, first: u64) -> Self {
        self.source = self.source.first(first);
        self
    }
}

/// The sequence step.
pub struct SequenceStep {
    dedup: SequencedDeduplicator,
    source: SequenceSource,
    update: Arc<TypedWork<Effect>>,
}

impl Step for SequenceStep {
    type State = ();

    async fn message(&self, m: Message, _: Option<SystemTime>, _: &()) -> Outcome {
        self.dedup
            .sequenced(&m, &self.source, |d| {
                let mut plan = (self.update)(d)?;
                match plan.effects.len() {
                    1 => Ok(plan.effects.remove(0)),
                    n => Err(HandlerError::invalid(format!(
                        "sequence mode writes one update per event, not {n}"
                    ))),
                }
            })
            .await
    }
}

impl Ordered for SequenceStep {}

impl<T, F, P> Flow<Items, (Event<T>, P, SequenceSource)> for Sequence<F>
where
    T: DeserializeOwned + 'static,
    F: Fn(Event<T>) -> P + Send + Sync + 'static,
    P: IntoPlan,
{
    type Step = SequenceStep;

    fn build(self, on: On<'_, Items>) -> Result<SequenceStep, BuildError> {
        let spec = item_spec(on.dedup)?;
        Ok(SequenceStep {
            dedup: SequencedDeduplicator::with_store(spec, on.dedup.store.sequence()?),
            source: self.source,
            update: typed_work(on, self.update),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::on_memory;
    use crate::{Dedup, events::SqsEvent};
    use lambda_dedup::{Item, MarkStore, Value};
    use lambda_dedup_config::Env;

    #[derive(serde::Deserialize)]
    struct Order {
        order_id: String,
        total: i64,
    }

    fn batch(bodies: &[&str]) -> SqsEvent {
        crate::testing::events::sqs_event(bodies)
    }

    fn failed(answer: &crate::events::SqsBatchResponse) -> Vec<&str> {
        answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }

    /// Create-once through the builder: one conditional `Put` per delivery and no mark item;
    /// a producer's retry (another message id, same order) is a duplicate, the same order with
    /// another total a conflict (reported failed), and a payload that is not an order rejected.
    #[tokio::test]
    async fn create_once_writes_each_order_once_in_one_put_and_no_mark() {
        let env = Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")]);
        let (dedup, store) = on_memory(Dedup::read(&env, "orders").expect("settings"));
        store.create_table("orders", "order_id");
        let service = dedup
            .identity("/order_id")
            .fingerprint(&["/total"])
            .sqs(create_once(|e: Event<Order>| {
                let order = Item::new().with("order_id", e.payload.order_id.as_str());
                Effect::put("orders", order.with("total", e.payload.total))
            }))
            .expect("service");
        let first = service
            .call_with(batch(&[r#"{"order_id": "o-1", "total": 5}"#]))
            .await
            .expect("answer");
        assert!(first.batch_item_failures.is_empty());
        assert_eq!(store.calls(), 1, "one write for a new order");
        let answer = service
            .call_with(batch(&[
                r#"{"order_id": "o-1", "total": 5, "retry": true}"#,
                r#"{"order_id": "o-1", "total": 6}"#,
                r#"{"order_id": "o-2", "total": "six"}"#,
            ]))
            .await
            .expect("answer");
        assert_eq!(failed(&answer), ["m1", "m2"]);
        let orders = store.items("orders");
        assert_eq!(orders.len(), 1);
        assert_eq!(orders[0].0.get("total"), Some(&Value::N("5".into())));
        let Some(Value::S(key)) = orders[0].0.get(lambda_dedup::create_once::CREATED_KEY) else {
            panic!("the order carries no key: {:?}", orders[0]);
        };
        let key = lambda_dedup::DedupKey::from_stored(key.clone());
        assert!(
            store.get(&key).await.expect("get").is_none(),
            "no mark item"
        );
    }

    /// Sequence mode through the builder: each account's credits in sequence, one conditional
    /// write each; a redelivery at or below the high-water is a duplicate and adds nothing, a gap
    /// is rejected and not applied, and no mark item is written.
    #[tokio::test]
    async fn sequence_applies_in_order_and_rejects_a_gap() {
        #[derive(serde::Deserialize)]
        struct Credit {
            account: String,
            amount: i64,
        }
        let env = Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")]);
        let (dedup, store) = on_memory(Dedup::read(&env, "credits").expect("settings"));
        store.create_table("balances", "account");
        let service = dedup
            .identity("/id")
            .sqs(sequence("/seq", |e: Event<Credit>| {
                Effect::add(
                    "balances",
                    ("account", e.payload.account.as_str()),
                    "balance",
                    e.payload.amount,
                )
            }))
            .expect("service");
        let credit = |id: &str, seq: u64| {
            format!(r#"{{"id": "{id}", "seq": {seq}, "account": "a", "amount": 10}}"#)
        };
        let bodies = [credit("c1", 1), credit("c2", 2), credit("c1", 1)];
        let bodies: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let answer = service.call_with(batch(&bodies)).await.expect("answer");
        assert!(failed(&answer).is_empty(), "{answer:?}");
        let gap = credit("c4", 4);
        let answer = service.call_with(batch(&[&gap])).await.expect("answer");
        assert_eq!(failed(&answer), ["m0"], "a gap is not applied");
        let balances = store.items("balances");
        assert_eq!(balances.len(), 1);
        assert_eq!(balances[0].0.get("balance"), Some(&Value::N("20".into())));
        assert!(store.marks().is_empty(), "no mark item");
    }
}
