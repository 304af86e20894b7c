//! The ends of a delivery and the account that must close (S14).

use std::time::SystemTime;

use lambda_dedup::DedupKey;
use serde::Serialize;

pub use lambda_dedup::Reason;

use crate::handler_error::{Invalid, InvalidCause, Transient, TransientCause};
use crate::retry::RetryCause;

/// How one delivery ended. Exactly one per delivery (S14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The effect happened, now, because of this delivery. Acknowledged.
    Applied,
    /// The event was already handled; nothing was done. Acknowledged, logged, counted (S8).
    Duplicate {
        /// When the event was first seen.
        first_seen_at: SystemTime,
        /// The result stored with the mark by the first processing, handed back to the
        /// duplicate (S8: e.g. a webhook answers a redelivery with the first answer).
        result: Option<String>,
    },
    /// Not processed now; reported as a batch item failure so the queue redelivers it (S8 in
    /// progress, S13 transient store faults, transient handler errors, a panicking handler or
    /// plan).
    Retry {
        /// Why, typed: what the account counts it by.
        cause: RetryCause,
        /// Why, for the log (naming fields, never their values).
        reason: String,
        /// The work's typed refusal, when the work refused it for now (`cause` is then
        /// [`RetryCause::Transient`]).
        transient: Option<Transient>,
    },
    /// Same key, different payload (S11). Reported failed, so it ends in the dead-letter queue
    /// through the queue's redrive policy; never acknowledged as a duplicate.
    Conflict,
    /// Latest-wins mode ([`lambda_dedup::latest`]): a newer event of the same object is applied
    /// already, so this older one is not applied over it. Nothing written. Acknowledged, and
    /// counted among the duplicates of the account (S14) and on its own (`Superseded`).
    Superseded,
    /// No key could be derived, or the payload is invalid (S2), or DynamoDB refused the event's
    /// own writes for good (`effect_refused`, S15: nothing was written). Reported failed, so it
    /// ends in the dead-letter queue; never processed, never dropped.
    Rejected {
        /// Why, as a [`Reason`]: its stable code is the metric and log label, and it says
        /// whether the event goes to reconciliation.
        code: Reason,
        /// The reason, naming fields but never their values.
        reason: String,
        /// The event's key, when one was derived (not for a message with no identity): what
        /// reconciliation and parking pass on, and what `lambda-dedup explain` takes.
        key: Option<DedupKey>,
        /// The work's typed refusal, when the work refused it (`code` is then
        /// [`Reason::InvalidPayload`]): a payload that does not fit, at which field, the
        /// provider's refusal, the work's own rule…
        invalid: Option<Invalid>,
    },
    /// A rejection the mark table cannot judge ([`Reason::for_reconciliation`]), handed to the
    /// reconciliation queue: acknowledged (it is safe there), and counted as `rejected` in the
    /// account (S10, S14).
    Reconciled {
        /// Why it went to reconciliation.
        code: Reason,
        /// The reason, naming fields but never their values.
        reason: String,
        /// The event's key, sent with it.
        key: Option<DedupKey>,
    },
}

impl Outcome {
    /// A retry for `cause`, with `reason` for the log.
    pub fn retry(cause: RetryCause, reason: impl Into<String>) -> Self {
        Outcome::Retry {
            cause,
            reason: reason.into(),
            transient: None,
        }
    }

    /// Whether the message is removed from the queue (absent from the batch item failures).
    pub fn acknowledged(&self) -> bool {
        matches!(
            self,
            Outcome::Applied
                | Outcome::Duplicate { .. }
                | Outcome::Superseded
                | Outcome::Reconciled { .. }
        )
    }

    /// The outcome's name in logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Duplicate { .. } => "duplicate",
            Outcome::Retry { .. } => "retry",
            Outcome::Conflict => "conflict",
            Outcome::Superseded => "superseded",
            Outcome::Rejected { .. } => "rejected",
            Outcome::Reconciled { .. } => "reconciled",
        }
    }
}

/// The per-invocation account: received = applied + duplicate + retry + conflict + rejected,
/// with the retries by [`RetryCause`], the rejections by [`Reason`], and the work's refusals
/// among them by their [`InvalidCause`] and [`TransientCause`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Account {
    /// Deliveries in the batch.
    pub received: u64,
    /// Effects applied.
    pub applied: u64,
    /// Duplicates skipped (the superseded events among them).
    pub duplicate: u64,
    /// Of the duplicates, the events older than one applied for their object (latest-wins
    /// mode): the EMF metric `Superseded`.
    pub superseded: u64,
    /// Left for redelivery.
    pub retry: u64,
    /// Payload conflicts.
    pub conflict: u64,
    /// Rejected deliveries.
    pub rejected: u64,
    /// The retries by cause, in the order of [`RetryCause::ALL`] (they sum to `retry`).
    pub retries: [u64; RetryCause::ALL.len()],
    /// The rejections (those sent to reconciliation too) by reason, in the order of
    /// [`Reason::ALL`] (they sum to `rejected`).
    pub rejections: [u64; Reason::ALL.len()],
    /// The work's refusals for good by cause, in the order of [`InvalidCause::ALL`] (they sum to
    /// the rejections for [`Reason::InvalidPayload`]).
    pub invalid: [u64; InvalidCause::ALL.len()],
    /// The work's refusals for now by cause, in the order of [`TransientCause::ALL`] (they sum
    /// to the retries for [`RetryCause::Transient`]).
    pub transient: [u64; TransientCause::ALL.len()],
}

impl Account {
    /// Counts one outcome.
    pub fn record(&mut self, outcome: &Outcome) {
        self.received += 1;
        match outcome {
            Outcome::Applied => self.applied += 1,
            Outcome::Duplicate { .. } => self.duplicate += 1,
            Outcome::Retry {
                cause, transient, ..
            } => {
                self.retry += 1;
                self.retries[cause.index()] += 1;
                if let Some(t) = transient {
                    self.transient[t.cause().index()] += 1;
                }
            }
            Outcome::Conflict => self.conflict += 1,
            Outcome::Superseded => {
                self.duplicate += 1;
                self.superseded += 1;
            }
            Outcome::Rejected { code, invalid, .. } => {
                self.rejected += 1;
                self.count_rejection(*code);
                if let Some(i) = invalid {
                    self.invalid[i.cause().index()] += 1;
                }
            }
            Outcome::Reconciled { code, .. } => {
                self.rejected += 1;
                self.count_rejection(*code);
            }
        }
    }

    fn count_rejection(&mut self, code: Reason) {
        if let Some(i) = reason_index(code) {
            self.rejections[i] += 1;
        }
    }

    /// The retries counted for `cause`.
    pub fn retries_for(&self, cause: RetryCause) -> u64 {
        self.retries[cause.index()]
    }

    /// The rejections counted for `reason`.
    pub fn rejections_for(&self, reason: Reason) -> u64 {
        reason_index(reason).map_or(0, |i| self.rejections[i])
    }

    /// The work's refusals for good counted for `cause`.
    pub fn invalid_for(&self, cause: InvalidCause) -> u64 {
        self.invalid[cause.index()]
    }

    /// The work's refusals for now counted for `cause`.
    pub fn transient_for(&self, cause: TransientCause) -> u64 {
        self.transient[cause.index()]
    }

    /// The EMF metric that counts the rejections for `reason`: `Rejected` and the reason's code
    /// in upper camel case (`RejectedIdentityMissing`, `RejectedInvalidPayload`, …).
    pub fn rejected_metric(reason: Reason) -> String {
        let mut name = String::from("Rejected");
        for word in reason.code().split('_') {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                name.extend(first.to_uppercase());
                name.push_str(chars.as_str());
            }
        }
        name
    }

    /// Whether the account closes (S14).
    pub fn closes(&self) -> bool {
        self.received == self.applied + self.duplicate + self.retry + self.conflict + self.rejected
    }

    /// Adds another account to this one.
    pub fn add(&mut self, other: &Account) {
        self.received += other.received;
        self.applied += other.applied;
        self.duplicate += other.duplicate;
        self.superseded += other.superseded;
        self.retry += other.retry;
        self.conflict += other.conflict;
        self.rejected += other.rejected;
        let pairs = self
            .retries
            .iter_mut()
            .zip(other.retries)
            .chain(self.rejections.iter_mut().zip(other.rejections))
            .chain(self.invalid.iter_mut().zip(other.invalid))
            .chain(self.transient.iter_mut().zip(other.transient));
        for (mine, theirs) in pairs {
            *mine += theirs;
        }
    }

    /// One CloudWatch Embedded Metric Format record of this account, as a single JSON line: print
    /// it to stdout on its own line and CloudWatch extracts the metrics (namespace `namespace`,
    /// dimension `Function`).
    pub fn emf_line(&self, namespace: &str, function: &str) -> String {
        self.emf_line_with(namespace, &[("Function", function)])
    }

    /// [`emf_line`](Self::emf_line) with the dimensions `dimensions` (name, value), all in one
    /// dimension set: e.g. `[("Function", "orders"), ("Step", "call")]` for one step of a
    /// function with two.
    pub fn emf_line_with(&self, namespace: &str, dimensions: &[(&str, &str)]) -> String {
        let counts = [
            self.received,
            self.applied,
            self.duplicate,
            self.retry,
            self.conflict,
            self.rejected,
        ];
        let rejected: Vec<(String, u64)> = Reason::ALL
            .iter()
            .zip(self.rejections)
            .filter(|(_, n)| *n > 0)
            .map(|(reason, n)| (Account::rejected_metric(*reason), n))
            .collect();
        let mut metrics: Vec<(&str, &str, u64)> = Account::METRICS
            .iter()
            .zip(counts)
            .map(|(name, n)| (*name, "Count", n))
            .collect();
        if self.superseded > 0 {
            metrics.push(("Superseded", "Count", self.superseded));
        }
        // Each cause that occurred, as its own metric: what an alarm on retries by cause reads.
        metrics.extend(occurred(RetryCause::ALL, self.retries, RetryCause::metric));
        // Likewise each rejection's reason, and the causes of the work's own refusals.
        metrics.extend(
            rejected
                .iter()
                .map(|(name, n)| (name.as_str(), "Count", *n)),
        );
        metrics.extend(occurred(
            InvalidCause::ALL,
            self.invalid,
            InvalidCause::metric,
        ));
        metrics.extend(occurred(
            TransientCause::ALL,
            self.transient,
            TransientCause::metric,
        ));
        crate::emf_line(namespace, dimensions, &metrics)
    }

    /// The names of the account's EMF metrics, in the order of the line: what an auditor sums
    /// per function (received = the sum of the other five, S14).
    pub const METRICS: [&'static str; 6] = [
        "Received",
        "Applied",
        "Duplicate",
        "Retry",
        "Conflict",
        "Rejected",
    ];
}

/// The causes of `all` that occurred (their counts in `counts`, in the same order), each as
/// its own EMF count named by `metric`.
fn occurred<'a, C, const N: usize>(
    all: [C; N],
    counts: [u64; N],
    metric: fn(C) -> &'static str,
) -> impl Iterator<Item = (&'a str, &'a str, u64)> {
    all.into_iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(move |(cause, n)| -> (&'a str, &'a str, u64) { (metric(cause), "Count", n) })
}

/// `reason`'s position in [`Reason::ALL`].
fn reason_index(reason: Reason) -> Option<usize> {
    Reason::ALL.iter().position(|r| *r == reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The account's EMF line for `function` in the `lambda-dedup` namespace, parsed.
    fn emf(a: &Account, function: &str) -> serde_json::Value {
        serde_json::from_str(&a.emf_line("lambda-dedup", function)).expect("one JSON object")
    }

    /// The metric names the EMF line declares.
    fn metric_names(v: &serde_json::Value) -> Vec<&str> {
        v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .collect()
    }

    #[test]
    fn s14_every_outcome_is_counted_once_and_the_account_closes() {
        let outcomes = [
            Outcome::Applied,
            Outcome::Duplicate {
                first_seen_at: SystemTime::now(),
                result: None,
            },
            Outcome::retry(RetryCause::Store, "x"),
            Outcome::Conflict,
            Outcome::Rejected {
                code: crate::Reason::IdentityMissing,
                reason: "x".into(),
                key: None,
                invalid: None,
            },
            Outcome::Applied,
        ];
        let mut a = Account::default();
        for o in &outcomes {
            a.record(o);
        }
        assert_eq!(
            a,
            Account {
                received: 6,
                applied: 2,
                duplicate: 1,
                retry: 1,
                conflict: 1,
                rejected: 1,
                retries: [0, 1, 0, 0, 0, 0, 0, 0],
                rejections: {
                    let mut by_reason = [0; Reason::ALL.len()];
                    by_reason[3] = 1;
                    by_reason
                },
                ..Account::default()
            }
        );
        assert!(a.closes());
        a.received += 1;
        assert!(!a.closes(), "a delivery with no outcome breaks the account");
    }

    #[test]
    fn s14_emf_line_carries_every_count() {
        let a = Account {
            received: 5,
            applied: 1,
            duplicate: 1,
            retry: 0,
            conflict: 1,
            rejected: 1,
            ..Account::default()
        };
        let v = emf(&a, "ledger-projector");
        assert_eq!(v["Function"], "ledger-projector");
        assert_eq!(v["Received"], 5);
        assert_eq!(v["Rejected"], 1);
        assert_eq!(metric_names(&v).len(), 6);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            "lambda-dedup"
        );
    }

    /// Retries are counted by cause: each cause that occurred is a metric of its own on the EMF
    /// line, the causes sum to `Retry`, and accounts add up cause by cause.
    #[test]
    fn retries_are_counted_by_cause_on_the_emf_line() {
        let mut a = Account::default();
        for cause in [RetryCause::Store, RetryCause::Store, RetryCause::Deadline] {
            a.record(&Outcome::retry(cause, "x"));
        }
        let mut b = Account::default();
        b.record(&Outcome::retry(RetryCause::InProgress, "y"));
        a.add(&b);
        assert_eq!(a.retry, 4);
        assert_eq!(a.retries_for(RetryCause::Store), 2);
        assert_eq!(a.retries_for(RetryCause::InProgress), 1);
        assert_eq!(a.retries.iter().sum::<u64>(), a.retry);
        let v = emf(&a, "f");
        assert_eq!(v["Retry"], 4);
        assert_eq!(v["RetryStore"], 2);
        assert_eq!(v["RetryDeadline"], 1);
        assert_eq!(v["RetryInProgress"], 1);
        assert!(
            v.get("RetryPanicked").is_none(),
            "a cause that did not occur: no metric"
        );
        let names = metric_names(&v);
        assert!(names.contains(&"RetryStore"), "{names:?}");
    }

    /// Rejections are counted by reason, and the work's refusals by their typed cause: each
    /// that occurred is a metric of its own on the EMF line beside the totals, which keep
    /// their names (`Rejected`, `Retry`, `RetryTransient`).
    #[test]
    fn rejections_and_refusals_are_counted_by_cause_on_the_emf_line() {
        let refused = |invalid: Invalid| Outcome::Rejected {
            code: Reason::InvalidPayload,
            reason: invalid.to_string(),
            key: None,
            invalid: Some(invalid),
        };
        let retried = |transient: Transient| Outcome::Retry {
            cause: RetryCause::Transient,
            reason: transient.to_string(),
            transient: Some(transient),
        };
        let mut a = Account::default();
        for o in [
            refused(Invalid::Misfit {
                path: "amount".into(),
            }),
            refused(Invalid::Misfit { path: "".into() }),
            refused(Invalid::Rule("amount must be positive".into())),
            Outcome::Rejected {
                code: Reason::IdentityMissing,
                reason: "x".into(),
                key: None,
                invalid: None,
            },
            Outcome::Reconciled {
                code: Reason::LateEvent,
                reason: "x".into(),
                key: None,
            },
            retried(Transient::CallTimeout {
                limit: std::time::Duration::from_millis(200),
            }),
            retried(Transient::Provider(crate::CallError::Status(404))),
        ] {
            a.record(&o);
        }
        assert!(a.closes());
        assert_eq!(a.rejected, 5);
        assert_eq!(a.rejections_for(Reason::InvalidPayload), 3);
        assert_eq!(a.rejections_for(Reason::LateEvent), 1);
        assert_eq!(a.rejections.iter().sum::<u64>(), a.rejected);
        assert_eq!(a.invalid_for(InvalidCause::Misfit), 2);
        assert_eq!(a.invalid_for(InvalidCause::Rule), 1);
        assert_eq!(
            a.invalid.iter().sum::<u64>(),
            a.rejections_for(Reason::InvalidPayload)
        );
        assert_eq!(a.transient_for(TransientCause::CallTimeout), 1);
        assert_eq!(a.transient_for(TransientCause::ProviderMisconfigured), 1);
        assert_eq!(
            a.transient.iter().sum::<u64>(),
            a.retries_for(RetryCause::Transient)
        );
        let mut twice = a;
        twice.add(&a);
        assert_eq!(twice.invalid_for(InvalidCause::Misfit), 4);
        assert_eq!(twice.rejections_for(Reason::IdentityMissing), 2);
        let v = emf(&a, "f");
        assert_eq!(v["Rejected"], 5);
        assert_eq!(v["RejectedInvalidPayload"], 3);
        assert_eq!(v["RejectedIdentityMissing"], 1);
        assert_eq!(v["RejectedLateEvent"], 1);
        assert_eq!(v["InvalidMisfit"], 2);
        assert_eq!(v["InvalidRule"], 1);
        assert_eq!(v["RetryTransient"], 2);
        assert_eq!(v["TransientCallTimeout"], 1);
        assert_eq!(v["TransientProviderMisconfigured"], 1);
        assert!(
            v.get("InvalidNotJson").is_none(),
            "no metric for a cause not met"
        );
        assert!(v.get("RejectedMarkCorrupt").is_none());
        let names = metric_names(&v);
        for name in [
            "RejectedInvalidPayload",
            "InvalidMisfit",
            "TransientCallTimeout",
        ] {
            assert!(names.contains(&name), "{name} declared: {names:?}");
        }
    }

    /// Every reason has a metric name of its own.
    #[test]
    fn each_reason_has_its_own_rejected_metric() {
        let names: std::collections::HashSet<String> = Reason::ALL
            .into_iter()
            .map(Account::rejected_metric)
            .collect();
        assert_eq!(names.len(), Reason::ALL.len());
        assert_eq!(
            Account::rejected_metric(Reason::ProviderKeyExpired),
            "RejectedProviderKeyExpired"
        );
    }

    #[test]
    fn only_applied_and_duplicate_are_acknowledged() {
        assert!(Outcome::Applied.acknowledged());
        assert!(
            Outcome::Duplicate {
                first_seen_at: SystemTime::now(),
                result: None,
            }
            .acknowledged()
        );
        assert!(!Outcome::retry(RetryCause::Deadline, "").acknowledged());
        assert!(!Outcome::Conflict.acknowledged());
        assert!(
            !Outcome::Rejected {
                code: crate::Reason::InvalidPayload,
                reason: String::new(),
                key: None,
                invalid: None,
            }
            .acknowledged()
        );
    }
}
