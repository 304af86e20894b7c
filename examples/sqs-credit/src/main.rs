//! The example to copy: an SQS-triggered Lambda whose effect — adding `data.amount` to the
//! balance of `data.account` — happens once per event, however often SQS delivers it. The credit
//! and the event's mark commit in one DynamoDB transaction; redeliveries are duplicates.
//!
//! Environment: the settings of `lambda_dedup_runtime::settings` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE` — see `lambda_dedup_dynamodb::provision` — and the queue's redelivery
//! horizon, which the mark retention must cover or the function refuses to start, S9) plus
//! `BALANCES_TABLE` (key `account`). The tests at the bottom run the same handler on the
//! in-memory store.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::{Derived, Effect, Item, KeySpec, Scope};
use lambda_dedup_batch::{Deduplicator, HandlerError, Plan, run_batch_transactional};
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The `data` of a credit event (CloudEvents JSON in the SQS body).
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// What one event writes: its credit. The library commits it together with the event's mark.
fn plan(balances: &str, event: &Derived) -> Result<Plan, HandlerError> {
    let credit: Credit = serde_json::from_value(HandlerError::data(event)?.clone())
        .map_err(|_| HandlerError::Invalid("data must be {account, amount}".into()))?;
    let account = lambda_dedup::tenant_scoped(&event.tenant, &credit.account);
    let effect = Effect::update(balances, Item::new().with("account", account))
        .expression("ADD balance :amount")
        .value(":amount", credit.amount);
    Ok(Plan {
        effects: vec![effect],
        result: None,
    })
}

/// One invocation: the batch's credits and marks, answered with a partial batch response.
async fn handle(
    dedup: &Deduplicator,
    balances: &str,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    lambda_dedup_runtime::run_sqs_batch("sqs-credit", dedup.spec(), event, |batch| {
        run_batch_transactional(batch, 10, dedup, |e| plan(balances, e))
    })
    .await
}

/// Events are CloudEvents; the tenant is their `tenantid` extension.
fn key_spec(scope: Scope) -> KeySpec {
    KeySpec::cloudevents(scope, "tenantid")
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Every setting checked at start: a retention below the redelivery horizon is refused (S9).
    let settings = lambda_dedup_runtime::Settings::from_env("sqs-credit")?;
    let dedup = settings.deduplicator(
        key_spec(settings.scope.clone()),
        lambda_dedup_dynamodb::connect().await,
    );
    let balances = lambda_dedup_runtime::required("BALANCES_TABLE")?;
    let (dedup, balances) = (&dedup, balances.as_str());
    lambda_runtime::run(service_fn(move |event| handle(dedup, balances, event))).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::sqs::SqsMessage;
    use lambda_dedup::Retention;
    use lambda_dedup_memory::MemoryStore;
    use std::time::Duration;

    fn record(message_id: &str, event_id: &str, amount: i64) -> SqsMessage {
        let body = serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": event_id, "tenantid": "acme", "data": {"account": "a-1", "amount": amount}});
        let mut m = SqsMessage::default();
        m.message_id = Some(message_id.into());
        m.body = Some(body.to_string());
        m
    }

    fn invocation(records: Vec<SqsMessage>) -> LambdaEvent<SqsEvent> {
        let mut event = SqsEvent::default();
        event.records = records;
        LambdaEvent::new(event, lambda_runtime::Context::default())
    }

    #[tokio::test]
    async fn each_event_is_credited_once_however_often_it_is_delivered() {
        let retention = Retention::unchecked(Duration::from_secs(86_400)).expect("retention");
        let store = MemoryStore::new(retention);
        store.create_table("balances", "account");
        let scope = Scope::new("example", "sqs-credit").expect("a valid scope");
        let dedup = Deduplicator::new(key_spec(scope), store.clone());
        // Two events; the first delivered twice in one batch and again in the next.
        let first = vec![
            record("m1", "e1", 10),
            record("m2", "e1", 10),
            record("m3", "e2", 5),
        ];
        let response = handle(&dedup, "balances", invocation(first))
            .await
            .expect("handled");
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        let mut again = vec![record("m4", "e1", 10), record("m5", "e3", 1)];
        again[1].body = Some("not json".into());
        let response = handle(&dedup, "balances", invocation(again))
            .await
            .expect("handled");
        // The redelivery is a duplicate; the message with no event identity is failed, for the
        // queue's redrive policy to dead-letter.
        let failed: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed, ["m5"]);
        let balance = store
            .item("balances", &Item::new().with("account", "acme/a-1"))
            .expect("credited");
        assert_eq!(balance.0["balance"], lambda_dedup::Value::N("15".into()));
    }
}
