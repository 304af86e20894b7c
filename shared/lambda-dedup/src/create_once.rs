//! Create-once mode, for effects that create an item which exists once per event (an order, an
//! inbox item, a fine record keyed by the event): the item is the mark. One conditional `Put`,
//! no mark table, no transaction — 1 write request unit for an item up to 1 KB.
//!
//! The `Put` carries the event's key, its payload fingerprint and the stored result in the item
//! itself ([`CREATED_KEY`], [`CREATED_FINGERPRINT`], [`CREATED_RESULT`], [`CREATED_AT`]), on the
//! condition that no item with its primary key exists (`attribute_not_exists` of each of the
//! item's attributes, which include its key, so the table's key schema need not be known). When
//! the condition fails, the old item — returned with the failure — is judged as a mark is
//! (see [`judge`]):
//! - created by this event (the same key) with the same fingerprint, or none: a **duplicate**,
//!   answered with the result stored in the item (S8);
//! - created by this event with another fingerprint: a **conflict** (S11);
//! - an item this event did not create (another event's, or written by other means), or the
//!   effect's own condition failing: the effect is **rejected**; nothing is written.
//!
//! The guarantee lasts as long as the item does: no retention window and no TTL of the library's
//! (the item has a TTL only if the caller gives it one). Deleting the item forgets the event: a
//! later delivery creates it again. See docs/CONTRACT.md.
//!
//! The attributes above and the placeholders starting `#dedup_`/`:dedup_` are the library's; an
//! effect must not use them.

use std::time::{Duration, SystemTime};

use crate::clock::{epoch_millis, from_epoch_millis};
use crate::effect::{Effect, EffectKind, Item, Value};
use crate::fingerprint::Fingerprint;
use crate::key::DedupKey;
use crate::mark::{Commit, Mark, MarkStatus, Seen};

/// The item's attribute holding the key of the event that created it.
pub const CREATED_KEY: &str = "dedup_key";
/// The attribute holding that event's payload fingerprint (absent when it had none).
pub const CREATED_FINGERPRINT: &str = "dedup_fp";
/// The attribute holding the result stored for duplicates (absent when there is none).
pub const CREATED_RESULT: &str = "dedup_result";
/// The attribute holding when the item was created (epoch milliseconds).
pub const CREATED_AT: &str = "dedup_created_at";

/// One create-once write: the `Put` of the item, with the event's key, fingerprint and result.
#[derive(Debug, Clone, Copy)]
pub struct CreateOnce<'a> {
    /// The event's key, stored in the item.
    pub key: &'a DedupKey,
    /// The effect: an [`Effect::put`] of the item. Its own condition, if any, must hold too.
    pub effect: &'a Effect,
    /// The payload fingerprint (S11).
    pub fingerprint: Option<&'a Fingerprint>,
    /// The result to store for duplicates (S8).
    pub result: Option<&'a str>,
}

impl CreateOnce<'_> {
    /// The one `Put` both stores send, as of `now`: the effect's item with the library's
    /// attributes added, on the condition that no item with its key exists (and the effect's
    /// own condition, if it has one). `None` when the effect is not a `Put` or already uses one
    /// of the library's attributes.
    pub fn to_effect(&self, now: SystemTime) -> Option<Effect> {
        let e = self.effect;
        let ours = [CREATED_KEY, CREATED_FINGERPRINT, CREATED_RESULT, CREATED_AT];
        if e.kind() != EffectKind::Put || ours.iter().any(|a| e.item().0.contains_key(*a)) {
            return None;
        }
        let mut item = e
            .item()
            .clone()
            .with(CREATED_KEY, self.key.as_str())
            .with(CREATED_AT, epoch_millis(now));
        if let Some(fp) = self.fingerprint {
            item = item.with(CREATED_FINGERPRINT, fp.as_str());
        }
        if let Some(result) = self.result {
            item = item.with(CREATED_RESULT, result);
        }
        let absent: Vec<String> = (0..e.item().0.len())
            .map(|i| format!("attribute_not_exists(#dedup_c{i})"))
            .collect();
        let absent = absent.join(" AND ");
        let condition = match e.condition_expression() {
            None => absent,
            Some(c) => format!("({absent}) AND ({c})"),
        };
        let mut out = Effect::put(e.table(), item).condition(&condition);
        for (i, name) in e.item().0.keys().enumerate() {
            out = out.name(&format!("#dedup_c{i}"), name);
        }
        for (k, v) in e.names() {
            out = out.name(k, v);
        }
        for (k, v) in e.values() {
            out = out.value(k, v.clone());
        }
        Some(out)
    }
}

/// What a create-once write whose condition failed met, from the item as it stood (`None`: no
/// item, so the effect's own condition failed). Both stores judge a failed write with this.
pub fn judge(old: Option<&Item>, key: &DedupKey, offered: Option<&Fingerprint>) -> Commit {
    let Some(old) = old else {
        return Commit::EffectRejected { index: 0 };
    };
    let text = |name: &str| match old.0.get(name) {
        Some(Value::S(s)) => Some(s.as_str()),
        _ => None,
    };
    if text(CREATED_KEY) != Some(key.as_str()) {
        // Another event's item, or one written by other means: not this event's to claim.
        return Commit::EffectRejected { index: 0 };
    }
    let created_at = match old.0.get(CREATED_AT) {
        Some(Value::N(n)) => n.parse().ok().map(from_epoch_millis),
        _ => None,
    }
    .unwrap_or(SystemTime::UNIX_EPOCH);
    let mark = Box::new(Mark {
        key: key.clone(),
        status: MarkStatus::Completed,
        owner: None,
        lease_expires_at: None,
        // The item is the mark: it counts for as long as it lives.
        expires_at: SystemTime::UNIX_EPOCH + Duration::from_secs(i64::MAX as u64 / 1000),
        fingerprint: text(CREATED_FINGERPRINT).map(|s| Fingerprint::from_stored(s.to_owned())),
        result: text(CREATED_RESULT).map(str::to_owned),
        first_seen_at: created_at,
        completed_at: Some(created_at),
    });
    if let (Some(stored), Some(offered)) = (&mark.fingerprint, offered)
        && stored != offered
    {
        return Commit::Seen(Seen::Conflict {
            stored: stored.clone(),
            offered: offered.clone(),
            mark,
        });
    }
    Commit::Seen(Seen::Duplicate(mark))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Scope;

    fn key(id: &str) -> DedupKey {
        DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &[id])
    }

    #[test]
    fn the_put_carries_the_mark_and_is_conditional_on_every_attribute() {
        let k = key("e-1");
        let fp = Fingerprint::of_bytes(b"a");
        let put = Effect::put(
            "orders",
            Item::new().with("order_id", "o-1").with("total", 5),
        );
        let w = CreateOnce {
            key: &k,
            effect: &put,
            fingerprint: Some(&fp),
            result: Some("ok"),
        };
        let e = w.to_effect(SystemTime::UNIX_EPOCH).expect("a put");
        assert_eq!(
            e.condition_expression(),
            Some("attribute_not_exists(#dedup_c0) AND attribute_not_exists(#dedup_c1)")
        );
        assert_eq!(e.item().0[CREATED_KEY], Value::S(k.as_str().into()));
        assert_eq!(e.item().0[CREATED_RESULT], Value::S("ok".into()));
        let update = Effect::update("orders", Item::new().with("order_id", "o-1"));
        assert!(
            CreateOnce {
                effect: &update,
                ..w
            }
            .to_effect(SystemTime::UNIX_EPOCH)
            .is_none()
        );
    }

    #[test]
    fn a_failed_put_is_judged_from_the_old_item() {
        let k = key("e-1");
        let (a, b) = (Fingerprint::of_bytes(b"a"), Fingerprint::of_bytes(b"b"));
        let mine = Item::new()
            .with(CREATED_KEY, k.as_str())
            .with(CREATED_FINGERPRINT, a.as_str())
            .with(CREATED_RESULT, "r");
        match judge(Some(&mine), &k, Some(&a)) {
            Commit::Seen(Seen::Duplicate(m)) => assert_eq!(m.result.as_deref(), Some("r")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            judge(Some(&mine), &k, Some(&b)),
            Commit::Seen(Seen::Conflict { .. })
        ));
        assert_eq!(
            judge(Some(&mine), &key("e-2"), Some(&a)),
            Commit::EffectRejected { index: 0 }
        );
        assert_eq!(judge(None, &k, None), Commit::EffectRejected { index: 0 });
    }
}
