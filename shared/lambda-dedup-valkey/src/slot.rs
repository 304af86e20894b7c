//! Valkey Cluster's hash slots: a key's slot is the CRC16 (XMODEM) of its hash tag, or of
//! the whole key when it has none, modulo 16384. A script may touch keys of one slot only
//! (the server refuses any other with `CROSSSLOT`), so in a cluster the mark and every key
//! of its effects must share one.

use std::fmt;

/// How many slots a cluster has.
pub const SLOTS: u16 = 16384;

/// Where a store's marks put their hash tag, for Valkey Cluster
/// ([`ValkeyStore::with_hash_tag`](crate::ValkeyStore::with_hash_tag)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HashTag {
    /// No tag (the default, for a single server or a primary with replicas): a mark is at
    /// `<prefix><dedup key>` and effects may name any key.
    #[default]
    None,
    /// One slot per event: a mark is at `<prefix>{<dedup key>}`, so the marks spread over the
    /// cluster; an effect's keys must carry the same tag
    /// ([`ValkeyStore::slot_tag`](crate::ValkeyStore::slot_tag)), which makes them the event's
    /// own keys (an outbox entry, a record per event).
    Event,
    /// One slot for every mark and effect: a mark is at `<prefix>{<tag>}<dedup key>`, and an
    /// effect's keys carry `{<tag>}`. Keys shared by events (a balance) can then be effects, at
    /// the price of one slot, one node, for the lot.
    Fixed(String),
}

impl fmt::Display for HashTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HashTag::None => f.write_str("no hash tag"),
            HashTag::Event => f.write_str("the event's hash tag"),
            HashTag::Fixed(t) => write!(f, "the hash tag {{{t}}}"),
        }
    }
}

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), as the Cluster specification's.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: between the first `{` and the first `}` after it, when
/// that is not empty; else the whole key.
pub fn hashed_part(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The hash slot of `key`.
pub fn key_slot(key: &str) -> u16 {
    crc16(hashed_part(key).as_bytes()) % SLOTS
}
