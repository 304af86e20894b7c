//! One SQS invocation: event in, partial batch response out (S12, S14).

use std::borrow::Cow;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::Message;

use crate::door::sqs::messages;
use crate::door::{AnyOrder, Door, Record, Refused};

/// The SQS door: each message under its `messageId`, opened first when the builder was given
/// an [`Envelope`](crate::service::Envelope); answered with the partial batch response listing exactly
/// the report's failures. Its queue's policy names who may send, so a verified sender on a
/// message counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sqs {
    pub(crate) envelope: Option<crate::service::Envelope>,
}

impl Door for Sqs {
    type Event = SqsEvent;
    type Response = SqsBatchResponse;
    type Ordering = AnyOrder;
    const NAME: &'static str = "SQS";
    const SENDER_VOUCHED: bool = true;

    fn messages(&self, event: &SqsEvent, _: &lambda_runtime::Context) -> Vec<Record> {
        let open = |m: Message| {
            let (id, group) = (m.message_id.clone(), m.group_id.clone());
            crate::source::envelope::opened(self.envelope, m).map_err(|outcome| Refused {
                id,
                group,
                outcome: Box::new(outcome),
            })
        };
        messages(event).into_iter().map(open).collect()
    }

    /// A FIFO batch in an envelope goes message by message, so that a message whose envelope is
    /// refused stops its group as any refusal does (S12).
    fn whole(&self, event: &SqsEvent) -> bool {
        let fifo = (event.records.iter()).any(|r| r.attributes.contains_key("MessageGroupId"));
        !(fifo && self.envelope.is_some())
    }

    fn reconciled<'a>(&self, event: &'a SqsEvent, _: &[Message]) -> Option<Cow<'a, SqsEvent>> {
        Some(Cow::Borrowed(event))
    }
}
