//! The world a schedule runs in: a mark store (local DynamoDB, memory, PostgreSQL or Valkey, with its
//! own effect type `E`, which the leased flow never commits), the fake provider, one clock, and
//! the leased flow as `payment-dispatcher` runs it.

use super::*;
use lambda_dedup_http::CallError;

#[derive(Debug, Clone)]
pub(super) struct Delivery {
    pub(super) message: Message,
    pub(super) event: u8,
}

/// What the model knows of an event's mark in the current epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// No live mark (never claimed, released, or past its TTL).
    Absent,
    /// `IN_PROGRESS`, its owner dead or gone; the lease runs until `until`.
    Held {
        until: SystemTime,
    },
    Completed,
}

/// What one batch came to.
#[derive(Debug, Default)]
pub(super) struct Log {
    /// (event, outcome, whether the provider refused this delivery's call) of every delivery
    /// that finished.
    pub(super) outcomes: Vec<(u8, Outcome, bool)>,
    /// (event, idempotency key) of every call the flow made: one per claim.
    pub(super) called: Vec<(u8, String)>,
    /// Events whose handler was parked by a crash, holding the claim.
    pub(super) parked: Vec<u8>,
    pub(super) provider_5xx: u64,
    pub(super) provider_timeouts: u64,
    /// Calls still out at the invocation's deadline.
    pub(super) slow_calls: u64,
}

#[derive(Debug)]
pub(super) struct BatchRun {
    pub(super) batch: Vec<Delivery>,
    pub(super) log: Log,
    /// The process crashed: the batch response never reached SQS.
    pub(super) lost: bool,
    /// Per delivery, in batch order, its outcome, when the batch response reached SQS.
    pub(super) reported: Option<Vec<Outcome>>,
    /// When the leases this batch took end, as the store records them: the owners' end and the
    /// clock-skew allowance past it.
    pub(super) lease_until: SystemTime,
}

#[derive(Debug)]
pub(super) struct Event {
    pub(super) key: DedupKey,
    pub(super) idempotency_key: String,
    pub(super) last: Message,
}

/// Where the marks are, read through the backend's own access path.
pub(super) enum Backing {
    /// The local DynamoDB or the memory store.
    Stores(Stores),
    /// A marks table of the PostgreSQL server.
    Postgres(PgWorld),
    /// A mark prefix of the Valkey server.
    Valkey(ValkeyWorld),
}

pub(super) struct World<E = lambda_dedup::Effect> {
    pub(super) backing: Backing,
    pub(super) clock: Arc<ManualClock>,
    pub(super) store: Arc<dyn lambda_dedup::MarkStore<E>>,
    pub(super) dedup: LeasedDeduplicator<E>,
    /// The same table and clock through a client whose completes can be made to fail.
    pub(super) faulty: LeasedDeduplicator<E>,
    pub(super) faults: Arc<CompleteFaults>,
    pub(super) provider: Provider,
    pub(super) api: IdempotentClient,
    pub(super) run: String,
}

impl World {
    /// On the local DynamoDB or the memory store.
    pub(super) async fn new(
        kind: StoreKind,
        provider: Provider,
        base_url: &str,
        forgetful: bool,
    ) -> Self {
        let retention = retention();
        let stores = Stores::new(kind, retention).await;
        let clock = stores.clock.clone();
        let store = stores.store(LEASE);
        let faults = Arc::new(CompleteFaults::default());
        let faulty_store: Arc<dyn lambda_dedup::MarkStore> = match stores.memory() {
            // The memory store asks a hook before each call; the hook fails completes only.
            Some(memory) => {
                let f = faults.clone();
                Arc::new(
                    memory
                        .with_fault_hook(Arc::new(move |op, key| {
                            let mode = (*lock(&f.mode))?;
                            if op != Op::Complete {
                                return None;
                            }
                            Some(match mode {
                                CompleteFault::NeverSent => {
                                    let pk = key.map(|k| k.as_str().to_owned()).unwrap_or_default();
                                    lock(&f.unsent).push(pk);
                                    Injected::Fail(lambda_dedup::FaultKind::Network)
                                }
                                CompleteFault::AnswerLost => {
                                    Injected::LoseAnswer(lambda_dedup::FaultKind::Timeout)
                                }
                            })
                        }))
                        .with_lease(LEASE),
                )
            }
            None => {
                let client = dedup_tests::client();
                let faulty_client = Client::from_conf(
                    client
                        .config()
                        .to_builder()
                        // One attempt: a lost answer stays lost (an SDK retry would find its own
                        // completion and succeed).
                        .retry_config(RetryConfig::disabled())
                        .interceptor(CompleteInterceptor(faults.clone()))
                        .build(),
                );
                Arc::new(
                    DynamoStore::new(faulty_client, stores.mark_table(), retention)
                        .with_lease(LEASE)
                        .with_clock(clock.clone()),
                )
            }
        };
        let parts = Parts {
            clock,
            store,
            faulty_store,
            faults,
        };
        World::assemble(
            Backing::Stores(stores),
            parts,
            provider,
            base_url,
            forgetful,
        )
    }
}

impl<E: 'static> World<E> {
    /// On a fresh place for marks (a marks table of the PostgreSQL server, a mark prefix of the
    /// Valkey server) of the server at `url`, which `backing` names.
    pub(super) async fn on_server<W: ServerWorld<Effect = E>>(
        url: &str,
        backing: fn(W) -> Backing,
        provider: Provider,
        base_url: &str,
        forgetful: bool,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let server = W::new(url, retention(), clock.clone()).await;
        let parts = Parts::on_server(clock, || server.store(LEASE));
        World::assemble(backing(server), parts, provider, base_url, forgetful)
    }
}

fn retention() -> Retention {
    Retention::unchecked(RETENTION).expect("retention")
}

/// A world's stores and clock.
struct Parts<E> {
    clock: Arc<ManualClock>,
    store: Arc<dyn lambda_dedup::MarkStore<E>>,
    faulty_store: Arc<dyn lambda_dedup::MarkStore<E>>,
    faults: Arc<CompleteFaults>,
}

impl<E: 'static> Parts<E> {
    /// Two stores on one server's marks, on `clock`: the flow's, and a second (a connection of
    /// its own) whose completes can be made to fail.
    fn on_server<S: lambda_dedup::MarkStore<E> + 'static>(
        clock: Arc<ManualClock>,
        store: impl Fn() -> S,
    ) -> Self {
        let faults = Arc::new(CompleteFaults::default());
        Self {
            clock,
            store: Arc::new(store()),
            faulty_store: Arc::new(FaultyCompletes {
                inner: Arc::new(store()),
                faults: faults.clone(),
            }),
            faults,
        }
    }
}

impl<E: 'static> World<E> {
    fn assemble(
        backing: Backing,
        parts: Parts<E>,
        provider: Provider,
        base_url: &str,
        forgetful: bool,
    ) -> Self {
        let dedup = |store: Arc<dyn lambda_dedup::MarkStore<E>>| {
            // A provider that never forgets keys is one that keeps them longer than any run.
            let keeps = if forgetful {
                PROVIDER_KEYS
            } else {
                Duration::from_secs(100 * 365 * 86_400)
            };
            Deduplicator::with_store(cloudevents_spec("model-leased"), store)
                .with_provider_key_retention(keeps)
        };
        if forgetful {
            provider.set_key_retention(Some(PROVIDER_KEYS));
        }
        Self {
            dedup: dedup(parts.store.clone()),
            faulty: dedup(parts.faulty_store),
            backing,
            clock: parts.clock,
            store: parts.store,
            faults: parts.faults,
            provider,
            api: IdempotentClient::new(base_url, PROVIDER_TIMEOUT).expect("payments client"),
            run: unique("pay"),
        }
    }

    /// The completes whose answer the memory store lost after applying them.
    pub(super) fn lost_on_memory(&self) -> Vec<String> {
        let Backing::Stores(stores) = &self.backing else {
            return Vec::new();
        };
        stores
            .memory()
            .map(|m| {
                m.take_lost_answers()
                    .into_iter()
                    .filter(|(op, _)| *op == Op::Complete)
                    .filter_map(|(_, k)| k.map(|k| k.as_str().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether a mark of `key` is stored at all, live or past its TTL.
    pub(super) async fn stored_mark(&self, key: &DedupKey) -> bool {
        match &self.backing {
            Backing::Stores(stores) => stores.stored_mark(key).await,
            Backing::Postgres(pg) => pg.stored_mark(key).await,
            Backing::Valkey(valkey) => valkey.stored_mark(key).await,
        }
    }

    /// Moves the store's clock and the provider's together.
    pub(super) fn advance(&self, by: Duration) {
        self.clock.advance(by);
        self.provider.advance(by);
    }

    /// Waits (real time) for the provider to finish the calls it is still working on: a
    /// redelivery comes a visibility timeout later, long after a slow provider has answered.
    pub(super) async fn settle_provider(&self) {
        let started = std::time::Instant::now();
        while self.provider.in_flight() > 0 {
            assert!(started.elapsed() < HUNG, "the provider hung");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs one batch through the leased flow, as `payment-dispatcher` does, and crashes it where
    /// `crash` says. With `slow`, its deadline is `SHORT_DEADLINE` away and comes `DEADLINE_LEFT`
    /// (real time) into any provider call: the process is killed there, holding the claim.
    pub(super) async fn execute(
        &self,
        batch: Vec<Delivery>,
        crash: Option<Crash>,
        short: bool,
        slow: bool,
    ) -> BatchRun {
        let now = self.clock.now();
        let deadline = now
            + if short || slow {
                SHORT_DEADLINE
            } else {
                Duration::from_secs(60)
            };
        // As the store records it: the owner's end, and the clock-skew allowance past it (S6).
        let lease_until = (now + LEASE).min(deadline) + lambda_dedup::store::DEFAULT_CLOCK_SKEW;
        let dedup = match crash {
            Some(Crash::DuringComplete { .. }) => &self.faulty,
            _ => &self.dedup,
        };
        let events: HashMap<String, u8> = batch
            .iter()
            .map(|d| (d.message.message_id.clone(), d.event))
            .collect();
        let log = Mutex::new(Log::default());
        // Handlers that finished or are parked for good; the crash cuts the batch when all are.
        let stopped = AtomicUsize::new(0);
        let parked = AtomicUsize::new(0);
        let wake = Notify::new();
        let (log, stopped, parked, wake, api, events) =
            (&log, &stopped, &parked, &wake, &self.api, &events);
        let park = |event: u8| async move {
            lock(log).parked.push(event);
            parked.fetch_add(1, Ordering::SeqCst);
            stopped.fetch_add(1, Ordering::SeqCst);
            wake.notify_one();
            // The process is dead: this handler never goes on.
            std::future::pending::<()>().await;
        };
        let messages: Vec<Message> = batch.iter().map(|d| d.message.clone()).collect();
        let n = messages.len();
        let work = run_batch(messages, 10, |m| async move {
            let refused = AtomicBool::new(false);
            let refused = &refused;
            let outcome = dedup
                .leased(&m, Some(deadline), |e: Derived, lease| async move {
                    let (event, request) = payment(&e)?;
                    lock(log).called.push((event, lease.idempotency_key()));
                    if crash == Some(Crash::AfterClaim) {
                        park(event).await;
                    }
                    let key = lease.idempotency_key();
                    let call = api.call("/v1/payments", &key, &request);
                    let sent = if slow {
                        tokio::select! {
                            sent = call => sent,
                            () = tokio::time::sleep(DEADLINE_LEFT) => {
                                // The deadline: Lambda stops the process with the call still out.
                                lock(log).slow_calls += 1;
                                park(event).await;
                                unreachable!("a parked handler never goes on")
                            }
                        }
                    } else {
                        call.await
                    };
                    match &sent {
                        Err(CallError::Timeout) => lock(log).provider_timeouts += 1,
                        Err(CallError::Status(503)) => lock(log).provider_5xx += 1,
                        Err(e) if e.is_permanent() => refused.store(true, Ordering::SeqCst),
                        Err(_) | Ok(_) => {}
                    }
                    if crash == Some(Crash::AfterCall) {
                        park(event).await;
                    }
                    Ok(Some(sent?.body))
                })
                .await;
            let event = events
                .get(&m.message_id)
                .copied()
                .expect("a message of the batch");
            lock(log)
                .outcomes
                .push((event, outcome.clone(), refused.load(Ordering::SeqCst)));
            stopped.fetch_add(1, Ordering::SeqCst);
            wake.notify_one();
            outcome
        });
        let crashes = matches!(crash, Some(Crash::AfterClaim | Crash::AfterCall));
        let finished = async {
            if crashes || slow {
                // `kill -9` (or the deadline) once every handler is parked or done: the batch
                // future is dropped. A slow batch dies only if a call outlived its deadline.
                let all_stopped = async {
                    loop {
                        let woken = wake.notified();
                        if stopped.load(Ordering::SeqCst) >= n
                            && (crashes || parked.load(Ordering::SeqCst) > 0)
                        {
                            break;
                        }
                        woken.await;
                    }
                };
                tokio::select! {
                    report = work => Some(report),
                    () = all_stopped => None,
                }
            } else {
                Some(work.await)
            }
        };
        let report = tokio::time::timeout(HUNG, finished)
            .await
            .expect("a batch hung");
        if let Some(report) = &report {
            assert!(report.account.closes(), "S14: {:?}", report.account);
            assert_eq!(
                report.account.received, n as u64,
                "S14: every delivery counted"
            );
            let failed: BTreeSet<&str> = report.failures().into_iter().collect();
            for (d, (id, o)) in batch.iter().zip(report.outcomes()) {
                assert_eq!(&d.message.message_id, id, "S12: outcomes in batch order");
                assert_eq!(
                    failed.contains(id.as_str()),
                    !o.acknowledged(),
                    "S12: exactly the failures"
                );
            }
        }
        let lost = report.is_none();
        let reported = report.map(|r| r.into_outcomes().into_iter().map(|(_, o)| o).collect());
        let log = std::mem::take(&mut *lock(log));
        BatchRun {
            batch,
            log,
            lost,
            reported,
            lease_until,
        }
    }
}

/// The event number and the provider request of a payment: the same on every retry.
pub(super) fn payment(e: &Derived) -> Result<(u8, Value), HandlerError> {
    let data = HandlerError::data(e)?;
    let event = data["event"]
        .as_u64()
        .and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| HandlerError::invalid("event"))?;
    Ok((
        event,
        json!({"reference": data["reference"], "amount": data["amount"]}),
    ))
}
