//! `mark-auditor`: triggered by the stream of the mark table. It counts the marks DynamoDB's TTL
//! purged — completed marks only, per consumer — and prints them as CloudWatch EMF (`Purged`,
//! dimension `Function` = the consumer), so that, over time, the account of marks can be
//! checked: applied − purged ≤ marks ≤ applied + duplicate − purged (S14; `cargo xtask audit`
//! does it locally). A mark removed any other way (by an operator, or a TTL purge of a claim
//! that never completed) is logged, not counted as a purge.
//!
//! Run locally with `cargo xtask demo` or `cargo xtask up`; it needs no configuration.

mod audit;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    Ok(lambda_runtime::run_concurrent(service_fn(handle)).await?)
}

/// One stream batch: TTL purges of completed marks counted per consumer and printed as EMF
/// lines (returned too, for tests); nothing to retry, so the response lists no failure.
async fn handle(event: LambdaEvent<Event>) -> Result<DynamoDbEventResponse, Error> {
    let tally = audit::tally(&event.payload.records);
    for (consumer, purged) in &tally.purged {
        // EMF must be a bare JSON line on stdout for CloudWatch to extract it.
        println!("{}", audit::emf_line(consumer, *purged));
    }
    tracing::info!(
        records = event.payload.records.len(),
        purged = tally.purged.values().sum::<u64>(),
        removed_otherwise = tally.removed_otherwise,
        "mark stream batch audited"
    );
    Ok(DynamoDbEventResponse::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handler, called as Lambda calls it, on the sample TTL purge: nothing to retry.
    #[tokio::test]
    async fn the_handler_answers_a_purge_with_no_failure() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/mark-ttl-purge.json"
        );
        let event: Event =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("event");
        assert_eq!(
            audit::tally(&event.records).purged.get("ledger-projector"),
            Some(&1)
        );
        let answer = handle(LambdaEvent::new(event, lambda_runtime::Context::default()))
            .await
            .expect("handled");
        assert!(answer.batch_item_failures.is_empty());
    }
}
