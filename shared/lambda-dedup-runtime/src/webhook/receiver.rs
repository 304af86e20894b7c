//! The receiver: one request's checks in order (method, size, signature: nothing stored before
//! them), its inbox item created once (the item is the mark), and its answer before the
//! invocation's deadline, counted in EMF.

use std::collections::BTreeMap;
use std::time::SystemTime;

use lambda_dedup::{AttributeValue, Derived, Effect, Item, Message};
use lambda_dedup_engine::{
    CreateOnceDeduplicator, HandlerError, Outcome, Plan, Reason, RetryCause,
};
use lambda_dedup_signature::{
    GITHUB_SIGNATURE_HEADER, Part, SHOPIFY_HMAC_HEADER, SLACK_SIGNATURE_HEADER,
    SLACK_TIMESTAMP_HEADER, SVIX_ID_HEADER, SVIX_TIMESTAMP_HEADER, SignatureError,
    WEBHOOK_ID_HEADER, WEBHOOK_TIMESTAMP_HEADER, standard_header,
};
use lambda_http::http::{HeaderMap, Method};
use lambda_http::{Body, Request, Response};

use super::answer::{Answer, answer_for, response};
use crate::service::Runner;
use crate::service::request::{Answers, respond};
use lambda_dedup_config::WebhookConfig;

/// The TTL attribute of an inbox item: when it expires, epoch seconds.
pub(crate) const INBOX_EXPIRES_AT: &str = "expires_at";
/// The signed headers whose values cannot hold a comma, so that a comma in one means the header
/// was sent more than once and joined by the front (Function URL, API Gateway payload 2.0).
/// Not Standard Webhooks' and Stripe's signature headers: commas are part of their format
/// (`v1,<base64>`, `t=…,v1=…`); GitHub's, Shopify's and Slack's hold one digest (hex or base64),
/// never a comma.
const JOINED_WHEN_REPEATED: [&str; 8] = [
    WEBHOOK_ID_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    SVIX_ID_HEADER,
    SVIX_TIMESTAMP_HEADER,
    GITHUB_SIGNATURE_HEADER,
    SHOPIFY_HMAC_HEADER,
    SLACK_SIGNATURE_HEADER,
    SLACK_TIMESTAMP_HEADER,
];

/// The receiver: its configuration and the deduplicator (built with [`WebhookConfig::key_spec`]).
#[derive(Debug)]
pub struct Receiver {
    pub(super) config: WebhookConfig,
    dedup: CreateOnceDeduplicator,
    runner: Runner,
}

impl Receiver {
    /// A receiver for `function` (the `Function` of its metrics), answering `margin` before the
    /// invocation's deadline (the builder gives the function's `DEDUP_DEADLINE_MARGIN_MS`).
    pub fn new(
        function: &str,
        config: WebhookConfig,
        dedup: CreateOnceDeduplicator,
        margin: lambda_dedup_config::DeadlineMargin,
    ) -> Self {
        Self {
            config,
            dedup,
            runner: Runner::of(function, margin.get()),
        }
    }

    /// Answers one request, given its parts: verifies, deduplicates, records in the inbox.
    /// `request_id` names the request in logs; `now` is the clock signatures are judged by.
    pub async fn answer(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: &[u8],
        request_id: &str,
        now: SystemTime,
    ) -> Answer {
        if method != Method::POST {
            return Answer::error(
                405,
                "MethodNotAllowed",
                "method_not_allowed",
                "webhooks are POSTed",
            );
        }
        // The body is already in memory (lambda_http received it whole); its length is checked
        // before anything costs more than a comparison: no HMAC, no parse, no store call.
        if body.len() > self.config.max_body_bytes {
            tracing::warn!(
                request_id,
                bytes = body.len(),
                max = self.config.max_body_bytes,
                "webhook refused: body too large"
            );
            return Answer::error(
                413,
                "TooLarge",
                Reason::BodyTooLarge.code(),
                &format!("the body is over {} bytes", self.config.max_body_bytes),
            );
        }
        // Each signed header once: otherwise which copy was verified and which one names the
        // event would be ambiguous.
        let header = |name: &str| {
            let mut all = headers.get_all(name).iter();
            match (all.next(), all.next()) {
                (Some(_), Some(_)) => Err(SignatureError::RepeatedHeader),
                (one, _) => {
                    let value = one.and_then(|v| v.to_str().ok());
                    // A Function URL (and API Gateway's payload 2.0) hands a header sent more
                    // than once as one header, its values joined with commas, so the count above
                    // sees one copy. An id or a timestamp never holds a comma: one that does was
                    // sent twice.
                    if JOINED_WHEN_REPEATED.contains(&name)
                        && value.is_some_and(|v| v.contains(','))
                    {
                        Err(SignatureError::RepeatedHeader)
                    } else {
                        Ok(value)
                    }
                }
            }
        };
        if let Err(e) = self.config.verify(&header, body, now).await {
            tracing::warn!(request_id, code = e.code(), reason = %e, "webhook refused: signature");
            return Answer::error(401, "Unauthorized", e.code(), "the signature is not valid");
        }
        // The first value of each header: the signed ones were sent once (checked above).
        let mut attributes = headers
            .iter()
            .fold(BTreeMap::new(), |mut all, (name, value)| {
                if let Ok(value) = value.to_str() {
                    all.entry(name.as_str().to_owned())
                        .or_insert_with(|| AttributeValue::String(value.to_owned()));
                }
                all
            });
        // The id that was verified, under whichever name it came (`webhook-id` or Svix's
        // `svix-id`; both agree, or the signature was refused): the key reads `webhook-id`.
        if let Ok(Some(id)) = standard_header(&header, Part::Id) {
            attributes.insert(
                WEBHOOK_ID_HEADER.to_owned(),
                AttributeValue::String(id.to_owned()),
            );
        }
        let message = Message {
            message_id: request_id.to_owned(),
            body: body.to_vec(),
            attributes,
            group_id: None,
        };
        let received_at = lambda_dedup::clock::epoch_millis(now);
        let inbox = self.config.inbox_table.as_str();
        // The answer of a new event is the one its plan stores with the mark.
        let mut first_answer = None;
        let outcome = self
            .dedup
            .create_once(&message, |event| {
                let expires_at = lambda_dedup::clock::epoch_secs(now + self.config.inbox_retention);
                let plan = inbox_plan(inbox, event, body, received_at, expires_at)?;
                first_answer.clone_from(&plan.result);
                Ok(plan)
            })
            .await;
        answer_for(outcome, first_answer)
    }

    /// Answers one Lambda HTTP request (Function URL or API Gateway HTTP API) through the one
    /// runner ([`crate::door`]), prints its EMF count and logs its outcome.
    /// Not answered by the invocation's cutoff (`crate::bound`), it is answered 503 with
    /// `retry-after` before the deadline; a commit abandoned meanwhile answers the sender's retry
    /// as a replay.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        respond(self, request).await
    }
}

impl Answers for Receiver {
    type Answer = Answer;
    const NAME: &'static str = "webhook";

    async fn answer(&self, request: &Request, request_id: &str, _: Option<SystemTime>) -> Answer {
        let body: &[u8] = request.body().as_ref();
        let now = SystemTime::now();
        self.answer(request.method(), request.headers(), body, request_id, now)
            .await
    }

    fn late(_: &str) -> Answer {
        answer_for(
            Outcome::retry(RetryCause::Deadline, crate::bound::ABANDONED),
            None,
        )
    }

    fn label(answer: &Answer) -> &'static str {
        answer.outcome
    }

    fn metrics(answer: &Answer) -> Vec<(&'static str, u64)> {
        let mut counts = vec![("Requests", 1), (answer.outcome, 1)];
        if answer.received() {
            counts.push(("Received", 1));
        }
        counts
    }

    fn runner(&self) -> &Runner {
        &self.runner
    }

    fn response(answer: Answer, function: &str, request_id: &str) -> Response<Body> {
        tracing::info!(
            function,
            request_id,
            status = answer.status,
            outcome = answer.outcome,
            "webhook answered"
        );
        response(answer)
    }
}

/// The inbox item, which is the event's mark (create-once mode: one conditional `Put`): the
/// event's key, the sender, the body as sent (the queue's consumer reads the sender's own bytes)
/// and when it was received; the answer stored in it for the sender's retries names the key.
fn inbox_plan(
    table: &str,
    event: &Derived,
    body: &[u8],
    received_at: u64,
    expires_at: u64,
) -> Result<Plan, HandlerError> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(HandlerError::Invalid(lambda_dedup_engine::Invalid::NotUtf8));
    };
    let key = event.key.as_str();
    let item = Item::new()
        .with("event_key", key)
        .with("tenant", event.tenant.as_str())
        .with("body", text)
        .with("received_at", received_at)
        .with(INBOX_EXPIRES_AT, expires_at);
    let result = serde_json::json!({
        "status": "accepted",
        "inbox_key": key,
        "received_at": received_at,
    });
    Ok(Plan {
        // Create-once: the put is conditional on no inbox item with this key existing, and
        // carries the mark (key, fingerprint, this answer) in the item itself (S5).
        effects: vec![Effect::put(table, item)],
        result: Some(result.to_string()),
    })
}
