//! Sequence mode, for ordered sources: one conditional write per message, no mark table, no
//! transaction.
//!
//! Where the producer stamps a sequence number per aggregate (an account, an order) and the
//! source keeps order per aggregate (an SQS FIFO message group, a Kinesis shard), the mark can
//! live in the effect item itself as the aggregate's **high-water sequence**: the effect is one
//! `UpdateItem` that also sets the high-water to this message's sequence, on the condition that
//! the stored high-water is the one just before it. One write request unit for a small item,
//! instead of a transaction's two per item and a mark item.
//!
//! What a message's sequence says against the stored high-water `hw` (see [`judge`]):
//! - `hw + 1` (or the first sequence, with nothing stored): applied, atomically with the
//!   high-water;
//! - `≤ hw`: a duplicate (an SQS redelivery, a replay); for `hw` itself the payload fingerprint
//!   stored with the high-water tells a duplicate from a **regression** — the producer reusing a
//!   sequence for another event — which is a conflict (S11);
//! - `> hw + 1`, or below the first with nothing stored: a **gap** — an event in between was
//!   never applied. It is never skipped silently: the message is rejected (`sequence_gap`), so it
//!   is counted and dead-lettered, and the group stops there until an operator repairs it.
//!
//! The attributes [`HIGH_WATER`] and [`HIGH_WATER_FINGERPRINT`] and the placeholders starting
//! `#dedup_`/`:dedup_` are the library's; an effect must not use them.

use crate::effect::{Effect, EffectKind, Item, Value};
use crate::fingerprint::Fingerprint;
use crate::key::{DedupKey, Derived};

/// The effect item's attribute holding its aggregate's high-water sequence.
pub const HIGH_WATER: &str = "dedup_seq";
/// The attribute holding the fingerprint of the payload applied at the high-water.
pub const HIGH_WATER_FINGERPRINT: &str = "dedup_seq_fp";

/// Where a message's sequence number comes from: a JSON pointer into its body, and the first
/// sequence a producer uses for an aggregate (1 unless set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceSource {
    pointer: String,
    first: u64,
}

impl SequenceSource {
    /// The sequence at `pointer` in the JSON body (for CloudEvents, e.g. `/data/seq`), first 1.
    pub fn pointer(pointer: &str) -> Self {
        Self {
            pointer: pointer.to_owned(),
            first: 1,
        }
    }

    /// The first sequence of every aggregate.
    pub fn first(mut self, first: u64) -> Self {
        self.first = first;
        self
    }

    /// The first sequence of every aggregate.
    pub fn first_sequence(&self) -> u64 {
        self.first
    }

    /// The event's sequence: a non-negative integer (or its decimal string) at the pointer.
    pub fn read(&self, event: &Derived) -> Result<u64, SequenceError> {
        let not_a_sequence = || SequenceError::NotASequence {
            field: self.pointer.clone(),
        };
        let v = match event.body.as_ref() {
            Some(b) => crate::pointer::resolve(b, &self.pointer).map_err(|_| not_a_sequence())?,
            None => None,
        }
        .ok_or_else(|| SequenceError::Missing {
            field: self.pointer.clone(),
        })?;
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .ok_or_else(not_a_sequence)
    }
}

/// A message without a usable sequence. Names the field, never its value (S3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// The field is absent.
    #[error("sequence field {field} is missing")]
    Missing {
        /// The JSON pointer.
        field: String,
    },
    /// The field is not a non-negative integer.
    #[error("sequence field {field} is not a non-negative integer")]
    NotASequence {
        /// The JSON pointer.
        field: String,
    },
}

impl SequenceError {
    /// A stable code for metrics and logs (its [`crate::Reason`]'s).
    pub fn code(&self) -> &'static str {
        crate::Reason::from(self).code()
    }
}

/// One write in sequence mode: an update of the aggregate's item, with the sequence it carries.
#[derive(Debug, Clone, Copy)]
pub struct SequencedWrite<'a> {
    /// The event's key (for errors and logs; nothing is stored under it).
    pub key: &'a DedupKey,
    /// The effect: an [`Effect::update`] of the aggregate's item. Its own condition, if any, must
    /// hold too.
    pub effect: &'a Effect,
    /// The event's sequence.
    pub sequence: u64,
    /// The first sequence of an aggregate.
    pub first: u64,
    /// The payload fingerprint, stored with the high-water (S11).
    pub fingerprint: Option<&'a Fingerprint>,
}

/// What became of a sequenced write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SequenceOutcome {
    /// Applied, with the high-water moved to this sequence.
    Applied,
    /// At or below the high-water: applied before. Nothing written.
    Duplicate {
        /// The stored high-water.
        high_water: u64,
    },
    /// The high-water's own sequence with another payload: the producer reused a sequence.
    /// Nothing written (S11).
    Conflict {
        /// The stored high-water.
        high_water: u64,
    },
    /// Not the next sequence: an event in between was never applied (or this one precedes the
    /// first). Nothing written; never skipped silently.
    Gap {
        /// The sequence that would have been applied.
        expected: u64,
        /// This message's.
        got: u64,
    },
    /// The effect's own condition failed. Nothing written.
    EffectRejected,
}

/// What a write of `sequence` meets, given the item's stored high-water and its fingerprint:
/// `None` when it is the next one and may be applied. Both stores judge a failed write with
/// this, from the item as it stood.
pub fn judge(
    stored: Option<(u64, Option<&str>)>,
    sequence: u64,
    first: u64,
    fingerprint: Option<&Fingerprint>,
) -> Option<SequenceOutcome> {
    let expected = match stored {
        None => first,
        Some((hw, _)) => hw.saturating_add(1),
    };
    if sequence == expected {
        return None;
    }
    match stored {
        Some((hw, stored_fp)) if sequence <= hw => {
            let other = matches!((stored_fp, fingerprint), (Some(s), Some(f)) if s != f.as_str());
            Some(if sequence == hw && other {
                SequenceOutcome::Conflict { high_water: hw }
            } else {
                SequenceOutcome::Duplicate { high_water: hw }
            })
        }
        _ => Some(SequenceOutcome::Gap {
            expected,
            got: sequence,
        }),
    }
}

/// The stored high-water of an item and its fingerprint, if it has one.
pub fn high_water(item: &Item) -> Option<(u64, Option<&str>)> {
    let hw = match item.0.get(HIGH_WATER)? {
        Value::N(n) => n.parse().ok()?,
        _ => return None,
    };
    let fp = match item.0.get(HIGH_WATER_FINGERPRINT) {
        Some(Value::S(s)) => Some(s.as_str()),
        _ => None,
    };
    Some((hw, fp))
}

impl SequencedWrite<'_> {
    /// What this write met when its condition failed, from the item as it stood (`None`: no
    /// item): [`judge`] of the stored high-water, or [`SequenceOutcome::EffectRejected`] when
    /// its sequence would apply (the effect's own condition failed). Both stores answer a
    /// failed write with this.
    pub fn judge_failed(&self, old: Option<&Item>) -> SequenceOutcome {
        judge(
            old.and_then(high_water),
            self.sequence,
            self.first,
            self.fingerprint,
        )
        .unwrap_or(SequenceOutcome::EffectRejected)
    }

    /// The one update both stores send: the effect's own update with the high-water (and
    /// fingerprint) set in the same `SET` clause, on the condition that the stored high-water is
    /// the one just before this sequence (or absent, for the first) — and the effect's own
    /// condition, if it has one. `None` when the effect is not an update.
    pub fn to_effect(&self) -> Option<Effect> {
        let e = self.effect;
        if e.kind() != EffectKind::Update {
            return None;
        }
        let mut set = String::from("#dedup_seq = :dedup_seq");
        if self.fingerprint.is_some() {
            set.push_str(", #dedup_fp = :dedup_fp");
        }
        let update = match e.update_expression() {
            None => format!("SET {set}"),
            Some(u) => merge_set(u, &set),
        };
        let ours = "(attribute_not_exists(#dedup_seq) AND :dedup_seq = :dedup_first) \
                    OR #dedup_seq = :dedup_prev";
        let condition = match e.condition_expression() {
            None => ours.to_owned(),
            Some(c) => format!("({ours}) AND ({c})"),
        };
        let mut out = Effect::update(e.table(), e.item().clone())
            .expression(&update)
            .condition(&condition)
            .name("#dedup_seq", HIGH_WATER)
            .value(":dedup_seq", self.sequence)
            .value(":dedup_first", self.first)
            .value(
                ":dedup_prev",
                Value::N((i128::from(self.sequence) - 1).to_string()),
            );
        for (k, v) in e.names() {
            out = out.name(k, v);
        }
        for (k, v) in e.values() {
            out = out.value(k, v.clone());
        }
        if let Some(fp) = self.fingerprint {
            out = out
                .name("#dedup_fp", HIGH_WATER_FINGERPRINT)
                .value(":dedup_fp", fp.as_str());
        }
        Some(out)
    }
}

/// `update` with `set` added to its `SET` clause (one is made if it has none): DynamoDB takes
/// each clause keyword once. `SET` is a reserved word, so a bare `SET` is always the clause.
fn merge_set(update: &str, set: &str) -> String {
    let bytes = update.as_bytes();
    let word = |i: usize| i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_');
    let mut i = 0;
    while i + 3 <= bytes.len() {
        let boundary_before =
            i == 0 || !(word(i - 1) || bytes[i - 1] == b'#' || bytes[i - 1] == b':');
        if boundary_before && update[i..i + 3].eq_ignore_ascii_case("SET") && !word(i + 3) {
            return format!("{}SET {set},{}", &update[..i], &update[i + 3..]);
        }
        i += 1;
    }
    format!("SET {set} {update}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(s: &str) -> Fingerprint {
        Fingerprint::of_bytes(s.as_bytes())
    }

    #[test]
    fn the_next_sequence_applies_and_everything_else_is_named() {
        let a = fp("a");
        assert_eq!(judge(None, 1, 1, Some(&a)), None);
        assert_eq!(
            judge(None, 2, 1, None),
            Some(SequenceOutcome::Gap {
                expected: 1,
                got: 2
            })
        );
        assert_eq!(judge(Some((4, None)), 5, 1, None), None);
        assert_eq!(
            judge(Some((4, None)), 3, 1, None),
            Some(SequenceOutcome::Duplicate { high_water: 4 })
        );
        assert_eq!(
            judge(Some((4, Some(a.as_str()))), 4, 1, Some(&a)),
            Some(SequenceOutcome::Duplicate { high_water: 4 })
        );
        assert_eq!(
            judge(Some((4, Some(a.as_str()))), 4, 1, Some(&fp("b"))),
            Some(SequenceOutcome::Conflict { high_water: 4 })
        );
        assert_eq!(
            judge(Some((4, None)), 7, 1, None),
            Some(SequenceOutcome::Gap {
                expected: 5,
                got: 7
            })
        );
    }

    #[test]
    fn the_high_water_joins_the_effects_own_set_clause() {
        assert_eq!(
            merge_set("ADD #b :a", "#dedup_seq = :dedup_seq"),
            "SET #dedup_seq = :dedup_seq ADD #b :a"
        );
        assert_eq!(
            merge_set("set #s = :v ADD #b :a", "X = :x"),
            "SET X = :x, #s = :v ADD #b :a"
        );
        assert_eq!(
            merge_set("ADD #SET :a, settled :b", "X = :x"),
            "SET X = :x ADD #SET :a, settled :b"
        );
    }
}
