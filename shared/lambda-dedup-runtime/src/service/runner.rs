//! One invocation's runner (the function's name, where its account goes, the deadline margin,
//! the concurrency) and the service type every source's builder method returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::Message;
use lambda_dedup_engine::{BatchReport, Outcome};
use lambda_runtime::LambdaEvent;

use crate::sqs::Accounting;

/// What one invocation's runner needs: the function's name, where its account goes, the deadline
/// margin and the concurrency.
#[derive(Debug, Clone)]
pub struct Runner {
    pub(super) function: String,
    pub(super) accounting: Accounting,
    pub(super) margin: Duration,
    pub(super) max_concurrency: usize,
}

impl Runner {
    pub(super) async fn sqs<F, Fut>(
        &self,
        event: LambdaEvent<SqsEvent>,
        process: F,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error>
    where
        F: Fn(Message) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let cutoff = crate::bound::cutoff_at(crate::deadline(&event.context), self.margin);
        let (accounting, function) = (&self.accounting, &self.function);
        crate::sqs::per_message(
            accounting,
            function,
            event,
            cutoff,
            self.max_concurrency,
            process,
        )
        .await
    }

    pub(super) async fn sqs_batch<F, Fut>(
        &self,
        event: LambdaEvent<SqsEvent>,
        process: F,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error>
    where
        F: FnOnce(Vec<Message>) -> Fut,
        Fut: Future<Output = BatchReport>,
    {
        let cutoff = crate::bound::cutoff_at(crate::deadline(&event.context), self.margin);
        // The whole batch until the cutoff (batch-transaction mode): abandoned whole after it,
        // what committed meanwhile is a duplicate then.
        crate::sqs::answer_to(&self.accounting, &self.function, event, cutoff, |batch| {
            let ids: Vec<String> = batch.iter().map(|m| m.message_id.clone()).collect();
            async move { crate::bound::report_within(cutoff, &ids, process(batch)).await }
        })
        .await
    }
}

/// The service of an SQS function: SQS events in, partial batch responses out.
pub type SqsService = Service<SqsEvent, SqsBatchResponse>;

type Handler<E, R> = dyn Fn(LambdaEvent<E>) -> Pin<Box<dyn Future<Output = Result<R, lambda_runtime::Error>> + Send>>
    + Send
    + Sync;

/// A function's service: takes the source's event, answers with its response (a partial batch
/// response for SQS and Kinesis). Give it to `lambda_runtime::run`; in tests, call it with
/// `tower::ServiceExt::oneshot` (or [`Service::call_with`]).
pub struct Service<E, R> {
    handler: Arc<Handler<E, R>>,
}

impl<E, R> Clone for Service<E, R> {
    fn clone(&self) -> Self {
        Self {
            handler: self.handler.clone(),
        }
    }
}

impl<E, R> std::fmt::Debug for Service<E, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Service")
    }
}

impl<E: 'static, R: 'static> Service<E, R> {
    pub(super) fn new<F, Fut>(handler: F) -> Self
    where
        F: Fn(LambdaEvent<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, lambda_runtime::Error>> + Send + 'static,
    {
        Self {
            handler: Arc::new(move |event| Box::pin(handler(event))),
        }
    }

    /// One invocation with `payload` and a default context (no deadline): for tests.
    pub async fn call_with(&self, payload: E) -> Result<R, lambda_runtime::Error> {
        (self.handler)(LambdaEvent::new(
            payload,
            lambda_runtime::Context::default(),
        ))
        .await
    }
}

impl<E, R> lambda_runtime::Service<LambdaEvent<E>> for Service<E, R> {
    type Response = R;
    type Error = lambda_runtime::Error;
    type Future = Pin<Box<dyn Future<Output = Result<R, lambda_runtime::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, event: LambdaEvent<E>) -> Self::Future {
        (self.handler)(event)
    }
}
