//! Batch-transaction mode: the transactional flow for a whole batch, its events committed in as
//! few transactions as the store can, with the duplicate pre-filter's read before them.

use lambda_dedup::{CommitRequest, Derived, Message, Seen};

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
        let mut todo: Vec<(usize, Derived, Plan<E>)> = Vec::new();
        for (i, msg) in messages.iter().enumerate() {
            let event = match self.derive(msg) {
                Ok(e) => e,
                Err(outcome) => {
                    outcomes[i] = Some(outcome);
                    continue;
                }
            };
            if let Some(seen) = self.cached(&event) {
                outcomes[i] = Some(self.seen(msg, &event, seen));
                continue;
            }
            match planned(msg, &event, &plan) {
                Ok(p) => todo.push((i, event, p)),
                Err(outcome) => outcomes[i] = Some(outcome),
            }
        }
        if self.prefilter && !todo.is_empty() {
            todo = self.known_duplicates(messages, todo, &mut outcomes).await;
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

    /// The duplicate pre-filter ([`with_duplicate_prefilter`](Self::with_duplicate_prefilter)):
    /// settles the events whose completed mark the store holds, and returns the others.
    async fn known_duplicates(
        &self,
        messages: &[Message],
        todo: Vec<(usize, Derived, Plan<E>)>,
        outcomes: &mut [Option<Outcome>],
    ) -> Vec<(usize, Derived, Plan<E>)> {
        let keys: Vec<&lambda_dedup::DedupKey> = todo.iter().map(|(_, e, _)| &e.key).collect();
        let marks = match self.store.get_many(&keys).await {
            Ok(marks) => marks,
            Err(e) => {
                // A filter only: the conditional writes still decide every event.
                tracing::warn!(error = %e, "duplicate pre-filter: read failed; writing all");
                return todo;
            }
        };
        let now = self.store.now();
        let mut rest = Vec::with_capacity(todo.len());
        for ((i, event, plan), mark) in todo.into_iter().zip(marks) {
            match mark.and_then(|m| m.classify(event.fingerprint.as_ref(), now)) {
                Some(seen @ Seen::Duplicate(_)) => {
                    outcomes[i] = Some(self.seen(&messages[i], &event, seen));
                }
                // In progress, a conflict or nothing: the conditional write judges it.
                _ => rest.push((i, event, plan)),
            }
        }
        rest
    }
}
