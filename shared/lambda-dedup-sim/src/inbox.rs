//! The webhook inbox lane: senders (Standard Webhooks, signed) whose retries carry the same
//! `webhook-id`, the runtime's real `webhook::Receiver` (signature, the inbox item created once
//! as the mark, the answer) on the simulated store, and the inbox's forwarder — the runtime's
//! relay with the inbox's own layout and stream reading (`relay::forward::LAYOUT`, `relay::forward::read`) — whose
//! send is to a simulated queue (at least once: a send may land and its answer be lost).

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::items::text;
use lambda_dedup::{Clock, Item, Scope};
use lambda_dedup_config::{Env, FORWARDER};
use lambda_dedup_engine::CreateOnceDeduplicator;
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::aws_lambda_events::event::dynamodb::EventRecord;
use lambda_dedup_runtime::relay::forward::{self, LAYOUT};
use lambda_dedup_runtime::relay::{Act, Failure, Read};
use lambda_dedup_runtime::webhook::{Receiver, WebhookConfig};
use lambda_dedup_signature::{Scheme, sign};
use lambda_http::http::{HeaderMap, HeaderValue, Method};

use crate::clock::{SimClock, epoch};
use crate::invariants::Invariant;
use crate::relay::{self, RelayLane};
use crate::relay_store::{Relayed, SimItems, Tables, relayed};
use crate::sqs::{self, LEASE};
use crate::store::SimStore;
use crate::world::{Shared, lock};

/// The inbox table.
const INBOX: &str = "inbox";
/// The sender's secret.
const SECRET: &str = "whsec_c2ltdWxhdGVkLXNlbmRlci1zZWNyZXQ=";
/// A sender's attempts at one delivery.
const SENDS: u32 = 8;

/// The forwarder's action: the inbox item's body to the simulated queue.
#[derive(Debug, Clone)]
pub struct ToQueue {
    world: Shared,
    /// The bodies that landed in the queue, in order.
    queue: Arc<Mutex<Vec<String>>>,
}

impl Act for ToQueue {
    type Item = forward::Message;

    fn read(&self, record: &EventRecord) -> Read<forward::Message> {
        forward::read(record)
    }

    async fn act(&self, _: &str, message: &forward::Message) -> Result<Item, Failure> {
        let (ms, down, lost) = {
            let mut w = lock(&self.world);
            (w.rng.between(2, 60), w.rng.chance(40), w.rng.chance(30))
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if down {
            return Err(Failure::Transient("queue throttled".into()));
        }
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.body.clone());
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if lost {
            return Err(Failure::Transient("sent, no answer".into()));
        }
        Ok(Item::new().with("forwarded_at", ms))
    }
}

/// The senders, each instance's receiver, and the forwarder.
#[derive(Debug)]
pub struct InboxLane {
    receivers: Vec<Receiver>,
    /// The forwarder over the inbox's stream.
    pub forwarder: Rc<RelayLane<ToQueue>>,
    queue: Arc<Mutex<Vec<String>>>,
    clocks: Vec<SimClock>,
    world: Shared,
    data: MemoryStore,
    streamed: Mutex<BTreeSet<String>>,
}

/// The body of webhook `id`, its payload `n` (another `n`: the same id with another payload).
fn body(id: &str, n: u64) -> String {
    serde_json::json!({ "type": "sim.webhook", "id": id, "data": { "n": n } }).to_string()
}

impl InboxLane {
    /// A lane on `data` (its inbox table created here): per instance a receiver (its create-once
    /// store the simulated one) and a forwarder, both from the functions' variables.
    pub fn new(data: &MemoryStore, clocks: &[SimClock], world: &Shared) -> Self {
        data.create_table(INBOX, LAYOUT.attributes.key.name());
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "sim"),
            ("INBOX_TABLE", INBOX),
            ("WEBHOOK_SECRETS", SECRET),
            ("WEBHOOK_TENANT", "sender"),
            ("FORWARDER_REDRIVE_AFTER_SECONDS", "30"),
        ]);
        let config =
            WebhookConfig::read(&env).unwrap_or_else(|e| panic!("the receiver's settings: {e}"));
        let scope = Scope::new("sim", "webhook").unwrap_or_else(|e| panic!("a scope: {e}"));
        let receivers = clocks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let store = SimStore::new(data, world, i, *c, LEASE);
                let spec = config.key_spec(scope.clone());
                Receiver::new(
                    "webhook",
                    config.clone(),
                    CreateOnceDeduplicator::new(spec, store),
                    lambda_dedup_config::DeadlineMargin::DEFAULT,
                )
            })
            .collect();
        let shared = Arc::new(Mutex::new(Relayed::default()));
        let queue = Arc::new(Mutex::new(Vec::new()));
        let services = clocks
            .iter()
            .map(|c| {
                let items = SimItems::new(data, world, *c, &shared)
                    .on_table(INBOX, LAYOUT.attributes.key.name());
                let tables = Tables {
                    data: data.clone(),
                    items: Arc::new(items),
                };
                let act = ToQueue {
                    world: world.clone(),
                    queue: queue.clone(),
                };
                relay::built(&env, "inbox-forwarder", tables, &FORWARDER, LAYOUT, act)
            })
            .collect();
        let forwarder = Rc::new(RelayLane::of(
            services,
            shared,
            data,
            clocks,
            world,
            INBOX,
            LAYOUT.attributes.key.name(),
            LAYOUT,
        ));
        Self {
            receivers,
            forwarder,
            queue,
            clocks: clocks.to_vec(),
            world: world.clone(),
            data: data.clone(),
            streamed: Mutex::default(),
        }
    }

    /// Inbox items not yet on the stream: each new one goes on as an insert.
    fn observe(&self) {
        let mut streamed = self.streamed.lock().unwrap_or_else(|e| e.into_inner());
        for item in self.data.items(INBOX) {
            let Some(key) = text(&item, LAYOUT.attributes.key.name()).map(str::to_owned) else {
                continue;
            };
            if streamed.insert(key) {
                relayed(&self.forwarder.relayed).stream.append(item, true);
            }
        }
    }

    /// The sender of webhook `k`: POSTs until it is answered 2xx or 4xx, now and then again
    /// after a 2xx (its answer lost on the way), and now and then the same id with another
    /// payload, which must never be acknowledged. Counted in the forwarder's producers before it
    /// starts (the run does), it leaves them when done.
    pub async fn send(self: Rc<Self>, k: u64) {
        let id = format!("wh-{k}");
        let (again, conflicting) = {
            let mut w = lock(&self.world);
            w.ledger.event(&id);
            (w.rng.chance(250), w.rng.chance(150))
        };
        self.deliver(&id, 1).await;
        if again {
            self.deliver(&id, 1).await;
        }
        if conflicting {
            self.deliver(&id, 2).await;
        }
        self.forwarder.producers.fetch_sub(1, Ordering::SeqCst);
    }

    /// One delivery of `id` with payload `n`, retried as a sender does.
    async fn deliver(&self, id: &str, n: u64) {
        let body = body(id, n);
        for attempt in 0..SENDS {
            let (inst, crash_ms, backoff) = {
                let mut w = lock(&self.world);
                let inst = sqs::instance(&mut w.rng, self.clocks.len());
                let crash = sqs::stop_ms(&mut w.rng);
                (inst, crash, w.rng.between(500, 30_000) << attempt.min(4))
            };
            let sent_at = epoch() + Duration::from_millis(lock(&self.world).now_ms());
            let headers = signed(id, sent_at, &body);
            let request_id = format!("{id}-{attempt}");
            let answer = self.receivers[inst].answer(
                &Method::POST,
                &headers,
                body.as_bytes(),
                &request_id,
                self.clocks[inst].now(),
            );
            let answered = tokio::time::timeout(Duration::from_millis(crash_ms), answer).await;
            self.observe();
            let Ok(a) = answered else {
                lock(&self.world).log(format!("i{inst} webhook {id} crashed at {crash_ms} ms"));
                tokio::time::sleep(Duration::from_millis(backoff)).await;
                continue;
            };
            if self.answered(inst, id, n, a.status, a.outcome) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(backoff)).await;
        }
        lock(&self.world).log(format!("webhook {id}#{n}: the sender gave up"));
    }

    /// Records the answer `status` / `outcome` to a delivery of `id` with payload `n`; whether
    /// the sender stops (2xx or 4xx). A first payload refused is lost.
    fn answered(&self, inst: usize, id: &str, n: u64, status: u16, outcome: &str) -> bool {
        let mut w = lock(&self.world);
        w.log(format!("i{inst} webhook {id}#{n} {status} {outcome}"));
        if (200..300).contains(&status) {
            if outcome == "Applied" {
                w.ledger.applied(id);
            }
            w.ledger.acked(id, n != 1);
            return true;
        }
        if (400..500).contains(&status) {
            if n == 1 {
                w.violate(
                    Invariant::NothingLost,
                    format!("{id}: refused {status} {outcome}"),
                );
            }
            return true;
        }
        false
    }

    /// At the end: every webhook acknowledged to its sender is in the inbox (its effect, once)
    /// and reached the queue, or was parked.
    pub fn finish(&self) -> Vec<String> {
        self.observe();
        let queued: Vec<String> = self.queue.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let items = self.data.items(INBOX);
        let mut w = lock(&self.world);
        let mut lost = Vec::new();
        for k in 0.. {
            let id = format!("wh-{k}");
            let needle = format!("\"id\":\"{id}\"");
            let Some(acked) = w.ledger.known(&id).map(|e| e.acked) else {
                break;
            };
            let stored = items
                .iter()
                .filter(|i| text(i, "body").is_some_and(|b| b.contains(&needle)))
                .count();
            w.ledger
                .effects_seen(&id, u32::try_from(stored).unwrap_or(u32::MAX));
            let parked = items.iter().any(|i| {
                text(i, "body").is_some_and(|b| b.contains(&needle))
                    && text(i, "forward_status") == Some(forward::PARKED.value())
            });
            if acked && !parked && !queued.iter().any(|b| b.contains(&needle)) {
                lost.push(format!("{id}: acknowledged, never forwarded"));
            }
        }
        for detail in lost {
            w.violate(Invariant::NothingLost, detail);
        }
        drop(w);
        self.forwarder.left()
    }
}

/// The Standard Webhooks headers of `id` sent at `at` with `body`.
fn signed(id: &str, at: std::time::SystemTime, body: &str) -> HeaderMap {
    let ts = lambda_dedup::clock::epoch_secs(at);
    let signature = sign(Scheme::StandardWebhooks, SECRET, id, ts, body.as_bytes())
        .unwrap_or_else(|e| panic!("the sender's secret: {e}"));
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("webhook-id", id.to_owned()),
        ("webhook-timestamp", ts.to_string()),
        ("webhook-signature", signature),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
    headers
}
