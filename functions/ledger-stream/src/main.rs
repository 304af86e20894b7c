//! `ledger-stream`: the ledger's events from a Kinesis stream (CloudEvents JSON in each record's
//! data). The identity is the event's own (`source` + `id` within the `tenantid` tenant, S1),
//! never the record's sequence number; records of one account keep their order, an account stops
//! at its first record not done, and the response names the first record not done, so Lambda
//! retries from there (S12). Mark and balance change commit in one transaction (S5). A record
//! that can never apply is parked, whole, in `DEDUP_PARKING_QUEUE_URL` before the checkpoint
//! passes it; without that queue the function refuses to start (S15,
//! `lambda_dedup_runtime::Parking`).
//!
//! Run locally with `cargo xtask demo`, or under `cargo lambda watch` with the variables of
//! `lambda_dedup_config` plus `BALANCES_TABLE` and `DEDUP_PARKING_QUEUE_URL`.

use ledger_projector::ledger;

/// The function's name: the default consumer of its keys and the `Function` of its metrics.
const FUNCTION: &str = "ledger-stream";

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    lambda_dedup_runtime::init_tracing();
    let dedup = lambda_dedup_runtime::Dedup::from_env(FUNCTION)?;
    let balances = dedup.env().required("BALANCES_TABLE")?;
    let dedup = ledger::configure(dedup.dynamodb().await);
    Ok(lambda_runtime::run_concurrent(
        dedup.door(lambda_dedup_runtime::source::Kinesis, move |e| {
            ledger::plan(&balances, e)
        })?,
    )
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_cli::template::{Flow, function_entry};
    use lambda_dedup_runtime::testing::assert_declared_key_spec;

    /// The template declares this function's key spec and flow for the operators' tool
    /// (`Metadata.LambdaDedupKeySpec`, `LambdaDedupFlow`; `lambda-dedup` links no function's
    /// code): they must stay the ones this code declares.
    #[test]
    fn the_template_declares_this_functions_key_spec_and_flow() {
        let template = include_str!("../../../infra/template.yaml");
        let entry = function_entry(template, Some(FUNCTION)).expect("the function's entry");
        assert_declared_key_spec(entry.key_spec.as_deref(), FUNCTION, ledger::configure);
        assert_eq!(entry.flow, Some(Flow::Transactional));
    }
}
