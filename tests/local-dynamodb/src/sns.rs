//! A few SNS calls against the SNS emulator (moto, beside the SQS one), over SNS's Query API:
//! enough for the local stack to create the template's topics and their SQS subscriptions, and
//! for tests and the demo to publish. Plain HTTP, as for Kinesis: three calls do not justify
//! another service client. moto delivers a publish to each SQS subscription as SNS does: in
//! SNS's JSON envelope, unless the subscription asks for raw message delivery.

use crate::moto::Emulator;

/// An SNS endpoint (the emulator's).
#[derive(Debug, Clone)]
pub struct Sns(Emulator);

impl Sns {
    /// A client of the emulator at `endpoint`.
    pub fn new(endpoint: &str) -> Self {
        Self(Emulator::new(endpoint, "sns"))
    }

    /// `action` with `params`; the text of the first `<field>` element of the answer.
    async fn call(
        &self,
        action: &str,
        params: &[(&str, &str)],
        field: &str,
    ) -> Result<String, String> {
        let mut form = vec![("Action", action), ("Version", "2010-03-31")];
        form.extend_from_slice(params);
        let body = (form.iter())
            .map(|(k, v)| format!("{k}={}", encoded(v)))
            .collect::<Vec<_>>()
            .join("&");
        let form = "application/x-www-form-urlencoded";
        let text = self.0.post(action, form, None, body).await?;
        let (open, close) = (format!("<{field}>"), format!("</{field}>"));
        let start = text.find(&open).map(|i| i + open.len());
        match (start, text.find(&close)) {
            (Some(s), Some(e)) if s <= e => Ok(text[s..e].to_owned()),
            _ => Err(self
                .0
                .failed(action, format_args!("no {field} in the answer"))),
        }
    }

    /// Creates the topic `name`; returns its ARN.
    pub async fn create_topic(&self, name: &str) -> Result<String, String> {
        self.call("CreateTopic", &[("Name", name)], "TopicArn")
            .await
    }

    /// Subscribes the queue `queue_arn` to `topic_arn`, with raw message delivery or not;
    /// returns the subscription's ARN.
    pub async fn subscribe_queue(
        &self,
        topic_arn: &str,
        queue_arn: &str,
        raw: bool,
    ) -> Result<String, String> {
        let mut params = vec![
            ("TopicArn", topic_arn),
            ("Protocol", "sqs"),
            ("Endpoint", queue_arn),
        ];
        if raw {
            params.extend([
                ("Attributes.entry.1.key", "RawMessageDelivery"),
                ("Attributes.entry.1.value", "true"),
            ]);
        }
        self.call("Subscribe", &params, "SubscriptionArn").await
    }

    /// Publishes `message` to `topic_arn`; returns SNS's `MessageId`.
    pub async fn publish(&self, topic_arn: &str, message: &str) -> Result<String, String> {
        let params = [("TopicArn", topic_arn), ("Message", message)];
        self.call("Publish", &params, "MessageId").await
    }
}

/// `v` percent-encoded for a form: unreserved characters kept, every other byte `%XX`.
fn encoded(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
