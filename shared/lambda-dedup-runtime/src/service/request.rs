//! The doors that answer one HTTP request (the `Idempotency-Key` door, the webhook receiver),
//! through the one runner ([`crate::door`]): the request is the invocation's one record, its
//! work bounded by the runner's cutoff, its answer kept for the door, counted in the door's own
//! EMF line (`Requests` and the answer's outcome), logged, and answered before the deadline.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::SystemTime;

use lambda_dedup::Message;
use lambda_dedup_engine::{Outcome, Reason, RetryCause};
use lambda_http::{Body, Request, RequestExt, Response};
use lambda_runtime::LambdaEvent;

use super::runner::{Asked, Runner};
use crate::door::{Answered, AnyOrder, Door, Record};

/// What an HTTP door does with one request: its answer, and how that answer is counted, logged
/// and sent.
pub(crate) trait Answers: Send + Sync + 'static {
    /// One request's answer, before it becomes an HTTP response.
    type Answer: Send + 'static;
    /// The door's name.
    const NAME: &'static str;

    /// Answers `request` (`request_id` names it in logs), its work over by `cutoff`.
    fn answer(
        &self,
        request: &Request,
        request_id: &str,
        cutoff: Option<SystemTime>,
    ) -> impl Future<Output = Self::Answer> + Send;

    /// The answer of a request not answered by the cutoff (503, `retry-after`).
    fn late(request_id: &str) -> Self::Answer;

    /// The outcome the answer is counted under (`Applied`, `Unauthorized`, …).
    fn label(answer: &Self::Answer) -> &'static str;

    /// The metrics the answer counts (name, count), one EMF line per request.
    fn metrics(answer: &Self::Answer) -> Vec<(&'static str, u64)>;

    /// The answer, logged (never the key, caller or body, S3), as the HTTP response.
    fn response(answer: Self::Answer, function: &str, request_id: &str) -> Response<Body>;

    /// The runner it answers through.
    fn runner(&self) -> &Runner;
}

/// The service of an HTTP door ([`HttpService`](crate::HttpService),
/// [`WebhookService`](crate::WebhookService)): requests in, answers out. Cheap to clone.
pub struct RequestService<H> {
    pub(crate) door: Arc<H>,
}

impl<H> Clone for RequestService<H> {
    fn clone(&self) -> Self {
        Self {
            door: self.door.clone(),
        }
    }
}

impl<H: std::fmt::Debug> std::fmt::Debug for RequestService<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestService")
            .field("door", &self.door)
            .finish()
    }
}

impl<H: Answers> lambda_http::Service<Request> for RequestService<H> {
    type Response = Response<Body>;
    type Error = lambda_http::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let door = self.door.clone();
        // Boxed here, so the deep future of the store calls is one pointer to the runtime.
        Box::pin(async move { Ok(respond(&*door, request).await) })
    }
}

/// The door of an [`Answers`]: one request, one record, answered with the answer its work kept.
struct Front<H>(PhantomData<fn() -> H>);

impl<H: Answers> Door for Front<H> {
    type Event = Asked<Request, H::Answer>;
    type Response = Response<Body>;
    type Ordering = AnyOrder;
    const NAME: &'static str = H::NAME;

    fn messages(&self, _: &Self::Event, context: &lambda_runtime::Context) -> Vec<Record> {
        vec![Ok(Message {
            message_id: context.request_id.clone(),
            ..Message::default()
        })]
    }

    fn metrics(
        &self,
        event: &Self::Event,
        _: &lambda_dedup_engine::BatchReport,
    ) -> Option<Vec<(&'static str, u64)>> {
        let request_id = request_id(&event.request);
        let kept = event.kept.lock().ok();
        Some(match kept.as_ref().and_then(|kept| kept.as_ref()) {
            Some(answer) => H::metrics(answer),
            None => H::metrics(&H::late(&request_id)),
        })
    }

    async fn answer(
        &self,
        event: &Self::Event,
        done: Answered<'_>,
    ) -> Result<Response<Body>, lambda_runtime::Error> {
        let request_id = request_id(&event.request);
        let answer = event.take().unwrap_or_else(|| {
            tracing::warn!(request_id, "not answered before the invocation's deadline");
            H::late(&request_id)
        });
        Ok(H::response(answer, done.function, &request_id))
    }
}

/// The request's Lambda request id (none on a hand-built request).
fn request_id(request: &Request) -> String {
    request
        .lambda_context_ref()
        .map(|c| c.request_id.clone())
        .unwrap_or_default()
}

/// Answers one Lambda HTTP request (API Gateway REST or HTTP API, ALB, Function URL) with
/// `door`, through `runner`: before the invocation's deadline (else [`Answers::late`]), counted
/// in one EMF line.
pub(crate) async fn respond<H: Answers>(door: &H, request: Request) -> Response<Body> {
    let runner = door.runner();
    // Lambda always gives one; a request without (a hand-built one) gets no deadline.
    let context = request.lambda_context_ref().cloned().unwrap_or_default();
    let event = LambdaEvent::new(Asked::new(request), context);
    let asked = &event.payload;
    // The request's answer, kept for the front.
    let work = |m: Message, cutoff| async move {
        let answer = door.answer(&asked.request, &m.message_id, cutoff).await;
        let outcome = outcome_of(H::label(&answer));
        asked.keep(answer);
        outcome
    };
    let front = Front::<H>(PhantomData);
    match runner.invoke(&front, None, &event, &work).await {
        Ok(response) => response,
        // The front's answer never fails.
        Err(_) => H::response(
            H::late(&event.context.request_id),
            &runner.function,
            &event.context.request_id,
        ),
    }
}

/// The outcome the runner's report (and the request's span) counts an answer under `label`
/// as; the answer's own metrics are the door's ([`Answers::metrics`]).
fn outcome_of(label: &str) -> Outcome {
    match label {
        "Applied" => Outcome::Applied,
        "Duplicate" => Outcome::Duplicate {
            first_seen_at: SystemTime::UNIX_EPOCH,
            result: None,
        },
        "Superseded" => Outcome::Superseded,
        "Conflict" => Outcome::Conflict,
        "Retry" => Outcome::retry(RetryCause::NotProcessed, "answered: retry"),
        _ => Outcome::Rejected {
            code: Reason::InvalidPayload,
            reason: format!("answered: {label}"),
            key: None,
            invalid: None,
        },
    }
}
