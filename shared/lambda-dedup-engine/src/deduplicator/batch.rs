//! Batch-transaction mode: the transactional flow for a whole batch, its events committed in as
//! few transactions as the store can, and the duplicate pre-filter's read in flight while the
//! batch's plans are made (issue 45).

use lambda_dedup::{CommitRequest, DedupKey, Derived, Mark, Message, Seen};

use super::{Deduplicator, Plan, planned};
use crate::handler_error::HandlerError;
use crate::outcome::Outcome;
use crate::retry::RetryCause;

impl<E: 'static> Deduplicator<E> {
    /// The transactional flow for a whole batch at once: the marks and effects of every event
    /// that needs writing go to DynamoDB in as few `TransactWriteItems` as possible (usually one
    /// for a batch of 10), with the same guarantees per event as [`transactional`](Self::transactional).
    /// Returns one outcome per message, in order. Messages are not ordered among themselves: for
    /// FIFO queues use [`crate::run_batch_transactional`], which keeps group order.
    ///
    /// A fault stays with its own message (S12): writes DynamoDB refuses for good reject that
    /// message alone (`effect_refused`) while the others commit; a `plan` that panics for one
    /// message makes that message a retry; only a transient fault of a shared transaction
    /// (throttling, a conflict) retries every message of it.
    ///
    /// With the duplicate pre-filter on, its read is sent as soon as the batch's keys are
    /// derived, and the plans are made while it is in flight: the read needs only the keys, so
    /// the batch's time is the read's or the plans', not both.
    ///
    /// Up to `max_in_flight` of the batch's transactions are in flight at once; no two of them
    /// write the same item (see `DynamoStore::commit_batch_bounded`).
    pub async fn transactional_batch<F>(
        &self,
        messages: &[Message],
        max_in_flight: usize,
        plan: F,
    ) -> Vec<Outcome>
    where
        F: Fn(&Derived) -> Result<Plan<E>, HandlerError>,
    {
        let mut outcomes: Vec<Option<Outcome>> = messages.iter().map(|_| None).collect();
        let mut events: Vec<(usize, Derived)> = Vec::new();
        for (i, msg) in messages.iter().enumerate() {
            match self.derive(msg) {
                Ok(event) => match self.cached(&event) {
                    Some(seen) => outcomes[i] = Some(self.seen(msg, &event, seen)),
                    None => events.push((i, event)),
                },
                Err(outcome) => outcomes[i] = Some(outcome),
            }
        }
        let keys: Vec<&DedupKey> = events.iter().map(|(_, e)| &e.key).collect();
        // `join!` polls the read first, so it is sent before the first plan is made.
        let (marks, plans) = futures::join!(self.known_marks(&keys), async {
            let plans: Vec<_> = events
                .iter()
                .map(|(i, event)| planned(&messages[*i], event, &plan))
                .collect();
            plans
        });
        let now = self.store.now();
        let mut marks = marks.into_iter();
        let mut todo: Vec<(usize, Derived, Plan<E>)> = Vec::with_capacity(events.len());
        for ((i, event), planned) in events.into_iter().zip(plans) {
            let mark = marks.next().flatten();
            match (
                planned,
                mark.and_then(|m| m.classify(event.fingerprint.as_ref(), now)),
            ) {
                (Err(outcome), _) => outcomes[i] = Some(outcome),
                (Ok(_), Some(seen @ Seen::Duplicate(_))) => {
                    outcomes[i] = Some(self.seen(&messages[i], &event, seen));
                }
                // In progress, a conflict or nothing: the conditional write judges it.
                (Ok(plan), _) => todo.push((i, event, plan)),
            }
        }
        let requests: Vec<CommitRequest<'_, E>> = todo
            .iter()
            .map(|(_, e, p)| CommitRequest {
                key: &e.key,
                fingerprint: e.fingerprint.as_ref(),
                result: p.result.as_deref(),
                effects: &p.effects,
            })
            .collect();
        let results = self
            .store
            .commit_batch_bounded(&requests, max_in_flight)
            .await;
        for ((i, event, plan), result) in todo.iter().zip(results) {
            outcomes[*i] = Some(self.committed(&messages[*i], event, plan, result));
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Outcome::retry(RetryCause::NotProcessed, "not processed")))
            .collect()
    }

    /// The duplicate pre-filter's read ([`with_duplicate_prefilter`](Self::with_duplicate_prefilter)):
    /// the marks the store holds for `keys`, one per key, in order; none when the pre-filter is
    /// off, there is nothing to read, or the read failed (a filter only: the conditional writes
    /// still decide every event).
    async fn known_marks(&self, keys: &[&DedupKey]) -> Vec<Option<Mark>> {
        if !self.prefilter || keys.is_empty() {
            return Vec::new();
        }
        self.store.get_many(keys).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "duplicate pre-filter: read failed; writing all");
            Vec::new()
        })
    }
}
