//! The reference model: what the provider, the marks and every delivery's outcome must be.

use super::*;

pub(super) struct Model {
    pub(super) epoch: u32,
    pub(super) epoch_start: SystemTime,
    pub(super) marks: BTreeMap<u8, Mark>,
    /// When each held event was first attempted: the claim that started its chain of takeovers
    /// (the store keeps that time across takeovers; a release or completion ends the chain).
    pub(super) first_attempt: BTreeMap<u8, SystemTime>,
    /// Applications per (event, epoch): `Applied` outcomes plus completes whose answer was lost.
    pub(super) applied: BTreeMap<(u8, u32), u32>,
    /// (event, epoch) pairs with at least one delivery.
    pub(super) delivered: BTreeSet<(u8, u32)>,
    /// (event, epoch) pairs sent to reconciliation (`provider_key_expired`).
    pub(super) reconciled: BTreeSet<(u8, u32)>,
    pub(super) events: BTreeMap<u8, Event>,
    pub(super) by_pk: HashMap<String, u8>,
    /// Sent and not acknowledged: SQS delivers these again.
    pub(super) pending: Vec<Delivery>,
    /// The dead-letter queue: (message id, event, outcome).
    pub(super) dlq: Vec<(String, u8, Outcome)>,
    pub(super) next_id: u32,
    /// The event whose key the provider refuses.
    pub(super) refused: Option<u8>,
    /// The provider forgets keys after `PROVIDER_KEYS`.
    pub(super) forgetful: bool,
    /// Provider-key-expiry steps taken in this epoch.
    pub(super) key_expiries: u32,
    /// The provider's effects when this epoch began.
    pub(super) effects_at_epoch: BTreeMap<String, u64>,
    /// The provider's effects during each finished epoch.
    pub(super) epoch_effects: Vec<BTreeMap<String, u64>>,
    pub(super) stats: Stats,
}

impl Model {
    pub(super) fn new(start: SystemTime, refused: Option<u8>, forgetful: bool) -> Self {
        Self {
            epoch: 0,
            epoch_start: start,
            marks: BTreeMap::new(),
            first_attempt: BTreeMap::new(),
            applied: BTreeMap::new(),
            delivered: BTreeSet::new(),
            reconciled: BTreeSet::new(),
            events: BTreeMap::new(),
            by_pk: HashMap::new(),
            pending: Vec::new(),
            dlq: Vec::new(),
            next_id: 0,
            refused,
            forgetful,
            key_expiries: 0,
            effects_at_epoch: BTreeMap::new(),
            epoch_effects: Vec::new(),
            stats: Stats {
                schedules: 1,
                refused_keys: u64::from(refused.is_some()),
                forgetful_providers: u64::from(forgetful),
                ..Stats::default()
            },
        }
    }

    /// A delivery of `event`: SQS delivering its last message again (`again`, same id), or the
    /// producer sending it (again: a new message id). `taken`: ids already in this batch.
    pub(super) fn deliver<E: 'static>(
        &mut self,
        world: &World<E>,
        event: u8,
        again: bool,
        taken: &BTreeSet<String>,
    ) -> Delivery {
        if again
            && let Some(e) = self.events.get(&event)
            && !taken.contains(&e.last.message_id)
            // A dead-lettered message is in the DLQ: the queue cannot deliver it again.
            && !self.dlq.iter().any(|(id, _, _)| *id == e.last.message_id)
        {
            // In flight now; it comes back if this delivery is not acknowledged either.
            let id = &e.last.message_id;
            self.pending.retain(|d| &d.message.message_id != id);
            return Delivery {
                message: e.last.clone(),
                event,
            };
        }
        self.next_id += 1;
        let body = json!({"specversion": "1.0", "type": "payment", "source": "/model-leased",
                          "id": format!("{}-{event}", world.run), "tenantid": "t",
                          "data": {"event": event, "reference": format!("{}-{event}", world.run),
                                   "amount": 100 + u64::from(event)}});
        let message = Message {
            message_id: format!("m{}", self.next_id),
            body: body.to_string().into_bytes(),
            ..Message::default()
        };
        let key = cloudevents_spec("model-leased")
            .derive(&message)
            .expect("derive")
            .key;
        if self.refused == Some(event) && !self.events.contains_key(&event) {
            world.provider.reject_key(&key.idempotency_key(), REFUSED);
        }
        self.by_pk.insert(key.as_str().to_owned(), event);
        self.events.insert(
            event,
            Event {
                idempotency_key: key.idempotency_key(),
                key,
                last: message.clone(),
            },
        );
        Delivery { message, event }
    }

    pub(super) fn event_of(&self, pk: &str) -> u8 {
        *self.by_pk.get(pk).expect("a mark of this schedule")
    }

    /// The provider's effects since this epoch began, per idempotency key.
    pub(super) fn epoch_delta(&self, now: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        now.iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n - self.effects_at_epoch.get(k).copied().unwrap_or(0),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Checks one step's batches (run at the same time, from the same state) against the model,
    /// and moves the model on. `faulty`: a fault was armed for this step (a crash, a provider
    /// fault, a slow call, a call still in flight from before).
    pub(super) fn settle<E: 'static>(
        &mut self,
        world: &World<E>,
        runs: Vec<BatchRun>,
        unsent: &[String],
        answer_lost: &[String],
        faulty: bool,
    ) {
        let now = world.clock.now();
        assert!(
            now.duration_since(self.epoch_start).unwrap_or_default() + VISIBILITY < RETENTION,
            "the schedule outran the retention within one epoch: no mark may expire outside a \
             TTL step"
        );
        let start = self.marks.clone();
        let state = |e: u8| start.get(&e).copied().unwrap_or(Mark::Absent);
        let live = |m: Mark| matches!(m, Mark::Held { until } if until > now);
        // A takeover of this event would find it first attempted longer ago than the provider
        // keeps keys.
        let key_expired = |e: u8| {
            self.forgetful
                && self
                    .first_attempt
                    .get(&e)
                    .is_some_and(|t| now.duration_since(*t).unwrap_or_default() > PROVIDER_KEYS)
        };
        let effects = world.provider.effects();
        let mut completed: BTreeMap<u8, u32> = BTreeMap::new();
        let mut held: BTreeMap<u8, SystemTime> = BTreeMap::new();
        let mut called: BTreeSet<u8> = BTreeSet::new();
        let mut expired: BTreeSet<u8> = BTreeSet::new();
        let mut received: BTreeSet<u8> = BTreeSet::new();
        for run in &runs {
            self.stats.batches += 1;
            self.stats.deliveries += run.batch.len() as u64;
            self.stats.provider_5xx += run.log.provider_5xx;
            self.stats.provider_timeouts += run.log.provider_timeouts;
            self.stats.slow_provider_calls += run.log.slow_calls;
            for d in &run.batch {
                self.delivered.insert((d.event, self.epoch));
                received.insert(d.event);
            }
            for (e, o, refused) in &run.log.outcomes {
                match o {
                    Outcome::Rejected {
                        code: lambda_dedup_engine::Reason::InvalidPayload,
                        ..
                    } => {
                        assert!(
                            *refused && self.refused == Some(*e),
                            "S15: event {e} rejected ({o:?}) though the provider refused no call"
                        );
                        self.stats.provider_rejections += 1;
                    }
                    Outcome::Rejected { code, .. }
                        if *code == lambda_dedup_engine::Reason::ProviderKeyExpired =>
                    {
                        assert!(
                            matches!(state(*e), Mark::Held { .. })
                                && !live(state(*e))
                                && key_expired(*e),
                            "S9/S16: event {e} got {o:?}, but a takeover of it is not past the \
                             provider's key retention ({:?}, first attempt {:?})",
                            state(*e),
                            self.first_attempt.get(e)
                        );
                        expired.insert(*e);
                        held.insert(*e, run.lease_until);
                        self.reconciled.insert((*e, self.epoch));
                        self.stats.provider_key_expired += 1;
                    }
                    Outcome::Conflict | Outcome::Rejected { .. } => {
                        panic!("event {e}: {o:?} (the payload never changes)")
                    }
                    _ => {}
                }
                assert!(
                    !*refused
                        || matches!(
                            o,
                            Outcome::Rejected {
                                code: lambda_dedup_engine::Reason::InvalidPayload,
                                ..
                            }
                        ),
                    "S15: the provider refused event {e}'s call for good (4xx), and the delivery \
                     got {o:?}, not a rejection"
                );
                match state(*e) {
                    Mark::Completed => assert!(
                        matches!(o, Outcome::Duplicate { .. }),
                        "S8: event {e} was completed, a delivery got {o:?}"
                    ),
                    m if live(m) => assert!(
                        matches!(o, Outcome::Retry { .. }),
                        "S8: event {e} is held under a live lease, a delivery got {o:?}"
                    ),
                    _ => {}
                }
                if o.acknowledged() {
                    assert!(
                        effects.get(&self.events[e].idempotency_key).copied() >= Some(1),
                        "event {e} acknowledged ({o:?}) but the provider never applied it"
                    );
                }
                if *o == Outcome::Applied {
                    *completed.entry(*e).or_default() += 1;
                }
            }
            for (e, key) in &run.log.called {
                assert_eq!(
                    key, &self.events[e].idempotency_key,
                    "S6: event {e} called the provider with a key not derived from its dedup key"
                );
                assert!(
                    state(*e) != Mark::Completed && !live(state(*e)),
                    "S4/S6: event {e} was claimed while {:?}",
                    state(*e)
                );
                assert!(
                    !key_expired(*e),
                    "S9/S16: event {e} was taken over past the provider's key retention (first \
                     attempt {:?}) and the provider was called",
                    self.first_attempt.get(e)
                );
                called.insert(*e);
            }
            for e in &run.log.parked {
                held.insert(*e, run.lease_until);
            }
        }
        for e in &expired {
            assert!(
                !called.contains(e),
                "S4: event {e} claimed twice in one step"
            );
        }
        // The faulty client only ever serves the first batch of a step.
        let faulty_lease = runs.first().map(|r| r.lease_until);
        for pk in unsent {
            let e = self.event_of(pk);
            held.insert(e, faulty_lease.expect("a batch"));
        }
        for pk in answer_lost {
            *completed.entry(self.event_of(pk)).or_default() += 1;
        }
        let touched: BTreeSet<u8> = called
            .iter()
            .chain(completed.keys())
            .chain(held.keys())
            .copied()
            .collect();
        for e in &touched {
            let done = completed.get(e).copied().unwrap_or(0);
            assert!(
                done == 0 || !held.contains_key(e),
                "S4: event {e} completed and still held by a dead owner in one step: two owners"
            );
            let next = if done > 0 {
                *self.applied.entry((*e, self.epoch)).or_default() += done;
                Mark::Completed
            } else if let Some(until) = held.get(e) {
                Mark::Held { until: *until }
            } else {
                // Claimed, the call failed, the claim was released (S6): its lease ended, the
                // mark (and its first attempt's time) stays for the next delivery to take over.
                Mark::Held {
                    until: std::time::UNIX_EPOCH,
                }
            };
            match next {
                // A claim over no live mark starts a chain; a takeover inherits its start.
                Mark::Held { .. } if state(*e) == Mark::Absent => {
                    self.first_attempt.insert(*e, now);
                }
                Mark::Held { .. } => {}
                Mark::Absent | Mark::Completed => {
                    self.first_attempt.remove(e);
                }
            }
            self.marks.insert(*e, next);
        }
        // A good event is applied at its first receive in a step with no fault, if its mark let
        // it be claimed (absent, or a dead owner's lease over).
        if !faulty {
            for e in &received {
                let claimable = match state(*e) {
                    Mark::Absent => true,
                    m @ Mark::Held { .. } => !live(m),
                    Mark::Completed => false,
                };
                if claimable && self.refused != Some(*e) {
                    assert!(
                        self.marks.get(e) == Some(&Mark::Completed) || expired.contains(e),
                        "S12: event {e} was not applied at a receive with no fault (it is {:?})",
                        self.marks.get(e)
                    );
                }
            }
        }
        // SQS keeps one copy of a message: acknowledged by any delivery, it is gone; rejected,
        // the redrive policy dead-letters it; otherwise it comes back (once). A delivery sent to
        // reconciliation is acknowledged once it is there.
        let mut acked: BTreeSet<String> = BTreeSet::new();
        let mut dead: BTreeMap<String, (u8, Outcome)> = BTreeMap::new();
        let mut back: Vec<Delivery> = Vec::new();
        for run in runs {
            match run.reported {
                Some(outcomes) if !run.lost => {
                    for (d, o) in run.batch.into_iter().zip(outcomes) {
                        let id = d.message.message_id.clone();
                        if o.acknowledged()
                            || matches!(&o, Outcome::Rejected { code, .. } if *code == lambda_dedup_engine::Reason::ProviderKeyExpired)
                        {
                            acked.insert(id);
                        } else if matches!(o, Outcome::Rejected { .. } | Outcome::Conflict) {
                            dead.insert(id, (d.event, o));
                        } else {
                            back.push(d);
                        }
                    }
                }
                // The process died: none of the batch was acknowledged.
                _ => back.extend(run.batch),
            }
        }
        dead.retain(|id, _| !acked.contains(id));
        self.pending.retain(|d| {
            !acked.contains(&d.message.message_id) && !dead.contains_key(&d.message.message_id)
        });
        for (id, (e, o)) in dead {
            if !self.dlq.iter().any(|(i, _, _)| *i == id) {
                self.stats.dead_lettered += 1;
                self.dlq.push((id, e, o));
            }
        }
        for d in back {
            let id = &d.message.message_id;
            if !acked.contains(id)
                && !self.dlq.iter().any(|(i, _, _)| i == id)
                && !self.pending.iter().any(|p| &p.message.message_id == id)
            {
                self.pending.push(d);
            }
        }
    }

    /// The store agrees with the model about every event's mark.
    pub(super) async fn check_marks<E: 'static>(&self, world: &World<E>) {
        for (e, ev) in &self.events {
            let mark = world.store.get(&ev.key).await.expect("get mark");
            let want = self.marks.get(e).copied().unwrap_or(Mark::Absent);
            let got = mark.as_ref().map(|m| m.status);
            match want {
                Mark::Absent => assert_eq!(got, None, "event {e}: the model has no live mark"),
                Mark::Held { until } => {
                    assert_eq!(
                        got,
                        Some(MarkStatus::InProgress),
                        "event {e}: held by a dead owner"
                    );
                    let mark = mark.as_ref().expect("a mark");
                    let ms = lambda_dedup::clock::epoch_millis;
                    assert_eq!(
                        mark.lease_expires_at.map(ms),
                        Some(ms(until)),
                        "S6: event {e}: its lease ends at the claim's deadline or lease"
                    );
                    assert_eq!(
                        Some(ms(mark.first_seen_at)),
                        self.first_attempt.get(e).copied().map(ms),
                        "S9/S16: event {e}: a takeover keeps the first attempt's time"
                    );
                }
                Mark::Completed => {
                    assert_eq!(got, Some(MarkStatus::Completed), "event {e}: completed")
                }
            }
        }
    }

    /// Ends the epoch's accounting of the provider's effects (once its calls have all landed).
    pub(super) async fn close_epoch<E: 'static>(&mut self, world: &World<E>) {
        world.settle_provider().await;
        let effects = world.provider.effects();
        let delta = self.epoch_delta(&effects);
        self.epoch_effects.push(delta);
        self.effects_at_epoch = effects;
    }
}
