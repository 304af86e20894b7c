//! Keyed hashes and webhook signatures: HMAC-SHA256 (RFC 2104), a constant-time comparison, and
//! the verification of a sender's signature over a timestamp and the raw body.
//!
//! # The signature scheme
//! The sender signs `"{timestamp}.{raw body}"` with HMAC-SHA256 under a shared secret, and sends
//! the timestamp (Unix seconds) in one header and `v1=<hex digest>` in another. Several
//! signatures may be sent, separated by commas or spaces (a sender rotating its secret signs
//! with both); several secrets may be held (a receiver rotating accepts both). A signature is
//! valid when any offered `v1` digest equals the digest under any held secret, compared in
//! constant time, and the timestamp is within the tolerance of the receiver's clock, either way:
//! a captured request cannot be replayed after the window, and its timestamp cannot be altered
//! without the secret.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the optimiser from short-circuiting the fold.
    std::hint::black_box(diff) == 0
}

/// The smallest secret accepted: a shorter one can be guessed.
pub const MIN_SECRET_BYTES: usize = 16;

/// Why a request's signature is refused. Every variant is answered the same way (401), and none
/// quotes the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No timestamp header, or not a number of seconds.
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
    /// No signature header, or no `v1=` digest in it.
    #[error("no v1 signature was sent")]
    Missing,
    /// No offered digest matches any held secret.
    #[error("no signature matches")]
    Mismatch,
}

impl SignatureError {
    /// A stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadTimestamp => "bad_timestamp",
            Self::Stale { .. } => "stale_signature",
            Self::Missing => "missing_signature",
            Self::Mismatch => "bad_signature",
        }
    }
}

/// The secrets a receiver holds and how far a timestamp may be from its clock.
#[derive(Clone)]
pub struct Verifier {
    secrets: Vec<Vec<u8>>,
    tolerance: Duration,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_struct("Verifier")
            .field("secrets", &self.secrets.len())
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
    /// A secret shorter than [`MIN_SECRET_BYTES`]; `index` counts from 0, in the order given.
    #[error("secret {index} is {len} bytes; at least {MIN_SECRET_BYTES} are needed")]
    ShortSecret {
        /// Which one.
        index: usize,
        /// Its length.
        len: usize,
    },
    /// A zero tolerance refuses every request.
    #[error("the tolerance must be at least one second")]
    NoTolerance,
}

impl Verifier {
    /// A verifier holding `secrets` (all accepted, for rotation) with a tolerance window.
    pub fn new(secrets: Vec<Vec<u8>>, tolerance: Duration) -> Result<Self, VerifierError> {
        if secrets.is_empty() {
            return Err(VerifierError::NoSecret);
        }
        if let Some((index, s)) = secrets
            .iter()
            .enumerate()
            .find(|(_, s)| s.len() < MIN_SECRET_BYTES)
        {
            return Err(VerifierError::ShortSecret {
                index,
                len: s.len(),
            });
        }
        if tolerance < Duration::from_secs(1) {
            return Err(VerifierError::NoTolerance);
        }
        Ok(Self { secrets, tolerance })
    }

    /// The tolerance window.
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// Checks a request: `timestamp` and `signatures` are the two headers' values (if sent),
    /// `body` the raw body, `now` the receiver's clock. Checks the timestamp's window first,
    /// then every offered digest against every secret.
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signatures: Option<&str>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<(), SignatureError> {
        let ts: u64 = timestamp
            .map(str::trim)
            .and_then(|t| t.parse().ok())
            .ok_or(SignatureError::BadTimestamp)?;
        let now_secs = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let off_secs = now_secs.abs_diff(ts);
        if off_secs > self.tolerance.as_secs() {
            return Err(SignatureError::Stale {
                off_secs,
                tolerance_secs: self.tolerance.as_secs(),
            });
        }
        let offered: Vec<Vec<u8>> = signatures
            .into_iter()
            .flat_map(|s| s.split([',', ' ']))
            .filter_map(|part| part.trim().strip_prefix("v1="))
            .filter_map(|h| hex::decode(h).ok())
            .collect();
        if offered.is_empty() {
            return Err(SignatureError::Missing);
        }
        let signed = signed_content(ts, body);
        // Every pair is compared, so the time taken does not say which secret matched.
        let mut matched = false;
        for secret in &self.secrets {
            let expected = hmac_sha256(secret, &signed);
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

/// What is signed: `"{timestamp}.{body}"`.
fn signed_content(timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    signed
}

/// The signature header's value a sender holding `secret` sends for `body` at `timestamp`
/// (`v1=<hex>`): for senders, tests and the demo.
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    format!(
        "v1={}",
        hex::encode(hmac_sha256(secret, &signed_content(timestamp, body)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[u8] = b"secret-a-0123456789";
    const B: &[u8] = b"secret-b-0123456789";

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn verifier(secrets: &[&[u8]]) -> Verifier {
        Verifier::new(
            secrets.iter().map(|s| s.to_vec()).collect(),
            Duration::from_secs(300),
        )
        .expect("verifier")
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

    #[test]
    fn a_signature_under_any_held_secret_is_accepted_within_the_window() {
        let body = br#"{"id":"e1"}"#;
        let v = verifier(&[A, B]);
        let now = at(1_000_000);
        assert_eq!(
            v.verify(Some("1000000"), Some(&sign(A, 1_000_000, body)), body, now),
            Ok(())
        );
        assert_eq!(
            v.verify(Some("999800"), Some(&sign(B, 999_800, body)), body, now),
            Ok(()),
            "the second secret, 200 s old"
        );
        // A sender rotating sends both; one of them is unknown to us.
        let both = format!(
            "{} {}",
            sign(b"another-secret-xyz", 1_000_000, body),
            sign(A, 1_000_000, body)
        );
        assert_eq!(v.verify(Some("1000000"), Some(&both), body, now), Ok(()));
    }

    #[test]
    fn forged_altered_stale_and_missing_signatures_are_refused() {
        let body = br#"{"id":"e1"}"#;
        let v = verifier(&[A]);
        let now = at(1_000_000);
        let good = sign(A, 1_000_000, body);
        assert_eq!(
            v.verify(Some("1000000"), Some(&good), br#"{"id":"e2"}"#, now),
            Err(SignatureError::Mismatch),
            "another body"
        );
        assert_eq!(
            v.verify(Some("1000001"), Some(&good), body, now),
            Err(SignatureError::Mismatch),
            "another timestamp"
        );
        assert_eq!(
            v.verify(Some("1000000"), Some(&sign(B, 1_000_000, body)), body, now),
            Err(SignatureError::Mismatch),
            "a secret we do not hold"
        );
        assert_eq!(
            v.verify(Some("999699"), Some(&sign(A, 999_699, body)), body, now),
            Err(SignatureError::Stale {
                off_secs: 301,
                tolerance_secs: 300
            }),
            "a valid signature, replayed after the window"
        );
        assert!(matches!(
            v.verify(Some("1000301"), Some(&sign(A, 1_000_301, body)), body, now),
            Err(SignatureError::Stale { .. })
        ));
        assert_eq!(
            v.verify(None, Some(&good), body, now),
            Err(SignatureError::BadTimestamp)
        );
        assert_eq!(
            v.verify(Some("soon"), Some(&good), body, now),
            Err(SignatureError::BadTimestamp)
        );
        assert_eq!(
            v.verify(Some("1000000"), None, body, now),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            v.verify(Some("1000000"), Some("v0=abcd"), body, now),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn short_or_absent_secrets_and_no_tolerance_are_refused() {
        let t = Duration::from_secs(300);
        assert_eq!(
            Verifier::new(vec![], t).err(),
            Some(VerifierError::NoSecret)
        );
        assert_eq!(
            Verifier::new(vec![A.to_vec(), b"short".to_vec()], t).err(),
            Some(VerifierError::ShortSecret { index: 1, len: 5 })
        );
        assert_eq!(
            Verifier::new(vec![A.to_vec()], Duration::ZERO).err(),
            Some(VerifierError::NoTolerance)
        );
        assert!(!format!("{:?}", verifier(&[A])).contains("secret-a"));
    }
}
