//! The HTTP `Idempotency-Key` door (feature `http`): API Gateway REST and HTTP APIs, ALB and
//! Function URLs, one service over `lambda_http`, as the IETF draft *The Idempotency-Key HTTP
//! Header Field* and Powertools' `@idempotent` handlers do: the first request's answer is stored
//! with its mark and replayed to every retry of the same key.
//!
//! # What each request gets (exactly one outcome, counted in EMF)
//! | request | status | stored | outcome |
//! | --- | --- | --- | --- |
//! | body over `HTTP_MAX_BODY_BYTES` | 413 | no | `Rejected` |
//! | no `Idempotency-Key` where required; empty, over 255 characters, a control character or any byte outside printable ASCII, sent twice, a structured-field parameter | 400, a code (`idempotency_key_*`) | no | `Rejected` |
//! | no caller identity of the kind `HTTP_CALLER_FROM` names; a caller header sent twice; a caller header on a request that did not come through the front `HTTP_CALLER_FRONT` names | 401 (`caller_missing`, `caller_ambiguous`, `caller_front_missing`) | no | `Rejected` |
//! | a field of `HTTP_FINGERPRINT=json:` that cannot be read (a pointer past a string that is not JSON) | 400 (`fingerprint_unreadable`) | no | `Rejected` |
//! | a body that is not JSON, or not the work's type | 400 (`not_json`, `misfit`) | no | `Rejected` |
//! | new key | the work's answer; 2xx and 4xx stored with its effects in one commit (S5); in one-item mode only an answer creating its one item, the item its own mark | yes | `Applied` |
//! | the same key and request again | the stored status, allow-listed headers and body, `idempotent-replayed: true` | — | `Duplicate` |
//! | the same key while the first is in flight | after up to `HTTP_IN_FLIGHT_WAIT_MS`, the first's answer replayed, or 409 with `retry-after` | no | `Duplicate` / `Retry` |
//! | the same key, another request (fingerprint) | 422 (`idempotency_key_reused`) | no | `Conflict` |
//! | the work answers 5xx, or refuses as transient | that answer / 503 with `retry-after`; nothing written, so the retry runs again | no | `Retry` |
//! | an answer over the store's result bound (64 KiB by default) | 500 (`response_too_large`), checked before the commit: its effects not written either | no | `Rejected` |
//! | the store failed or timed out; the invocation's deadline | 503 with `retry-after` | no | `Retry` |
//!
//! Validation failures before the work runs are not stored, as Stripe does: a corrected retry
//! under the same key runs; so does one after a 5xx (a released mark's fingerprint holds
//! nothing). The work's own 4xx answers are stored: the request was judged. Every refusal is an
//! RFC 9457 problem (`application/problem+json`: `type` `urn:lambda-dedup:problem:<code>`,
//! `title`, `status`, `detail`), as the draft's examples, with the stable `code` as an
//! extension member (and `error`, `message`, the members of earlier versions). The method and
//! path are always part of the fingerprint: one key on two routes is 422, never one request.
//!
//! # The key
//! `Idempotency-Key` is read as the draft writes it, a structured-field string
//! (`"8e03978e-…"`, RFC 8941: printable ASCII, `\"` and `\\` escaped, nothing after the closing
//! quote), or bare as Stripe's clients send it (visible ASCII without `"`, `\`, `,`, `;`); at
//! most 255 characters (Stripe's limit). A comma outside a string means the header was sent
//! twice (a Function URL joins repeated headers with commas): refused, as two headers are (a
//! REST API's `multiValueHeaders`, read from the raw event: run the service with
//! `lambda_runtime::run_concurrent`, see `event`). The key is scoped by the
//! caller (`HTTP_CALLER_FROM`: the authorizer's principal, a REST API key, a header a trusted
//! front sets — only behind the front `HTTP_CALLER_FRONT` declares, checked on each request —,
//! or `none` for one client; written as length-prefixed parts, so two callers never write one
//! string) and enters the mark's key only hashed with it
//! (`namespace#consumer#sha256(caller, key)`, S3), so one caller never receives another's answer.
//!
//! # How it holds
//! Nothing is claimed. The work runs; its answer is checked against the store's bound; then the
//! mark, holding the answer, and the work's effects are committed in one conditional write
//! (S4, S5: on DynamoDB one `TransactWriteItems`, the mark conditioned on no live mark), which
//! decides: a request that lost the race for the key learns the winner's mark from the failed
//! condition (`ALL_OLD`) and replays its answer (or is 422, or waits for a key held in flight),
//! and its own effects are not written. So the work acts only through its [`Reply`]: it may run
//! for a request that is then answered as a replay. A retry answered first in the same
//! container is answered from the warm cache of completed marks (`DEDUP_CACHE_SIZE`,
//! `DEDUP_CACHE_SECONDS`; keyed by the whole key, so by the caller too), with no store request.
//! A work answer that stores nothing (a 5xx, a transient refusal, one over the bound) is given
//! after one read of the mark, so a key that already stands is still replayed, 422 or waited
//! for. A key held in flight (a live lease, as a door that claims first leaves one) is 409 or
//! the bounded wait (`HTTP_IN_FLIGHT_WAIT_MS`). It uses only the
//! [`MarkStore`](lambda_dedup::MarkStore) trait, so it runs on every store, with the store's own
//! effects.
//!
//! # One item, its own mark (`Dedup::http_create_once`)
//! For work whose creating answer puts exactly one item into a declared table (an order), the
//! item is written as the key's own mark: the create-once write (one conditional `PutItem`
//! carrying the key, the fingerprint and the answer; `ALL_OLD` on failure), no mark item, no
//! transaction, no mark table read. The item's key attribute must hold the id derived from the
//! request's whole key (`DedupKey::idempotency_key`); anything else with effects is 500
//! `not_one_item`, nothing written. The item a failed put returns decides: this request's
//! answer replayed, another request's 422, an item this key did not create 500
//! `effect_refused` (never overwritten). An answer that creates nothing (the work's 4xx, a
//! 404, a 405) is **not stored** in this mode, and not compared with the key: its retry runs
//! again. No request is in flight, so no 409; the key lasts as long as its item. The warm cache
//! answers retries in the container that answered first, as above. `once` holds it.
//!
//! # Retention
//! There is no queue to outlast (S9): a key is kept `HTTP_KEY_RETENTION_SECONDS` (24 hours, as
//! Stripe, by default; at least an hour), the marks' retention for this door on whichever store
//! the settings chose (DynamoDB, PostgreSQL, Valkey); a store given as it is (`Store::new`,
//! `Items::new`) keeps its own. A retry after that is a new request — the promise the API
//! documents to its clients.
//!
//! # Layout
//! - `key`: `Idempotency-Key` parsed (`KeyError`);
//! - `caller`: the caller of a request (`CallerError`);
//! - `event`: the raw Lambda event read before `lambda_http` converts it (`NotHttp`);
//! - `reply`: the work's [`Reply`] and its `Stored` form;
//! - `once`: one-item mode's write (`OneItem`: the declared table, its create-once store);
//! - `answer`: the `Answer` and how it is `Counted`;
//! - `door`: the `Door` — the checks, the claim, the commit, the wait; its requests answered
//!   through the one runner ([`crate::door`]: the cutoff before the deadline, the EMF count);
//! - `builder`: the builder's door (`Dedup::http`), its [`HttpService`](crate::HttpService)
//!   and the work's [`HttpEvent`](crate::HttpEvent).

mod answer;
pub(crate) mod builder;
mod caller;
mod door;
pub(crate) mod event;
mod key;
mod once;
mod reply;

pub(crate) use door::{Door, Meta, Work};
pub use lambda_dedup_config::HttpConfig;
pub use reply::Reply;

#[cfg(test)]
mod tests;
