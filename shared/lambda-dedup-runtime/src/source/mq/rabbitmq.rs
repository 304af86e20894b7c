//! RabbitMQ messages (`aws_lambda_events::event::rabbitmq`) as [`MqMessage`]s: the message id
//! `basicProperties.messageId`, the queue the key of `rmqMessagesByQueue` (`"<queue>::<vhost>"`),
//! the `headers` as attributes — a string as it is, a number as its text, a byte array
//! (`{"bytes": [...]}`, Java's signed bytes or unsigned ones) as its text when UTF-8 and as
//! bytes otherwise (an array holding anything but numbers from -128 to 255 is no byte array:
//! left out, never wrapped into a byte); other values are left out.

use std::collections::BTreeMap;

use aws_lambda_events::event::rabbitmq::RabbitMqEvent;
use lambda_dedup::AttributeValue;

use super::{MqMessage, decoded};

/// One byte of a header's byte array: Java's signed byte (-128 to 127, as the broker's client
/// writes it) or its unsigned value (0 to 255); anything else is no byte.
fn byte(b: i64) -> Option<u8> {
    match i8::try_from(b) {
        Ok(signed) => Some(signed.to_ne_bytes()[0]),
        Err(_) => u8::try_from(b).ok(),
    }
}

/// A header's value as a message attribute, when it has one.
fn header(value: &serde_json::Value) -> Option<AttributeValue> {
    match value {
        serde_json::Value::String(s) => Some(AttributeValue::String(s.clone())),
        serde_json::Value::Number(n) => Some(AttributeValue::String(n.to_string())),
        serde_json::Value::Object(o) => {
            let bytes: Vec<u8> = o
                .get("bytes")?
                .as_array()?
                .iter()
                .map(|b| byte(b.as_i64()?))
                .collect::<Option<_>>()?;
            Some(match String::from_utf8(bytes) {
                Ok(text) => AttributeValue::String(text),
                Err(e) => AttributeValue::Binary(e.into_bytes()),
            })
        }
        _ => None,
    }
}

/// The messages of a RabbitMQ invocation: queues in the order of their names, each queue's
/// messages as delivered.
pub(crate) fn messages(event: &RabbitMqEvent) -> Vec<MqMessage> {
    let broker = event.event_source_arn.clone().unwrap_or_default();
    let queues: BTreeMap<&String, _> = event.messages_by_queue.iter().collect();
    queues
        .into_iter()
        .flat_map(|(queue, list)| list.iter().map(move |m| (queue, m)))
        .enumerate()
        .map(|(index, (queue, m))| {
            let p = &m.basic_properties;
            MqMessage {
                broker: broker.clone(),
                queue: queue.clone(),
                message_id: p.message_id.clone().filter(|id| !id.trim().is_empty()),
                index,
                properties: p
                    .headers
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), header(v)?)))
                    .collect(),
                data: decoded(m.data.as_deref()),
                raw: m.data.clone(),
                delivered: serde_json::to_value(m).unwrap_or_default(),
            }
        })
        .collect()
}
