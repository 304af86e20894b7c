//! ActiveMQ messages (`aws_lambda_events::event::activemq`) as [`MqMessage`]s: the message id
//! `messageID`, the queue `destination.physicalName`, the `properties` as attributes.

use aws_lambda_events::event::activemq::ActiveMqEvent;
use lambda_dedup::AttributeValue;

use super::{MqMessage, decoded};

/// The messages of an ActiveMQ invocation, in the batch's order.
pub(crate) fn messages(event: &ActiveMqEvent) -> Vec<MqMessage> {
    let broker = event.event_source_arn.clone().unwrap_or_default();
    event
        .messages
        .iter()
        .enumerate()
        .map(|(index, m)| MqMessage {
            broker: broker.clone(),
            queue: m.destination.physical_name.clone().unwrap_or_default(),
            message_id: m.message_id.clone().filter(|id| !id.trim().is_empty()),
            index,
            properties: m
                .properties
                .iter()
                .map(|(k, v)| (k.clone(), AttributeValue::String(v.clone())))
                .collect(),
            data: decoded(m.data.as_deref()),
            raw: m.data.clone(),
            delivered: serde_json::to_value(m).unwrap_or_default(),
        })
        .collect()
}
