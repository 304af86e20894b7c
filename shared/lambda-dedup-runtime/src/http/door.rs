//! The door: one request's checks in order (size, key, caller, body: nothing written before
//! them), the warm cache asked, the work run, its answer bounded, then the mark (holding the
//! answer) and the work's effects committed in one conditional write, and the answer counted
//! in EMF.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{
    Claim, Commit, DedupKey, Fingerprint, Mark, MarkCache, MarkStatus, MarkStore, Scope, Seen,
};
use lambda_dedup::{FaultKind, FingerprintSource, StoreError};
use lambda_http::http::{HeaderMap, Method};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};

use crate::service::Runner;
use crate::service::request::Answers;

use super::answer::{Answer, Counted, conflict, key_refused, refused, replay, store_failed};
use super::once::CreatesOne;
use super::reply::{Reply, Stored};
use super::{caller, key};
use lambda_dedup_config::{HttpConfig, HttpFingerprint, KeyRequirement};
use lambda_dedup_engine::HandlerError;

/// What the work is told of a request besides its payload.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    /// The request's method.
    pub method: Method,
    /// Its path.
    pub path: String,
    /// Its dedup key: the caller's scope and its `Idempotency-Key` (an unkeyed request's, where
    /// keys are optional: its Lambda request id). Derive the ids of what the work creates from
    /// [`DedupKey::idempotency_key`], so a retry names the same resource.
    pub key: DedupKey,
    /// Whether the request carried an `Idempotency-Key`.
    pub keyed: bool,
}

/// The work, prepared from a request's JSON body before any claim (a refusal here is answered
/// and nothing is stored), then run once under the claim.
pub(crate) type Work<E> =
    Arc<dyn Fn(serde_json::Value, Meta) -> Result<Ready<E>, HandlerError> + Send + Sync>;
/// The work of one request, ready to run under its claim.
pub(crate) type Ready<E> = Box<dyn FnOnce() -> Result<Reply<E>, HandlerError> + Send>;

/// How often a request that waits for one in flight looks at the mark.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// One request, in parts.
#[derive(Debug)]
pub(crate) struct Incoming<'a> {
    /// The method.
    pub method: &'a Method,
    /// The path.
    pub path: &'a str,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The body, as received.
    pub body: &'a [u8],
    /// The front's request context (the authorizer, the API key).
    pub context: Option<&'a RequestContext>,
    /// The Lambda request id (logs; the mark of an unkeyed request).
    pub request_id: &'a str,
}

/// The door of one function: its configuration, its marks and its work.
pub struct Door<E> {
    pub(crate) config: HttpConfig,
    pub(crate) store: Arc<dyn MarkStore<E>>,
    pub(crate) scope: Scope,
    pub(crate) work: Work<E>,
    pub(crate) runner: Runner,
    /// The warm cache of completed marks (`DEDUP_CACHE_SIZE`, `DEDUP_CACHE_SECONDS`): a retry
    /// answered first in this container costs no store request.
    pub(crate) cache: Option<MarkCache>,
    /// One-item mode (`Dedup::http_create_once`): a creating answer's one item written as its
    /// own mark, one conditional put; an answer that creates nothing is not stored.
    pub(crate) once: Option<Arc<dyn CreatesOne<E>>>,
}

/// The work's answer, ready to be stored with its effects.
struct Storable<E> {
    /// The work's whole answer (its effects, every header: the first answer's).
    reply: Reply<E>,
    /// The part the mark stores and retries replay.
    stored: Stored,
    /// `stored`, as the mark's result.
    result: String,
}

impl<E> std::fmt::Debug for Door<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("function", &self.runner.function)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<E: Send + Sync + 'static> Door<E> {
    /// Answers one request, in order: size (413), key (400), caller (401), body (400): nothing
    /// claimed before; then the key claimed (a replay, 409 or 422 if it stood), the work run and
    /// its answer committed with its effects, or released (5xx, too large).
    pub(crate) async fn answer(&self, req: &Incoming<'_>, cutoff: Option<SystemTime>) -> Answer {
        if req.body.len() > self.config.max_body_bytes {
            return Answer::error(
                413,
                Counted::Rejected,
                "body_too_large",
                "the body is too large",
            );
        }
        let idempotency_key = match key::read(req.headers) {
            Ok(Some(k)) => Some(k),
            Ok(None) if self.config.key == KeyRequirement::Optional => None,
            Ok(None) => return key_refused(key::KeyError::Missing),
            Err(e) => return key_refused(e),
        };
        let caller = match caller::of(
            &self.config.caller,
            self.config.front,
            req.context,
            req.headers,
        ) {
            Ok(c) => c,
            Err(e) => return Answer::error(401, Counted::Rejected, e.code(), &e.to_string()),
        };
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(req.body) else {
            return Answer::error(400, Counted::Rejected, "not_json", "the body is not JSON");
        };
        let fingerprint = match self.fingerprint(req, &json) {
            Ok(fp) => fp,
            Err(e) => {
                return Answer::error(
                    400,
                    Counted::Rejected,
                    "fingerprint_unreadable",
                    &format!("a field the fingerprint covers cannot be read: {e}"),
                );
            }
        };
        let dedup_key = match &idempotency_key {
            Some(k) => DedupKey::new(&self.scope, &caller, &["idempotency-key", k]),
            None => DedupKey::new(&self.scope, &caller, &["request", req.request_id]),
        };
        let meta = Meta {
            method: req.method.clone(),
            path: req.path.to_owned(),
            key: dedup_key.clone(),
            keyed: idempotency_key.is_some(),
        };
        let ready = match (self.work)(json, meta) {
            Ok(ready) => ready,
            Err(refusal) => return refused(&refusal),
        };
        // A retry answered first in this container: no store request (S8, S11). The cache holds
        // completed marks only, under the whole key (scope and caller in it).
        if let Some(answer) = self.cached(&dedup_key, &fingerprint) {
            return answer;
        }
        match (self.prepare(ready), &self.once) {
            (Ok(work), Some(once)) => {
                self.create(once.as_ref(), &dedup_key, &fingerprint, work)
                    .await
            }
            (Ok(work), None) => {
                self.commit(&dedup_key, &fingerprint, work, cutoff, true)
                    .await
            }
            // One-item mode reads no mark: the answer is given as it is.
            (Err(answer), Some(_)) => answer,
            (Err(answer), None) => self.unstored(&dedup_key, &fingerprint, answer).await,
        }
    }

    /// One-item mode: the answer's one item written as its own mark, holding the answer, in one
    /// conditional put (create-once); a request that lost the race, or a retry in another
    /// container, learns from the item the failed condition returns (`ALL_OLD`): its answer
    /// replayed (S8), or 422 (S11); an item with this key that this key did not create is
    /// refused, never overwritten. An answer that creates nothing (a 4xx of the work, a
    /// validation refusal) is not stored: a retry runs again and answers the same.
    async fn create(
        &self,
        once: &dyn CreatesOne<E>,
        key: &DedupKey,
        fp: &Fingerprint,
        work: Storable<E>,
    ) -> Answer {
        let whole = Stored {
            headers: work.reply.headers.clone(),
            ..work.stored.clone()
        };
        if work.reply.effects.is_empty() {
            let outcome = match whole.status {
                400.. => Counted::Rejected,
                _ => Counted::Applied,
            };
            return Answer::reply(&whole, false).counted(outcome);
        }
        match once
            .create(key, fp, &work.result, &work.reply.effects)
            .await
        {
            Ok(Commit::Applied) => {
                self.remember(&self.store.written_mark(key, Some(fp), Some(&work.result)));
                Answer::reply(&whole, false)
            }
            Ok(Commit::Seen(Seen::Duplicate(mark))) => {
                self.remember(&mark);
                replay(&mark)
            }
            Ok(Commit::Seen(Seen::Conflict { .. })) => conflict(),
            // Only in an upgrade's window: a mark in the mark table held in flight by a
            // container of the transaction path (this door reads no mark to wait on).
            Ok(Commit::Seen(Seen::InProgress { .. })) => self.retry_later(),
            Ok(Commit::EffectRejected { .. }) => {
                tracing::warn!(key = %key, "the item exists and this key did not create it: nothing written");
                Answer::error(
                    500,
                    Counted::Rejected,
                    "effect_refused",
                    "an item with this key exists that this request did not create; nothing was done",
                )
            }
            Err(StoreError::Invalid(why)) => {
                tracing::warn!(key = %key, why = %why, "not one item: nothing written");
                Answer::error(
                    500,
                    Counted::Rejected,
                    "not_one_item",
                    "the answer does not create one item keyed by the request; nothing was done",
                )
            }
            Err(e) => store_failed(&e),
        }
    }

    /// What the warm cache knows of `key`: a replay or a 422, else `None` (ask the store).
    fn cached(&self, key: &DedupKey, fp: &Fingerprint) -> Option<Answer> {
        match self.cache.as_ref()?.seen(key, Some(fp), self.store.now())? {
            Seen::Duplicate(mark) => Some(replay(&mark)),
            Seen::Conflict { .. } => Some(conflict()),
            // Never cached; ask the store.
            Seen::InProgress { .. } => None,
        }
    }

    /// Remembers a completed mark in the warm cache.
    fn remember(&self, mark: &Mark) {
        if let Some(cache) = &self.cache {
            cache.insert_at(mark, self.store.now());
        }
    }

    /// The work run, its answer made ready to store; `Err` the answer given without storing
    /// anything (a transient refusal, a 5xx, an answer over the store's bound).
    fn prepare(&self, ready: Ready<E>) -> Result<Storable<E>, Answer> {
        let reply = match ready() {
            Ok(reply) => reply,
            Err(HandlerError::Invalid(invalid)) => Reply::new(
                400,
                super::answer::problem(400, invalid.cause().code(), &invalid.to_string()),
            )
            .header("content-type", super::answer::PROBLEM_JSON),
            Err(refusal) => return Err(refused(&refusal)),
        };
        if reply.status >= 500 {
            // Not stored: the client's retry runs again.
            let whole = Stored {
                headers: reply.headers.clone(),
                ..Stored::of(&reply, &[])
            };
            return Err(Answer::reply(&whole, false).counted(Counted::Retry));
        }
        let stored = Stored::of(&reply, &self.config.replay_headers);
        let result = stored.to_result();
        // Checked before the commit: the effect commits with the mark, so an answer the mark
        // cannot hold must stop the effect too (S5, S16).
        if result.len() > self.store.max_result_bytes() {
            return Err(Answer::error(
                500,
                Counted::Rejected,
                "response_too_large",
                "the answer is too large to store; nothing was done",
            ));
        }
        Ok(Storable {
            reply,
            stored,
            result,
        })
    }

    /// The answer of work that stores nothing, unless the key already stands: a request that
    /// came before answers it (its replay, 422, or the wait for one in flight), as a claim
    /// would have found it. One read.
    async fn unstored(&self, key: &DedupKey, fp: &Fingerprint, answer: Answer) -> Answer {
        let mark = match self.store.get(key).await {
            Ok(Some(mark)) => mark,
            Ok(None) => return answer,
            Err(e) => return store_failed(&e),
        };
        let now = self.store.now();
        let released = mark.is_released(now);
        match mark.classify(Some(fp), now) {
            // A released mark's fingerprint holds nothing (its request stored nothing).
            Some(Seen::Conflict { .. }) if released => answer,
            Some(seen) => self.seen(seen, key, fp).await,
            None => answer,
        }
    }

    /// The work's answer committed: the mark (written only where no request holds the key,
    /// holding the answer) and the work's effects in one atomic write (S4, S5), no claim
    /// before it. A request that lost the race learns the winner's mark from the failed
    /// condition and replays its answer (S8), or is 422 (S11); nothing of its own is written.
    async fn commit(
        &self,
        key: &DedupKey,
        fp: &Fingerprint,
        work: Storable<E>,
        cutoff: Option<SystemTime>,
        may_take_over: bool,
    ) -> Answer {
        let request = || lambda_dedup::CommitRequest {
            key,
            fingerprint: Some(fp),
            result: Some(&work.result),
            effects: &work.reply.effects,
        };
        let mut sent = self.store.commit(request()).await;
        if let Err(e) = &sent
            && contended(e)
        {
            // Another request's write of this key was under way: once it is done, the retried
            // commit reads its mark (a replay) or writes this one.
            tokio::time::sleep(WAIT_STEP).await;
            sent = self.store.commit(request()).await;
        }
        match sent {
            Ok(Commit::Applied) => {
                self.remember(&self.store.written_mark(key, Some(fp), Some(&work.result)));
                // The first answer is the work's whole; its retries get the stored part.
                Answer::reply(
                    &Stored {
                        headers: work.reply.headers,
                        ..work.stored
                    },
                    false,
                )
            }
            Ok(Commit::Seen(Seen::Conflict { mark, .. })) => {
                Box::pin(self.conflict(&mark, key, fp, work, cutoff, may_take_over)).await
            }
            Ok(Commit::Seen(seen)) => {
                if let Seen::Duplicate(mark) = &seen {
                    self.remember(mark);
                }
                self.seen(seen, key, fp).await
            }
            Ok(Commit::EffectRejected { index }) => {
                tracing::warn!(index, "an effect's condition failed: nothing written");
                Answer::error(
                    500,
                    Counted::Rejected,
                    "effect_refused",
                    "an effect's condition failed; nothing was done",
                )
            }
            Err(e) => store_failed(&e),
        }
    }

    /// The key's mark holds another fingerprint, as the failed condition returned it (no read).
    /// A completed request's, or one still in flight: 422. A released one (its work answered
    /// 5xx or was refused as transient, or its invocation ended, on a door that claims first:
    /// nothing of it committed, S5): its fingerprint holds nothing, and this request takes the
    /// key over and commits (once: `may_take_over`).
    async fn conflict(
        &self,
        mark: &Mark,
        key: &DedupKey,
        offered: &Fingerprint,
        work: Storable<E>,
        cutoff: Option<SystemTime>,
        may_take_over: bool,
    ) -> Answer {
        // S11: a conflict takes precedence over a request in flight.
        if !(may_take_over && mark.is_released(self.store.now())) {
            if mark.status == MarkStatus::Completed {
                self.remember(mark);
            }
            return conflict();
        }
        // Taken over without a fingerprint, so the one it holds is not compared (the store's
        // conditional write decides between racing retries); its lease ended at once, so the
        // commit (which decides, S4) may write this request's mark.
        match self.store.claim(key, None, cutoff).await {
            Ok(Claim::Claimed(lease)) => {
                if let Err(e) = self.store.release(&lease).await {
                    return store_failed(&e);
                }
                self.commit(key, offered, work, cutoff, false).await
            }
            Ok(Claim::Seen(Seen::Duplicate(mark)))
                if mark.fingerprint.as_ref().is_some_and(|f| f != offered) =>
            {
                self.remember(&mark);
                conflict()
            }
            Ok(Claim::Seen(seen)) => self.seen(seen, key, offered).await,
            Err(e) => store_failed(&e),
        }
    }

    /// 409 with `retry-after`: the key's state changed under this request.
    fn retry_later(&self) -> Answer {
        Answer {
            headers: vec![("retry-after".into(), "1".into())],
            ..Answer::error(
                409,
                Counted::Retry,
                "in_flight",
                "a request with this Idempotency-Key is being processed; retry later",
            )
        }
    }

    /// What stood in the way of the claim (or of the commit).
    async fn seen(&self, seen: Seen, key: &DedupKey, fp: &Fingerprint) -> Answer {
        match seen {
            Seen::Duplicate(mark) => replay(&mark),
            Seen::Conflict { .. } => conflict(),
            Seen::InProgress { .. } => self.wait(key, fp).await,
        }
    }

    /// A request whose key is in flight: it waits up to `HTTP_IN_FLIGHT_WAIT_MS` for the first
    /// to finish (its answer replayed), else 409 with `retry-after`.
    async fn wait(&self, key: &DedupKey, fp: &Fingerprint) -> Answer {
        let until = tokio::time::Instant::now() + self.config.in_flight_wait;
        while tokio::time::Instant::now() < until {
            tokio::time::sleep(WAIT_STEP.min(until - tokio::time::Instant::now())).await;
            match self.store.get(key).await {
                Ok(Some(mark)) => match mark.classify(Some(fp), self.store.now()) {
                    Some(Seen::Duplicate(mark)) => return replay(&mark),
                    Some(Seen::Conflict { .. }) => return conflict(),
                    Some(Seen::InProgress { .. }) => {}
                    // The first gave up (released): a retry runs anew.
                    None => break,
                },
                Ok(None) => break,
                Err(e) => return store_failed(&e),
            }
        }
        self.retry_later()
    }

    /// The request's fingerprint: its method and path always (one key on two routes is never
    /// one request), with its body (`request`, `body`) or the values at the pointers (`json:`);
    /// a pointer that cannot be read is an error (400), never an empty fingerprint.
    fn fingerprint(
        &self,
        req: &Incoming<'_>,
        json: &serde_json::Value,
    ) -> Result<Fingerprint, lambda_dedup::pointer::PointerError> {
        let request_line = |rest: &[u8]| {
            let mut bytes = format!("{}\n{}\n", req.method, req.path).into_bytes();
            bytes.extend_from_slice(rest);
            Fingerprint::of_bytes(&bytes)
        };
        Ok(match &self.config.fingerprint {
            HttpFingerprint::Request | HttpFingerprint::Body => request_line(req.body),
            HttpFingerprint::Pointers(pointers) => {
                let source = FingerprintSource::JsonPointers(pointers.clone());
                match source.try_compute(req.body, Some(json))? {
                    Some(picked) => request_line(picked.as_str().as_bytes()),
                    None => request_line(b""),
                }
            }
        })
    }
}

impl<E: Send + Sync + 'static> Answers for Door<E> {
    type Answer = Answer;
    const NAME: &'static str = "HTTP";

    async fn answer(
        &self,
        request: &Request,
        request_id: &str,
        cutoff: Option<SystemTime>,
    ) -> Answer {
        let incoming = Incoming {
            method: request.method(),
            path: request.uri().path(),
            headers: request.headers(),
            body: request.body().as_ref(),
            context: request.request_context_ref(),
            request_id,
        };
        self.answer(&incoming, cutoff).await
    }

    fn late(_: &str) -> Answer {
        Answer {
            headers: vec![("retry-after".into(), "1".into())],
            ..Answer::error(
                503,
                Counted::Retry,
                "deadline",
                "not done in time; retry later",
            )
        }
    }

    fn label(answer: &Answer) -> &'static str {
        answer.outcome.label()
    }

    fn metrics(answer: &Answer) -> Vec<(&'static str, u64)> {
        // Every request ends in exactly one of the five outcomes: the account's
        // received = applied + duplicate + retry + conflict + rejected (S14).
        vec![
            ("Requests", 1),
            ("Received", 1),
            (answer.outcome.label(), 1),
        ]
    }

    fn runner(&self) -> &Runner {
        &self.runner
    }

    fn response(answer: Answer, function: &str, request_id: &str) -> Response<Body> {
        tracing::info!(
            function,
            request_id,
            status = answer.status,
            outcome = answer.outcome.label(),
            code = answer.code,
            "http request answered"
        );
        answer.response()
    }
}

/// A commit that failed because another write of the key was under way at once (a conflicting
/// transaction, a mark that changed while it was read): sent again once, it reads the other's
/// mark.
fn contended(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Contended(_)
            | StoreError::Store {
                kind: FaultKind::TransactionConflict,
                ..
            }
    )
}
