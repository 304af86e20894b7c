//! Keyed hashes and webhook signatures: HMAC-SHA256 (RFC 2104), a constant-time comparison, and
//! the verification of a sender's signature in the scheme its own library signs with.
//!
//! # The schemes ([`Scheme`])
//! - **Standard Webhooks** (`standard-webhooks`, the default), as its specification has it: the
//!   sender signs `"{webhook-id}.{webhook-timestamp}.{raw body}"` with HMAC-SHA256 under the
//!   secret's key, and sends the three headers `webhook-id`, `webhook-timestamp` (Unix seconds)
//!   and `webhook-signature`, a space-separated list of `v1,<base64 digest>` (other version tags
//!   are ignored; a `v1` entry that is not padded base64 of a 32-byte digest refuses the
//!   request, as the reference library refuses unpadded base64). A secret is `whsec_<base64 of the key>`. The event id is signed, so a
//!   captured delivery cannot be replayed under another id.
//! - **Stripe** (`stripe`), as Stripe's own libraries verify it: one header,
//!   `Stripe-Signature: t=<timestamp>,v1=<hex digest>[,v1=…][,v0=…]`, over `"{t}.{raw body}"`;
//!   the secret `whsec_…` is the key as it is written (its UTF-8 bytes, not decoded). Stripe
//!   signs no id header: the event id is the signed body's own `id`.
//!
//!   Svix's header names (`svix-id`, `svix-timestamp`, `svix-signature`) are the same scheme and
//!   are read too ([`families`]); a part sent under both names with two values is refused.
//! - **GitHub** (`github`), **Shopify** (`shopify`) and **Slack** (`slack`), as [`senders`] reads
//!   them: each signs the raw body with the secret's own bytes (GitHub's webhook secret,
//!   Shopify's app client secret, Slack's signing secret), and sends one signature. Only Slack
//!   signs a timestamp (`v0:{timestamp}:{body}`); GitHub and Shopify sign neither a timestamp nor
//!   their delivery id header, so a captured delivery stays valid for as long as its secret is
//!   held: a replay is caught only by its event's inbox item, whose identity must therefore come
//!   from the signed body ([`Scheme::signs_time`], [`Scheme::signed_id_header`]).
//!
//! In all, several signatures may be offered (a sender rolling its secret signs with both) and
//! several secrets held (a receiver rotating accepts both): a request is valid when any offered
//! digest equals the digest under any held secret, compared in constant time, and the timestamp
//! is within the tolerance of the receiver's clock, either way (Stripe's library checks only
//! the past; a timestamp from the future is refused here too).

#![warn(missing_docs)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use sha2::{Digest, Sha256};

pub mod families;
pub mod senders;

pub use families::{
    Part, SVIX_ID_HEADER, SVIX_SIGNATURE_HEADER, SVIX_TIMESTAMP_HEADER, WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER, standard_header,
};
use senders::Signed;
pub use senders::{
    GITHUB_DELIVERY_HEADER, GITHUB_SIGNATURE_HEADER, SHOPIFY_HMAC_HEADER,
    SHOPIFY_WEBHOOK_ID_HEADER, SLACK_SIGNATURE_HEADER, SLACK_TIMESTAMP_HEADER,
};

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Whether `a` and `b` are equal, in a time that depends only on their lengths (not on where
/// they first differ), so that a forger learns nothing from how long a refusal takes.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the optimiser from short-circuiting the fold.
    std::hint::black_box(diff) == 0
}

/// The smallest key accepted (after decoding, for Standard Webhooks): a shorter one can be
/// guessed.
pub const MIN_SECRET_BYTES: usize = 16;

/// The longest tolerance window accepted: one hour. The window is how long a captured delivery
/// can be sent again with its signature still valid (the mark makes a replay of the same event
/// a duplicate, but one under another scheme's unsigned id, or after the mark's retention, would
/// not be); the senders' libraries use 5 minutes, and an hour leaves room for a clock far off.
pub const MAX_TOLERANCE: Duration = Duration::from_secs(3600);

/// The prefix of Standard Webhooks' and Stripe's secrets.
pub const SECRET_PREFIX: &str = "whsec_";
/// Stripe's header (`t=…,v1=…`), as HTTP headers are compared: lower case.
pub const STRIPE_SIGNATURE_HEADER: &str = "stripe-signature";

/// Base64 of secrets as Standard Webhooks writes them (the standard alphabet), padding optional
/// on input as the reference library allows (it appends `==` before decoding a secret).
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Base64 of signatures: the standard alphabet with its padding required. The reference
/// library decodes signatures with Python's `b64decode`, which refuses them unpadded; accepting
/// more than the reference does would make this receiver the one place where such a header
/// passes.
const SIGNATURE_BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The length of a `v1` (HMAC-SHA256) digest.
const DIGEST_BYTES: usize = 32;

/// How a sender signs its deliveries: which headers, what is signed, how secrets are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    /// Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`
    /// over `{id}.{timestamp}.{body}`; secrets `whsec_<base64>`.
    #[default]
    StandardWebhooks,
    /// Stripe: `Stripe-Signature: t=<ts>,v1=<hex>` over `{t}.{body}`; the secret's own bytes.
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body; the secret's own bytes.
    GitHub,
    /// Shopify: `X-Shopify-Hmac-Sha256: <base64>` over the body; the client secret's bytes.
    Shopify,
    /// Slack: `X-Slack-Signature: v0=<hex>` over `v0:{X-Slack-Request-Timestamp}:{body}`; the
    /// signing secret's bytes.
    Slack,
}

/// Every scheme, in the order the settings list them.
pub const SCHEMES: [Scheme; 5] = [
    Scheme::StandardWebhooks,
    Scheme::Stripe,
    Scheme::GitHub,
    Scheme::Shopify,
    Scheme::Slack,
];

/// A scheme name that is none of the offered ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown webhook scheme '{0}': standard-webhooks, stripe, github, shopify or slack")]
pub struct UnknownScheme(pub String);

impl std::str::FromStr for Scheme {
    type Err = UnknownScheme;

    fn from_str(s: &str) -> Result<Self, UnknownScheme> {
        let name = s.trim();
        SCHEMES
            .into_iter()
            .find(|scheme| scheme.name() == name)
            .ok_or_else(|| UnknownScheme(name.to_owned()))
    }
}

impl Scheme {
    /// The setting's name of the scheme.
    pub fn name(self) -> &'static str {
        match self {
            Self::StandardWebhooks => "standard-webhooks",
            Self::Stripe => "stripe",
            Self::GitHub => "github",
            Self::Shopify => "shopify",
            Self::Slack => "slack",
        }
    }

    /// Whether the scheme signs a timestamp, so that an old signature can be refused. Without
    /// one (GitHub, Shopify), a captured delivery is valid for as long as its secret is held:
    /// only its event's inbox item (and its retention) catches a replay.
    pub fn signs_time(self) -> bool {
        !matches!(self, Self::GitHub | Self::Shopify)
    }

    /// The header naming the event that the scheme's signature covers: Standard Webhooks'
    /// `webhook-id` (or Svix's `svix-id`). The others sign no id header (GitHub's
    /// `X-GitHub-Delivery` and Shopify's `X-Shopify-Webhook-Id` are sent unsigned): their
    /// identity must come from the signed body.
    pub fn signed_id_header(self) -> Option<&'static str> {
        match self {
            Self::StandardWebhooks => Some(WEBHOOK_ID_HEADER),
            _ => None,
        }
    }

    /// The key a secret written as the sender writes it stands for: Standard Webhooks decodes
    /// the base64 after `whsec_`; Stripe uses the whole string's bytes (`whsec_…`); GitHub,
    /// Shopify and Slack use the secret's bytes as the sender shows it, with no prefix.
    pub fn key(self, secret: &str) -> Result<Vec<u8>, SecretError> {
        let secret = secret.trim();
        let prefixed = || {
            secret
                .strip_prefix(SECRET_PREFIX)
                .ok_or(SecretError::NoPrefix)
        };
        let key = match self {
            Self::StandardWebhooks => BASE64
                .decode(prefixed()?)
                .map_err(|_| SecretError::NotBase64)?,
            Self::Stripe => {
                prefixed()?;
                secret.as_bytes().to_vec()
            }
            Self::GitHub | Self::Shopify | Self::Slack => secret.as_bytes().to_vec(),
        };
        if key.len() < MIN_SECRET_BYTES {
            return Err(SecretError::Short { len: key.len() });
        }
        Ok(key)
    }
}

/// Why a secret, as written, is refused. None quotes the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not `whsec_…`.
    #[error("it does not start with {SECRET_PREFIX}")]
    NoPrefix,
    /// Standard Webhooks: what follows `whsec_` is not base64.
    #[error("what follows {SECRET_PREFIX} is not base64")]
    NotBase64,
    /// The key is shorter than [`MIN_SECRET_BYTES`].
    #[error("its key is {len} bytes; at least {MIN_SECRET_BYTES} are needed")]
    Short {
        /// The key's length.
        len: usize,
    },
}

/// Why a request's signature is refused. Every variant is answered the same way (401), and none
/// quotes the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No timestamp, or not a number of seconds.
    #[error("the signature timestamp is missing or not a number of seconds")]
    BadTimestamp,
    /// The timestamp is outside the tolerance window (a replay of an old signature, or a
    /// sender's clock far off).
    #[error(
        "the signature timestamp is {off_secs} s from now; the tolerance is {tolerance_secs} s"
    )]
    Stale {
        /// How far the timestamp is from now, either way.
        off_secs: u64,
        /// The window.
        tolerance_secs: u64,
    },
    /// No signature header, or no `v1` signature in it.
    #[error("no v1 signature was sent")]
    Missing,
    /// Standard Webhooks: no `webhook-id` nor `svix-id` (the id is part of what is signed).
    #[error("no webhook-id (or svix-id) was sent")]
    MissingId,
    /// A signed header sent more than once.
    #[error("the signature headers must each be sent once")]
    RepeatedHeader,
    /// No offered digest matches any held secret.
    #[error("no signature matches")]
    Mismatch,
    /// Standard Webhooks: a part sent under both its names (`webhook-*` and Svix's `svix-*`)
    /// with two different values.
    #[error("a signed header was sent under both webhook-* and svix-* with different values")]
    ConflictingHeaders,
    /// A signature that is not a SHA-256 digest in its scheme's encoding: Standard Webhooks'
    /// `v1` not padded base64 (as the reference library, which refuses unpadded base64, reads
    /// it; the whole header is refused, not only the entry: no sender's library writes one),
    /// Shopify's not padded base64, GitHub's `sha256=` or Slack's `v0=` not 64 hex digits.
    #[error("a signature is not a 32-byte digest in its scheme's encoding")]
    Malformed,
}

impl SignatureError {
    /// A stable code for logs, metrics and the answer.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadTimestamp => "bad_timestamp",
            Self::Stale { .. } => "stale_signature",
            Self::Missing => "missing_signature",
            Self::MissingId => "missing_id",
            Self::RepeatedHeader => "repeated_header",
            Self::Mismatch => "bad_signature",
            Self::Malformed => "malformed_signature",
            Self::ConflictingHeaders => "conflicting_headers",
        }
    }
}

/// The secrets a receiver holds, the scheme its sender signs with, and how far a timestamp may
/// be from its clock.
#[derive(Clone)]
pub struct Verifier {
    scheme: Scheme,
    keys: Vec<Vec<u8>>,
    tolerance: Duration,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_struct("Verifier")
            .field("scheme", &self.scheme)
            .field("secrets", &self.keys.len())
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

/// Why a [`Verifier`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifierError {
    /// No secret at all.
    #[error("no secret: at least one is needed")]
    NoSecret,
    /// A secret the scheme cannot use; `index` counts from 0, in the order given.
    #[error("secret {index} is refused for {scheme}: {reason}")]
    BadSecret {
        /// Which one.
        index: usize,
        /// The scheme's name.
        scheme: &'static str,
        /// Why.
        reason: SecretError,
    },
    /// A zero tolerance refuses every request.
    #[error("the tolerance must be at least one second")]
    NoTolerance,
    /// A tolerance over [`MAX_TOLERANCE`]: a captured delivery could be replayed for that long.
    #[error("the tolerance is {secs} s; at most {} s is accepted", MAX_TOLERANCE.as_secs())]
    ToleranceTooLong {
        /// The tolerance asked for, in seconds.
        secs: u64,
    },
}

/// How [`Verifier::verify`] reads a request's headers: the value of header `name` (lower case)
/// if it was sent, `Err(SignatureError::RepeatedHeader)` if it was sent more than once.
pub type Headers<'h, 'f> = &'f dyn Fn(&str) -> Result<Option<&'h str>, SignatureError>;

impl Verifier {
    /// A verifier for `scheme` holding `secrets`, written as the sender writes them
    /// (`whsec_…`; all accepted, for rotation), with a tolerance window.
    pub fn new<S: AsRef<str>>(
        scheme: Scheme,
        secrets: &[S],
        tolerance: Duration,
    ) -> Result<Self, VerifierError> {
        if secrets.is_empty() {
            return Err(VerifierError::NoSecret);
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(index, s)| {
                scheme
                    .key(s.as_ref())
                    .map_err(|reason| VerifierError::BadSecret {
                        index,
                        scheme: scheme.name(),
                        reason,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if tolerance < Duration::from_secs(1) {
            return Err(VerifierError::NoTolerance);
        }
        if tolerance > MAX_TOLERANCE {
            return Err(VerifierError::ToleranceTooLong {
                secs: tolerance.as_secs(),
            });
        }
        Ok(Self {
            scheme,
            keys,
            tolerance,
        })
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The tolerance window.
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// Checks a request: `headers` gives the scheme's headers as received, `body` is the raw
    /// body, `now` the receiver's clock. Checks the timestamp's window first, then every
    /// offered digest against every secret.
    pub fn verify(
        &self,
        headers: Headers<'_, '_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<(), SignatureError> {
        let Signed {
            timestamp,
            offered,
            content,
        } = match self.scheme {
            Scheme::StandardWebhooks => standard(headers, body)?,
            Scheme::Stripe => stripe(headers, body)?,
            Scheme::GitHub => senders::github(headers, body)?,
            Scheme::Shopify => senders::shopify(headers, body)?,
            Scheme::Slack => senders::slack(headers, body)?,
        };
        if let Some(timestamp) = timestamp {
            let now_secs = now
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let off_secs = now_secs.abs_diff(timestamp);
            if off_secs > self.tolerance.as_secs() {
                return Err(SignatureError::Stale {
                    off_secs,
                    tolerance_secs: self.tolerance.as_secs(),
                });
            }
        }
        // After the window, so a stale delivery is told as stale whatever its signatures.
        let offered = offered?;
        if offered.is_empty() {
            return Err(SignatureError::Missing);
        }
        // Every pair is compared, so the time taken does not say which secret matched.
        let mut matched = false;
        for key in &self.keys {
            let expected = hmac_sha256(key, &content);
            for o in &offered {
                matched |= constant_time_eq(&expected, o);
            }
        }
        if matched {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

/// Standard Webhooks, under either header family: `v1,<base64>` entries over
/// `{id}.{timestamp}.{body}`.
fn standard(headers: Headers<'_, '_>, body: &[u8]) -> Result<Signed, SignatureError> {
    let timestamp = parse_timestamp(standard_header(headers, Part::Timestamp)?)?;
    let id = standard_header(headers, Part::Id)?;
    let offered: Result<Vec<Vec<u8>>, SignatureError> = standard_header(headers, Part::Signature)?
        .into_iter()
        .flat_map(|s| s.split(' '))
        .filter_map(|entry| entry.trim().split_once(','))
        .filter(|(version, _)| *version == "v1")
        .map(|(_, sig)| match SIGNATURE_BASE64.decode(sig) {
            Ok(digest) if digest.len() == DIGEST_BYTES => Ok(digest),
            _ => Err(SignatureError::Malformed),
        })
        .collect();
    let id = id.ok_or(SignatureError::MissingId)?;
    Ok(Signed {
        timestamp: Some(timestamp),
        offered,
        content: standard_content(id, timestamp, body),
    })
}

/// Stripe: `t=<timestamp>,v1=<hex>[,v1=…]` over `{t}.{body}`.
fn stripe(headers: Headers<'_, '_>, body: &[u8]) -> Result<Signed, SignatureError> {
    let header = headers(STRIPE_SIGNATURE_HEADER)?.ok_or(SignatureError::Missing)?;
    let items: Vec<(&str, &str)> = header
        .split(',')
        .filter_map(|item| item.trim().split_once('='))
        .collect();
    // The first `t`, as Stripe's libraries read it.
    let timestamp = parse_timestamp(items.iter().find(|(k, _)| *k == "t").map(|(_, v)| *v))?;
    let offered = Ok(items
        .iter()
        .filter(|(k, _)| *k == "v1")
        .filter_map(|(_, v)| hex::decode(v).ok())
        .collect());
    Ok(Signed {
        timestamp: Some(timestamp),
        offered,
        content: stripe_content(timestamp, body),
    })
}

fn parse_timestamp(value: Option<&str>) -> Result<u64, SignatureError> {
    value
        .map(str::trim)
        .and_then(|t| t.parse().ok())
        .ok_or(SignatureError::BadTimestamp)
}

/// What Standard Webhooks signs: `"{id}.{timestamp}.{body}"`.
fn standard_content(id: &str, timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    signed
}

/// What Stripe signs: `"{t}.{body}"`.
fn stripe_content(timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    signed
}

/// The signature a sender holding `secret` (as written) sends for event `id`'s `body` at
/// `timestamp`, in `scheme`: Standard Webhooks' `webhook-signature` value (`v1,<base64>`),
/// Stripe's whole `Stripe-Signature` value (`t=…,v1=<hex>`), GitHub's `sha256=<hex>`,
/// Shopify's base64, Slack's `v0=<hex>` (`id` is signed by Standard Webhooks only, `timestamp`
/// ignored by GitHub and Shopify). For the library's own tests; the end-to-end tests sign with
/// the senders' libraries.
pub fn sign(
    scheme: Scheme,
    secret: &str,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Result<String, SecretError> {
    let key = scheme.key(secret)?;
    Ok(match scheme {
        Scheme::StandardWebhooks => format!(
            "v1,{}",
            SIGNATURE_BASE64.encode(hmac_sha256(&key, &standard_content(id, timestamp, body)))
        ),
        Scheme::Stripe => format!(
            "t={timestamp},v1={}",
            hex::encode(hmac_sha256(&key, &stripe_content(timestamp, body)))
        ),
        Scheme::GitHub => format!("sha256={}", hex::encode(hmac_sha256(&key, body))),
        Scheme::Shopify => SIGNATURE_BASE64.encode(hmac_sha256(&key, body)),
        Scheme::Slack => format!(
            "v0={}",
            hex::encode(hmac_sha256(&key, &senders::slack_content(timestamp, body)))
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Standard Webhooks' published test vector (the specification's and its reference
    /// libraries'): secret, id, timestamp, body and the signature they make.
    const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SW_TS: u64 = 1_614_265_330;
    const SW_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SW_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    /// A Stripe signature made by Stripe's own Python library (stripe 16.1.0,
    /// `WebhookSignature.generate_signature_header(body, secret, timestamp=1614265330)`; its
    /// tests' dummy secret).
    const ST_SECRET: &str = "whsec_test_secret";
    const ST_BODY: &[u8] = br#"{"id": "evt_test_webhook", "object": "event"}"#;
    const ST_HEADER: &str =
        "t=1614265330,v1=64776382e3b272a50ff9d6821bb74452794757d5dd79f1b091f36be25190d080";

    /// A second Standard Webhooks secret (the base64 of `another-key-0123456789`).
    const SW_OTHER: &str = "whsec_YW5vdGhlci1rZXktMDEyMzQ1Njc4OQ==";

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// Headers as a map (each sent once).
    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn verify(
        v: &Verifier,
        headers: &BTreeMap<String, String>,
        body: &[u8],
        now: u64,
    ) -> Result<(), SignatureError> {
        let lookup = |name: &str| Ok(headers.get(name).map(String::as_str));
        v.verify(&lookup, body, at(now))
    }

    fn standard(secrets: &[&str]) -> Verifier {
        Verifier::new(Scheme::StandardWebhooks, secrets, Duration::from_secs(300))
            .expect("verifier")
    }

    fn sw_headers(id: &str, ts: u64, signature: &str) -> BTreeMap<String, String> {
        map(&[
            (WEBHOOK_ID_HEADER, id),
            (WEBHOOK_TIMESTAMP_HEADER, &ts.to_string()),
            (WEBHOOK_SIGNATURE_HEADER, signature),
        ])
    }

    #[test]
    fn hmac_matches_rfc_4231_test_cases_1_and_6() {
        assert_eq!(
            hex::encode(hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // A key longer than the block is hashed first.
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn constant_time_eq_compares_whole_values() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    /// The specification's vector is accepted as the reference library signs it, alone or
    /// among other versions' and other secrets' signatures; and our signer reproduces it.
    #[test]
    fn the_standard_webhooks_test_vector_is_accepted() {
        let v = standard(&[SW_SECRET]);
        let headers = sw_headers(SW_ID, SW_TS, SW_SIGNATURE);
        assert_eq!(verify(&v, &headers, SW_BODY, SW_TS), Ok(()));
        assert_eq!(
            sign(Scheme::StandardWebhooks, SW_SECRET, SW_ID, SW_TS, SW_BODY).as_deref(),
            Ok(SW_SIGNATURE)
        );
        let other = sign(Scheme::StandardWebhooks, SW_OTHER, SW_ID, SW_TS, SW_BODY).expect("s");
        let many = format!("v1a,abcd {other} {SW_SIGNATURE}");
        assert_eq!(
            verify(&v, &sw_headers(SW_ID, SW_TS, &many), SW_BODY, SW_TS + 299),
            Ok(()),
            "any matching v1 entry; other versions ignored"
        );
        // Held among several secrets (a rotation), in either order.
        let rotating = standard(&[SW_OTHER, SW_SECRET]);
        assert_eq!(verify(&rotating, &headers, SW_BODY, SW_TS - 299), Ok(()));
    }

    /// The id is signed: the vector's signature under another id, another timestamp or another
    /// body is refused; so are a stale one, an unknown secret's, and one without its headers.
    #[test]
    fn a_standard_webhooks_signature_covers_the_id_timestamp_and_body() {
        let v = standard(&[SW_SECRET]);
        let refused = |id: &str, ts: u64, body: &[u8], now: u64| {
            verify(&v, &sw_headers(id, ts, SW_SIGNATURE), body, now)
        };
        assert_eq!(
            refused("msg_another", SW_TS, SW_BODY, SW_TS),
            Err(SignatureError::Mismatch),
            "a replay under another webhook-id"
        );
        assert_eq!(
            refused(SW_ID, SW_TS + 1, SW_BODY, SW_TS),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            refused(SW_ID, SW_TS, br#"{"test": 2432232315}"#, SW_TS),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            refused(SW_ID, SW_TS, SW_BODY, SW_TS + 301),
            Err(SignatureError::Stale {
                off_secs: 301,
                tolerance_secs: 300
            }),
            "the vector, replayed after the window"
        );
        assert!(matches!(
            refused(SW_ID, SW_TS, SW_BODY, SW_TS - 301),
            Err(SignatureError::Stale { .. })
        ));
        assert_eq!(
            verify(
                &standard(&[SW_OTHER]),
                &sw_headers(SW_ID, SW_TS, SW_SIGNATURE),
                SW_BODY,
                SW_TS
            ),
            Err(SignatureError::Mismatch),
            "a secret we do not hold"
        );
        let ts = SW_TS.to_string();
        let no_id = map(&[
            (WEBHOOK_TIMESTAMP_HEADER, &ts),
            (WEBHOOK_SIGNATURE_HEADER, SW_SIGNATURE),
        ]);
        assert_eq!(
            verify(&v, &no_id, SW_BODY, SW_TS),
            Err(SignatureError::MissingId)
        );
        let no_ts = map(&[
            (WEBHOOK_ID_HEADER, SW_ID),
            (WEBHOOK_SIGNATURE_HEADER, SW_SIGNATURE),
        ]);
        assert_eq!(
            verify(&v, &no_ts, SW_BODY, SW_TS),
            Err(SignatureError::BadTimestamp)
        );
        assert_eq!(
            verify(&v, &sw_headers(SW_ID, SW_TS, "v2,abcd"), SW_BODY, SW_TS),
            Err(SignatureError::Missing),
            "no v1 entry"
        );
        // Today's former scheme (`v1=<hex>` over `{timestamp}.{body}`) is no longer read.
        let old = format!(
            "v1={}",
            hex::encode(hmac_sha256(
                &Scheme::StandardWebhooks.key(SW_SECRET).expect("key"),
                &stripe_content(SW_TS, SW_BODY)
            ))
        );
        assert_eq!(
            verify(&v, &sw_headers(SW_ID, SW_TS, &old), SW_BODY, SW_TS),
            Err(SignatureError::Missing)
        );
    }

    /// Stripe's library's header is accepted; several `v1` (a secret being rolled) and a `v0`
    /// are read as Stripe's libraries read them; the id in the body is what is signed.
    #[test]
    fn a_stripe_signature_made_by_stripes_library_is_accepted() {
        let v = Verifier::new(Scheme::Stripe, &[ST_SECRET], Duration::from_secs(300))
            .expect("verifier");
        let headers = map(&[(STRIPE_SIGNATURE_HEADER, ST_HEADER)]);
        assert_eq!(verify(&v, &headers, ST_BODY, SW_TS + 300), Ok(()));
        assert_eq!(
            sign(Scheme::Stripe, ST_SECRET, "", SW_TS, ST_BODY).as_deref(),
            Ok(ST_HEADER)
        );
        let (_, v1) = ST_HEADER.split_once(',').expect("t, v1");
        let several = format!("t={SW_TS},v0=00ff,v1={},{v1}", "ab".repeat(32));
        assert_eq!(
            verify(
                &v,
                &map(&[(STRIPE_SIGNATURE_HEADER, &several)]),
                ST_BODY,
                SW_TS
            ),
            Ok(())
        );
        let rotating = Verifier::new(
            Scheme::Stripe,
            &["whsec_another_secret_0000", ST_SECRET],
            Duration::from_secs(300),
        )
        .expect("verifier");
        assert_eq!(verify(&rotating, &headers, ST_BODY, SW_TS), Ok(()));

        let body = br#"{"id": "evt_another", "object": "event"}"#;
        assert_eq!(
            verify(&v, &headers, body, SW_TS),
            Err(SignatureError::Mismatch),
            "another event id in the body"
        );
        assert!(matches!(
            verify(&v, &headers, ST_BODY, SW_TS + 301),
            Err(SignatureError::Stale { .. })
        ));
        assert!(
            matches!(
                verify(&v, &headers, ST_BODY, SW_TS - 301),
                Err(SignatureError::Stale { .. })
            ),
            "from the future, too"
        );
        let shifted = ST_HEADER.replace("t=1614265330", "t=1614265331");
        assert_eq!(
            verify(
                &v,
                &map(&[(STRIPE_SIGNATURE_HEADER, &shifted)]),
                ST_BODY,
                SW_TS
            ),
            Err(SignatureError::Mismatch)
        );
        let v0_only = format!("t={SW_TS},v0={}", &v1[3..]);
        assert_eq!(
            verify(
                &v,
                &map(&[(STRIPE_SIGNATURE_HEADER, &v0_only)]),
                ST_BODY,
                SW_TS
            ),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(
                &v,
                &map(&[(STRIPE_SIGNATURE_HEADER, &ST_HEADER[13..])]),
                ST_BODY,
                SW_TS
            ),
            Err(SignatureError::BadTimestamp),
            "no t="
        );
        // A Standard Webhooks delivery is no Stripe delivery.
        assert_eq!(
            verify(&v, &sw_headers(SW_ID, SW_TS, SW_SIGNATURE), ST_BODY, SW_TS),
            Err(SignatureError::Missing)
        );
    }

    /// The reference library (`standardwebhooks`) decodes a `v1` signature as padded base64 and
    /// refuses one without its padding; so does this verifier, whether the unpadded entry is
    /// alone or beside a valid one (the reference library fails on the first malformed entry).
    #[test]
    fn a_standard_webhooks_signature_without_its_base64_padding_is_refused() {
        let v = standard(&[SW_SECRET]);
        let unpadded = SW_SIGNATURE.trim_end_matches('=');
        assert_ne!(unpadded, SW_SIGNATURE, "the vector's digest is padded");
        assert_eq!(
            verify(&v, &sw_headers(SW_ID, SW_TS, unpadded), SW_BODY, SW_TS),
            Err(SignatureError::Malformed)
        );
        let beside = format!("{unpadded} {SW_SIGNATURE}");
        assert_eq!(
            verify(&v, &sw_headers(SW_ID, SW_TS, &beside), SW_BODY, SW_TS),
            Err(SignatureError::Malformed)
        );
        for not_base64 in [
            "v1,***",
            "v1,",
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE==",
        ] {
            assert_eq!(
                verify(&v, &sw_headers(SW_ID, SW_TS, not_base64), SW_BODY, SW_TS),
                Err(SignatureError::Malformed),
                "{not_base64}"
            );
        }
        assert_eq!(SignatureError::Malformed.code(), "malformed_signature");
    }

    /// A repeated header is refused, whichever copy would have matched.
    #[test]
    fn a_repeated_signed_header_is_refused() {
        let v = standard(&[SW_SECRET]);
        let headers = sw_headers(SW_ID, SW_TS, SW_SIGNATURE);
        let lookup = |name: &str| {
            if name == WEBHOOK_ID_HEADER {
                Err(SignatureError::RepeatedHeader)
            } else {
                Ok(headers.get(name).map(String::as_str))
            }
        };
        assert_eq!(
            v.verify(&lookup, SW_BODY, at(SW_TS)),
            Err(SignatureError::RepeatedHeader)
        );
    }

    /// Secrets are read as each scheme writes them, and refused at start when they cannot be.
    #[test]
    fn secrets_are_read_per_scheme_and_bad_ones_refused() {
        let t = Duration::from_secs(300);
        let sw = Scheme::StandardWebhooks;
        assert_eq!(sw.key(SW_SECRET).map(|k| k.len()), Ok(24), "decoded");
        assert_eq!(
            sw.key("whsec_YW5vdGhlci1rZXktMDEyMzQ1Njc4OQ"),
            sw.key(SW_OTHER),
            "padding optional, as the reference library reads it"
        );
        assert_eq!(
            Scheme::Stripe.key(ST_SECRET),
            Ok(ST_SECRET.as_bytes().to_vec()),
            "Stripe: the string's own bytes"
        );
        assert_eq!(
            sw.key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::NoPrefix)
        );
        assert_eq!(
            sw.key("whsec_not base64 at all!"),
            Err(SecretError::NotBase64)
        );
        assert_eq!(
            sw.key("whsec_c2hvcnQ="),
            Err(SecretError::Short { len: 5 }),
            "the base64 of `short`"
        );
        assert_eq!(
            Scheme::Stripe.key("whsec_short"),
            Err(SecretError::Short { len: 11 })
        );
        assert_eq!(
            Verifier::new::<&str>(sw, &[], t).err(),
            Some(VerifierError::NoSecret)
        );
        assert_eq!(
            Verifier::new(sw, &[SW_SECRET, "local-webhook-secret-2026-11"], t).err(),
            Some(VerifierError::BadSecret {
                index: 1,
                scheme: "standard-webhooks",
                reason: SecretError::NoPrefix
            }),
            "a secret in the former raw format"
        );
        assert_eq!(
            Verifier::new(sw, &[SW_SECRET], Duration::ZERO).err(),
            Some(VerifierError::NoTolerance)
        );
        assert!(Verifier::new(sw, &[SW_SECRET], MAX_TOLERANCE).is_ok());
        assert_eq!(
            Verifier::new(sw, &[SW_SECRET], MAX_TOLERANCE + Duration::from_secs(1)).err(),
            Some(VerifierError::ToleranceTooLong { secs: 3601 })
        );
        let debug = format!("{:?}", standard(&[SW_SECRET]));
        assert!(!debug.contains("MfKQ") && debug.contains("StandardWebhooks"));
        let error = Verifier::new(sw, &["whsec_c2hvcnQ="], t)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!error.contains("c2hvcnQ"), "{error}");
    }

    #[test]
    fn schemes_are_parsed_by_name_and_unknown_ones_refused() {
        assert_eq!("standard-webhooks".parse(), Ok(Scheme::StandardWebhooks));
        assert_eq!("stripe".parse(), Ok(Scheme::Stripe));
        assert_eq!(Scheme::default(), Scheme::StandardWebhooks);
        for name in ["v1", "", "Stripe", "GitHub", "hub-signature", "svix"] {
            assert_eq!(
                name.parse::<Scheme>(),
                Err(UnknownScheme(name.to_owned())),
                "{name}"
            );
        }
        for s in SCHEMES {
            assert_eq!(s.name().parse(), Ok(s));
        }
        assert_eq!("github".parse(), Ok(Scheme::GitHub));
        assert_eq!("shopify".parse(), Ok(Scheme::Shopify));
        assert_eq!("slack".parse(), Ok(Scheme::Slack));
        let signs_time: Vec<bool> = SCHEMES.iter().map(|s| s.signs_time()).collect();
        assert_eq!(signs_time, [true, true, false, false, true]);
        let id_headers: Vec<Option<&str>> = SCHEMES.iter().map(|s| s.signed_id_header()).collect();
        assert_eq!(
            id_headers,
            [Some(WEBHOOK_ID_HEADER), None, None, None, None]
        );
    }

    /// GitHub's published test vector ("Validating webhook deliveries"), which `githubkit`
    /// 0.16.1's `githubkit.webhooks.sign` reproduces.
    const GH_SECRET: &str = "It's a Secret to Everybody";
    const GH_BODY: &[u8] = b"Hello, World!";
    const GH_SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    /// A Slack signature made by Slack's own library (slack-sdk 3.47.0,
    /// `SignatureVerifier("8f742231b10e8888abcd99yyyzzz85a5").generate_signature(timestamp=
    /// "1531420618", body=SL_BODY)`; the signing secret of Slack's documentation), over an Events
    /// API payload.
    const SL_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const SL_TS: u64 = 1_531_420_618;
    const SL_BODY: &[u8] = br#"{"token":"z26uFbvR1xHJEdHE1OQiO6t8","team_id":"T061EG9RZ","api_app_id":"A0FFV41KK","event":{"type":"app_mention","user":"U061F7AUR","text":"hello","ts":"1515449522.000016","channel":"C0LAN2Q65","event_ts":"1515449522000016"},"type":"event_callback","event_id":"Ev0LAN670R","event_time":1515449522000016}"#;
    const SL_SIGNATURE: &str =
        "v0=2a80ad4e34243904b0d3c25380851c5438e84f58ae27836df348283f7680ec5f";

    /// A Shopify signature as Shopify's documentation computes it (its recipe, run with
    /// Python's own `hmac` and `base64`: `shopifyapi` 12.7.0 has no webhook signing).
    const SH_SECRET: &str = "hush-shopify-client-secret-0001";
    const SH_BODY: &[u8] = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    const SH_SIGNATURE: &str = "aNxnQIIa+uCgoVUvS5120U0wY7q08AH0mIU93ILM82I=";

    fn raw(scheme: Scheme, secrets: &[&str]) -> Verifier {
        Verifier::new(scheme, secrets, Duration::from_secs(300)).expect("verifier")
    }

    /// Svix's header names carry the Standard Webhooks scheme: the specification's vector
    /// (which `svix` 2.9.1's `Webhook.sign` also makes) is accepted under `svix-*`, under both
    /// families with the same values, and mixed; a part sent under both names with two values
    /// is refused, whichever would have matched; `svix-id` is signed like `webhook-id`.
    #[test]
    fn the_svix_header_names_are_read_as_standard_webhooks() {
        let v = standard(&[SW_SECRET]);
        let ts = SW_TS.to_string();
        let svix = map(&[
            (SVIX_ID_HEADER, SW_ID),
            (SVIX_TIMESTAMP_HEADER, &ts),
            (SVIX_SIGNATURE_HEADER, SW_SIGNATURE),
        ]);
        assert_eq!(verify(&v, &svix, SW_BODY, SW_TS), Ok(()));
        let mut both = svix.clone();
        both.extend(sw_headers(SW_ID, SW_TS, SW_SIGNATURE));
        assert_eq!(verify(&v, &both, SW_BODY, SW_TS), Ok(()), "the same values");
        let mixed = map(&[
            (SVIX_ID_HEADER, SW_ID),
            (WEBHOOK_TIMESTAMP_HEADER, &ts),
            (SVIX_SIGNATURE_HEADER, SW_SIGNATURE),
        ]);
        assert_eq!(verify(&v, &mixed, SW_BODY, SW_TS), Ok(()));
        let other = sign(
            Scheme::StandardWebhooks,
            SW_SECRET,
            "msg_other",
            SW_TS,
            SW_BODY,
        )
        .expect("sign");
        for (name, value) in [
            (WEBHOOK_ID_HEADER, "msg_other"),
            (WEBHOOK_TIMESTAMP_HEADER, "1614265331"),
            (WEBHOOK_SIGNATURE_HEADER, other.as_str()),
        ] {
            let mut disagree = svix.clone();
            disagree.insert(name.to_owned(), value.to_owned());
            assert_eq!(
                verify(&v, &disagree, SW_BODY, SW_TS),
                Err(SignatureError::ConflictingHeaders),
                "{name} against its svix-* twin"
            );
        }
        let mut replayed = svix.clone();
        replayed.insert(SVIX_ID_HEADER.to_owned(), "msg_another".to_owned());
        assert_eq!(
            verify(&v, &replayed, SW_BODY, SW_TS),
            Err(SignatureError::Mismatch),
            "svix-id is signed"
        );
        let lookup = |name: &str| Ok(svix.get(name).map(String::as_str));
        assert_eq!(standard_header(&lookup, Part::Id), Ok(Some(SW_ID)));
        assert_eq!(
            SignatureError::ConflictingHeaders.code(),
            "conflicting_headers"
        );
    }

    /// GitHub: the published vector is accepted whenever it comes (no timestamp is signed: a
    /// replay is only caught by the event's inbox item), under either of two held secrets;
    /// the delivery id header plays no part in the signature; a changed body, a digest of the
    /// wrong length or encoding, and a missing or SHA-1-only header are refused.
    #[test]
    fn a_github_signature_matches_githubs_published_vector() {
        let v = raw(Scheme::GitHub, &[GH_SECRET]);
        let headers = map(&[(GITHUB_SIGNATURE_HEADER, GH_SIGNATURE)]);
        for now in [0, SW_TS, u64::from(u32::MAX) * 4] {
            assert_eq!(verify(&v, &headers, GH_BODY, now), Ok(()), "at {now}");
        }
        assert_eq!(
            sign(Scheme::GitHub, GH_SECRET, "", 0, GH_BODY).as_deref(),
            Ok(GH_SIGNATURE)
        );
        let rotating = raw(Scheme::GitHub, &["the-next-github-secret-2026", GH_SECRET]);
        assert_eq!(verify(&rotating, &headers, GH_BODY, SW_TS), Ok(()));
        let mut delivery = headers.clone();
        delivery.insert(
            GITHUB_DELIVERY_HEADER.to_owned(),
            "another-delivery".to_owned(),
        );
        assert_eq!(
            verify(&v, &delivery, GH_BODY, SW_TS),
            Ok(()),
            "the delivery id is not signed: it cannot be the identity"
        );
        assert_eq!(
            verify(&v, &headers, b"Hello, World?", SW_TS),
            Err(SignatureError::Mismatch)
        );
        let refused = |value: &str| {
            verify(
                &v,
                &map(&[(GITHUB_SIGNATURE_HEADER, value)]),
                GH_BODY,
                SW_TS,
            )
        };
        for malformed in [
            &GH_SIGNATURE[..GH_SIGNATURE.len() - 2],
            &format!("{GH_SIGNATURE}00"),
            &GH_SIGNATURE.replace('e', "g"),
            "sha256=",
        ] {
            assert_eq!(
                refused(malformed),
                Err(SignatureError::Malformed),
                "{malformed}"
            );
        }
        assert_eq!(
            refused("sha1=0123456789abcdef0123456789abcdef01234567"),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            refused(&GH_SIGNATURE[7..]),
            Err(SignatureError::Missing),
            "no sha256="
        );
        assert_eq!(
            verify(&v, &map(&[]), GH_BODY, SW_TS),
            Err(SignatureError::Missing)
        );
    }

    /// Shopify: base64 over the body, no timestamp; hex, unpadded or truncated digests are
    /// refused as malformed, a changed body as a mismatch.
    #[test]
    fn a_shopify_signature_over_the_body_is_accepted() {
        let v = raw(Scheme::Shopify, &[SH_SECRET]);
        let headers = map(&[(SHOPIFY_HMAC_HEADER, SH_SIGNATURE)]);
        assert_eq!(verify(&v, &headers, SH_BODY, 0), Ok(()));
        assert_eq!(verify(&v, &headers, SH_BODY, SW_TS * 2), Ok(()));
        assert_eq!(
            sign(Scheme::Shopify, SH_SECRET, "", 0, SH_BODY).as_deref(),
            Ok(SH_SIGNATURE)
        );
        let changed = br#"{"id":820982911946154509,"email":"jon@example.com"}"#;
        assert_eq!(
            verify(&v, &headers, changed, 0),
            Err(SignatureError::Mismatch)
        );
        let digest = SIGNATURE_BASE64.decode(SH_SIGNATURE).expect("base64");
        for malformed in [
            SH_SIGNATURE.trim_end_matches('='),
            &SH_SIGNATURE[..20],
            &hex::encode(&digest),
            "not base64 at all",
        ] {
            let h = map(&[(SHOPIFY_HMAC_HEADER, malformed)]);
            assert_eq!(
                verify(&v, &h, SH_BODY, 0),
                Err(SignatureError::Malformed),
                "{malformed}"
            );
        }
        let unsigned = map(&[(
            SHOPIFY_WEBHOOK_ID_HEADER,
            "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        )]);
        assert_eq!(
            verify(&v, &unsigned, SH_BODY, 0),
            Err(SignatureError::Missing)
        );
    }

    /// Slack: slack-sdk's signature over `v0:{timestamp}:{body}` is accepted inside the window;
    /// a stale one, one whose timestamp header was changed, a missing timestamp, another
    /// version's tag and a digest of the wrong length are refused.
    #[test]
    fn a_slack_signature_made_by_slack_sdk_is_accepted() {
        let v = raw(Scheme::Slack, &[SL_SECRET]);
        let headers = |ts: &str, sig: &str| {
            map(&[(SLACK_TIMESTAMP_HEADER, ts), (SLACK_SIGNATURE_HEADER, sig)])
        };
        let ts = SL_TS.to_string();
        let valid = headers(&ts, SL_SIGNATURE);
        assert_eq!(verify(&v, &valid, SL_BODY, SL_TS + 300), Ok(()));
        assert_eq!(
            sign(Scheme::Slack, SL_SECRET, "", SL_TS, SL_BODY).as_deref(),
            Ok(SL_SIGNATURE)
        );
        assert!(matches!(
            verify(&v, &valid, SL_BODY, SL_TS + 301),
            Err(SignatureError::Stale { .. })
        ));
        assert_eq!(
            verify(&v, &headers("1531420619", SL_SIGNATURE), SL_BODY, SL_TS),
            Err(SignatureError::Mismatch),
            "the timestamp is signed"
        );
        let no_ts = map(&[(SLACK_SIGNATURE_HEADER, SL_SIGNATURE)]);
        assert_eq!(
            verify(&v, &no_ts, SL_BODY, SL_TS),
            Err(SignatureError::BadTimestamp)
        );
        let v1 = SL_SIGNATURE.replace("v0=", "v1=");
        assert_eq!(
            verify(&v, &headers(&ts, &v1), SL_BODY, SL_TS),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(&v, &headers(&ts, &SL_SIGNATURE[..40]), SL_BODY, SL_TS),
            Err(SignatureError::Malformed)
        );
        let changed = String::from_utf8_lossy(SL_BODY).replace("Ev0LAN670R", "Ev0LAN670S");
        assert_eq!(
            verify(&v, &valid, changed.as_bytes(), SL_TS),
            Err(SignatureError::Mismatch),
            "the event_id is in the signed body"
        );
    }

    /// GitHub's, Shopify's and Slack's secrets are their own bytes, with no prefix, and at
    /// least 16 of them; a Standard Webhooks secret is still refused without `whsec_`.
    #[test]
    fn github_shopify_and_slack_secrets_are_their_own_bytes() {
        for scheme in [Scheme::GitHub, Scheme::Shopify, Scheme::Slack] {
            assert_eq!(scheme.key(GH_SECRET), Ok(GH_SECRET.as_bytes().to_vec()));
            assert_eq!(
                scheme.key(" 0123456789abcdef "),
                Ok(b"0123456789abcdef".to_vec())
            );
            assert_eq!(scheme.key("too-short"), Err(SecretError::Short { len: 9 }));
        }
        assert_eq!(
            Verifier::new(
                Scheme::Slack,
                &[SL_SECRET, "short"],
                Duration::from_secs(300)
            )
            .err(),
            Some(VerifierError::BadSecret {
                index: 1,
                scheme: "slack",
                reason: SecretError::Short { len: 5 }
            })
        );
        assert_eq!(
            Scheme::StandardWebhooks.key(GH_SECRET),
            Err(SecretError::NoPrefix)
        );
    }
}
