//! `mark-auditor`: triggered by the stream of the mark table. It counts the marks DynamoDB's TTL
//! purged — completed marks only, per consumer — and prints them as CloudWatch EMF (`Purged`,
//! dimension `Function` = the consumer), so that, over time, marks in the table = applied −
//! purged can be checked (S14; `cargo xtask audit` does it locally). A mark removed any other way
//! (a released claim, an operator) is logged, not counted as a purge.
//!
//! Run locally with `cargo xtask demo` or `cargo xtask up`; it needs no configuration.

#![recursion_limit = "256"]

mod audit;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_edge::init_tracing();
    lambda_runtime::run(service_fn(|event: LambdaEvent<Event>| async move {
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
        Ok::<DynamoDbEventResponse, Error>(DynamoDbEventResponse::default())
    }))
    .await
}
