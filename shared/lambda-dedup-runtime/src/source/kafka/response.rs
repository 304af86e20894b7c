//! The partial batch response of a Kafka invocation (Amazon MSK, self-managed Apache Kafka),
//! which `aws_lambda_events` 1.2 does not have.
//!
//! Its shape is the one AWS documents for Kafka event source mappings with
//! `ReportBatchItemFailures` (the Lambda developer guide's "Configuring error handling controls
//! for Kafka event sources", `kafka-retry-configurations`; the same shape Powertools for AWS
//! Lambda returns for `EventType.Kafka`, and the one proposed to `aws_lambda_events` in
//! aws-lambda-rust-runtime pull request 1164): unlike SQS and the streams, the item identifier
//! is not a string but an object naming the topic-partition (the key of the event's `records`
//! map, `"<topic>-<partition>"`) and the offset to resume from:
//!
//! ```json
//! {"batchItemFailures": [{"itemIdentifier": {"partition": "orders-0", "offset": 42}}]}
//! ```
//!
//! Lambda resumes each partition named from its offset; a partition not named is done up to
//! the batch's last record.

use serde::{Deserialize, Serialize};

/// The response of a Kafka invocation: the failures, at most one per partition (its first
/// record not done).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaEventResponse {
    /// One failure per partition that resumes from an offset.
    pub batch_item_failures: Vec<KafkaBatchItemFailure>,
}

/// One partition's resume point.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaBatchItemFailure {
    /// The record Lambda resumes the partition from.
    pub item_identifier: KafkaItemIdentifier,
}

/// A record of a Kafka batch as its partial batch response names it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaItemIdentifier {
    /// The topic-partition: the key of the event's `records` map (`"<topic>-<partition>"`).
    pub partition: String,
    /// The record's offset in that partition.
    pub offset: i64,
}

impl KafkaEventResponse {
    /// Names `partition`'s resume point, `offset`.
    pub(crate) fn add_failure(&mut self, partition: impl Into<String>, offset: i64) {
        self.batch_item_failures.push(KafkaBatchItemFailure {
            item_identifier: KafkaItemIdentifier {
                partition: partition.into(),
                offset,
            },
        });
    }

    /// The identifiers named, in order.
    #[cfg(test)]
    pub(crate) fn identifiers(&self) -> Vec<&KafkaItemIdentifier> {
        self.batch_item_failures
            .iter()
            .map(|f| &f.item_identifier)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The response serialises to the documented shape: an object identifier with the
    /// topic-partition as a string and the offset as a number, not a string identifier.
    #[test]
    fn kafka_response_has_the_documented_object_identifier() {
        let mut response = KafkaEventResponse::default();
        response.add_failure("AWSKafkaTopic-0", 15);
        response.add_failure("AWSKafkaTopic-3", 7);
        assert_eq!(
            serde_json::to_value(&response).expect("json"),
            json!({"batchItemFailures": [
                {"itemIdentifier": {"partition": "AWSKafkaTopic-0", "offset": 15}},
                {"itemIdentifier": {"partition": "AWSKafkaTopic-3", "offset": 7}},
            ]})
        );
        // An empty response is a complete success, as Lambda reads it.
        assert_eq!(
            serde_json::to_value(KafkaEventResponse::default()).expect("json"),
            json!({"batchItemFailures": []})
        );
    }

    /// What Powertools for AWS Lambda (Python, TypeScript) returns for a Kafka batch reads as
    /// this type: the identifier written by someone else's code, not by this encoder.
    #[test]
    fn kafka_response_reads_what_powertools_returns() {
        let theirs =
            r#"{"batchItemFailures":[{"itemIdentifier":{"partition":"mytopic-0","offset":15}}]}"#;
        let response: KafkaEventResponse = serde_json::from_str(theirs).expect("reads");
        assert_eq!(
            response.identifiers(),
            vec![&KafkaItemIdentifier {
                partition: "mytopic-0".into(),
                offset: 15
            }]
        );
    }
}
