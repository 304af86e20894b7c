//! The Kafka source (Amazon MSK, self-managed Apache Kafka): every flow that keeps records in
//! order ([`Ordered`]), each partition in order, records that can never apply parked before the
//! resume point passes them (S15), each partition's resume point in the response.

use std::sync::Arc;

use aws_lambda_events::event::kafka::KafkaEvent;
use lambda_dedup::IdentitySource;
use lambda_runtime::LambdaEvent;

use super::flow::Flow;
use super::flow::seal::{On, Ordered, Step};
use super::{BuildError, Dedup, Service};
use crate::kafka::{CLUSTER_ID_VARIABLE, Invocation, KafkaEventResponse, POSITION_ATTRIBUTE};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The Kafka service of `flow` (any flow but a batch-wide transaction, which would not
    /// keep order): records in order per partition, each partition's first record not done
    /// named in a [`KafkaEventResponse`], records that can never apply parked in
    /// `DEDUP_PARKING_QUEUE_URL` (required) before the response passes them (S15).
    ///
    /// Unless the builder was given an identity (`identity_attribute("<header>")` for a record
    /// header, `identity("/pointer")` into the value, `cloudevents(..)`), a record's identity
    /// is its position — cluster, topic, partition and offset ([`crate::kafka`]): it catches
    /// every redelivery of a record, not a producer that writes one event twice. Keyed by
    /// position, it refuses to start without `DEDUP_KAFKA_CLUSTER_ID`
    /// ([`crate::kafka::CLUSTER_ID_VARIABLE`]), the name of a self-managed cluster (an MSK
    /// event is named by its `eventSourceArn`). The envelope id
    /// ([`identity_envelope_id`](Self::identity_envelope_id)) is refused: a Kafka record has
    /// none.
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, Event, flow::transact};
    /// fn f(dedup: Dedup) {
    ///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
    ///     let _ = dedup.kafka(work.one_transaction_per_batch());
    /// }
    /// ```
    pub fn kafka<M, F>(self, flow: F) -> Result<Service<KafkaEvent, KafkaEventResponse>, BuildError>
    where
        F: Flow<S, M>,
        F::Step: Ordered,
    {
        let mut dedup = self;
        dedup.refuse_envelope_id("Kafka")?;
        if !dedup.identity_chosen {
            dedup.identity = IdentitySource::MessageAttribute(POSITION_ATTRIBUTE.to_owned());
        }
        // Keyed by position, a self-managed cluster is named by the id it is given, never by
        // its bootstrap string (issue 42): no start without it.
        let by_position = matches!(&dedup.identity,
            IdentitySource::MessageAttribute(name) if name == POSITION_ATTRIBUTE);
        let cluster_id: Option<Arc<str>> = if by_position {
            Some(dedup.setting(CLUSTER_ID_VARIABLE)?.trim().into())
        } else {
            dedup.env.get(CLUSTER_ID_VARIABLE).map(|v| v.trim().into())
        };
        let at = dedup.payload_at();
        let parking = dedup.parking_queue()?;
        let step = Arc::new(flow.build(On { dedup: &dedup, at })?);
        let runner = Arc::new(dedup.runner());
        Ok(Service::new(move |event: LambdaEvent<KafkaEvent>| {
            let (step, runner, parking) = (step.clone(), runner.clone(), parking.clone());
            let cluster_id = cluster_id.clone();
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
                let answer =
                    crate::kafka::run(at, &event.payload, cluster_id.as_deref(), process).await;
                step.finish(state, &runner).await;
                Ok(answer)
            }
        }))
    }
}
