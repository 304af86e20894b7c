//! The provider's memory: one slot per idempotency key, effect counters and
//! the fault queue. Purely synchronous so the `Mutex` around it is never held
//! across an `.await`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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
}

#[derive(Debug)]
enum Slot {
    InFlight {
        fingerprint: String,
        claim: u64,
    },
    Done {
        fingerprint: String,
        response: StoredResponse,
    },
}

impl Slot {
    fn fingerprint(&self) -> &str {
        match self {
            Self::InFlight { fingerprint, .. } | Self::Done { fingerprint, .. } => fingerprint,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Effect {
    pub(crate) resource: String,
    pub(crate) count: u64,
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
            ..Self::default()
        };
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

    pub(crate) fn lookup(&mut self, key: &str, fingerprint: &str) -> Lookup {
        match self.slots.get(key) {
            None => {
                self.last_claim += 1;
                self.slots.insert(
                    key.to_owned(),
                    Slot::InFlight {
                        fingerprint: fingerprint.to_owned(),
                        claim: self.last_claim,
                    },
                );
                Lookup::Claimed(self.last_claim)
            }
            Some(slot) if slot.fingerprint() != fingerprint => Lookup::Mismatch,
            Some(Slot::InFlight { .. }) => Lookup::InProgress,
            Some(Slot::Done { response, .. }) => Lookup::Replay(response.clone()),
        }
    }

    fn holds(&self, key: &str, claim: u64) -> bool {
        matches!(self.slots.get(key), Some(Slot::InFlight { claim: held, .. }) if *held == claim)
    }

    fn release(&mut self, key: &str, claim: u64) {
        // Only our own claim: after a reset the key may belong to another request.
        if self.holds(key, claim) {
            self.slots.remove(key);
        }
    }

    /// `None` when the claim was wiped by a reset: the effect belongs to a run
    /// that no longer exists and must not leak into the fresh counters.
    fn apply(
        &mut self,
        key: &str,
        claim: u64,
        resource: &str,
        fingerprint: &str,
        request: Value,
    ) -> Option<StoredResponse> {
        if !self.holds(key, claim) {
            return None;
        }
        let effect = self
            .effects
            .entry(key.to_owned())
            .or_insert_with(|| Effect {
                resource: resource.to_owned(),
                count: 0,
            });
        effect.count += 1;
        self.sequence += 1;
        let body = json!({
            "id": format!("{resource}_{}", self.sequence),
            "resource": resource,
            "idempotency_key": key,
            "request": request,
        });
        let response = StoredResponse {
            status: StatusCode::CREATED,
            body: Bytes::from(body.to_string()),
        };
        self.slots.insert(
            key.to_owned(),
            Slot::Done {
                fingerprint: fingerprint.to_owned(),
                response: response.clone(),
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
    resource: String,
    fingerprint: String,
    applied: bool,
}

impl Claim {
    pub(crate) fn new(
        provider: Provider,
        key: String,
        claim: u64,
        resource: String,
        fingerprint: String,
    ) -> Self {
        Self {
            provider,
            key,
            claim,
            resource,
            fingerprint,
            applied: false,
        }
    }

    /// Applies the effect and stores the response; `None` if a reset wiped
    /// the claim meanwhile.
    pub(crate) fn apply(mut self, request: Value) -> Option<StoredResponse> {
        self.applied = true;
        self.provider.lock().apply(
            &self.key,
            self.claim,
            &self.resource,
            &self.fingerprint,
            request,
        )
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.applied {
            self.provider.lock().release(&self.key, self.claim);
        }
    }
}

/// Identifies "the same request": the resource plus the body in canonical
/// JSON (object keys sorted, no whitespace), so key order and formatting do
/// not make a retry look like a different payload.
pub(crate) fn fingerprint(resource: &str, body: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(body, &mut canonical);
    let mut hasher = Sha256::new();
    // Length prefix so no (resource, body) pair can collide with another by
    // moving bytes across the boundary.
    hasher.update((resource.len() as u64).to_le_bytes());
    hasher.update(resource.as_bytes());
    hasher.update(canonical.as_bytes());
    hex::encode(hasher.finalize())
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            // Sort explicitly: serde_json keeps insertion order when some
            // crate in the build enables its `preserve_order` feature.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by_key(|(key, _)| *key);
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
