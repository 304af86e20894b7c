//! Run with `cargo test -p example-sqs-credit` (the tests below, on the memory store); in
//! Lambda, `cargo lambda build --release -p example-sqs-credit`, then `cargo lambda deploy
//! example-sqs-credit` with the environment below.
//!
//! The example to copy: an SQS-triggered Lambda whose effect — adding `data.amount` to the
//! balance of `data.account` — happens once per event, however often SQS delivers it. The credit
//! and the event's mark commit in one DynamoDB transaction; redeliveries are duplicates.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE` — see `lambda_dedup_dynamodb::provision` — and the queue's redelivery
//! horizon, which the mark retention must cover or the function refuses to start, S9) plus
//! `BALANCES_TABLE` (key `account`). The tests at the bottom run the same service on the
//! in-memory store.

use lambda_dedup_runtime::{Dedup, Effect, Event, SqsService, Tenant};

/// The `data` of a credit event (CloudEvents JSON in the SQS body).
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The function: CloudEvents with the tenant in `tenantid`; what one event writes is its
/// credit, which the library commits together with the event's mark.
fn service(dedup: Dedup) -> Result<SqsService, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    // The tenant is the payload's: the queue's producers are trusted (its policy names them).
    let dedup = dedup
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers();
    Ok(dedup.sqs(move |e: Event<Credit>| {
        let account = ("account", e.scoped(&e.payload.account));
        Effect::add(&balances, account, "balance", e.payload.amount)
    })?)
}

/// Every setting checked at start: a retention below the redelivery horizon is refused (S9).
#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(
        lambda_runtime::run_concurrent(service(Dedup::from_env("sqs-credit")?.dynamodb().await)?)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_memory::MemoryStore;
    use lambda_dedup_runtime::events::{SqsEvent, SqsMessage};
    use lambda_dedup_runtime::testing::{memory_store, now_as};
    use lambda_dedup_runtime::{Env, TimeFormat};
    use lambda_dedup_testkit::{Item, Value, events, with_outcomes};
    use lambda_runtime::tower::ServiceExt;

    fn record(message_id: &str, event_id: &str, amount: i64) -> SqsMessage {
        // Stamped now: a fixed `time` would turn late (S10) once the retention has passed.
        let body = serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": event_id, "tenantid": "acme", "time": now_as(TimeFormat::Rfc3339),
            "data": {"account": "a-1", "amount": amount}});
        events::sqs_record(message_id, &body.to_string())
    }

    fn invocation(records: Vec<SqsMessage>) -> lambda_runtime::LambdaEvent<SqsEvent> {
        let mut event = SqsEvent::default();
        event.records = records;
        lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default())
    }

    /// The function's settings, as `main` reads them.
    fn settings() -> Dedup<lambda_dedup_runtime::store::NoStore> {
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "example"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("BALANCES_TABLE", "balances"),
        ]);
        Dedup::read(&env, "sqs-credit").expect("settings")
    }

    /// The function as `main` wires it, on the in-memory store (each build a new container on
    /// the same data).
    fn function(store: &MemoryStore) -> SqsService {
        service(settings().on(lambda_dedup_runtime::store::Items::new(store.clone())))
            .expect("service")
    }

    fn failed(response: &lambda_dedup_runtime::events::SqsBatchResponse) -> Vec<&str> {
        let ids = response.batch_item_failures.iter();
        ids.map(|f| f.item_identifier.as_str()).collect()
    }

    #[tokio::test]
    async fn each_event_is_credited_once_however_often_it_is_delivered() {
        let store = memory_store(settings().settings());
        store.create_table("balances", "account");
        // Two events; the first delivered twice in one batch and again in the next.
        let first = vec![
            record("m1", "e1", 10),
            record("m2", "e1", 10),
            record("m3", "e2", 5),
        ];
        // `with_outcomes` says why a record failed (the response names ids only).
        let (response, outcomes) = with_outcomes(function(&store).oneshot(invocation(first))).await;
        assert!(
            failed(&response.expect("handled")).is_empty(),
            "{outcomes:?}"
        );
        let mut again = vec![
            record("m4", "e1", 10),
            record("m5", "e3", 1),
            record("m6", "e4", 1),
        ];
        again[1].body = Some("not json".into());
        again[2].body = Some(
            again[2]
                .body
                .clone()
                .unwrap_or_default()
                .replace("\"amount\":1", "\"amount\":\"one\""),
        );
        let response = function(&store)
            .oneshot(invocation(again))
            .await
            .expect("handled");
        // The redelivery is a duplicate; the message with no event identity and the one whose
        // data is not a credit are failed, for the queue's redrive policy to dead-letter.
        assert_eq!(failed(&response), ["m5", "m6"]);
        let balance = store
            .item("balances", &Item::new().with("account", "acme/a-1"))
            .expect("credited");
        assert_eq!(balance.0["balance"], Value::N("15".into()));
    }
}
