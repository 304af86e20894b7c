//! `intent-relay`: triggered by the stream of the intents table that `fine-notices` writes in the
//! same transaction as its marks. Each new intent is applied to the external collection API with
//! the intent's id as `Idempotency-Key` — the same on every retry — and marked `CONFIRMED` once the
//! API answers 2xx (S7).
//!
//! It is a relay of the runtime ([`lambda_dedup_runtime::relay`]), which never stalls its shard:
//! - a **transient** failure (5xx, 409 in flight, 429, timeouts, DynamoDB faults) is reported as
//!   the batch item failure, so Lambda retries from that record, in order (S12, S13); so is an
//!   answer that says the relay is **misconfigured** (a 3xx, 401, 403, 404, 405, a TLS or DNS
//!   failure: `provider_misconfigured_*`, logged at error level), so a wrong URL or key parks
//!   nothing;
//! - a **permanent** refusal (400, 410, 422…, classified once by
//!   [`lambda_dedup_http::CallError::permanence`]), or an intent that can never be posted as it is, is
//!   **parked**: the intent becomes `FAILED` with a reason code, is counted (`Parked`), and the
//!   relay moves on (S15);
//! - before each record, if the invocation has less time left than one record needs
//!   (`RELAY_RECORD_BUDGET_MS`: one provider call and the writes around it), it stops and
//!   reports the first record it did not reach, so a slow provider cannot make the invocation
//!   time out and start the whole batch over; a call still out `DEDUP_DEADLINE_MARGIN_MS`
//!   before the deadline is abandoned and its record retried;
//! - an intent that is no longer `PENDING` (confirmed or parked, seen when the stream replays) is
//!   never posted again: checked on the record's new image, then with a strongly consistent
//!   read before the call, and every write is conditioned on `PENDING`;
//! - nothing stays `PENDING` silently: the sweep, run on a schedule (any event without
//!   `Records`), re-drives intents left pending longer than `RELAY_REDRIVE_AFTER_SECONDS` (the
//!   stream may have given their records up) and emits the age of the oldest one
//!   (`OldestPendingSeconds`, alarmed on).
//!
//! This crate is the relay's own part ([`mod@relay`]: how an intent reads, the call, where its
//! settings are); [`service`] is the relay on the builder (`RelayService::new`), which `main.rs` runs
//! on DynamoDB and the tests run on the memory store.

pub mod relay;

pub use lambda_dedup_runtime::relay::Swept;
pub use lambda_dedup_runtime::relay::{Handled, RelayService, Tally};
pub use relay::{Collections, FUNCTION, LAYOUT, SETTINGS, service};
