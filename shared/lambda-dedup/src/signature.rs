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
//! GitHub's scheme (`X-Hub-Signature-256`) is not offered: it signs the body only, not the
//! delivery id nor a timestamp, so neither a replay nor a swapped id could be told apart.
//!
//! In both, several signatures may be offered (a sender rolling its secret signs with both) and
//! several secrets held (a receiver rotating accepts both): a request is valid when any offered
//! digest equals the digest under any held secret, compared in constant time, and the timestamp
//! is within the tolerance of the receiver's clock, either way (Stripe's library checks only
//! the past; a timestamp from the future is refused here too).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use sha2::{Digest, Sha256};

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

/// The prefix of both schemes' secrets.
pub const SECRET_PREFIX: &str = "whsec_";

/// Standard Webhooks' header naming the event (signed).
pub const WEBHOOK_ID_HEADER: &str = "webhook-id";
/// Standard Webhooks' header carrying the signature's timestamp (Unix seconds).
pub const WEBHOOK_TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Standard Webhooks' header carrying the signatures, `v1,<base64>`, separated by spaces.
pub const WEBHOOK_SIGNATURE_HEADER: &str = "webhook-signature";
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
}

/// A scheme name that is none of the offered ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown webhook scheme '{0}': standard-webhooks or stripe (GitHub's cannot sign the delivery id and is not offered)"
)]
pub struct UnknownScheme(pub String);

impl std::str::FromStr for Scheme {
    type Err = UnknownScheme;

    fn from_str(s: &str) -> Result<Self, UnknownScheme> {
        match s.trim() {
            "standard-webhooks" => Ok(Self::StandardWebhooks),
            "stripe" => Ok(Self::Stripe),
            other => Err(UnknownScheme(other.to_owned())),
        }
    }
}

impl Scheme {
    /// The setting's name of the scheme.
    pub fn name(self) -> &'static str {
        match self {
            Self::StandardWebhooks => "standard-webhooks",
            Self::Stripe => "stripe",
        }
    }

    /// The key a secret written as the sender writes it stands for: Standard Webhooks decodes
    /// the base64 after `whsec_`; Stripe uses the whole string's bytes.
    pub fn key(self, secret: &str) -> Result<Vec<u8>, SecretError> {
        let secret = secret.trim();
        let Some(encoded) = secret.strip_prefix(SECRET_PREFIX) else {
            return Err(SecretError::NoPrefix);
        };
        let key = match self {
            Self::StandardWebhooks => BASE64.decode(encoded).map_err(|_| SecretError::NotBase64)?,
            Self::Stripe => secret.as_bytes().to_vec(),
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
    /// Standard Webhooks: no `webhook-id` (the id is part of what is signed).
    #[error("no webhook-id was sent")]
    MissingId,
    /// A signed header sent more than once.
    #[error("the signature headers must each be sent once")]
    RepeatedHeader,
    /// No offered digest matches any held secret.
    #[error("no signature matches")]
    Mismatch,
    /// Standard Webhooks: a `v1` signature that is not the padded base64 of a SHA-256 digest
    /// (as the reference library, which refuses unpadded base64, reads it). The whole header is
    /// refused, not only the entry: no sender's library writes one.
    #[error("a v1 signature is not the padded base64 of a 32-byte digest")]
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
        let (timestamp, offered, signed) = match self.scheme {
            Scheme::StandardWebhooks => {
                let timestamp = parse_timestamp(headers(WEBHOOK_TIMESTAMP_HEADER)?)?;
                let id = headers(WEBHOOK_ID_HEADER)?;
                let offered: Result<Vec<Vec<u8>>, SignatureError> =
                    headers(WEBHOOK_SIGNATURE_HEADER)?
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
                let signed = standard_content(id, timestamp, body);
                (timestamp, offered, signed)
            }
            Scheme::Stripe => {
                let header = headers(STRIPE_SIGNATURE_HEADER)?.ok_or(SignatureError::Missing)?;
                let items: Vec<(&str, &str)> = header
                    .split(',')
                    .filter_map(|item| item.trim().split_once('='))
                    .collect();
                // The first `t`, as Stripe's libraries read it.
                let timestamp =
                    parse_timestamp(items.iter().find(|(k, _)| *k == "t").map(|(_, v)| *v))?;
                let offered = Ok(items
                    .iter()
                    .filter(|(k, _)| *k == "v1")
                    .filter_map(|(_, v)| hex::decode(v).ok())
                    .collect());
                (timestamp, offered, stripe_content(timestamp, body))
            }
        };
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
        // After the window, so a stale delivery is told as stale whatever its signatures.
        let offered = offered?;
        if offered.is_empty() {
            return Err(SignatureError::Missing);
        }
        // Every pair is compared, so the time taken does not say which secret matched.
        let mut matched = false;
        for key in &self.keys {
            let expected = hmac_sha256(key, &signed);
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

/// The signature a sender holding `secret` (as written, `whsec_…`) sends for event `id`'s
/// `body` at `timestamp`, in `scheme`: Standard Webhooks' `webhook-signature` value
/// (`v1,<base64>`), or Stripe's whole `Stripe-Signature` value (`t=…,v1=<hex>`; `id` is not
/// signed there). For the library's own tests; the end-to-end tests sign with the senders'
/// libraries.
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
        for name in ["github", "v1", "", "Stripe"] {
            assert_eq!(
                name.parse::<Scheme>(),
                Err(UnknownScheme(name.to_owned())),
                "{name}"
            );
        }
        for s in [Scheme::StandardWebhooks, Scheme::Stripe] {
            assert_eq!(s.name().parse(), Ok(s));
        }
    }
}
