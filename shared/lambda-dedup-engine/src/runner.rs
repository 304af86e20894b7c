//! Running a batch (S12): bounded concurrency, FIFO order per message group, exactly the failures
//! reported.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::{FutureExt, StreamExt};
use lambda_dedup::Message;

use crate::deduplicator::{Deduplicator, Plan};
use crate::handler_error::HandlerError;
use crate::outcome::{Account, Outcome};
use crate::retry::RetryCause;

/// The messages of one FIFO group, with their positions in the batch.
type Group = Vec<(usize, Message)>;

/// What a batch came to: each message id with its outcome, in batch order. The account and the
/// failures are derived from the outcomes, so the three views cannot drift apart.
#[derive(Debug, Clone, Default)]
pub struct BatchReport {
    /// The account of this batch (S14), kept equal to the outcomes' count.
    pub account: Account,
    outcomes: Vec<(String, Outcome)>,
}

/// Processes `messages` with `process`, at most `max_concurrency` at a time.
///
/// - Standard queues (no message has a group id): messages run concurrently, bounded.
/// - FIFO queues: messages of one group run one after another in batch order; groups run
///   concurrently, bounded. After the first message of a group that is not acknowledged, the later
///   messages of that group are not processed and are reported failed, so the queue redelivers
///   them after it, in order.
/// - A panicking `process` is caught: that message is a retry, the rest of the batch goes on.
///
/// The report lists exactly the messages that were not acknowledged.
pub async fn run_batch<F, Fut>(
    messages: Vec<Message>,
    max_concurrency: usize,
    process: F,
) -> BatchReport
where
    F: Fn(Message) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let max_concurrency = max_concurrency.max(1);
    let ids: Vec<String> = messages.iter().map(|m| m.message_id.clone()).collect();
    let fifo = messages.iter().any(|m| m.group_id.is_some());
    let process = &process;

    let mut results: Vec<(usize, Outcome)> = if fifo {
        // Groups in order of first appearance, messages in batch order within a group.
        let mut groups: Vec<(Option<String>, Group)> = Vec::new();
        for (i, m) in messages.into_iter().enumerate() {
            match groups.iter_mut().find(|(g, _)| *g == m.group_id) {
                Some((_, list)) => list.push((i, m)),
                None => groups.push((m.group_id.clone(), vec![(i, m)])),
            }
        }
        futures::stream::iter(groups)
            .map(|(_, list)| async move {
                #[cfg(feature = "simulation-planted")]
                if lambda_dedup::planted::Planted::FifoGroupPipelined.is_on() {
                    return pipelined(process, list).await;
                }
                let mut out = Vec::with_capacity(list.len());
                let mut blocked = false;
                for (i, m) in list {
                    let outcome = if blocked {
                        Outcome::retry(
                            RetryCause::Blocked,
                            "an earlier message of its FIFO group was not acknowledged",
                        )
                    } else {
                        guarded(process, m).await
                    };
                    blocked |= !outcome.acknowledged();
                    #[cfg(feature = "simulation-planted")]
                    if lambda_dedup::planted::Planted::FifoGroupNotBlocked.is_on() {
                        blocked = false;
                    }
                    out.push((i, outcome));
                }
                out
            })
            .buffer_unordered(max_concurrency)
            .flat_map(futures::stream::iter)
            .collect()
            .await
    } else {
        futures::stream::iter(messages.into_iter().enumerate())
            .map(|(i, m)| async move { (i, guarded(process, m).await) })
            .buffer_unordered(max_concurrency)
            .collect()
            .await
    };
    results.sort_by_key(|(i, _)| *i);
    BatchReport::from_outcomes(
        results
            .into_iter()
            .map(|(i, o)| (ids.get(i).cloned().unwrap_or_default(), o))
            .collect(),
    )
}

impl BatchReport {
    /// The report of outcomes given in batch order.
    pub fn from_outcomes(outcomes: Vec<(String, Outcome)>) -> Self {
        let mut account = Account::default();
        for (_, outcome) in &outcomes {
            account.record(outcome);
        }
        BatchReport { account, outcomes }
    }

    /// Each message id with its outcome, in batch order.
    pub fn outcomes(&self) -> &[(String, Outcome)] {
        &self.outcomes
    }

    /// The outcomes, consumed.
    pub fn into_outcomes(self) -> Vec<(String, Outcome)> {
        self.outcomes
    }

    /// The message ids to report as batch item failures (redelivered by the queue): exactly the
    /// outcomes not acknowledged, in batch order.
    pub fn failures(&self) -> Vec<&str> {
        self.outcomes
            .iter()
            .filter(|(_, o)| !o.acknowledged())
            .map(|(id, _)| id.as_str())
            .collect()
    }

    /// Replaces the outcome of message `id` (e.g. a late event once it is safely routed to
    /// reconciliation is acknowledged), keeping the account equal to the outcomes.
    pub fn set_outcome(&mut self, id: &str, outcome: Outcome) {
        if let Some((_, o)) = self.outcomes.iter_mut().find(|(i, _)| i == id) {
            *o = outcome;
        }
        let mut account = Account::default();
        for (_, o) in &self.outcomes {
            account.record(o);
        }
        self.account = account;
    }
}

/// The transactional flow over a whole batch in batch-transaction mode
/// ([`Deduplicator::transactional_batch`]: usually one `TransactWriteItems` for the batch; for
/// a batch that needs several, up to `max_concurrency` of them in flight at once, never two
/// writing the same item). FIFO
/// batches keep their order per group instead, one message at a time
/// ([`run_batch`] with [`Deduplicator::transactional`]), since a shared transaction cannot stop a
/// group at its first failure.
///
/// In both, a fault stays with its own message (S12): a panicking `plan` is a retry of that
/// message, and writes the store refuses for good reject that message alone (`effect_refused`)
/// while the rest of the batch is applied. On any store, with its own effect type `E`
/// (`lambda_dedup_postgres::PgStore` commits the batch in one transaction, a savepoint per event).
pub async fn run_batch_transactional<E: 'static, F>(
    messages: Vec<Message>,
    max_concurrency: usize,
    dedup: &Deduplicator<E>,
    plan: F,
) -> BatchReport
where
    F: Fn(&lambda_dedup::Derived) -> Result<Plan<E>, HandlerError>,
{
    if messages.iter().any(|m| m.group_id.is_some()) {
        let plan = &plan;
        return run_batch(messages, max_concurrency, |m| async move {
            dedup.transactional(&m, plan).await
        })
        .await;
    }
    let outcomes = dedup
        .transactional_batch(&messages, max_concurrency, plan)
        .await;
    BatchReport::from_outcomes(
        messages
            .iter()
            .map(|m| m.message_id.clone())
            .zip(outcomes)
            .collect(),
    )
}

/// Planted `fifo-group-pipelined`: a group's messages two at a time, the next pair blocked
/// after a failure: order breaks only in an interleaving where a pair's second lands first.
#[cfg(feature = "simulation-planted")]
async fn pipelined<F, Fut>(process: &F, list: Group) -> Vec<(usize, Outcome)>
where
    F: Fn(Message) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut out = Vec::with_capacity(list.len());
    let mut list = list.into_iter().peekable();
    while list.peek().is_some() {
        let pair: Vec<_> = list.by_ref().take(2).collect();
        if out
            .iter()
            .any(|(_, o): &(usize, Outcome)| !o.acknowledged())
        {
            let blocked = pair
                .into_iter()
                .map(|(i, _)| (i, Outcome::retry(RetryCause::Blocked, "blocked (planted)")));
            out.extend(blocked);
            continue;
        }
        let run = pair
            .into_iter()
            .map(|(i, m)| async move { (i, guarded(process, m).await) });
        out.extend(futures::future::join_all(run).await);
    }
    out
}

async fn guarded<F, Fut>(process: &F, m: Message) -> Outcome
where
    F: Fn(Message) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let id = m.message_id.clone();
    match AssertUnwindSafe(process(m)).catch_unwind().await {
        Ok(outcome) => outcome,
        #[cfg(feature = "simulation-planted")]
        Err(_) if lambda_dedup::planted::Planted::PanicAcknowledged.is_on() => Outcome::Applied,
        Err(_) => {
            tracing::error!(message_id = %id, "handler panicked; the message will be redelivered");
            Outcome::retry(RetryCause::Panicked, "handler panicked")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, SystemTime};

    fn msg(id: &str, group: Option<&str>) -> Message {
        Message {
            message_id: id.into(),
            body: id.as_bytes().to_vec(),
            group_id: group.map(str::to_owned),
            ..Message::default()
        }
    }

    fn by_body(m: &Message) -> Outcome {
        match std::str::from_utf8(&m.body).unwrap_or_default() {
            b if b.starts_with("fail") => Outcome::retry(RetryCause::Transient, "told to"),
            b if b.starts_with("dup") => Outcome::Duplicate {
                first_seen_at: SystemTime::now(),
                result: None,
            },
            b if b.starts_with("conflict") => Outcome::Conflict,
            b if b.starts_with("bad") => Outcome::Rejected {
                code: crate::Reason::IdentityMissing,
                reason: "x".into(),
                key: None,
                invalid: None,
            },
            _ => Outcome::Applied,
        }
    }

    /// S12: standard queue: exactly the unacknowledged messages are reported, in batch order,
    /// and the account closes (S14).
    #[tokio::test]
    async fn s12_reports_exactly_the_failures() {
        let batch = ["ok1", "fail1", "dup1", "conflict1", "bad1", "ok2", "fail2"]
            .map(|id| msg(id, None))
            .to_vec();
        let report = run_batch(batch, 3, |m| async move { by_body(&m) }).await;
        assert_eq!(report.failures(), ["fail1", "conflict1", "bad1", "fail2"]);
        assert_eq!(report.account.received, 7);
        assert_eq!(report.account.applied, 2);
        assert_eq!(report.account.duplicate, 1);
        assert_eq!(report.account.retry, 2);
        assert!(report.account.closes());
        let order: Vec<&str> = report
            .outcomes()
            .iter()
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(
            order,
            ["ok1", "fail1", "dup1", "conflict1", "bad1", "ok2", "fail2"]
        );
    }

    /// S12: concurrency is bounded, and used.
    #[tokio::test]
    async fn s12_concurrency_is_bounded() {
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let batch: Vec<Message> = (0..10).map(|i| msg(&format!("m{i}"), None)).collect();
        let report = run_batch(batch, 3, |_| async {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            Outcome::Applied
        })
        .await;
        assert_eq!(report.account.applied, 10);
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    /// S12: FIFO: within a group, order is kept and after the first failure the later messages
    /// are reported failed without being processed; other groups go on.
    #[tokio::test]
    async fn s12_fifo_stops_a_group_at_its_first_failure() {
        let batch = vec![
            msg("a1", Some("A")),
            msg("b1", Some("B")),
            msg("fail-a2", Some("A")),
            msg("a3", Some("A")),
            msg("b2", Some("B")),
            msg("a4", Some("A")),
        ];
        let seen = Mutex::new(Vec::new());
        let report = run_batch(batch, 4, |m| {
            let seen = &seen;
            async move {
                // Later messages of a group must not overtake earlier ones.
                tokio::time::sleep(Duration::from_millis(if m.message_id == "a1" {
                    30
                } else {
                    1
                }))
                .await;
                seen.lock().expect("lock").push(m.message_id.clone());
                by_body(&m)
            }
        })
        .await;
        assert_eq!(report.failures(), ["fail-a2", "a3", "a4"]);
        let seen = seen.into_inner().expect("lock");
        assert!(!seen.contains(&"a3".to_owned()) && !seen.contains(&"a4".to_owned()));
        let pos = |id: &str| seen.iter().position(|s| s == id).expect("processed");
        assert!(pos("a1") < pos("fail-a2"), "order within group A: {seen:?}");
        assert!(pos("b1") < pos("b2"));
        assert_eq!(report.account.retry, 3);
        assert!(report.account.closes());
    }

    /// A panicking handler loses nothing: that message is retried, the others complete.
    #[tokio::test]
    async fn a_panic_is_a_retry_not_a_loss() {
        let batch = vec![msg("ok", None), msg("boom", None), msg("ok2", None)];
        let report = run_batch(batch, 2, |m| async move {
            if m.message_id == "boom" {
                panic!("handler bug");
            }
            Outcome::Applied
        })
        .await;
        assert_eq!(report.failures(), ["boom"]);
        assert_eq!(report.account.applied, 2);
        assert!(report.account.closes());
    }
}
