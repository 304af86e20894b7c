//! Why a message would be treated as it would: the operator's question (`lambda-dedup explain`,
//! `lambda-dedup redrive`), answered with the flows' own rules and nothing written.
//!
//! [`Deduplicator::explain`] derives the message's key as the flows do (the same
//! [`KeySpec`](lambda_dedup::KeySpec), body limit and event-time source), applies the same
//! late/future rule (S10), then reads the mark and judges it with [`Mark::classify`], the
//! client-side mirror of the store's claim condition. The [`Verdict`] is what a delivery of the
//! message would get now.

use std::time::SystemTime;

use lambda_dedup::{DedupKey, Fingerprint, Mark, MarkStatus, Message, Rejection, Seen, StoreError};

use crate::deduplicator::Deduplicator;

/// What a delivery of a message would get now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No mark stands in its way: it would be applied (or, under an expired lease, taken over).
    WouldApply,
    /// Already applied: acknowledged as a duplicate of the mark's first processing (S8).
    Duplicate {
        /// When the event was first claimed or committed.
        first_seen_at: SystemTime,
        /// When it completed.
        completed_at: Option<SystemTime>,
        /// The result stored with the mark.
        result: Option<String>,
    },
    /// Claimed by another process whose lease is live: it would be retried later (S6).
    InProgress {
        /// When that lease runs out.
        lease_expires_at: Option<SystemTime>,
    },
    /// Same key, different payload: not applied, dead-lettered (S11).
    Conflict {
        /// The fingerprint stored with the mark.
        stored: Fingerprint,
        /// This message's.
        offered: Fingerprint,
    },
    /// The mark table cannot judge it (S10: older than the retention, or implausibly far in the
    /// future): it goes to reconciliation, never applied.
    Late(Rejection),
    /// A takeover first attempted longer ago than the external API keeps idempotency keys: to
    /// reconciliation instead of calling again (S16).
    ProviderKeyExpired {
        /// When the event was first attempted.
        first_attempt_at: SystemTime,
    },
    /// No key can be derived (S2): rejected, dead-lettered, never applied.
    NoIdentity(Rejection),
}

impl Verdict {
    /// A stable, low-cardinality name, for counts and `--json`.
    pub fn code(&self) -> &'static str {
        match self {
            Verdict::WouldApply => "would_apply",
            Verdict::Duplicate { .. } => "duplicate",
            Verdict::InProgress { .. } => "in_progress",
            Verdict::Conflict { .. } => "conflict",
            Verdict::Late(_) => "late",
            Verdict::ProviderKeyExpired { .. } => "provider_key_expired",
            Verdict::NoIdentity(_) => "no_identity",
        }
    }

    /// Whether the event belongs in the reconciliation queue rather than the source (S10, S16).
    pub fn for_reconciliation(&self) -> bool {
        matches!(self, Verdict::Late(_) | Verdict::ProviderKeyExpired { .. })
    }
}

/// A message explained: its key (when it has one), its fingerprint, the live mark found under
/// the key, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The dedup key, as the flows derive it (`None`: no identity).
    pub key: Option<DedupKey>,
    /// The message's payload fingerprint, if the spec takes one.
    pub fingerprint: Option<Fingerprint>,
    /// The event's own time, when it declares one (S10).
    pub event_time: Option<SystemTime>,
    /// The live mark under the key, as stored (`None`: none, or past its TTL).
    pub mark: Option<Mark>,
    /// What a delivery would get now.
    pub verdict: Verdict,
}

impl Explanation {
    /// Whether the stored fingerprint matches the message's: `None` when either has none.
    pub fn fingerprint_matches(&self) -> Option<bool> {
        let stored = self.mark.as_ref()?.fingerprint.as_ref()?;
        Some(stored == self.fingerprint.as_ref()?)
    }
}

impl Deduplicator {
    /// What a delivery of `msg` would get now, read from the store and never written (see the
    /// module docs). A late event is judged before its mark is read, as the flows do; its key
    /// and any mark are still reported. Store faults are errors, never a verdict.
    pub async fn explain(&self, msg: &Message) -> Result<Explanation, StoreError> {
        let event = match self.spec().derive(msg) {
            Ok(event) => event,
            Err(rejection) => {
                return Ok(Explanation {
                    key: None,
                    fingerprint: None,
                    event_time: None,
                    mark: None,
                    verdict: Verdict::NoIdentity(rejection),
                });
            }
        };
        let mark = self.store().get(&event.key).await?;
        let verdict = match self.untimely(&event) {
            Some(untimely) => Verdict::Late(untimely),
            None => self.judge(mark.clone(), event.fingerprint.as_ref()),
        };
        Ok(Explanation {
            key: Some(event.key),
            fingerprint: event.fingerprint,
            event_time: event.event_time,
            mark,
            verdict,
        })
    }

    /// The verdict of the store's claim condition on `mark` for a delivery offering `offered`.
    fn judge(&self, mark: Option<Mark>, offered: Option<&Fingerprint>) -> Verdict {
        let now = self.store().now();
        let Some(mark) = mark else {
            return Verdict::WouldApply;
        };
        let taken_over = mark.status == MarkStatus::InProgress && !mark.lease_is_live(now);
        let first_attempt_at = mark.first_seen_at;
        match mark.classify(offered, now) {
            Some(Seen::Duplicate(m)) => Verdict::Duplicate {
                first_seen_at: m.first_seen_at,
                completed_at: m.completed_at,
                result: m.result,
            },
            Some(Seen::InProgress { lease_expires_at }) => Verdict::InProgress { lease_expires_at },
            Some(Seen::Conflict {
                stored, offered, ..
            }) => Verdict::Conflict { stored, offered },
            None if taken_over
                && self.provider_key_retention().is_some_and(|retention| {
                    now.duration_since(first_attempt_at)
                        .is_ok_and(|age| age > retention)
                }) =>
            {
                Verdict::ProviderKeyExpired { first_attempt_at }
            }
            None => Verdict::WouldApply,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Outcome, Plan};
    use lambda_dedup::{Clock, KeySpec, ManualClock, MarkStore, Retention, Scope};
    use lambda_dedup_memory::MemoryStore;
    use std::sync::Arc;
    use std::time::Duration;

    const DAY: Duration = Duration::from_secs(86_400);

    fn message(id: &str, amount: i64, time: Option<SystemTime>) -> Message {
        let mut body = serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/t",
            "id": id, "tenantid": "acme", "data": {"amount": amount}});
        if let Some(t) = time {
            body["time"] = chrono::DateTime::<chrono::Utc>::from(t)
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                .into();
        }
        Message {
            message_id: format!("m-{id}"),
            body: body.to_string().into_bytes(),
            ..Message::default()
        }
    }

    fn setup() -> (Deduplicator, MemoryStore, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let store = MemoryStore::new(Retention::unchecked(DAY).expect("retention"))
            .with_clock(clock.clone())
            .with_lease(Duration::from_secs(60));
        let spec = KeySpec::cloudevents(Scope::new("t", "ledger").expect("scope"), "tenantid")
            .fingerprint(lambda_dedup::FingerprintSource::CloudEventsData);
        (Deduplicator::new(spec, store.clone()), store, clock)
    }

    fn nothing(_: &lambda_dedup::Derived) -> Result<Plan, crate::HandlerError> {
        Ok(Plan {
            effects: Vec::new(),
            result: Some("receipt-1".into()),
        })
    }

    /// Each verdict the flows would reach, read without writing: new, duplicate (with its
    /// stored result), conflict, live lease, late, no identity; explaining twice changes
    /// nothing (a new event stays "would apply").
    #[tokio::test]
    async fn every_verdict_matches_what_the_flow_does() {
        let (dedup, store, clock) = setup();
        let fresh = message("e-1", 5, None);
        let e = dedup.explain(&fresh).await.expect("explained");
        assert_eq!(e.verdict, Verdict::WouldApply);
        assert!(e.key.is_some() && e.mark.is_none());
        assert_eq!(
            dedup.explain(&fresh).await.expect("again").verdict,
            Verdict::WouldApply,
            "explaining writes nothing"
        );
        assert_eq!(dedup.transactional(&fresh, nothing).await, Outcome::Applied);

        let e = dedup.explain(&fresh).await.expect("explained");
        assert!(
            matches!(&e.verdict, Verdict::Duplicate { result: Some(r), completed_at: Some(_), .. } if r == "receipt-1"),
            "{e:?}"
        );
        assert_eq!(e.fingerprint_matches(), Some(true));

        let conflicting = message("e-1", 500, None);
        let e = dedup.explain(&conflicting).await.expect("explained");
        assert!(matches!(e.verdict, Verdict::Conflict { .. }), "{e:?}");
        assert_eq!(e.fingerprint_matches(), Some(false));
        assert_eq!(
            dedup.transactional(&conflicting, nothing).await,
            Outcome::Conflict
        );

        let leased = message("e-2", 1, None);
        let key = dedup.spec().derive(&leased).expect("key").key;
        let fp = dedup.spec().derive(&leased).expect("key").fingerprint;
        let claim = store.claim(&key, fp.as_ref(), None).await.expect("claim");
        assert!(matches!(claim, lambda_dedup::Claim::Claimed(_)));
        let e = dedup.explain(&leased).await.expect("explained");
        assert!(
            matches!(
                e.verdict,
                Verdict::InProgress {
                    lease_expires_at: Some(_)
                }
            ),
            "{e:?}"
        );
        clock.advance(Duration::from_secs(61));
        assert_eq!(
            dedup.explain(&leased).await.expect("explained").verdict,
            Verdict::WouldApply,
            "an expired lease is taken over"
        );

        let late = message("e-3", 1, Some(clock.now() - 2 * DAY));
        let e = dedup.explain(&late).await.expect("explained");
        assert!(
            matches!(e.verdict, Verdict::Late(Rejection::Late { .. })),
            "{e:?}"
        );
        assert!(e.verdict.for_reconciliation());
        assert!(matches!(
            dedup.transactional(&late, nothing).await,
            Outcome::Rejected {
                code: crate::Reason::LateEvent,
                ..
            }
        ));

        let malformed = Message {
            message_id: "m-x".into(),
            body: b"{\"broken\":".to_vec(),
            ..Message::default()
        };
        let e = dedup.explain(&malformed).await.expect("explained");
        assert!(
            matches!(
                e.verdict,
                Verdict::NoIdentity(Rejection::BodyNotJson { .. })
            ),
            "{e:?}"
        );
        assert_eq!(e.key, None);
    }

    /// S16: a takeover first attempted longer ago than the provider keeps keys would go to
    /// reconciliation, as the leased flow sends it.
    #[tokio::test]
    async fn s16_an_old_takeover_is_for_reconciliation() {
        let (dedup, store, clock) = setup();
        let dedup = dedup.with_provider_key_retention(Duration::from_secs(3600));
        let msg = message("e-9", 1, None);
        let derived = dedup.spec().derive(&msg).expect("key");
        store
            .claim(&derived.key, derived.fingerprint.as_ref(), None)
            .await
            .expect("claim");
        clock.advance(Duration::from_secs(7200));
        let e = dedup.explain(&msg).await.expect("explained");
        assert!(
            matches!(e.verdict, Verdict::ProviderKeyExpired { .. }),
            "{e:?}"
        );
        assert!(e.verdict.for_reconciliation());
    }
}
