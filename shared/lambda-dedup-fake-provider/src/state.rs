//! The provider's memory: one slot per idempotency key, effect counters and
//! the fault queue. Purely synchronous so the `Mutex` around it is never held
//! across an `.await`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::{Fault, FaultKind, Provider};

#[derive(Debug, Default)]
pub(crate) struct State {
    slots: HashMap<String, Slot>,
    effects: BTreeMap<String, Effect>,
    /// Numbers the ids handed out; global rather than per resource so that an
    /// id never repeats within a run, whatever the resource.
    sequence: u64,
    requests: u64,
    faults: VecDeque<Fault>,
    /// Tags each in-flight claim; survives [`State::reset`] so a request that
    /// started before a reset can tell its claim was wiped.
    last_claim: u64,
    /// Keys refused for good, with the status they get (see
    /// [`Provider::reject_key`]).
    rejected: HashMap<String, u16>,
    /// Requests answered by such a refusal.
    rejections: u64,
    /// How long a finished key is remembered; `None`: for ever. Survives
    /// [`State::reset`], like the clock: it is what the provider is, not what
    /// it has seen.
    key_retention: Option<Duration>,
    /// How far the provider's clock is ahead of real time. Survives resets.
    clock_offset: Duration,
    /// Finished keys forgotten because they outlived `key_retention`.
    forgotten: u64,
}

/// One key's slot: the request it was first used with, and how far that request got.
#[derive(Debug)]
struct Slot {
    request: Request,
    progress: Progress,
}

#[derive(Debug)]
enum Progress {
    InFlight {
        claim: u64,
    },
    Done {
        response: StoredResponse,
        /// When the response was stored, on the provider's clock.
        stored_at: Instant,
    },
}

#[derive(Debug)]
pub(crate) struct Effect {
    pub(crate) resource: String,
    pub(crate) count: u64,
    /// The request body it was last applied with.
    pub(crate) request: Value,
}

/// Kept as bytes rather than a JSON value so a replay is byte-for-byte the
/// first answer, whatever serde_json's map ordering features are.
#[derive(Debug, Clone)]
pub(crate) struct StoredResponse {
    pub(crate) status: StatusCode,
    pub(crate) body: Bytes,
}

/// What a request finds when it looks its key up.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The key was unknown and is now held in flight by this request, under
    /// this claim tag.
    Claimed(u64),
    Replay(StoredResponse),
    /// The key is known with another fingerprint (even while in flight: a
    /// different payload is a client bug whatever the timing).
    Mismatch,
    InProgress,
}

/// A queued fault chosen for one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FaultHit {
    pub(crate) kind: FaultKind,
    pub(crate) delay_ms: u64,
}

impl State {
    pub(crate) fn reset(&mut self) {
        *self = Self {
            last_claim: self.last_claim,
            key_retention: self.key_retention,
            clock_offset: self.clock_offset,
            ..Self::default()
        };
    }

    /// The provider's clock: real time plus every [`State::advance`].
    fn now(&self) -> Instant {
        Instant::now() + self.clock_offset
    }

    pub(crate) fn advance(&mut self, by: Duration) {
        self.clock_offset += by;
    }

    pub(crate) fn set_key_retention(&mut self, retention: Option<Duration>) {
        self.key_retention = retention;
    }

    pub(crate) fn forgotten(&self) -> u64 {
        self.forgotten
    }

    pub(crate) fn reject_key(&mut self, key: &str, status: u16) {
        self.rejected.insert(key.to_owned(), status);
    }

    /// The status `key` is refused with, if it is; counts the refusal.
    pub(crate) fn refusal(&mut self, key: &str) -> Option<u16> {
        let status = self.rejected.get(key).copied()?;
        self.rejections += 1;
        Some(status)
    }

    pub(crate) fn rejections(&self) -> u64 {
        self.rejections
    }

    /// Keys held by a first request still running.
    pub(crate) fn in_flight(&self) -> usize {
        self.slots
            .values()
            .filter(|slot| matches!(slot.progress, Progress::InFlight { .. }))
            .count()
    }

    pub(crate) fn effects(&self) -> &BTreeMap<String, Effect> {
        &self.effects
    }

    pub(crate) fn total_effects(&self) -> u64 {
        self.effects.values().map(|effect| effect.count).sum()
    }

    pub(crate) fn requests(&self) -> u64 {
        self.requests
    }

    pub(crate) fn count_request(&mut self) {
        self.requests += 1;
    }

    pub(crate) fn push_fault(&mut self, fault: Fault) {
        if fault.count > 0 {
            self.faults.push_back(fault);
        }
    }

    pub(crate) fn clear_faults(&mut self) {
        self.faults.clear();
    }

    pub(crate) fn pending_faults(&self) -> usize {
        self.faults.len()
    }

    /// Uses one unit of the oldest queued fault that matches `resource`.
    pub(crate) fn take_fault(&mut self, resource: &str) -> Option<FaultHit> {
        let index = self.faults.iter().position(|fault| {
            fault
                .resource
                .as_deref()
                .is_none_or(|wanted| wanted == resource)
        })?;
        let fault = self.faults.get_mut(index)?;
        let hit = FaultHit {
            kind: fault.kind,
            delay_ms: fault.delay_ms,
        };
        fault.count = fault.count.saturating_sub(1);
        if fault.count == 0 {
            self.faults.remove(index);
        }
        Some(hit)
    }

    pub(crate) fn lookup(&mut self, key: &str, request: &Request) -> Lookup {
        self.forget_if_expired(key);
        match self.slots.get(key) {
            None => {
                self.last_claim += 1;
                self.slots.insert(
                    key.to_owned(),
                    Slot {
                        request: request.clone(),
                        progress: Progress::InFlight {
                            claim: self.last_claim,
                        },
                    },
                );
                Lookup::Claimed(self.last_claim)
            }
            Some(slot) if slot.request != *request => Lookup::Mismatch,
            Some(slot) => match &slot.progress {
                Progress::InFlight { .. } => Lookup::InProgress,
                Progress::Done { response, .. } => Lookup::Replay(response.clone()),
            },
        }
    }

    /// Drops `key`'s finished slot once it is older than the key retention,
    /// as providers do (Stripe: 24 hours): the next request with the key is a
    /// first request again, and applies the effect again.
    fn forget_if_expired(&mut self, key: &str) {
        let (Some(retention), Some(Progress::Done { stored_at, .. })) =
            (self.key_retention, self.slots.get(key).map(|s| &s.progress))
        else {
            return;
        };
        if self.now().saturating_duration_since(*stored_at) >= retention {
            self.slots.remove(key);
            self.forgotten += 1;
        }
    }

    fn holds(&self, key: &str, claim: u64) -> bool {
        let progress = self.slots.get(key).map(|s| &s.progress);
        matches!(progress, Some(Progress::InFlight { claim: held }) if *held == claim)
    }

    fn release(&mut self, key: &str, claim: u64) {
        // Only our own claim: after a reset the key may belong to another request.
        if self.holds(key, claim) {
            self.slots.remove(key);
        }
    }

    /// `None` when the claim was wiped by a reset: the effect belongs to a run
    /// that no longer exists and must not leak into the fresh counters.
    fn apply(&mut self, key: &str, claim: u64, request: Request) -> Option<StoredResponse> {
        if !self.holds(key, claim) {
            return None;
        }
        let resource = request.resource.as_str();
        let effect = self
            .effects
            .entry(key.to_owned())
            .or_insert_with(|| Effect {
                resource: resource.to_owned(),
                count: 0,
                request: Value::Null,
            });
        effect.count += 1;
        effect.request = request.body.clone();
        self.sequence += 1;
        let body = json!({
            "id": format!("{resource}_{}", self.sequence),
            "resource": resource,
            "idempotency_key": key,
            "request": request.body,
        });
        let response = StoredResponse {
            status: StatusCode::CREATED,
            body: Bytes::from(body.to_string()),
        };
        let stored_at = self.now();
        self.slots.insert(
            key.to_owned(),
            Slot {
                request,
                progress: Progress::Done {
                    response: response.clone(),
                    stored_at,
                },
            },
        );
        Some(response)
    }
}

/// A key held in flight by one request. Dropping it without [`Claim::apply`]
/// (the request was cancelled or failed) frees the key, so it is not stuck
/// answering 409 forever.
#[derive(Debug)]
pub(crate) struct Claim {
    provider: Provider,
    key: String,
    claim: u64,
    request: Request,
    applied: bool,
}

impl Claim {
    pub(crate) fn new(provider: Provider, key: String, claim: u64, request: Request) -> Self {
        Self {
            provider,
            key,
            claim,
            request,
            applied: false,
        }
    }

    /// Applies the effect and stores the response; `None` if a reset wiped
    /// the claim meanwhile.
    pub(crate) fn apply(mut self) -> Option<StoredResponse> {
        self.applied = true;
        let request = self.request.clone();
        self.provider.lock().apply(&self.key, self.claim, request)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.applied {
            self.provider.lock().release(&self.key, self.claim);
        }
    }
}

/// What makes a retry "the same request": the resource and the body, compared as JSON values,
/// so key order and formatting do not make a retry look like a different payload (two objects
/// are equal when they hold the same members, in any order).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub(crate) resource: String,
    pub(crate) body: Value,
}
