//! A fake external HTTP API (think payments or mail API) that honours the `Idempotency-Key`
//! header, for your own tests of the leased flow.
//!
//! A function that calls an external API under a lease (lambda-dedup's leased flow, S6) sends
//! the event's idempotency key with each call, so that a retry after a lost answer or a crash
//! applies nothing twice. Testing that needs an API that behaves like a real one (the IETF
//! `Idempotency-Key` header draft, with Stripe's choices where the draft leaves room) *and* lets
//! the test count how many times each effect was really applied and break the network in
//! controlled ways. Start one in a test, point the function's API URL at it, deliver, and count:
//!
//! ```
//! use lambda_dedup_fake_provider::{Fault, Provider};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Provider::new();
//! let (url, _server) = provider.serve().await?;
//! // The next call is applied, but its answer comes too late for a 50 ms client timeout.
//! provider.inject(Fault::apply_then_timeout(1, Duration::from_millis(200)));
//! let http = reqwest::Client::builder().timeout(Duration::from_millis(50)).build()?;
//! let call = |http: &reqwest::Client| {
//!     http.post(format!("{url}/v1/payments"))
//!         .header("Idempotency-Key", "evt-1")
//!         .json(&serde_json::json!({"amount": 100}))
//!         .send()
//! };
//! assert!(call(&http).await.is_err(), "the answer is lost");
//! let replay = call(&http).await?; // the retry, under the same key
//! assert_eq!(replay.headers()["idempotent-replayed"], "true");
//! assert_eq!(provider.effects()["evt-1"], 1, "applied once");
//! assert_eq!(provider.applied()["evt-1"]["amount"], 100, "with the first request's body");
//! # Ok(())
//! # }
//! ```
//!
//! - `POST /v1/{resource}` with a JSON body and an `Idempotency-Key` header
//!   applies an effect once per key; a retry with the same payload replays the
//!   stored response (`Idempotent-Replayed: true`), a different payload gets
//!   422, and a retry while the first attempt is still running gets 409.
//! - `/_admin/...` routes queue faults (`error_5xx`, `slow`,
//!   `apply_then_timeout`), report effect counters and reset everything.
//! - Permanent faults, for as long as the provider lives: a key refused for
//!   good with a 4xx ([`Provider::reject_key`], `POST /_admin/rejections`),
//!   and keys forgotten once they are older than a retention
//!   ([`Provider::set_key_retention`], `POST /_admin/key-retention`) on the
//!   provider's own clock, which tests move forward ([`Provider::advance`],
//!   `POST /_admin/clock`).
//!
//! Everything lives in memory and is lost when the process exits: this is a
//! test double. The `lambda-dedup-fake-provider` binary serves the same API on a port of its
//! own, for tests written in another language or a local stack.
//!
//! # Layout
//!
//! - `lib.rs`: the public handle ([`Provider`]), the fault description
//!   ([`Fault`], [`FaultKind`]), [`spawn`] to serve on a socket and
//!   [`Provider::serve`] on a free loopback port.
//! - `state.rs`: the in-memory store (idempotency slots, effect counters, fault
//!   queue) and what makes a retry the same request. No HTTP in there, no `.await`, so its lock
//!   is never held across a suspension point.
//! - `routes.rs`: the axum handlers that turn HTTP requests into store
//!   operations and apply the queued faults' delays.
//! - `main.rs`: the `lambda-dedup-fake-provider` binary.
//! - `tests.rs`: tests driving the real server over loopback with `reqwest`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

mod routes;
mod state;
#[cfg(test)]
mod tests;

use state::State;

/// Handle over the provider's shared in-memory state.
///
/// Clones share the same state, so a test can keep one clone to inspect
/// counters and inject faults while the router built from another serves HTTP.
#[derive(Debug, Clone, Default)]
pub struct Provider {
    state: Arc<Mutex<State>>,
}

impl Provider {
    /// A provider with no recorded keys, no effects and no queued faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The HTTP API (provider routes and `/_admin` routes) over this state.
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// This provider served on a free port of the loopback address ([`spawn`] on
    /// `127.0.0.1:0`): its base URL, `http://127.0.0.1:<port>` (the provider routes are under
    /// `/v1`), and the server's task. What a test points the client it exercises at.
    pub async fn serve(&self) -> std::io::Result<(String, JoinHandle<()>)> {
        let (addr, server) = spawn(self.clone(), ([127, 0, 0, 1], 0).into()).await?;
        Ok((format!("http://{addr}"), server))
    }

    /// The request body each key's effect was applied with (the last one, if it was applied
    /// more than once): what the API was really asked to do.
    pub fn applied(&self) -> BTreeMap<String, serde_json::Value> {
        self.lock()
            .effects()
            .iter()
            .map(|(key, effect)| (key.clone(), effect.request.clone()))
            .collect()
    }

    /// How many times the effect was applied, per idempotency key.
    pub fn effects(&self) -> BTreeMap<String, u64> {
        self.lock()
            .effects()
            .iter()
            .map(|(key, effect)| (key.clone(), effect.count))
            .collect()
    }

    /// Effects applied across all keys.
    pub fn total_effects(&self) -> u64 {
        self.lock().total_effects()
    }

    /// `POST /v1/...` requests received, whatever their outcome.
    pub fn requests(&self) -> u64 {
        self.lock().requests()
    }

    /// Queues a fault behind those already queued. A fault with `count == 0`
    /// would never match anything, so it is dropped.
    pub fn inject(&self, fault: Fault) {
        self.lock().push_fault(fault);
    }

    /// From now on, every `POST /v1/...` with `key` is answered `status`
    /// (a 4xx, say 422: the provider refuses the request as it is, for good)
    /// and applies and stores nothing. Queued faults still come first: they
    /// model the network and the provider's health. Forgotten on [`reset`].
    ///
    /// [`reset`]: Provider::reset
    pub fn reject_key(&self, key: &str, status: u16) {
        self.lock().reject_key(key, status);
    }

    /// Requests answered by a [`reject_key`](Provider::reject_key) refusal.
    pub fn rejections(&self) -> u64 {
        self.lock().rejections()
    }

    /// Forget a finished key once it is `retention` old on the provider's
    /// clock (`None`: never, the default), as real providers do (Stripe: 24
    /// hours). A request with a forgotten key is a first request again: it
    /// applies the effect again. Kept across [`reset`](Provider::reset).
    pub fn set_key_retention(&self, retention: Option<Duration>) {
        self.lock().set_key_retention(retention);
    }

    /// Moves the provider's clock (real time plus every advance) forward:
    /// what key retention is measured on. Kept across [`reset`](Provider::reset).
    pub fn advance(&self, by: Duration) {
        self.lock().advance(by);
    }

    /// Finished keys forgotten so far because they outlived the key retention.
    pub fn forgotten_keys(&self) -> u64 {
        self.lock().forgotten()
    }

    /// Keys held in flight by a first request still running (a `slow` one,
    /// whether or not its client is still waiting).
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight()
    }

    /// Queued faults not yet used up.
    pub fn pending_faults(&self) -> usize {
        self.lock().pending_faults()
    }

    /// Drops every queued fault, leaving keys and counters alone.
    pub fn clear_faults(&self) {
        self.lock().clear_faults();
    }

    /// Forgets keys, stored responses, counters, faults and rejected keys
    /// (the key retention and the clock stay).
    ///
    /// A first request still in flight (held by a `slow` fault) is answered
    /// 503 when its delay ends and records nothing, so an earlier scenario
    /// cannot leak effects into the next one.
    pub fn reset(&self) {
        self.lock().reset();
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain counters and maps, never
        // a half-applied invariant worth refusing to serve over.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a queued fault does to the requests it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultKind {
    /// Answer `503 {"error":"injected"}` after `delay_ms`, without applying or
    /// storing anything, so a retry with the same key is a first request.
    #[serde(rename = "error_5xx")]
    Error5xx,
    /// Take `delay_ms` longer to answer. A first request holds its key in
    /// flight during the delay (a concurrent retry gets 409) and applies the
    /// effect at the end of it, even if the client has given up by then.
    #[serde(rename = "slow")]
    Slow,
    /// Apply the effect and store the response at once, then wait `delay_ms`
    /// before answering: the provider did the work but the client may time
    /// out without learning it, and a retry gets the replay.
    #[serde(rename = "apply_then_timeout")]
    ApplyThenTimeout,
}

/// A fault affecting the next `count` matching `POST /v1/...` requests.
///
/// This is also the JSON body of `POST /_admin/faults`; `count` defaults to 1,
/// `delay_ms` to 0 and `resource` to "any resource".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What happens to the matched requests.
    pub kind: FaultKind,
    /// How many requests this fault affects before it is used up.
    #[serde(default = "default_count")]
    pub count: u32,
    /// Delay in milliseconds (see [`FaultKind`] for where it is spent).
    #[serde(default)]
    pub delay_ms: u64,
    /// Only requests to `POST /v1/{resource}` with this resource match;
    /// `None` matches every resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

fn default_count() -> u32 {
    1
}

impl Fault {
    /// The next `count` matching requests get a 503 and apply nothing.
    pub fn error_5xx(count: u32) -> Self {
        Self::new(FaultKind::Error5xx, count, Duration::ZERO)
    }

    /// The next `count` matching requests take `delay` longer.
    pub fn slow(count: u32, delay: Duration) -> Self {
        Self::new(FaultKind::Slow, count, delay)
    }

    /// The next `count` matching requests apply at once but answer after `delay`.
    pub fn apply_then_timeout(count: u32, delay: Duration) -> Self {
        Self::new(FaultKind::ApplyThenTimeout, count, delay)
    }

    /// Restricts the fault to `POST /v1/{resource}`.
    #[must_use]
    pub fn for_resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// `delay_ms` as a [`Duration`].
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }

    fn new(kind: FaultKind, count: u32, delay: Duration) -> Self {
        Self {
            kind,
            count,
            // Saturate rather than fail: a delay of 584 million years is
            // "forever" either way.
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            resource: None,
        }
    }
}

/// Binds `addr` (port 0 picks a free port), serves `provider` from a
/// background task and returns the bound address.
///
/// Dropping the handle does not stop the server; abort it (or end the runtime)
/// to stop serving.
pub async fn spawn(
    provider: Provider,
    addr: SocketAddr,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let router = provider.router();
    let handle = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, %bound, "fake provider stopped serving");
        }
    });
    Ok((bound, handle))
}
