//! The header formats of the senders that sign the body with a secret of their own, each as its
//! documentation and libraries have it: GitHub, Shopify and Slack. Each reader gives what the
//! [`Verifier`](super::Verifier) checks: the signed timestamp (Slack's; GitHub and Shopify sign
//! none), the offered digests and the bytes they are over.
//!
//! - **GitHub**: `X-Hub-Signature-256: sha256=<hex>` over the raw body. `X-GitHub-Delivery`
//!   (the delivery's id) and the event's time are not signed.
//! - **Shopify**: `X-Shopify-Hmac-Sha256: <base64>` over the raw body. `X-Shopify-Webhook-Id` and
//!   `X-Shopify-Triggered-At` are not signed.
//! - **Slack**: `X-Slack-Signature: v0=<hex>` over `v0:{X-Slack-Request-Timestamp}:{body}`; the
//!   timestamp is signed, no id header is sent.
//!
//! Each sends one signature: a digest that is not the right length or encoding refuses the
//! request ([`SignatureError::Malformed`]), a header without the expected prefix is no signature
//! ([`SignatureError::Missing`]).

use base64::Engine;

use super::{DIGEST_BYTES, Headers, SIGNATURE_BASE64, SignatureError, parse_timestamp};

/// GitHub's signature header (HMAC-SHA256 of the body), as HTTP headers are compared.
pub const GITHUB_SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// GitHub's delivery id header: not signed, so never the identity.
pub const GITHUB_DELIVERY_HEADER: &str = "x-github-delivery";
/// Shopify's signature header (base64 HMAC-SHA256 of the body).
pub const SHOPIFY_HMAC_HEADER: &str = "x-shopify-hmac-sha256";
/// Shopify's webhook id header: not signed, so never the identity.
pub const SHOPIFY_WEBHOOK_ID_HEADER: &str = "x-shopify-webhook-id";
/// Slack's signature header (`v0=<hex>`).
pub const SLACK_SIGNATURE_HEADER: &str = "x-slack-signature";
/// Slack's signed timestamp header (Unix seconds).
pub const SLACK_TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// What a request offers for verification.
pub(super) struct Signed {
    /// The signed timestamp, if the scheme signs one.
    pub(super) timestamp: Option<u64>,
    /// The offered digests (an error if one is malformed: told after the window).
    pub(super) offered: Result<Vec<Vec<u8>>, SignatureError>,
    /// The bytes the digests are over.
    pub(super) content: Vec<u8>,
}

/// GitHub: `sha256=<hex>` over the body.
pub(super) fn github(headers: Headers<'_, '_>, body: &[u8]) -> Result<Signed, SignatureError> {
    Ok(Signed {
        timestamp: None,
        offered: prefixed_hex_digest(headers, GITHUB_SIGNATURE_HEADER, "sha256=")?,
        content: body.to_vec(),
    })
}

/// Shopify: the padded base64 of the digest over the body.
pub(super) fn shopify(headers: Headers<'_, '_>, body: &[u8]) -> Result<Signed, SignatureError> {
    let value = headers(SHOPIFY_HMAC_HEADER)?.ok_or(SignatureError::Missing)?;
    let offered = match SIGNATURE_BASE64.decode(value.trim()) {
        Ok(digest) if digest.len() == DIGEST_BYTES => Ok(vec![digest]),
        _ => Err(SignatureError::Malformed),
    };
    Ok(Signed {
        timestamp: None,
        offered,
        content: body.to_vec(),
    })
}

/// Slack: `v0=<hex>` over `v0:{timestamp}:{body}`.
pub(super) fn slack(headers: Headers<'_, '_>, body: &[u8]) -> Result<Signed, SignatureError> {
    let timestamp = parse_timestamp(headers(SLACK_TIMESTAMP_HEADER)?)?;
    Ok(Signed {
        timestamp: Some(timestamp),
        offered: prefixed_hex_digest(headers, SLACK_SIGNATURE_HEADER, "v0=")?,
        content: slack_content(timestamp, body),
    })
}

/// What Slack signs: `"v0:{timestamp}:{body}"`.
pub(super) fn slack_content(timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut signed = format!("v0:{timestamp}:").into_bytes();
    signed.extend_from_slice(body);
    signed
}

/// The one digest `header` offers as `{prefix}<hex>`: [`SignatureError::Missing`] at once
/// without the header or its prefix; a digest that is not one in hex is told as `offered` is
/// (after the window).
fn prefixed_hex_digest(
    headers: Headers<'_, '_>,
    header: &str,
    prefix: &str,
) -> Result<Result<Vec<Vec<u8>>, SignatureError>, SignatureError> {
    let value = headers(header)?.ok_or(SignatureError::Missing)?;
    let digest = value
        .trim()
        .strip_prefix(prefix)
        .ok_or(SignatureError::Missing)?;
    Ok(hex_digest(digest).map(|d| vec![d]))
}

/// A hex digest of a SHA-256 HMAC, or [`SignatureError::Malformed`].
fn hex_digest(text: &str) -> Result<Vec<u8>, SignatureError> {
    match hex::decode(text) {
        Ok(digest) if digest.len() == DIGEST_BYTES => Ok(digest),
        _ => Err(SignatureError::Malformed),
    }
}
