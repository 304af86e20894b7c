//! An SQS queue a function sends to on the side — late events to reconciliation
//! ([`crate::reconcile`]), stream records that can never apply to a parking queue
//! (`parking::Parking`), the inbox's items to the queue the forwarder feeds (`inbox`) — with
//! its SQS client built on the first send, with the function's SDK timeouts: most invocations
//! never send there, so cold starts do not pay for an SQS client.
//!
//! Without the feature `sqs-client` there is no client: such a build refuses to start with a
//! reconciliation queue ([`SideQueues`](lambda_dedup_config::SideQueues)), and has no stream source,
//! parking or forwarder, so no queue is ever built there.
#![cfg_attr(not(feature = "sqs-client"), allow(dead_code))]

#[cfg(feature = "sqs-client")]
use aws_sdk_sqs::types::MessageAttributeValue;
#[cfg(feature = "sqs-client")]
use tokio::sync::OnceCell;

use lambda_dedup_config::SdkTimeouts;

/// A queue, by URL, and the client that sends to it (built once, on the first send).
#[derive(Debug)]
pub struct Queue {
    url: String,
    timeouts: SdkTimeouts,
    #[cfg(feature = "sqs-client")]
    client: OnceCell<aws_sdk_sqs::Client>,
}

/// Why a send failed: SQS's answer, or none (unreachable, timed out). The message was not
/// sent; the caller keeps it (reports it failed) so nothing is lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not send to the queue: {0}")]
pub(crate) struct SendError(String);

impl Queue {
    /// The queue at `url`; its client comes from the environment with `timeouts` (the
    /// function's `DEDUP_SDK_*_TIMEOUT_MS`) on the first send.
    pub(crate) fn new(url: impl Into<String>, timeouts: SdkTimeouts) -> Self {
        Self {
            url: url.into(),
            timeouts,
            #[cfg(feature = "sqs-client")]
            client: OnceCell::new(),
        }
    }

    /// The queue at `url`, sent to with `client` (tests point it at a loopback endpoint).
    #[cfg(feature = "sqs-client")]
    pub fn with_client(url: impl Into<String>, client: aws_sdk_sqs::Client) -> Self {
        Self {
            url: url.into(),
            timeouts: SdkTimeouts::DEFAULT,
            client: OnceCell::new_with(Some(client)),
        }
    }

    /// The queue's URL (the forwarder names it in its log).
    #[cfg(feature = "inbox")]
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The client, built on the first call with the queue's SDK timeouts: a hung queue cannot
    /// hold the answer back.
    #[cfg(feature = "sqs-client")]
    pub(crate) async fn client(&self) -> &aws_sdk_sqs::Client {
        self.client
            .get_or_init(|| async {
                aws_sdk_sqs::Client::new(&crate::aws::sdk_config(&self.timeouts).await)
            })
            .await
    }

    /// Sends `body` with string `attributes` (at most SQS's 10); `Ok` only once SQS has taken it.
    #[cfg(feature = "sqs-client")]
    pub(crate) async fn send(
        &self,
        body: String,
        attributes: &[(String, String)],
    ) -> Result<(), SendError> {
        let mut send = self
            .client()
            .await
            .send_message()
            .queue_url(&self.url)
            .message_body(body);
        for (name, value) in attributes {
            send = send.message_attributes(
                name,
                string_attribute(value).map_err(|e| SendError(e.to_string()))?,
            );
        }
        send.send()
            .await
            .map(|_| ())
            .map_err(|e| SendError(aws_sdk_sqs::error::DisplayErrorContext(&e).to_string()))
    }

    /// Without an SQS client nothing is sent: the message stays failed, for redelivery.
    #[cfg(not(feature = "sqs-client"))]
    pub(crate) async fn send(&self, _: String, _: &[(String, String)]) -> Result<(), SendError> {
        Err(SendError(
            "this build has no SQS client (lambda-dedup-runtime's feature sqs-client)".into(),
        ))
    }
}

/// `value` as an SQS message attribute of type `String`, or why SQS's builder refused it: how
/// every sender here (and the operators' tool) attaches its attributes.
#[cfg(feature = "sqs-client")]
pub(crate) fn string_attribute(
    value: impl Into<String>,
) -> Result<MessageAttributeValue, aws_sdk_sqs::error::BuildError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
}

/// An SQS client of SQS at loopback `port`, with no retries: each send answered, or failed, once.
#[cfg(test)]
fn loopback_client(port: u16) -> aws_sdk_sqs::Client {
    let conf = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "t", "t", None, None, "test",
        ))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_sqs::Client::from_conf(conf)
}

/// An SQS client whose endpoint refuses connections (a real loopback port nobody listens on),
/// with no retries, so every send fails at once: a queue that is down, for tests.
#[cfg(test)]
pub(crate) fn unreachable_client() -> (aws_sdk_sqs::Client, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    (loopback_client(port), port)
}

/// What an SQS on loopback ([`sqs_on_loopback`]) took: each message's body and attributes.
#[cfg(test)]
pub(crate) type Taken = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<(String, String)>)>>>;

/// An SQS client talking to an SQS of the tests' own on loopback, which, as SQS does, refuses a
/// message whose body and attributes (names, data types and values) exceed `max_bytes`, and
/// keeps the others: the client, the queue's URL, and what it took.
#[cfg(test)]
pub(crate) fn sqs_on_loopback(max_bytes: usize) -> (aws_sdk_sqs::Client, String, Taken) {
    use std::io::{BufRead, BufReader, Read, Write};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let taken = Taken::default();
    let kept = taken.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = BufReader::new(stream);
                // One request after another on a kept-alive connection, until it closes.
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let request: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    let message = request["MessageBody"].as_str().unwrap_or_default();
                    let attributes: Vec<(String, String)> = request["MessageAttributes"]
                        .as_object()
                        .map(|a| {
                            a.iter()
                                .map(|(n, v)| {
                                    (n.clone(), v["StringValue"].as_str().unwrap_or("").into())
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let size = message.len()
                        + attributes
                            .iter()
                            .map(|(n, v)| n.len() + "String".len() + v.len())
                            .sum::<usize>();
                    let (status, answer) = if size > max_bytes {
                        let why = format!(
                            "One or more parameters are invalid. Reason: Message must be \
                             shorter than {max_bytes} bytes."
                        );
                        let answer = serde_json::json!({
                            "__type": "com.amazonaws.sqs#InvalidParameterValue", "message": why});
                        ("400 Bad Request", answer)
                    } else {
                        let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                        kept.push((message.to_owned(), attributes));
                        let id = format!("m-{}", kept.len());
                        ("200 OK", serde_json::json!({"MessageId": id}))
                    };
                    let answer = answer.to_string();
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/x-amz-json-1.0\r\n\
                         content-length: {}\r\n\r\n",
                        answer.len()
                    );
                    if writer
                        .write_all(head.as_bytes())
                        .and_then(|()| writer.write_all(answer.as_bytes()))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    let url = format!("http://127.0.0.1:{port}/000000000000/parking");
    (loopback_client(port), url, taken)
}
