//! The scheduled sweep (any event without `Records`): every item still waiting longer than the
//! bound (or of unknown age) stamped `redrive_requested_at`, conditioned on it still waiting, so
//! it comes back on the stream; the oldest waiting item's age reported.

use std::time::{Duration, SystemTime};

use lambda_dedup::items::{Filter, text};
use lambda_dedup::{Item, StoreError, Value};

use super::act::Act;
use super::layout::{REDRIVE, Waiting};
use super::service::RelayService;
use crate::in_order::Swept;

impl<A: Act> RelayService<A> {
    /// The sweep (see the module's rules), at `now`: prints its result as one EMF line and
    /// returns it. A store error stops it (the next scheduled run starts over; stamps are
    /// idempotent).
    pub async fn sweep(&self, now: SystemTime) -> Result<Swept, StoreError> {
        let r = &self.relay;
        let (layout, table) = (&r.relay.layout, &r.relay.table);
        let status = layout.attributes.status.name().to_owned();
        let filter = match layout.waiting {
            Waiting::Holds(value) => Filter::Equals(status, value.value().to_owned()),
            Waiting::Absent => Filter::Missing(status),
        };
        let waiting = r.items.scan(table, &filter).await?;
        let now_ms = lambda_dedup::clock::epoch_millis(now);
        let mut swept = Swept {
            pending: waiting.len() as u64,
            ..Swept::default()
        };
        for item in waiting {
            let Some(key) = text(&item, layout.attributes.key.name()) else {
                continue;
            };
            let age = millis(&item, layout.attributes.created.name())
                .map(|c| Duration::from_millis(now_ms.saturating_sub(c)));
            if let Some(age) = age {
                swept.oldest_pending = swept.oldest_pending.max(age);
            }
            if age.is_some_and(|a| a <= r.relay.redrive_after) {
                continue;
            }
            let stamp = r
                .update(key, "SET #redrive = :now", true)
                .name("#redrive", REDRIVE.name())
                .value(":now", now_ms);
            if r.items.write(&[stamp]).await? {
                swept.redriven += 1;
            }
        }
        tracing::info!(
            function = %r.relay.function,
            pending = swept.pending,
            redriven = swept.redriven,
            oldest_pending_s = swept.oldest_pending.as_secs(),
            "sweep done"
        );
        crate::emf::emit(swept.emf_line(&r.relay.function, layout.waiting_metric.name()));
        Ok(swept)
    }
}

/// The number attribute `name` of `item` (stored as a number or its text).
fn millis(item: &Item, name: &str) -> Option<u64> {
    match item.0.get(name) {
        Some(Value::N(n) | Value::S(n)) => n.parse().ok(),
        _ => None,
    }
}
