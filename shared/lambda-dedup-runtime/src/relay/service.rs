//! A relay's service: the relay as the builder made it ([`Relay`]), on its items, taking both
//! the stream's events (walked in order, [`RelayService::handle`]) and the schedule's (the
//! sweep).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::dynamodb::Event;
use lambda_dedup::ItemStore;
use lambda_runtime::LambdaEvent;

use super::act::Act;
use super::layout::Layout;
use super::tally::{Ending, Handled, Tally};
use crate::in_order;

/// A relay, as [`RelayService::new`] builds it from the function's settings:
/// the function, its table, how its items look, its action, the record budget, the deadline
/// margin and the sweep's age.
#[derive(Debug)]
pub(crate) struct Relay<A> {
    pub(crate) function: String,
    pub(crate) table: String,
    pub(crate) layout: Layout,
    pub(crate) act: A,
    pub(crate) per_record: Duration,
    pub(crate) margin: Duration,
    pub(crate) redrive_after: Duration,
}

impl<A: Act> Relay<A> {
    /// The service, its items in `items` (`DynamoItems` in Lambda, a `MemoryStore` in tests).
    pub(crate) fn service(self, items: Arc<dyn ItemStore>) -> RelayService<A> {
        RelayService {
            relay: Arc::new(Running { relay: self, items }),
        }
    }
}

/// The relay and its items, shared by every clone of its service.
#[derive(Debug)]
pub(super) struct Running<A> {
    pub(super) relay: Relay<A>,
    pub(super) items: Arc<dyn ItemStore>,
}

/// A relay's service: a stream event (with `Records`) is handled in order, any other event
/// (the schedule's) runs the sweep. Cheap to clone. Give it to `lambda_runtime::run_concurrent`.
#[derive(Debug)]
pub struct RelayService<A> {
    pub(super) relay: Arc<Running<A>>,
}

impl<A> Clone for RelayService<A> {
    fn clone(&self) -> Self {
        Self {
            relay: self.relay.clone(),
        }
    }
}

impl<A: Act> RelayService<A> {
    /// The time left before the deadline that a record needs to be started: the relay's record
    /// budget (`{prefix}_RECORD_BUDGET_MS`).
    pub fn per_record(&self) -> Duration {
        self.relay.relay.per_record
    }

    /// The time kept before the invocation's deadline to answer: the function's one
    /// `DEDUP_DEADLINE_MARGIN_MS`. A record still not done then is abandoned and retried.
    pub fn deadline_margin(&self) -> Duration {
        self.relay.relay.margin
    }

    /// How long an item may wait before the sweep re-drives it.
    pub fn redrive_after(&self) -> Duration {
        self.relay.relay.redrive_after
    }

    /// Handles one stream batch in order (see the module's rules) before `deadline` (the
    /// invocation's; `None` for no limit), prints the tally as one EMF line, and answers with
    /// the record the stream must retry from, if any.
    pub async fn handle(&self, event: &Event, deadline: Option<SystemTime>) -> Handled {
        let r = &self.relay;
        let (per_record, margin) = (r.relay.per_record, r.relay.margin);
        let walk = in_order::walk(&event.records, per_record, margin, deadline, |record| {
            r.step(record)
        })
        .await;
        let mut tally = Tally {
            records: event.records.len() as u64,
            transient: walk.transient,
            deferred: walk.deferred,
            ..Tally::default()
        };
        for ending in walk.done {
            match ending {
                Ending::Settled => tally.settled += 1,
                Ending::Parked => tally.parked += 1,
                Ending::AlreadySettled => tally.already_settled += 1,
                Ending::Ignored => tally.ignored += 1,
            }
        }
        // EMF must be a bare JSON line on stdout for CloudWatch to extract it, hence not `tracing`.
        crate::emf::emit(tally.emf_line(&r.relay.function, &r.relay.layout));
        tracing::info!(
            function = %r.relay.function,
            tally = ?tally,
            closes = tally.closes(),
            "stream batch done"
        );
        Handled {
            response: walk.response,
            tally,
        }
    }

    /// One invocation: a stream batch (the payload has `Records`) or the sweep (any other).
    async fn invoke(
        self,
        event: LambdaEvent<serde_json::Value>,
    ) -> Result<serde_json::Value, lambda_runtime::Error> {
        if event.payload.get("Records").is_some() {
            let deadline = crate::bound::deadline(&event.context);
            let stream: Event = serde_json::from_value(event.payload)?;
            let handled = self.handle(&stream, deadline).await;
            Ok(serde_json::to_value(handled.response)?)
        } else {
            Ok(self.sweep(SystemTime::now()).await?.answer())
        }
    }
}

impl<A: Act> lambda_runtime::Service<LambdaEvent<serde_json::Value>> for RelayService<A> {
    type Response = serde_json::Value;
    type Error = lambda_runtime::Error;
    type Future = Pin<Box<dyn Future<Output = Result<serde_json::Value, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, event: LambdaEvent<serde_json::Value>) -> Self::Future {
        // Boxed here, so the deep future of the walk is one pointer to the runtime.
        Box::pin(self.clone().invoke(event))
    }
}
