//! The queues, through the SQS SDK: messages as the functions see them, receiving with a hold,
//! and letting go.

use aws_sdk_sqs::types::MessageSystemAttributeName;
use lambda_dedup::{AttributeValue, Message};

use crate::error::Error;

/// An SQS client configured as the function's (`AWS_ENDPOINT_URL_SQS` for a local stack), with
/// its SDK timeouts.
pub(crate) async fn client(timeouts: &lambda_dedup_config::SdkTimeouts) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&lambda_dedup_aws::sdk_config(timeouts).await)
}

/// A message attribute of type `String`.
pub(crate) fn string_attribute(
    value: impl Into<String>,
) -> Result<aws_sdk_sqs::types::MessageAttributeValue, aws_sdk_sqs::error::BuildError> {
    aws_sdk_sqs::types::MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
}

/// One received SQS message as the function would see it.
pub(crate) fn library_message(m: &aws_sdk_sqs::types::Message) -> Message {
    Message {
        message_id: m.message_id().unwrap_or_default().to_owned(),
        body: m.body().unwrap_or_default().as_bytes().to_vec(),
        attributes: m
            .message_attributes()
            .map(|a| {
                a.iter()
                    .filter_map(|(k, v)| {
                        let value = match (v.string_value(), v.binary_value()) {
                            (Some(s), _) => AttributeValue::String(s.to_owned()),
                            (None, Some(b)) => AttributeValue::Binary(b.as_ref().to_vec()),
                            _ => return None,
                        };
                        Some((k.clone(), value))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        group_id: group_id(m).map(str::to_owned),
    }
}

/// A FIFO message's group.
pub(crate) fn group_id(m: &aws_sdk_sqs::types::Message) -> Option<&str> {
    m.attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .map(String::as_str)
}

/// Up to ten messages of `queue`, each invisible to others for `hold_seconds`.
pub(crate) async fn receive(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    hold_seconds: i32,
) -> Result<Vec<aws_sdk_sqs::types::Message>, Error> {
    let out = sqs
        .receive_message()
        .queue_url(queue)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .visibility_timeout(hold_seconds)
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .map_err(|e| Error::sqs(format_args!("receive from {queue}"), e))?;
    Ok(out.messages.unwrap_or_default())
}

/// Makes a held message visible again at once: it is left as it was.
pub(crate) async fn release(sqs: &aws_sdk_sqs::Client, queue: &str, receipt: &str) {
    // Best effort: a receipt that is no longer valid (its hold ended, it was received again)
    // is already visible or held by a newer receipt.
    let _ = sqs
        .change_message_visibility()
        .queue_url(queue)
        .receipt_handle(receipt)
        .visibility_timeout(0)
        .send()
        .await;
}
