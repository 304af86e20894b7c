//! The kill-and-restart run the PostgreSQL and Valkey chaos tests share (issue 23, S5, S13):
//! 3 deliveries each of 60 credit events, shuffled, committed by several instances in batches of
//! 5 (transactional flow) while the caller's server is SIGKILLed and restarted once a third
//! have settled; every failed delivery is redelivered until none is left. What each store
//! then holds (balances, one mark per event) its own test checks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dedup_tests::credit;
use lambda_dedup::{Derived, Message};
use lambda_dedup_batch::{Deduplicator, HandlerError, Outcome, Plan};

/// Events of the run, and copies delivered of each.
pub(crate) const EVENTS: usize = 60;
const COPIES: usize = 3;

/// A server the run can kill (SIGKILL) and start again on the same port and data.
pub(crate) trait Restartable {
    fn kill(&mut self);
    fn start(&mut self) -> impl std::future::Future<Output = ()>;
}

/// What the run saw.
pub(crate) struct KillRun {
    /// Deliveries made (first ones).
    pub total: usize,
    /// Each account's balance if every event applied once.
    pub expected: BTreeMap<String, i64>,
    pub applied: usize,
    pub retried: usize,
    pub settled_at_kill: usize,
    /// The reasons of the retries.
    pub reasons: BTreeSet<String>,
}

/// A small deterministic shuffle (no seed to chase).
pub(crate) fn shuffle<T>(items: &mut [T]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..items.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        items.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

/// The deliveries (shuffled) and the balances they must leave.
fn credits() -> (Vec<Message>, BTreeMap<String, i64>) {
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut deliveries: Vec<Message> = Vec::new();
    for e in 0..EVENTS {
        let account = format!("acct-{}", e % 6);
        let amount = (e % 7 + 1) as i64;
        *expected.entry(account.clone()).or_default() += amount;
        for c in 0..COPIES {
            deliveries.push(credit(
                &format!("m{e}-{c}"),
                &format!("evt-{e}"),
                &account,
                amount,
            ));
        }
    }
    shuffle(&mut deliveries);
    (deliveries, expected)
}

#[derive(Default)]
struct Counters {
    done: AtomicUsize,
    applied: AtomicUsize,
    retried: AtomicUsize,
    reasons: Mutex<BTreeSet<String>>,
}

/// The run: `instances` commit the credits with `plan` while `server` is killed and restarted.
pub(crate) async fn credits_through_a_kill<E, P>(
    instances: &[Arc<Deduplicator<E>>],
    plan: P,
    server: &mut impl Restartable,
) -> KillRun
where
    E: Send + Sync + 'static,
    P: Fn(&Derived) -> Result<Plan<E>, HandlerError> + Copy + Send + Sync + 'static,
{
    let (deliveries, expected) = credits();
    let total = deliveries.len();
    let queue = Arc::new(Mutex::new(VecDeque::from(deliveries)));
    let counters = Arc::new(Counters::default());
    let deadline = Instant::now() + Duration::from_secs(90);
    let workers: Vec<_> = instances
        .iter()
        .map(|dedup| {
            let (dedup, queue, c) = (dedup.clone(), queue.clone(), counters.clone());
            tokio::spawn(async move { work(&dedup, &queue, &c, plan, total, deadline).await })
        })
        .collect();

    // Mid-run: a third settled, then SIGKILL, a pause with the server down, a restart.
    while counters.done.load(Ordering::SeqCst) < total / 3 {
        assert!(
            Instant::now() < deadline,
            "a third of the deliveries did not settle within 90 s, before any kill"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill();
    let settled_at_kill = counters.done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.start().await;
    for w in workers {
        // A worker stuck in a call (a lock never released) fails the run, not hangs it.
        tokio::time::timeout_at((deadline + Duration::from_secs(10)).into(), w)
            .await
            .expect("deliveries still hanging after 100 s")
            .expect("a worker");
    }
    assert!(
        settled_at_kill < total,
        "the kill came mid-run ({settled_at_kill} of {total} settled)"
    );
    let retried = counters.retried.load(Ordering::SeqCst);
    assert!(
        retried > 0,
        "the kill failed some deliveries, which were redelivered"
    );
    KillRun {
        total,
        expected,
        applied: counters.applied.load(Ordering::SeqCst),
        retried,
        settled_at_kill,
        reasons: counters.reasons.lock().expect("reasons").clone(),
    }
}

/// One instance: batches of 5 from the queue until every delivery is settled; retries go back.
async fn work<E, P>(
    dedup: &Deduplicator<E>,
    queue: &Mutex<VecDeque<Message>>,
    c: &Counters,
    plan: P,
    total: usize,
    deadline: Instant,
) where
    E: Send + Sync + 'static,
    P: Fn(&Derived) -> Result<Plan<E>, HandlerError> + Copy,
{
    while c.done.load(Ordering::SeqCst) < total {
        assert!(
            Instant::now() < deadline,
            "deliveries still failing after 90 s: {} of {total} settled",
            c.done.load(Ordering::SeqCst)
        );
        let batch: Vec<Message> = {
            let mut q = queue.lock().expect("queue");
            let n = q.len().min(5);
            q.drain(..n).collect()
        };
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let outcomes = dedup.transactional_batch(&batch, 5, plan).await;
        let mut again = Vec::new();
        for (msg, outcome) in batch.into_iter().zip(outcomes) {
            match outcome {
                Outcome::Applied => {
                    c.applied.fetch_add(1, Ordering::SeqCst);
                    c.done.fetch_add(1, Ordering::SeqCst);
                }
                Outcome::Duplicate { .. } => {
                    c.done.fetch_add(1, Ordering::SeqCst);
                }
                Outcome::Retry { reason } => {
                    c.reasons.lock().expect("reasons").insert(reason);
                    again.push(msg);
                }
                other => panic!("a delivery was not retried nor settled: {other:?}"),
            }
        }
        if !again.is_empty() {
            c.retried.fetch_add(again.len(), Ordering::SeqCst);
            queue.lock().expect("queue").extend(again);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}
