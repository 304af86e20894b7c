//! What must hold after every step and at the end of a run: the ledger of every event's
//! deliveries, outcomes and effects, and the checks on it.

use std::collections::BTreeMap;
use std::fmt;

/// An invariant of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Invariant {
    /// Each event's effect happens at most once.
    AtMostOnce,
    /// An acknowledged event that was not parked, dead-lettered, refused or reconciled has had
    /// its effect exactly once.
    ExactlyOnce,
    /// Every delivery ends acknowledged, dead-lettered, parked or reconciled.
    NothingLost,
    /// A lease owner whose lease was taken over never completes the event.
    StaleOwnerCompleted,
    /// A lease owner whose lease was taken over never releases the new owner's claim.
    StaleOwnerReleased,
    /// No claim takes over a lease whose owner may still act (clocks within the allowance).
    LeaseExclusive,
    /// A delivery with the same key and another payload is never acknowledged (S11).
    ConflictAcknowledged,
    /// Effects of one aggregate apply in sequence; a gap only behind a parked record.
    Order,
    /// Every invocation's account closes (S14).
    Account,
    /// A stream's checkpoint passes only records acknowledged or parked.
    Checkpoint,
    /// A relay settles an intent only after the provider answered its call with success.
    SettledBeforeCall,
    /// A durable step's effect is applied once per execution, and a replay of the step
    /// returns the output stored with it.
    StepOnce,
    /// One durable execution per event identity, whatever its deliveries.
    OneExecution,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invariant::AtMostOnce => "effect at most once",
            Invariant::ExactlyOnce => "effect exactly once",
            Invariant::NothingLost => "nothing lost",
            Invariant::StaleOwnerCompleted => "stale owner never completes",
            Invariant::StaleOwnerReleased => "stale owner never releases",
            Invariant::LeaseExclusive => "lease exclusive",
            Invariant::ConflictAcknowledged => "conflict never acknowledged",
            Invariant::Order => "order per group and shard",
            Invariant::Account => "account closes (S14)",
            Invariant::Checkpoint => "checkpoint passes only settled records",
            Invariant::SettledBeforeCall => "never settled before the call succeeded",
            Invariant::StepOnce => "durable step effect once, replay returns the stored output",
            Invariant::OneExecution => "one durable execution per event",
        })
    }
}

/// A broken invariant, with what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant.
    pub invariant: Invariant,
    /// The event or call it is about (ids of the simulation, no payloads).
    pub detail: String,
}

/// What happened to one event.
#[derive(Debug, Default, Clone)]
pub struct Event {
    /// Times its effect happened (counted by the world the effect lands in).
    pub effects: u32,
    /// A delivery of it was acknowledged (applied or duplicate).
    pub acked: bool,
    /// A delivery of it was dead-lettered or parked.
    pub dead: bool,
    /// It was sent to reconciliation (the provider may have forgotten its key).
    pub reconciled: bool,
    /// A delivery with the same key and another payload was acknowledged.
    pub other_payload_acked: bool,
    /// Deliveries whose outcome was `applied`.
    pub applied_outcomes: u32,
}

/// Every event of the run, by id.
#[derive(Debug, Default)]
pub struct Ledger {
    events: BTreeMap<String, Event>,
    /// Per aggregate: the last sequence applied, and whether a record of it was parked.
    sequences: BTreeMap<String, (u64, bool)>,
    violations: Vec<Violation>,
}

impl Ledger {
    /// The event `id`, created on first mention.
    pub fn event(&mut self, id: &str) -> &mut Event {
        self.events.entry(id.to_owned()).or_default()
    }

    /// The event `id`, if it was mentioned.
    pub fn known(&self, id: &str) -> Option<&Event> {
        self.events.get(id)
    }

    /// Records a broken invariant.
    pub fn violate(&mut self, invariant: Invariant, detail: String) {
        self.violations.push(Violation { invariant, detail });
    }

    /// The violations so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// A delivery of `id` was acknowledged; `other_payload` says it carried the key with
    /// another payload. Both payloads acknowledged breaks S11.
    pub fn acked(&mut self, id: &str, other_payload: bool) {
        let e = self.event(id);
        if other_payload {
            e.other_payload_acked = true;
        } else {
            e.acked = true;
        }
        if e.acked && e.other_payload_acked {
            self.violate(
                Invariant::ConflictAcknowledged,
                format!("{id}: both payloads acknowledged"),
            );
        }
    }

    /// Sets the effect count of `id` as the world holding the effect counts it, and checks
    /// that it happened at most once.
    pub fn effects_seen(&mut self, id: &str, effects: u32) {
        let e = self.event(id);
        e.effects = effects;
        if effects > 1 {
            self.violate(
                Invariant::AtMostOnce,
                format!("{id}: effect {effects} times"),
            );
        }
    }

    /// A delivery of `id` answered `applied`: at most once per event.
    pub fn applied(&mut self, id: &str) {
        let e = self.event(id);
        e.applied_outcomes += 1;
        let n = e.applied_outcomes;
        if n > 1 {
            self.violate(Invariant::AtMostOnce, format!("{id}: applied {n} times"));
        }
    }

    /// Sequence `seq` of `aggregate` was applied: it must follow the last one acknowledged,
    /// and is never at or below it (an old sequence redelivered after newer ones is a
    /// duplicate or a gap, never applied over the newer state), parked records or not.
    pub fn sequence_applied(&mut self, aggregate: &str, seq: u64) {
        let (last, parked) = *self.sequences.entry(aggregate.to_owned()).or_default();
        if seq <= last {
            self.violate(
                Invariant::Order,
                format!("{aggregate}: {seq} applied over {last}"),
            );
        } else if seq != last + 1 && !parked {
            self.violate(
                Invariant::Order,
                format!("{aggregate}: {seq} applied after {last}"),
            );
        }
        self.sequence_acked(aggregate, seq);
    }

    /// Sequence `seq` of `aggregate` was acknowledged.
    pub fn sequence_acked(&mut self, aggregate: &str, seq: u64) {
        let (last, _) = self.sequences.entry(aggregate.to_owned()).or_default();
        *last = (*last).max(seq);
    }

    /// A record of `aggregate` was parked: later ones may meet a gap.
    pub fn sequence_parked(&mut self, aggregate: &str) {
        self.sequences.entry(aggregate.to_owned()).or_default().1 = true;
    }

    /// A record of `aggregate` was rejected as a gap: only right behind a parked record.
    pub fn sequence_gap(&mut self, aggregate: &str, seq: u64) {
        let parked = self.sequences.get(aggregate).is_some_and(|s| s.1);
        if !parked {
            self.violate(
                Invariant::Order,
                format!("{aggregate}: gap at {seq}, nothing parked"),
            );
        }
    }

    /// The end-of-run checks: nothing lost, exactly once where promised.
    pub fn finish(&mut self, in_flight: &[String]) {
        for id in in_flight {
            self.violate(
                Invariant::NothingLost,
                format!("{id}: still undelivered at the end"),
            );
        }
        let mut found = Vec::new();
        for (id, e) in &self.events {
            if !(e.acked || e.other_payload_acked || e.dead || e.reconciled) {
                found.push((Invariant::NothingLost, format!("{id}: no outcome")));
            }
            if (e.acked || e.other_payload_acked) && !e.dead && !e.reconciled && e.effects != 1 {
                found.push((
                    Invariant::ExactlyOnce,
                    format!("{id}: acknowledged, effect {} times", e.effects),
                ));
            }
        }
        for (invariant, detail) in found {
            self.violate(invariant, detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(l: &Ledger) -> Vec<Invariant> {
        l.violations().iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn a_second_effect_or_a_second_applied_answer_breaks_at_most_once() {
        let mut l = Ledger::default();
        l.effects_seen("e", 1);
        l.applied("e");
        assert!(broken(&l).is_empty());
        l.effects_seen("e", 2);
        l.applied("e");
        assert_eq!(broken(&l), [Invariant::AtMostOnce, Invariant::AtMostOnce]);
    }

    #[test]
    fn an_acknowledged_event_without_its_effect_breaks_exactly_once_unless_parked() {
        let mut l = Ledger::default();
        l.acked("a", false);
        l.acked("b", false);
        l.event("b").dead = true;
        l.acked("c", false);
        l.effects_seen("c", 1);
        l.finish(&[]);
        assert_eq!(broken(&l), [Invariant::ExactlyOnce]);
        assert!(l.violations()[0].detail.starts_with("a:"));
    }

    #[test]
    fn an_event_with_no_outcome_or_left_in_the_queue_is_lost() {
        let mut l = Ledger::default();
        l.event("quiet");
        l.finish(&["queued (m1)".to_owned()]);
        assert_eq!(broken(&l), [Invariant::NothingLost, Invariant::NothingLost]);
    }

    #[test]
    fn both_payloads_of_one_key_acknowledged_breaks_s11() {
        let mut l = Ledger::default();
        l.acked("e", true);
        assert!(broken(&l).is_empty());
        l.acked("e", false);
        assert_eq!(broken(&l), [Invariant::ConflictAcknowledged]);
    }

    #[test]
    fn sequences_apply_in_order_and_gaps_only_behind_a_parked_record() {
        let mut l = Ledger::default();
        l.sequence_applied("a", 1);
        l.sequence_acked("a", 2);
        l.sequence_applied("a", 3);
        assert!(broken(&l).is_empty());
        l.sequence_applied("a", 5);
        l.sequence_gap("b", 2);
        assert_eq!(broken(&l), [Invariant::Order, Invariant::Order]);
        let mut parked = Ledger::default();
        parked.sequence_parked("a");
        parked.sequence_gap("a", 2);
        parked.sequence_applied("a", 3);
        assert!(broken(&parked).is_empty());
    }

    #[test]
    fn an_old_sequence_applied_after_newer_ones_breaks_order_even_behind_a_parked_record() {
        let mut l = Ledger::default();
        l.sequence_parked("a");
        l.sequence_applied("a", 1);
        l.sequence_applied("a", 2);
        l.sequence_acked("a", 1);
        assert!(broken(&l).is_empty());
        l.sequence_applied("a", 1);
        assert_eq!(broken(&l), [Invariant::Order]);
    }
}
