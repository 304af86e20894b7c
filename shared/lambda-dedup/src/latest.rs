//! Latest-wins mode: events of one object may arrive out of order, and an event older than one
//! already applied for the same object is **superseded** — acknowledged, counted, never applied
//! over the newer one.
//!
//! Unlike sequence mode ([`crate::sequence`]), which needs consecutive integers and treats a
//! gap as an error, the order here is only *monotone*: S3 stamps each PUT and DELETE
//! notification of an object key with a `sequencer`, a hex string that grows with each event of
//! that key, with gaps. The object's **high-water** is one item in the mark table (its key
//! [`HIGH_WATER_KEY`], the object's hashed key: no object name in clear, S3), holding the
//! greatest sequencer applied ([`HIGH_WATER_SEQUENCER`]). The event's mark, its effects and an
//! update of that item — on the condition that the stored sequencer is absent or lower
//! ([`LatestWrite::to_effect`]) — go in one transaction (S5), so of an older and a newer event
//! delivered at once the newer always wins, whatever the order.
//!
//! [`Sequencer`] normalises a sequencer to a fixed width so DynamoDB's string `<` orders it: the
//! S3 documentation says sequencers of different lengths are compared by **right**-padding the
//! shorter with zeros, then comparing lexicographically (the AWS Knowledge Center, "Why do I
//! see duplicate messages in Amazon SQS for the same Amazon S3 event?", and the S3 User Guide's
//! "Event message structure": "right-pad the shorter value with zeros"; older copies of the
//! guide said left). Upper-cased too, so `a` and `A` compare as the same digit.

use std::time::SystemTime;

use crate::effect::{Effect, Item, Value};
use crate::key::DedupKey;
use crate::mark::Commit;

/// The high-water item's partition key attribute: the mark table's (`pk`).
pub const HIGH_WATER_KEY: &str = "pk";
/// The attribute holding the greatest sequencer applied, padded ([`Sequencer::as_str`]).
pub const HIGH_WATER_SEQUENCER: &str = "dedup_latest";
/// The high-water item's TTL attribute, epoch seconds: the mark table's (`expires_at`).
pub const HIGH_WATER_EXPIRES: &str = "expires_at";
/// The width a sequencer is right-padded to, in hex digits: the stored form, which high-water
/// items already written hold (so it stays, whatever [`MAX_SEQUENCER_DIGITS`] is).
pub const SEQUENCER_WIDTH: usize = 64;
/// The widest sequencer taken, in hex digits. S3 documents the sequencer only as "a string
/// representation of a hexadecimal value"; every one it sends (and every example in its
/// documentation and EventBridge's) has 16 or 18 digits. 20 leaves S3 a byte to grow and
/// refuses what no S3 sends: a forged sequencer of 64 digits, say (issue 42).
pub const MAX_SEQUENCER_DIGITS: usize = 20;

/// A sequencer, right-padded with `0` to [`SEQUENCER_WIDTH`] and upper-cased, so two compare
/// as S3 documents by plain string order — here and in DynamoDB's condition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sequencer(String);

/// A sequencer that cannot be ordered. Names the rule, never the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SequencerError {
    /// Empty.
    #[error("the sequencer is empty")]
    Empty,
    /// Not hexadecimal digits only.
    #[error("the sequencer is not hexadecimal")]
    NotHex,
    /// Longer than [`MAX_SEQUENCER_DIGITS`] digits (trailing zeros, the padding, aside; at
    /// most [`SEQUENCER_WIDTH`] with them): wider than any S3 sends.
    #[error("the sequencer has {len} digits, over {MAX_SEQUENCER_DIGITS}")]
    TooLong {
        /// Its length.
        len: usize,
    },
}

impl Sequencer {
    /// `raw` as S3 sends it (hex digits), normalised for comparison.
    pub fn parse(raw: &str) -> Result<Self, SequencerError> {
        if raw.is_empty() {
            return Err(SequencerError::Empty);
        }
        if !raw.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SequencerError::NotHex);
        }
        // Trailing zeros are the padding (they compare equal): the bound is on the digits that
        // count, so the padded form reads back as itself.
        let significant = raw.trim_end_matches('0').len();
        if raw.len() > SEQUENCER_WIDTH || significant > MAX_SEQUENCER_DIGITS {
            return Err(SequencerError::TooLong {
                len: raw.len().max(significant),
            });
        }
        let mut s = raw.to_ascii_uppercase();
        s.extend(std::iter::repeat_n('0', SEQUENCER_WIDTH - raw.len()));
        Ok(Self(s))
    }

    /// The padded form, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One latest-wins write: the object's high-water key and the event's sequencer.
#[derive(Debug, Clone, Copy)]
pub struct LatestWrite<'a> {
    /// The object's high-water key (a hash: no object name in clear).
    pub object: &'a DedupKey,
    /// The event's sequencer.
    pub sequencer: &'a Sequencer,
}

impl LatestWrite<'_> {
    /// The update of the object's high-water item in `table`, kept until `expires_at`: the
    /// sequencer set on the condition that none is stored or the stored one is lower.
    pub fn to_effect(&self, table: &str, expires_at: SystemTime) -> Effect {
        let ttl = expires_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        Effect::update(
            table,
            Item::new().with(HIGH_WATER_KEY, self.object.as_str()),
        )
        .expression("SET #dedup_latest = :dedup_latest, #dedup_ttl = :dedup_ttl")
        .condition("attribute_not_exists(#dedup_latest) OR #dedup_latest < :dedup_latest")
        .name("#dedup_latest", HIGH_WATER_SEQUENCER)
        .name("#dedup_ttl", HIGH_WATER_EXPIRES)
        .value(":dedup_latest", self.sequencer.as_str())
        .value(":dedup_ttl", Value::N(ttl.to_string()))
    }
}

/// What became of a latest-wins commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Latest {
    /// The commit's own answer (applied, the mark seen, an effect of the event's refused).
    Committed(Commit),
    /// A sequencer at or above this one is applied for the object: nothing written.
    Superseded,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(s: &str) -> Sequencer {
        Sequencer::parse(s).expect("a sequencer")
    }

    /// Sequencers of different lengths compare as the S3 guide says: the shorter right-padded
    /// with zeros. Left-padding would order these two the other way.
    #[test]
    fn s3_sequencers_of_different_lengths_compare_right_padded() {
        assert!(seq("0055AED6DCD90281E5") > seq("0055AED6DCD9028"));
        assert!(seq("1") > seq("0FFFFFFFFFFFFFFFFF"));
        // Left-padded, "1" would be 00…01, lower than 0FF…F: the order above proves the rule.
        // Likewise "A0" (A0…) > "0B1" (0B1…), where left-padding puts "…0A0" below "…0B1".
        assert!(seq("A0") > seq("0B1"));
        assert_eq!(seq("abc"), seq("ABC"), "case does not order");
        assert_eq!(seq("AB"), seq("AB000"), "trailing zeros are the padding");
        assert_eq!(seq("ff").as_str().len(), SEQUENCER_WIDTH);
    }

    #[test]
    fn s3_sequencers_that_cannot_be_ordered_are_named() {
        assert_eq!(Sequencer::parse(""), Err(SequencerError::Empty));
        assert_eq!(Sequencer::parse("12G4"), Err(SequencerError::NotHex));
        assert_eq!(Sequencer::parse("-1"), Err(SequencerError::NotHex));
        assert_eq!(
            Sequencer::parse(&"A".repeat(65)),
            Err(SequencerError::TooLong { len: 65 })
        );
    }

    #[test]
    fn s3_the_high_water_update_sets_only_a_greater_sequencer() {
        let key = DedupKey::from_stored("t#c#abc".into());
        let s = seq("0A");
        let e = LatestWrite {
            object: &key,
            sequencer: &s,
        }
        .to_effect(
            "marks",
            SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1500),
        );
        assert_eq!(
            e.condition_expression(),
            Some("attribute_not_exists(#dedup_latest) OR #dedup_latest < :dedup_latest")
        );
        assert_eq!(e.values().get(":dedup_ttl"), Some(&Value::N("2".into())));
        assert_eq!(e.item().0.get("pk"), Some(&Value::S("t#c#abc".into())));
    }
}
