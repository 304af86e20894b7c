//! Where a key is valid ([`Scope`]) and the key itself ([`DedupKey`]).

use std::fmt;
use std::sync::Arc;

use crate::hash_parts;
use crate::retention::ConfigError;

/// Longest namespace or consumer name.
pub const MAX_SCOPE_NAME: usize = 64;

/// Where the dedup key is valid: the environment (`prod`, `dev`) and the consuming application.
/// Two consumers of one event each handle it once (S1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    namespace: String,
    consumer: String,
}

impl Scope {
    /// A scope. Both names: 1–64 characters of `A-Z a-z 0-9 . _ -`.
    pub fn new(namespace: &str, consumer: &str) -> Result<Self, ConfigError> {
        for (what, name) in [("namespace", namespace), ("consumer", consumer)] {
            let ok = !name.is_empty()
                && name.len() <= MAX_SCOPE_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(ConfigError::BadName {
                    what,
                    name: name.to_owned(),
                });
            }
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            consumer: consumer.to_owned(),
        })
    }

    /// The environment namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The consumer name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }
}

/// The partition key of a mark: `namespace#consumer#<sha256 hex of tenant and identity>`.
/// Shared, not copied, when cloned: a key travels with its event through the flow, its
/// outcome, the warm cache and the store's requests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey(Arc<str>);

impl DedupKey {
    /// Derives the key of an event from its scope, tenant and identity components. The components
    /// name what they are (e.g. `["cloudevents", source, id]`) so two extractors never collide.
    /// Values are checked by the extractors; use this directly only for sources that are not
    /// messages (a webhook header, say), after checking the values yourself.
    pub fn new(scope: &Scope, tenant: &str, identity: &[&str]) -> Self {
        #[cfg(feature = "simulation-planted")]
        let tenant = if crate::planted::Planted::KeyIgnoresTenant.is_on() {
            ""
        } else {
            tenant
        };
        let digest = hash_parts(
            "lambda-dedup/key/v1",
            std::iter::once(tenant.as_bytes()).chain(identity.iter().map(|s| s.as_bytes())),
        );
        let mut hex = [0u8; 64];
        // 32 bytes always fit 64 hex digits.
        let _ = hex::encode_to_slice(digest, &mut hex);
        let mut key = String::with_capacity(scope.namespace.len() + scope.consumer.len() + 66);
        key.push_str(&scope.namespace);
        key.push('#');
        key.push_str(&scope.consumer);
        key.push('#');
        key.extend(hex.iter().map(|&b| char::from(b)));
        Self(key.into())
    }

    /// Rebuilds a key from a stored partition key value.
    pub fn from_stored(pk: String) -> Self {
        Self(pk.into())
    }

    /// The partition key value.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The idempotency key to hand to an external API for this event (S6, S7): derived only from
    /// the dedup key, so it is the same on every retry, in every process, under every lease.
    pub fn idempotency_key(&self) -> String {
        let digest = hash_parts("lambda-dedup/idempotency-key/v1", [self.0.as_bytes()]);
        // 32 hex chars (128 bits): fits every provider's limit (Stripe: 255, IETF draft: any).
        format!("ldd-{}", &hex::encode(digest)[..32])
    }
}

impl DedupKey {
    /// A `ClientRequestToken` for one write attempt on this key: derived from the key and the
    /// attempt's own random token, so the SDK's retries of that one call share it (and DynamoDB
    /// cannot apply it twice), while two deliveries of the same event never do (a shared token
    /// would let DynamoDB answer the second with the first's success, and count it applied twice).
    pub fn request_token(&self, attempt: &crate::mark::OwnerToken) -> String {
        let digest = hash_parts(
            "lambda-dedup/request-token/v1",
            [self.0.as_bytes(), attempt.as_str().as_bytes()],
        );
        hex::encode(&digest[..16]) // 32 characters; DynamoDB allows up to 36
    }
}

impl fmt::Display for DedupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
