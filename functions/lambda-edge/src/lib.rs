//! The Lambda edge that every function shares: the only library that knows `aws_lambda_events`
//! and `lambda_runtime`. It converts SQS events to the library's [`dedup::Message`]s and the
//! [`dedup_batch::BatchReport`] back to a partial batch response, reads the configuration every
//! function has from the environment (refusing to start on a bad one), and logs the account.
//!
//! # Layout
//! - [`settings`]: [`Settings`] from `DEDUP_*` variables, including the S9 retention check.
//! - [`sqs`]: [`run_sqs`]: one SQS invocation, from event to `SqsBatchResponse`.
//! - [`reconcile`]: late events (S10) to the reconciliation queue.

pub mod emf;
pub mod reconcile;
pub mod settings;
pub mod sqs;
#[doc(hidden)]
pub mod testing;

pub use settings::{Settings, SettingsError, optional, required};
pub use sqs::{messages, response, run_sqs, run_sqs_batch};

/// The invocation's deadline, for leases (S6): a lease must not outlive the invocation.
///
/// Lambda sends it as epoch milliseconds. `cargo lambda watch` (1.9) sends the timeout itself
/// (e.g. `600000`) instead; a value that cannot be a deadline (before 2001) is read as "that many
/// milliseconds from now", so local runs behave like Lambda. No deadline at all gives `None`.
pub fn deadline(ctx: &lambda_runtime::Context) -> Option<std::time::SystemTime> {
    use std::time::{Duration, SystemTime};
    const YEAR_2001_MS: u64 = 978_307_200_000;
    match ctx.deadline {
        0 => None,
        ms if ms < YEAR_2001_MS => Some(SystemTime::now() + Duration::from_millis(ms)),
        _ => Some(ctx.deadline()),
    }
}

/// Sets up JSON or text logging as the Lambda environment asks (`AWS_LAMBDA_LOG_FORMAT`,
/// `AWS_LAMBDA_LOG_LEVEL`, or `RUST_LOG`).
pub fn init_tracing() {
    lambda_runtime::tracing::init_default_subscriber();
}

#[cfg(test)]
mod sample_events {
    //! The sample events in `events/` (for `cargo lambda invoke --data-file`) stay valid: each
    //! parses as the event its function takes, and every SQS message in them has a key.

    use aws_lambda_events::event::dynamodb::Event;
    use aws_lambda_events::event::sqs::SqsEvent;

    fn read(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../events")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn sqs_samples_parse_and_derive_keys() {
        for name in [
            "ledger-credit.json",
            "fine-notice.json",
            "payment-request.json",
        ] {
            let event: SqsEvent = serde_json::from_str(&read(name)).expect(name);
            let spec = dedup::KeySpec::cloudevents(
                dedup::Scope::new("demo", "sample").expect("scope"),
                "tenantid",
            );
            for m in crate::messages(&event) {
                assert!(spec.derive(&m).is_ok(), "{name}: {}", m.message_id);
            }
        }
    }

    #[test]
    fn stream_and_schedule_samples_parse() {
        for name in ["intent-insert.json", "mark-ttl-purge.json"] {
            let event: Event = serde_json::from_str(&read(name)).expect(name);
            assert_eq!(event.records.len(), 1, "{name}");
        }
        let sweep: serde_json::Value =
            serde_json::from_str(&read("relay-sweep.json")).expect("sweep");
        assert!(
            sweep.get("Records").is_none(),
            "the relay tells a sweep by its shape"
        );
    }
}
