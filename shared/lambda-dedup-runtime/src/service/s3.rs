//! The S3 event notification door: a direct (asynchronous) invocation of S3's notifications,
//! each record one event through the latest-wins flow; Ok when every record is acknowledged,
//! else an error for Lambda's async retries and the on-failure destination
//! ([`crate::asynchronous`]).

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::event::s3::S3Event;
use lambda_dedup::{IdentitySource, Message, Reason};
use lambda_dedup_engine::Outcome;
use lambda_runtime::LambdaEvent;

use super::flow::seal::{On, Step};
use super::flow::{Flow, LatestWins};
use super::{BuildError, Dedup, Service};
use crate::asynchronous::NotAcknowledged;
use crate::s3::IDENTITY_ATTRIBUTE;
use crate::store::LatestMarks;

impl<S: LatestMarks> Dedup<S> {
    /// The service of S3 event notifications invoking the function directly (asynchronously):
    /// each record once ([`crate::s3`]: by default its bucket, decoded key, version id and
    /// sequencer), its work committed with its mark and its object's high-water sequencer
    /// ([`latest_wins`](crate::flow::latest_wins)), so a redelivery is a duplicate and an event
    /// older than one applied for the same object is superseded — acknowledged, counted,
    /// never applied over the newer one. A record that cannot be read (no key, a sequencer
    /// that is not hex…) is rejected `envelope_malformed`. Ok when every record is
    /// acknowledged; else an error, for Lambda's async retries and then the on-failure
    /// destination (the template must give the function one).
    ///
    /// Only on a store with latest-wins mode ([`LatestMarks`]: DynamoDB, memory):
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, Marks, flow::latest_wins};
    /// fn f(dedup: Dedup<impl Marks<Effect = Effect>>) {
    ///     let _ = dedup.s3(latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
    /// }
    /// ```
    ///
    /// ```
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, flow::latest_wins};
    /// fn f(dedup: Dedup) {
    ///     let _ = dedup.s3(latest_wins(|_: Event<serde_json::Value>| Vec::<Effect>::new()));
    /// }
    /// ```
    pub fn s3<M, F>(self, flow: LatestWins<F>) -> Result<Service<S3Event, ()>, BuildError>
    where
        LatestWins<F>: Flow<S, M>,
    {
        let mut dedup = self;
        dedup.refuse_envelope_id("S3")?;
        if !dedup.identity_chosen {
            dedup.identity = IdentitySource::MessageAttribute(IDENTITY_ATTRIBUTE.to_owned());
        }
        let at = dedup.payload_at();
        let step = Arc::new(flow.build(On { dedup: &dedup, at })?);
        let runner = Arc::new(dedup.runner());
        Ok(Service::new(move |event: LambdaEvent<S3Event>| {
            let (step, runner) = (step.clone(), runner.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                let cutoff = crate::bound::cutoff_at(deadline, runner.margin);
                let (batch, refused) = read(&event.payload);
                let state = Default::default();
                let answer = {
                    let (step, state, refused) = (&*step, &state, &refused);
                    crate::asynchronous::run(
                        &runner.accounting,
                        &runner.function,
                        &event.context,
                        batch,
                        cutoff,
                        runner.max_concurrency,
                        |m: Message| async move {
                            match refused.get(&m.message_id) {
                                Some(outcome) => outcome.clone(),
                                None => step.message(m, deadline, state).await,
                            }
                        },
                    )
                    .await
                };
                step.finish(state, &runner).await;
                answer.map_err(|e: NotAcknowledged| lambda_runtime::Error::from(e))
            }
        }))
    }
}

/// The event's records as messages, a refused record as an empty message under its id with
/// its rejection beside it, so every record is counted once (S14).
fn read(event: &S3Event) -> (Vec<Message>, HashMap<String, Outcome>) {
    let mut refused = HashMap::new();
    let batch = crate::s3::records(event)
        .into_iter()
        .map(|r| match r.message {
            Ok(m) => m,
            Err(rejection) => {
                tracing::warn!(record = %r.id, code = rejection.code(), reason = %rejection,
                    "rejected: the S3 record cannot be read");
                refused.insert(
                    r.id.clone(),
                    Outcome::Rejected {
                        code: Reason::from(&rejection),
                        reason: rejection.to_string(),
                        key: None,
                        invalid: None,
                    },
                );
                Message {
                    message_id: r.id,
                    body: Vec::new(),
                    attributes: Default::default(),
                    group_id: None,
                }
            }
        })
        .collect();
    (batch, refused)
}
