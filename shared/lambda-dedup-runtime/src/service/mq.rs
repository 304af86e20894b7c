//! The Amazon MQ sources (ActiveMQ, RabbitMQ): every flow that works message by message
//! ([`Ordered`]); no partial batch response, so a poison message is parked and the batch
//! acknowledged, and a transient failure fails the invocation for the whole batch to come again
//! ([`crate::mq`]).

use std::sync::Arc;

use aws_lambda_events::event::activemq::ActiveMqEvent;
use aws_lambda_events::event::rabbitmq::RabbitMqEvent;
use lambda_runtime::LambdaEvent;

use super::flow::Flow;
use super::flow::seal::{On, Ordered, Step};
use super::{BuildError, Dedup, Service};
use crate::mq::MqMessage;
use crate::store::Marks;
use crate::stream::Invocation;

impl<S: Marks> Dedup<S> {
    /// The ActiveMQ service of `flow` (Amazon MQ for ActiveMQ): each message once, by the
    /// identity the builder is given — the broker's `messageID` only when chosen openly,
    /// `.identity_attribute(mq::MESSAGE_ID_ATTRIBUTE)` (S1: it misses a producer's resend;
    /// [`crate::mq`]), a property (`.identity_attribute("event-id")`) or the data's own. A message
    /// that can never apply is parked in `DEDUP_PARKING_QUEUE_URL` (required) and the batch
    /// acknowledged; a transient failure fails the invocation, so the whole batch comes again
    /// and what applied is then a duplicate.
    pub fn activemq<M, F>(self, flow: F) -> Result<Service<ActiveMqEvent, ()>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.mq_service(flow, crate::mq::activemq_messages)
    }

    /// The RabbitMQ service of `flow` (Amazon MQ for RabbitMQ), as
    /// [`activemq`](Self::activemq): the broker's id is `basicProperties.messageId`, which
    /// RabbitMQ leaves null unless the producer sets it (a message without the identity chosen
    /// is parked, never guessed): a header (`identity_attribute("<header>")`) or the data's own
    /// (`identity("/pointer")`) is the usual choice.
    pub fn rabbitmq<M, F>(self, flow: F) -> Result<Service<RabbitMqEvent, ()>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        self.mq_service(flow, crate::mq::rabbitmq_messages)
    }

    fn mq_service<E, M, F>(
        self,
        flow: F,
        messages: fn(&E) -> Vec<MqMessage>,
    ) -> Result<Service<E, ()>, BuildError>
    where
        E: Send + 'static,
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        let dedup = self;
        dedup.refuse_envelope_id("Amazon MQ")?;
        let at = dedup.payload_at();
        let parking = dedup.parking_queue()?;
        let step = Arc::new(flow.build(On { dedup: &dedup, at })?);
        let runner = Arc::new(dedup.runner());
        Ok(Service::new(move |event: LambdaEvent<E>| {
            let (step, runner, parking) = (step.clone(), runner.clone(), parking.clone());
            async move {
                let deadline = crate::deadline(&event.context);
                let state = <F::Step as Step>::State::default();
                let at = Invocation {
                    namespace: &runner.accounting.namespace,
                    function: &runner.function,
                    margin: runner.margin,
                    context: &event.context,
                    parking: &parking,
                    max_concurrency: runner.max_concurrency,
                };
                let process = |m| step.message(m, deadline, &state);
                let answer = crate::mq::run(at, &messages(&event.payload), process).await;
                step.finish(state, &runner).await;
                Ok(answer?)
            }
        }))
    }
}
