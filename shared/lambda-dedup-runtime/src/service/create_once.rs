//! The builder's create-once service: for work that creates an item which exists once per
//! event (an order, an inbox item, a record keyed by the event), the item is the mark — one
//! conditional `Put` per event, no mark item, no transaction (see `lambda_dedup::create_once`).

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;

use super::{BuildError, Dedup, Event, IntoPlan, SqsService};
use crate::store::CreateOnceMarks;

impl<S: CreateOnceMarks> Dedup<S> {
    /// The SQS service of a function whose effect creates one item per event: `create` says
    /// the [`Effect::put`](lambda_dedup::Effect::put) of that item (a [`Plan`](lambda_dedup_batch::Plan)
    /// of one put, to store a result for duplicates); it is written in one conditional `Put`
    /// carrying the event's key and fingerprint, and a redelivery finds the item and is a
    /// duplicate (S8), another payload a conflict (S11). The item is the mark for as long as it
    /// lives: there is no retention window and no late-event rule, and deleting the item
    /// forgets the event. Answers with a partial batch response (S12). Only on a store with the
    /// capability ([`CreateOnceMarks`]: DynamoDB, memory).
    pub fn sqs_create_once<T, F, P>(self, create: F) -> Result<SqsService, BuildError>
    where
        T: DeserializeOwned + 'static,
        F: Fn(Event<T>) -> P + Send + Sync + 'static,
        P: IntoPlan,
    {
        let store = self.store.create_once_marks(&self.settings)?;
        let spec = self.raw_spec(self.settings.scope.clone());
        let dedup = self.settings.create_once_deduplicator_on(spec, store);
        let (dedup, create, runner) = self.sqs_parts_on(dedup, create);
        Ok(SqsService::new(move |event: LambdaEvent<SqsEvent>| {
            let (dedup, create, runner) = (dedup.clone(), create.clone(), runner.clone());
            async move {
                runner
                    .sqs(event, |m| {
                        let (dedup, create) = (dedup.clone(), create.clone());
                        async move { dedup.create_once(&m, |d| create(d)).await }
                    })
                    .await
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Env;
    use crate::testing::on_memory;
    use lambda_dedup::{Effect, Item, MarkStore, Value};

    #[derive(serde::Deserialize)]
    struct Order {
        order_id: String,
        total: i64,
    }

    fn batch(bodies: &[&str]) -> SqsEvent {
        crate::testing::sqs_event(bodies)
    }

    /// Create-once through the builder: one conditional `Put` per delivery and no mark item;
    /// a producer's retry (another message id, same order) is a duplicate, the same order with
    /// another total a conflict (reported failed), and a payload that is not an order rejected.
    #[tokio::test]
    async fn sqs_create_once_writes_each_order_once_in_one_put_and_no_mark() {
        let env = Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")]);
        let (dedup, store) = on_memory(Dedup::read(&env, "orders").expect("settings"));
        store.create_table("orders", "order_id");
        let service = dedup
            .identity("/order_id")
            .fingerprint(&["/total"])
            .sqs_create_once(|e: Event<Order>| {
                let order = Item::new().with("order_id", e.payload.order_id.as_str());
                Effect::put("orders", order.with("total", e.payload.total))
            })
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
        let failed: Vec<&str> = answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed, ["m1", "m2"]);
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
}
