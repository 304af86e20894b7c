//! Webhooks as a source (feature `webhook`): an HTTP request becomes a [`Message`](lambda_dedup::Message), is verified,
//! deduplicated, and recorded in an inbox table whose item is its mark (create-once mode: one
//! conditional `Put`, the key, fingerprint and answer in the item; no mark item, no
//! transaction); the answer says which of the documented outcomes it had.
//!
//! # What each request gets (exactly one outcome, counted in EMF)
//! | request | status | outcome |
//! | --- | --- | --- |
//! | not `POST` | 405 | `MethodNotAllowed` |
//! | body over `WEBHOOK_MAX_BODY_BYTES` | 413 | `TooLarge` |
//! | signature missing, malformed, forged, of another scheme, made for another id, a signed header sent twice (or a `webhook-id` / `webhook-timestamp` holding a comma: a Function URL joins a repeated header's values with commas), or timestamp outside the window | 401 | `Unauthorized` |
//! | new event | 200, the answer stored in the inbox item | `Applied` |
//! | same event again (a sender's retry) | 200, the first answer, `idempotent-replayed: true` | `Duplicate` |
//! | same identity, another body | 409 | `Conflict` |
//! | no identity, a body that is not UTF-8 (or not JSON where the identity is a pointer) | 400, a code | `Rejected` |
//! | the store failed or timed out | 503, `retry-after` | `Retry` |
//!
//! Every request counts `Requests` and its outcome. Those that passed the checks and reached the
//! deduplicator also count `Received`, so for them the account of the SQS functions holds
//! (received = applied + duplicate + retry + conflict + rejected, S14) and
//! the inbox items are its marks; and requests = received + method not allowed
//! + too large + unauthorized.
//!
//! The body limit bounds what is verified, parsed and stored, not what is received: Lambda
//! hands the function the whole request (up to its synchronous invocation payload, 6 MB), and
//! `lambda_http` has read and decoded all of it before the receiver runs. What the limit
//! guarantees is the order: after the method, the body's length is the first thing checked —
//! before the signature is verified (no HMAC over an oversized body), before anything is parsed,
//! and before any store call — so an oversized request costs one comparison and writes nothing.
//! Then the signature, so an unsigned request costs no DynamoDB call either.
//!
//! # Settings ([`WebhookConfig::read`])
//! The receiver's variables (`WEBHOOK_*`, `INBOX_TABLE`) are read into a [`WebhookConfig`] by the
//! [`lambda_dedup_config`] crate, whose table says what each means and refuses.
//!
//! The identity is never an unsigned header: a delivery captured inside the window and sent
//! again under another id must not be a new event. GitHub's scheme, which does not sign the
//! delivery id, is not offered.
//!
//! Nothing answered 2xx is lost: the inbox item, which is the mark, is written in one conditional
//! `Put` before the answer, and remembers the event for as long as it lives: the inbox
//! retention, after which the table's TTL removes it (raw bodies are not kept forever; the
//! forwarder ignores the removal). The warm cache (`DEDUP_CACHE_SIZE`, `DEDUP_CACHE_SECONDS`)
//! holds the items a container created or found, by their whole key (the sender in it): a
//! sender's retry to that container is answered without a store call, another body under the
//! same id there is the same 409. A stream consumer (`relay::forward`, feature `inbox`) hands inbox items on to a queue.
//!
//! # Layout
//! - `receiver`: the [`Receiver`] — a request's checks in order, the inbox item created once;
//!   its request answered through the one runner ([`crate::door`]: the cutoff before the
//!   deadline, the EMF count);
//! - `answer`: what each outcome answers (`Answer`) and the HTTP response it becomes;
//! - `builder`: the receiver's [`WebhookService`](crate::WebhookService), built from the
//!   builder (`WebhookService::new`).

pub(crate) mod answer;
pub(crate) mod builder;
mod receiver;

/// The webhook's settings with its signing secrets read from Secrets Manager
/// (`WEBHOOK_SECRETS_ARN`), and read again, bounded, when a signature does not match.
#[cfg(feature = "secrets-manager")]
pub use crate::secrets::{webhook_config, webhook_config_in};
#[cfg(any(feature = "http", test))]
pub(crate) use answer::REPLAYED_HEADER;
pub use lambda_dedup_config::WebhookConfig;
pub use receiver::Receiver;

#[cfg(test)]
mod tests;
