//! Crash during complete on DynamoDB: an SDK interceptor on a second client of the same
//! local DynamoDB table fails the store's complete (never sent, or written and its answer lost).

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CompleteFault {
    /// The `UpdateItem` never leaves the process.
    NeverSent,
    /// DynamoDB applies the `UpdateItem`; its answer is dropped.
    AnswerLost,
}

#[derive(Debug, Default)]
pub(super) struct CompleteFaults {
    pub(super) mode: Mutex<Option<CompleteFault>>,
    /// Marks (partition keys) whose complete (or write-back) never reached DynamoDB.
    pub(super) unsent: Mutex<Vec<String>>,
    /// Marks whose complete DynamoDB wrote, with the answer lost on the way back.
    pub(super) lost: Mutex<Vec<String>>,
}

#[derive(Debug, Clone)]
pub(super) struct CompleteInterceptor(pub(super) Arc<CompleteFaults>);

/// The partition key of a complete in flight, from before to after transmission.
#[derive(Debug, Clone)]
pub(super) struct SentComplete(String);

impl Storable for SentComplete {
    type Storer = StoreReplace<Self>;
}

impl Intercept for CompleteInterceptor {
    fn name(&self) -> &'static str {
        "model-leased-complete-faults"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        // The store's `UpdateItem`s: `complete` (it sets `:done`); claims and releases are
        // `UpdateItem`s too, and are let through.
        if request.headers().get("x-amz-target") != Some("DynamoDB_20120810.UpdateItem") {
            return Ok(());
        }
        let body = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .unwrap_or_default();
        let pk = body["Key"]["pk"]["S"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let values = &body["ExpressionAttributeValues"];
        let complete = values.get(":done").is_some();
        let mode = *lock(&self.0.mode);
        match mode {
            None => Ok(()),
            Some(_) if !complete => Ok(()),
            Some(CompleteFault::NeverSent) => {
                lock(&self.0.unsent).push(pk);
                Err("injected: the process died before its complete reached DynamoDB".into())
            }
            Some(CompleteFault::AnswerLost) => {
                cfg.interceptor_state().store_put(SentComplete(pk));
                Ok(())
            }
        }
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(SentComplete(pk)) = cfg.load::<SentComplete>() else {
            return Ok(());
        };
        if context.response().status().is_success() {
            lock(&self.0.lost).push(pk.clone());
        }
        Err("injected: the complete's answer was lost".into())
    }
}
