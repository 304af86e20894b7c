//! The Valkey store's effects: typed Valkey commands on your own keys, run in the same
//! server-side script as the mark's write, so the mark and its effects are written together or
//! not at all (S5).
//!
//! ```
//! use lambda_dedup_valkey::{Guard, ValkeyEffect};
//! // Settle an order: only while it is pending and its balance covers the fee.
//! let settle = ValkeyEffect::hset("order:17", [("status", "DONE")])
//!     .and(ValkeyEffect::hincr_by("order:17", "balance", -3))
//!     .when(Guard::field_equals("order:17", "status", "PENDING"))
//!     .when(Guard::field_at_least("order:17", "balance", 3));
//! assert_eq!(settle.ops().len(), 2);
//! ```
//!
//! # Why typed commands, not any command
//! Valkey does not roll a script back when one of its commands fails: the writes before the
//! failure stay. So the script judges **everything before it writes anything**: the mark's
//! condition, every [`Guard`], and whether each [`Op`] can succeed on the keys as they stand
//! (the key's type, an integer where an increment needs one, no overflow). Only then does it
//! write the mark and run the commands, which can no longer fail. That is possible for the
//! commands below, not for an arbitrary one, which is why the set is closed.
//!
//! Guards and checks judge the keys as they stood before the commit, as a DynamoDB
//! transaction's conditions do; to keep that sound, one commit may not write a key from two
//! effects, nor one hash field twice, nor mix a key's string and hash commands
//! ([`lambda_dedup::StoreError::Invalid`]).

use std::time::Duration;

/// The largest magnitude an increment may reach: the script's numbers are Lua's doubles,
/// exact up to 2^53.
pub const MAX_COUNTER: i64 = 1 << 53;

/// A condition on a key, judged before the commit writes anything. When it does not hold,
/// nothing of the commit is written, not even the mark, and the commit is
/// [`lambda_dedup::Commit::EffectRejected`] at the effect's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// The key exists.
    Exists(String),
    /// The key does not exist.
    Absent(String),
    /// The key is a hash whose `field` is `value`.
    FieldEquals {
        /// The hash's key.
        key: String,
        /// The field.
        field: String,
        /// The value it must have.
        value: String,
    },
    /// The key is a hash whose `field` is an integer of at least `min`.
    FieldAtLeast {
        /// The hash's key.
        key: String,
        /// The field.
        field: String,
        /// The least value.
        min: i64,
    },
}

impl Guard {
    /// [`Guard::Exists`].
    pub fn exists(key: impl Into<String>) -> Self {
        Guard::Exists(key.into())
    }
    /// [`Guard::Absent`].
    pub fn absent(key: impl Into<String>) -> Self {
        Guard::Absent(key.into())
    }
    /// [`Guard::FieldEquals`].
    pub fn field_equals(
        key: impl Into<String>,
        field: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        Guard::FieldEquals {
            key: key.into(),
            field: field.into(),
            value: value.into(),
        }
    }
    /// [`Guard::FieldAtLeast`].
    pub fn field_at_least(key: impl Into<String>, field: impl Into<String>, min: i64) -> Self {
        Guard::FieldAtLeast {
            key: key.into(),
            field: field.into(),
            min,
        }
    }

    /// The key it judges.
    pub fn key(&self) -> &str {
        match self {
            Guard::Exists(k) | Guard::Absent(k) => k,
            Guard::FieldEquals { key, .. } | Guard::FieldAtLeast { key, .. } => key,
        }
    }
}

/// One Valkey command of an effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `SET key value [PX ttl]`.
    Set {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Its expiry, if any (at least 1 ms).
        ttl: Option<Duration>,
    },
    /// `HSET key field value`.
    HSet {
        /// The hash's key.
        key: String,
        /// The field.
        field: String,
        /// The value.
        value: String,
    },
    /// `HINCRBY key field by` (a missing field counts as 0).
    HIncrBy {
        /// The hash's key.
        key: String,
        /// The field.
        field: String,
        /// The increment (negative to decrement).
        by: i64,
    },
    /// `INCRBY key by` (a missing key counts as 0).
    IncrBy {
        /// The key.
        key: String,
        /// The increment.
        by: i64,
    },
    /// `DEL key`.
    Del(String),
}

impl Op {
    /// The key it writes.
    pub fn key(&self) -> &str {
        match self {
            Op::Set { key, .. }
            | Op::HSet { key, .. }
            | Op::HIncrBy { key, .. }
            | Op::IncrBy { key, .. }
            | Op::Del(key) => key,
        }
    }

    /// The hash field it writes, for hash commands.
    pub(crate) fn field(&self) -> Option<&str> {
        match self {
            Op::HSet { field, .. } | Op::HIncrBy { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// One effect: [`Op`]s run in order, on the condition that every [`Guard`] holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValkeyEffect {
    guards: Vec<Guard>,
    ops: Vec<Op>,
}

impl ValkeyEffect {
    /// No command and no guard (build on it with [`and`](Self::and) and [`when`](Self::when)).
    pub fn new() -> Self {
        Self::default()
    }

    fn op(op: Op) -> Self {
        Self {
            guards: Vec::new(),
            ops: vec![op],
        }
    }

    /// `SET key value`.
    pub fn set(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self::op(Op::Set {
            key: key.into(),
            value: value.into(),
            ttl: None,
        })
    }

    /// `SET key value PX ttl`: a value that expires (`ttl` of at least 1 ms; zero is refused
    /// as Valkey refuses it).
    pub fn set_px(key: impl Into<String>, value: impl Into<String>, ttl: Duration) -> Self {
        Self::op(Op::Set {
            key: key.into(),
            value: value.into(),
            ttl: Some(ttl),
        })
    }

    /// `HSET key field value …`: one [`Op::HSet`] per field.
    pub fn hset<F, V>(key: impl Into<String>, fields: impl IntoIterator<Item = (F, V)>) -> Self
    where
        F: Into<String>,
        V: Into<String>,
    {
        let key = key.into();
        Self {
            guards: Vec::new(),
            ops: fields
                .into_iter()
                .map(|(f, v)| Op::HSet {
                    key: key.clone(),
                    field: f.into(),
                    value: v.into(),
                })
                .collect(),
        }
    }

    /// `HINCRBY key field by`.
    pub fn hincr_by(key: impl Into<String>, field: impl Into<String>, by: i64) -> Self {
        Self::op(Op::HIncrBy {
            key: key.into(),
            field: field.into(),
            by,
        })
    }

    /// `INCRBY key by`.
    pub fn incr_by(key: impl Into<String>, by: i64) -> Self {
        Self::op(Op::IncrBy {
            key: key.into(),
            by,
        })
    }

    /// `DEL key`.
    pub fn del(key: impl Into<String>) -> Self {
        Self::op(Op::Del(key.into()))
    }

    /// Writes nothing; the commit is rejected unless `guard` holds.
    pub fn require(guard: Guard) -> Self {
        Self {
            guards: vec![guard],
            ops: Vec::new(),
        }
    }

    /// Adds a condition.
    pub fn when(mut self, guard: Guard) -> Self {
        self.guards.push(guard);
        self
    }

    /// Adds `other`'s commands and guards to this effect.
    pub fn and(mut self, other: ValkeyEffect) -> Self {
        self.guards.extend(other.guards);
        self.ops.extend(other.ops);
        self
    }

    /// Its guards.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// Its commands.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }
}
