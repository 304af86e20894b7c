//! The exhaustive model: every interleaving, to a depth, of claim / the provider's call /
//! complete / release / crash / the clock's tick (lease end, TTL) for 2–3 actors with their own
//! clock skews, on the real memory store (its claim, complete and release are the transitions),
//! explored breadth first with every state visited once. The invariants: a stale owner never
//! completes or releases; the provider's effect at most once (fencing plus the provider-key
//! horizon, S16); and, while the clocks stay within the lease allowance, no claim succeeds while
//! another actor's lease is still running by that actor's clock (S6). An actor may call,
//! complete or release at any time until it crashes (an invocation runs on past a lease shorter
//! than its deadline): fencing, not timing, must stop a stale one.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::clock::epoch_millis;
use lambda_dedup::{
    Claim, Clock, DedupKey, Lease, ManualClock, MarkStatus, MarkStore, Retention, Scope, Seen,
};
use lambda_dedup_memory::MemoryStore;

use crate::clock::epoch;
use crate::invariants::Invariant;

/// One step of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Actor claims the event (a delivery, or a redelivery).
    Claim(usize),
    /// Actor calls the provider with the lease's idempotency key.
    Call(usize),
    /// Actor completes its claim.
    Complete(usize),
    /// Actor releases its claim (its call failed).
    Release(usize),
    /// Actor crashes, forgetting its lease.
    Crash(usize),
    /// One second passes on every clock.
    Tick,
}

/// The world the model explores.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Each actor's clock skew, in ms.
    pub skews_ms: Vec<i64>,
    /// Seconds the clock may advance.
    pub ticks: u32,
    /// The longest path explored.
    pub depth: usize,
    /// The store's lease.
    pub lease: Duration,
    /// The mark's retention.
    pub retention: Duration,
    /// How long the provider keeps keys.
    pub provider_retention: Duration,
}

/// What the exploration found.
#[derive(Debug)]
pub struct ModelReport {
    /// Distinct states visited.
    pub states: usize,
    /// The broken invariants, each with the path that breaks it.
    pub violations: Vec<(Invariant, Vec<Action>)>,
    /// Transitions in which a claim took over a lease still running by its owner's clock
    /// (a violation only while the clocks stay within the allowance).
    pub early_takeovers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Claimed,
    Called,
    Done,
}

/// One path replayed on a fresh store.
struct Replay<'s> {
    setup: &'s Setup,
    key: DedupKey,
    clocks: Vec<Arc<ManualClock>>,
    stores: Vec<MemoryStore>,
    truth: MemoryStore,
    phases: Vec<Phase>,
    leases: Vec<Option<Lease>>,
    tokens: Vec<(String, usize)>,
    provider: BTreeMap<String, u32>,
    applied: u32,
    t: u32,
    broken: Option<Invariant>,
    early: bool,
}

impl<'s> Replay<'s> {
    fn new(setup: &'s Setup) -> Self {
        let retention =
            Retention::unchecked(setup.retention).unwrap_or_else(|e| panic!("retention: {e}"));
        let truth = MemoryStore::new(retention);
        let clocks: Vec<Arc<ManualClock>> = setup
            .skews_ms
            .iter()
            .map(|s| {
                let skew = Duration::from_millis(s.unsigned_abs());
                Arc::new(ManualClock::new(if *s >= 0 {
                    epoch() + skew
                } else {
                    epoch() - skew
                }))
            })
            .collect();
        let stores = clocks
            .iter()
            .map(|c| {
                let clock: Arc<dyn Clock> = c.clone();
                truth
                    .clone()
                    .with_clock(clock)
                    .with_lease(setup.lease)
                    .with_clock_skew(Duration::from_secs(1))
            })
            .collect();
        let n = setup.skews_ms.len();
        let key = DedupKey::new(
            &Scope::new("sim", "model").unwrap_or_else(|e| panic!("scope: {e}")),
            "acme",
            &["e-1"],
        );
        Self {
            setup,
            key,
            clocks,
            stores,
            truth,
            phases: vec![Phase::Idle; n],
            leases: vec![None; n],
            tokens: Vec::new(),
            provider: BTreeMap::new(),
            applied: 0,
            t: 0,
            broken: None,
            early: false,
        }
    }

    fn may_act(&self, i: usize) -> bool {
        self.leases[i]
            .as_ref()
            .is_some_and(|l| self.clocks[i].now() < l.expires_at)
    }

    fn within_allowance(&self) -> bool {
        let (lo, hi) = self
            .setup
            .skews_ms
            .iter()
            .fold((i64::MAX, i64::MIN), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
        hi - lo < 1_000
    }

    fn owner_of(&self, token: &str) -> i64 {
        let (t, released) = match token.strip_prefix("released-") {
            Some(t) => (t, 100),
            None => (token, 0),
        };
        self.tokens
            .iter()
            .find(|(k, _)| k == t)
            .map_or(-1, |(_, i)| *i as i64 + released)
    }

    /// Applies `a`; false when it is not enabled (or changes nothing).
    fn apply(&mut self, rt: &tokio::runtime::Runtime, a: Action) -> bool {
        match a {
            Action::Tick => {
                if self.t >= self.setup.ticks {
                    return false;
                }
                self.t += 1;
                for c in &self.clocks {
                    c.advance(Duration::from_secs(1));
                }
            }
            Action::Claim(i) => {
                if matches!(self.phases[i], Phase::Claimed | Phase::Called) {
                    return false;
                }
                match rt.block_on(self.stores[i].claim(&self.key, None, None)) {
                    Ok(Claim::Claimed(lease)) => {
                        self.early = (0..self.phases.len()).any(|j| j != i && self.may_act(j));
                        if self.early && self.within_allowance() {
                            self.broken = Some(Invariant::LeaseExclusive);
                        }
                        self.tokens.push((lease.owner.as_str().to_owned(), i));
                        self.leases[i] = Some(lease);
                        self.phases[i] = Phase::Claimed;
                    }
                    Ok(Claim::Seen(Seen::Duplicate(_))) if self.phases[i] != Phase::Done => {
                        self.phases[i] = Phase::Done
                    }
                    _ => return false,
                }
            }
            Action::Call(i) => {
                if self.phases[i] != Phase::Claimed {
                    return false;
                }
                let Some(lease) = self.leases[i].clone() else {
                    return false;
                };
                // S16: a takeover of an event first attempted longer ago than the provider keeps
                // keys does not call (it goes to reconciliation).
                let age = self.clocks[i]
                    .now()
                    .duration_since(lease.first_attempt_at)
                    .unwrap_or_default();
                if age > self.setup.provider_retention {
                    self.phases[i] = Phase::Done;
                    self.leases[i] = None;
                    return true;
                }
                let key = lease.idempotency_key();
                let remembered = self.provider.get(&key).is_some_and(|at| {
                    u64::from(self.t - at) <= self.setup.provider_retention.as_secs()
                });
                if !remembered {
                    self.applied += 1;
                    self.provider.insert(key, self.t);
                    if self.applied > 1 {
                        self.broken = Some(Invariant::AtMostOnce);
                    }
                }
                self.phases[i] = Phase::Called;
            }
            Action::Complete(i) | Action::Release(i) => {
                let want = if matches!(a, Action::Complete(_)) {
                    Phase::Called
                } else {
                    Phase::Claimed
                };
                if self.phases[i] != want {
                    return false;
                }
                let Some(lease) = self.leases[i].clone() else {
                    return false;
                };
                let before = self.truth.marks().into_iter().next();
                let owner = before
                    .as_ref()
                    .and_then(|m| m.owner.as_ref())
                    .map(|o| self.owner_of(o.as_str()))
                    .unwrap_or(-1);
                let in_progress = before
                    .as_ref()
                    .is_some_and(|m| m.status == MarkStatus::InProgress);
                let me = i as i64;
                let ok = if want == Phase::Called {
                    let ok = rt
                        .block_on(self.stores[i].complete(&lease, Some("r")))
                        .is_ok();
                    if ok && owner != me {
                        self.broken = Some(Invariant::StaleOwnerCompleted);
                    }
                    ok
                } else {
                    let ok = rt.block_on(self.stores[i].release(&lease)).is_ok();
                    if ok && in_progress && owner != me && owner != me + 100 {
                        self.broken = Some(Invariant::StaleOwnerReleased);
                    }
                    ok
                };
                self.phases[i] = if ok && want == Phase::Called {
                    Phase::Done
                } else {
                    Phase::Idle
                };
                self.leases[i] = None;
            }
            Action::Crash(i) => {
                if !matches!(self.phases[i], Phase::Claimed | Phase::Called) {
                    return false;
                }
                self.phases[i] = Phase::Idle;
                self.leases[i] = None;
            }
        }
        true
    }

    /// The state, with owner tokens replaced by the actor holding them and times relative.
    fn state(&self) -> String {
        let base = epoch_millis(epoch());
        let rel = |t: SystemTime| epoch_millis(t) as i64 - base as i64;
        let mark = self.truth.marks().into_iter().next().map(|m| {
            let owner = m.owner.as_ref().map(|o| self.owner_of(o.as_str()));
            (
                m.status,
                owner,
                m.lease_expires_at.map(rel),
                rel(m.expires_at),
                rel(m.first_seen_at),
            )
        });
        let leases: Vec<_> = self
            .leases
            .iter()
            .map(|l| {
                l.as_ref()
                    .map(|l| (rel(l.expires_at), rel(l.first_attempt_at)))
            })
            .collect();
        format!(
            "{} {:?} {:?} {:?} {:?} {}",
            self.t,
            self.phases,
            leases,
            mark,
            self.provider.values().collect::<Vec<_>>(),
            self.applied
        )
    }
}

/// Explores every interleaving of `setup` to its depth.
pub fn explore(setup: &Setup) -> ModelReport {
    let rt = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => panic!("a current-thread runtime: {e}"),
    };
    let n = setup.skews_ms.len();
    let mut actions = vec![Action::Tick];
    for i in 0..n {
        actions.extend([
            Action::Claim(i),
            Action::Call(i),
            Action::Complete(i),
            Action::Release(i),
            Action::Crash(i),
        ]);
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut queue: VecDeque<Vec<Action>> = VecDeque::from([Vec::new()]);
    let mut violations = Vec::new();
    let mut early_takeovers = 0;
    while let Some(path) = queue.pop_front() {
        for a in &actions {
            let mut r = Replay::new(setup);
            for p in &path {
                r.apply(&rt, *p);
            }
            if !r.apply(&rt, *a) {
                continue;
            }
            let mut next = path.clone();
            next.push(*a);
            early_takeovers += usize::from(r.early);
            if let Some(inv) = r.broken {
                if !violations.iter().any(|(v, _)| *v == inv) {
                    violations.push((inv, next));
                }
                continue;
            }
            if seen.insert(r.state()) && next.len() < setup.depth {
                queue.push_back(next);
            }
        }
    }
    ModelReport {
        states: seen.len(),
        violations,
        early_takeovers,
    }
}
