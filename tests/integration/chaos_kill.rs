//! The kill-and-restart run the PostgreSQL and Valkey chaos tests share (issue 23, S5, S13):
//! 3 deliveries each of 60 credit events, shuffled, committed by several instances in batches of
//! 5 (transactional flow) while the caller's server is SIGKILLed and restarted once a third
//! have settled; every failed delivery is redelivered until none is left. What each store
//! then holds (balances, one mark per event) its own test reads; [`check`] judges it. Also the
//! leased flow's claims across a kill and restart ([`claims_across_a_restart`]), and the server
//! process each test owns ([`Process`], [`Restartable`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dedup_tests::credit;
use lambda_dedup::{
    Claim, DedupKey, Derived, ManualClock, MarkStore, Message, Scope, Seen, StoreError,
};
use lambda_dedup_engine::{Deduplicator, HandlerError, Outcome, Plan};

/// Events of the run, and copies delivered of each.
pub(crate) const EVENTS: usize = 60;
const COPIES: usize = 3;

/// The binary directory or file a chaos test runs its server from, named by the variable
/// `var` that `cargo xtask test -p dedup-tests -- {filter}` sets; why not, when it is unset.
pub(crate) fn bin(var: &str, filter: &str) -> Result<PathBuf, String> {
    std::env::var(var).map(PathBuf::from).map_err(|_| {
        format!("{var} is not set; `cargo xtask test -p dedup-tests -- {filter}` sets it")
    })
}

/// A server process a chaos test owns: a scratch data directory and a free port of its own,
/// the process in a process group of its own; killed and the directory removed when dropped.
pub(crate) struct Process {
    pub(crate) data: PathBuf,
    pub(crate) port: u16,
    child: Option<Child>,
}

impl Process {
    /// A fresh data directory (named after `store`) and a free port; nothing started yet.
    pub(crate) fn new(store: &str) -> Self {
        let data = std::env::temp_dir().join(format!(
            "lambda-dedup-{store}-chaos-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&data).expect("data directory");
        Self {
            data,
            port: dedup_tests::free_port(),
            child: None,
        }
    }

    /// SIGKILL to the process group: the server and every process it forked, at once; no
    /// shutdown, no final write of anything.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// A server the run can kill (SIGKILL) and start again on the same port and data.
pub(crate) trait Restartable {
    /// The server's name, for messages.
    const NAME: &str;
    fn process(&mut self) -> &mut Process;
    /// The command that runs the server in the foreground on [`Process`]'s port and data.
    fn command(&self) -> Command;
    /// Whether the server answers (its recovery done).
    fn ready(&self) -> impl Future<Output = bool>;

    fn kill(&mut self) {
        self.process().kill();
    }

    /// Starts the server and waits until it answers; starts it again when it exits first (the
    /// port not yet free after a kill); fails after 60 s.
    fn start(&mut self) -> impl Future<Output = ()> {
        async move {
            let started = Instant::now();
            loop {
                let child = std::os::unix::process::CommandExt::process_group(
                    self.command().stdout(Stdio::null()).stderr(Stdio::null()),
                    0,
                )
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e}", Self::NAME));
                self.process().child = Some(child);
                while started.elapsed() < Duration::from_secs(60) {
                    if self.ready().await {
                        return;
                    }
                    if let Some(Ok(Some(_))) = self.process().child.as_mut().map(Child::try_wait) {
                        break; // it exited (e.g. the port not yet free): start it again
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{} did not come back within 60 s",
                    Self::NAME
                );
            }
        }
    }
}

/// The server `init` made, started; `None` after reporting that `test` is skipped when there is
/// none (the binaries not named: plain `cargo test`).
pub(crate) async fn started<S: Restartable>(init: Result<S, String>, test: &str) -> Option<S> {
    match init {
        Ok(mut server) => {
            server.start().await;
            Some(server)
        }
        Err(why) => {
            lambda_dedup_conformance::report(&format!("{test} skipped: {why}"));
            None
        }
    }
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

/// Issue 23, S5, S13: what a store holds after [`credits_through_a_kill`], read back by the
/// store's test: each balance is the sum of its distinct events (no credit twice, none lost),
/// one mark per event, and no event applied twice (a mark acknowledged before the kill was
/// still there after it: were it lost, its event would be applied again on redelivery).
pub(crate) fn check(store: &str, run: &KillRun, balances: &BTreeMap<String, i64>, marks: usize) {
    assert_eq!(
        balances, &run.expected,
        "each balance is the sum of its distinct events: 0 double effects, 0 lost"
    );
    assert_eq!(marks, EVENTS, "one mark per event");
    assert!(
        run.applied <= EVENTS,
        "no acknowledged mark was lost by the kill: no event applied twice"
    );
    lambda_dedup_conformance::report(&format!(
        "{store} chaos: {} deliveries of {EVENTS} events, killed at {} settled, {} redeliveries, \
         {} applied (the rest duplicates; an applied commit whose answer the kill lost is a \
         duplicate on redelivery); redelivered for: {:?}",
        run.total, run.settled_at_kill, run.retried, run.applied, run.reasons
    ));
}

/// `call` until it answers, at most `tries` times more, 100 ms apart: a store whose
/// connection may need a try to come back after a restart (a transient fault, as with the
/// server down). With 0 tries, the first answer stands.
async fn after_restart<T, F>(tries: usize, call: impl Fn() -> F) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, StoreError>>,
{
    let mut out = call().await;
    for _ in 0..tries {
        if out.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        out = call().await;
    }
    out
}

/// Issue 23, S6, S13: the leased flow's claims across a kill and restart of `server`, with two
/// instances `a` and `b` of one store on `clock`, leases of 30 s. A claim held across the
/// restart still holds; its owner completes it once its connection is back (after at most
/// `reconnect_tries` transient faults), and the second instance then sees a duplicate. A claim
/// whose lease ran out while the server was down is taken over by the second instance; the
/// first owner's late completion is fenced and changes nothing.
pub(crate) async fn claims_across_a_restart<E, S: MarkStore<E>>(
    (a, b): (&S, &S),
    clock: &ManualClock,
    server: &mut impl Restartable,
    scope: &Scope,
    reconnect_tries: usize,
) {
    let (held, lapsed) = (
        DedupKey::new(scope, "acme", &["held"]),
        DedupKey::new(scope, "acme", &["lapsed"]),
    );
    let Claim::Claimed(held_lease) = a.claim(&held, None, None).await.expect("claim") else {
        panic!("a first claim wins");
    };
    let Claim::Claimed(lapsed_lease) = a.claim(&lapsed, None, None).await.expect("claim") else {
        panic!("a first claim wins");
    };

    server.kill();
    let down = b.claim(&held, None, None).await;
    assert!(
        matches!(&down, Err(e) if e.is_retryable()),
        "with the server down a claim is a transient fault, never a decision: {down:?}"
    );
    server.start().await;

    // The held claim survived the restart: b sees it in progress.
    let seen = after_restart(reconnect_tries, || b.claim(&held, None, None)).await;
    assert!(
        matches!(seen, Ok(Claim::Seen(Seen::InProgress { .. }))),
        "a claim held across the restart still holds: {seen:?}"
    );
    // a's connection is back; its completion lands; b then sees a duplicate.
    after_restart(reconnect_tries, || a.complete(&held_lease, Some("sent")))
        .await
        .expect("the owner completes after the restart");
    assert!(matches!(
        b.claim(&held, None, None).await.expect("claim"),
        Claim::Seen(Seen::Duplicate(_))
    ));

    // The other lease ran out (past 30 s): b takes over; a's late completion is fenced.
    clock.advance(Duration::from_secs(31));
    let Claim::Claimed(takeover) = b.claim(&lapsed, None, None).await.expect("claim") else {
        panic!("a lapsed lease is taken over");
    };
    assert!(
        matches!(
            a.complete(&lapsed_lease, Some("late")).await,
            Err(StoreError::Fenced { .. })
        ),
        "the first owner's late completion is fenced"
    );
    b.complete(&takeover, Some("sent"))
        .await
        .expect("the new owner completes");
    let mark = b.get(&lapsed).await.expect("get").expect("a mark");
    assert_eq!(
        mark.result.as_deref(),
        Some("sent"),
        "the new owner's result stands"
    );
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
                Outcome::Retry { reason, .. } => {
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
