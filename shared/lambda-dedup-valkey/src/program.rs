//! A commit's effects as the commit script's arguments: the keys it touches (`KEYS`, the mark
//! first) and, per effect, its guards and commands as four slots each (kind, key index, two
//! arguments). What can be judged without the server is judged here.

use std::collections::HashMap;
use std::time::Duration;

use lambda_dedup::{DedupKey, StoreError};

use crate::effect::{Guard, MAX_COUNTER, Op, ValkeyEffect};

/// The longest expiry a `SET … PX` may carry (a century).
const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

#[derive(Debug)]
pub(crate) struct Program {
    pub(crate) keys: Vec<String>,
    pub(crate) args: Vec<String>,
}

/// Which family of commands writes a key (a key is written by one family in one commit).
#[derive(Debug, PartialEq, Eq)]
enum Family {
    Hash,
    Other,
}

impl Program {
    /// The program of `effects`, committed with the mark at `mark_key`. A command refused as
    /// it is (an expiry of zero, an increment past [`MAX_COUNTER`]) is the event's
    /// [`StoreError::Refused`]; keys under the marks' `prefix`, or a key written by two
    /// effects (see [`crate::effect`]), are [`StoreError::Invalid`]; so is, with `slot` (the
    /// mark's hash slot, for Valkey Cluster), a key of another slot.
    pub(crate) fn build(
        event: &DedupKey,
        mark_key: &str,
        prefix: &str,
        slot: Option<u16>,
        effects: &[ValkeyEffect],
    ) -> Result<Self, StoreError> {
        let mut p = Program {
            keys: vec![mark_key.to_owned()],
            args: Vec::new(),
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut written: HashMap<&str, (usize, Family, Vec<&str>)> = HashMap::new();
        for (i, effect) in effects.iter().enumerate() {
            p.args.push(effect.guards().len().to_string());
            p.args.push(effect.ops().len().to_string());
            for g in effect.guards() {
                check_slot(slot, i, g.key())?;
                let k = p.key(&mut index, prefix, g.key())?;
                let (kind, a, b) = match g {
                    Guard::Exists(_) => ("ex", String::new(), String::new()),
                    Guard::Absent(_) => ("ab", String::new(), String::new()),
                    Guard::FieldEquals { field, value, .. } => ("eq", field.clone(), value.clone()),
                    Guard::FieldAtLeast { field, min, .. } => {
                        ("ge", field.clone(), min.to_string())
                    }
                };
                p.args.extend([kind.to_owned(), k.to_string(), a, b]);
            }
            for op in effect.ops() {
                let refused = |code: &str| StoreError::Refused {
                    key: event.clone(),
                    code: code.to_owned(),
                    position: Some(i + 1),
                };
                check_overlap(&mut written, i, op)?;
                check_slot(slot, i, op.key())?;
                let k = p.key(&mut index, prefix, op.key())?;
                let (kind, a, b) = match op {
                    Op::Set { value, ttl, .. } => {
                        let px = match ttl {
                            None => String::new(),
                            Some(t) if t.is_zero() || *t > MAX_TTL => {
                                return Err(refused("INVALID_EXPIRE"));
                            }
                            Some(t) => t.as_millis().max(1).to_string(),
                        };
                        ("set", value.clone(), px)
                    }
                    Op::HSet { field, value, .. } => ("hset", field.clone(), value.clone()),
                    Op::HIncrBy { field, by, .. } => {
                        if by.unsigned_abs() > MAX_COUNTER.unsigned_abs() {
                            return Err(refused("OVERFLOW"));
                        }
                        ("hincr", field.clone(), by.to_string())
                    }
                    Op::IncrBy { by, .. } => {
                        if by.unsigned_abs() > MAX_COUNTER.unsigned_abs() {
                            return Err(refused("OVERFLOW"));
                        }
                        ("incr", by.to_string(), String::new())
                    }
                    Op::Del(_) => ("del", String::new(), String::new()),
                };
                p.args.extend([kind.to_owned(), k.to_string(), a, b]);
            }
        }
        Ok(p)
    }

    /// The script's index (1-based, `KEYS[n]`) of `key`, adding it on first use.
    fn key(
        &mut self,
        index: &mut HashMap<String, usize>,
        prefix: &str,
        key: &str,
    ) -> Result<usize, StoreError> {
        if key.starts_with(prefix) {
            return Err(StoreError::Invalid(format!(
                "an effect's key is under the marks' prefix {prefix:?}"
            )));
        }
        if let Some(i) = index.get(key) {
            return Ok(*i);
        }
        self.keys.push(key.to_owned());
        index.insert(key.to_owned(), self.keys.len());
        Ok(self.keys.len())
    }
}

/// With a hash tag, every key of the script is in the mark's slot: Valkey Cluster refuses a
/// script that touches two (`CROSSSLOT`), so that is said here, before anything is sent.
fn check_slot(slot: Option<u16>, effect: usize, key: &str) -> Result<(), StoreError> {
    let Some(mark) = slot else {
        return Ok(());
    };
    let theirs = crate::slot::key_slot(key);
    if theirs == mark {
        return Ok(());
    }
    Err(StoreError::Invalid(format!(
        "effect {effect} names a key in hash slot {theirs}, the mark is in slot {mark}: \
         Valkey Cluster refuses a script across slots (CROSSSLOT); put the mark's hash tag \
         (ValkeyStore::slot_tag) in the key"
    )))
}

/// One key is written by one effect of a commit, by hash commands on distinct fields or by
/// one other command: the script judges every command against the keys as they stood.
fn check_overlap<'a>(
    written: &mut HashMap<&'a str, (usize, Family, Vec<&'a str>)>,
    effect: usize,
    op: &'a Op,
) -> Result<(), StoreError> {
    let invalid = || {
        StoreError::Invalid(format!(
            "effect {effect} writes a key another command of the commit writes too; \
             write each key from one effect, each hash field once"
        ))
    };
    let family = match op.field() {
        Some(_) => Family::Hash,
        None => Family::Other,
    };
    match written.get_mut(op.key()) {
        None => {
            written.insert(op.key(), (effect, family, op.field().into_iter().collect()));
            Ok(())
        }
        Some((e, f, fields)) => {
            let field = op.field().ok_or_else(invalid)?;
            if *e != effect || *f != Family::Hash || fields.contains(&field) {
                return Err(invalid());
            }
            fields.push(field);
            Ok(())
        }
    }
}
