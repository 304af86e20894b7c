//! A durable execution's name, from an event's key.

use lambda_dedup::DedupKey;
use sha2::{Digest, Sha256};

/// The API's bound on an execution name: 1–64 characters of `A-Z a-z 0-9 - _`.
pub const MAX_NAME: usize = 64;
/// Hex characters of the key's digest in a name: 160 bits, collision-free in practice.
const DIGEST_HEX: usize = 40;
/// What is left for the readable prefix, with its `-`.
const MAX_PREFIX: usize = MAX_NAME - DIGEST_HEX - 1;

/// The name of the one durable execution an event starts: the key's consumer (its characters
/// outside the API's set as `-`, cut to 23) as a readable prefix, then 160 bits of a digest of
/// the whole key (namespace, consumer, tenant and identity), so two keys never share a name and
/// a redelivery, or a producer's retry of the same event, always has the same one.
pub fn execution_name(key: &DedupKey) -> String {
    let consumer = key.as_str().split('#').nth(1).unwrap_or_default();
    let prefix: String = consumer
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_PREFIX)
        .collect();
    let digest = Sha256::digest(format!(
        "lambda-dedup/durable-execution/v1#{}",
        key.as_str()
    ));
    let hex = hex::encode(digest);
    let digest = hex.get(..DIGEST_HEX).unwrap_or(&hex);
    if prefix.is_empty() {
        digest.to_owned()
    } else {
        format!("{prefix}-{digest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::Scope;

    fn allowed(name: &str) -> bool {
        (1..=MAX_NAME).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }

    #[test]
    fn names_keep_the_apis_rules_and_differ_per_key() {
        let long = "a.consumer.name.longer.than.any.prefix";
        let scope = Scope::new("prod", long).expect("scope");
        let a = execution_name(&DedupKey::new(&scope, "acme", &["order", "o-1"]));
        let b = execution_name(&DedupKey::new(&scope, "acme", &["order", "o-2"]));
        let c = execution_name(&DedupKey::new(&scope, "other", &["order", "o-1"]));
        for name in [&a, &b, &c] {
            assert!(allowed(name), "{name}");
            assert_eq!(name.len(), MAX_NAME);
            assert!(name.starts_with("a-consumer-name-longer-"), "{name}");
        }
        assert_ne!(a, b);
        assert_ne!(a, c);
        let again = execution_name(&DedupKey::new(&scope, "acme", &["order", "o-1"]));
        assert_eq!(a, again);
    }
}
