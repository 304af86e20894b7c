//! Events as Lambda hands them to each door, typed, in AWS's shapes (those of the samples in
//! the repository's `events/` folder and of `aws_lambda_events`): what a function's test hands
//! its service. Each door's builders come with the runtime feature of that door (`kinesis`,
//! `dynamodb-streams`, `kafka`, `mq`, `s3`, `http`, `webhook`); SQS, SNS in SQS and
//! EventBridge are always there. Message ids are `m0`, `m1`, … in order; times are now.
//!
//! The HTTP builders give the request a front sends (`Idempotency-Key`, a caller header, a
//! body); a test hands it to an `HttpService` as the raw event Lambda invokes it with
//! (`serde_json::to_value`), or reads it as a `lambda_http::Request`.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
#[cfg(any(feature = "kinesis", feature = "kafka", feature = "mq"))]
use base64::Engine as _;
use serde_json::{Value, json};

/// The account, Region and time every builder puts in its events.
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

fn now() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

fn rfc3339_now() -> Value {
    lambda_dedup::TimeFormat::Rfc3339.write(now())
}

fn millis_now() -> i64 {
    let since = now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(any(feature = "kinesis", feature = "kafka", feature = "mq"))]
fn base64(data: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// `value` (JSON in AWS's shape, written here) as the event type `E`. Panics if the shape is
/// not `E`'s: a bug of this module, which the tests below rule out.
fn typed<E: serde::de::DeserializeOwned>(value: Value) -> E {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("not the event's shape: {e}"))
}

/// One SQS message `id` with `body`, as in an SQS event's `Records`.
pub fn sqs_record(id: &str, body: &str) -> SqsMessage {
    typed(json!({
        "messageId": id, "receiptHandle": format!("handle-{id}"), "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": millis_now().to_string(),
                       "SenderId": ACCOUNT, "ApproximateFirstReceiveTimestamp": millis_now().to_string()},
        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
        "eventSourceARN": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:queue"), "awsRegion": REGION,
    }))
}

/// An SQS event of one message per body, with message ids `m0`, `m1`, ….
pub fn sqs_event(bodies: &[&str]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| sqs_record(&format!("m{i}"), body))
        .collect();
    event
}

/// SNS notifications delivered to an SQS queue (raw message delivery off, the default): each
/// message body is the notification envelope around one of `messages`, published to `topic`.
pub fn sns_in_sqs(topic: &str, messages: &[&str]) -> SqsEvent {
    let bodies: Vec<String> = messages
        .iter()
        .enumerate()
        .map(|(i, message)| {
            json!({
                "Type": "Notification", "MessageId": format!("n{i}"),
                "TopicArn": format!("arn:aws:sns:{REGION}:{ACCOUNT}:{topic}"),
                "Message": message, "Timestamp": rfc3339_now(), "SignatureVersion": "1",
                "Signature": "", "SigningCertURL": "", "UnsubscribeURL": "",
            })
            .to_string()
        })
        .collect();
    sqs_event(&bodies.iter().map(String::as_str).collect::<Vec<_>>())
}

fn eventbridge_json(id: &str, source: &str, detail_type: &str, detail: &Value) -> Value {
    json!({
        "version": "0", "id": id, "detail-type": detail_type, "source": source,
        "account": ACCOUNT, "time": rfc3339_now(), "region": REGION, "resources": [],
        "detail": detail,
    })
}

/// An EventBridge event from `source` of type `detail_type` with `detail`, invoking the
/// function directly (a rule's target), id `e0`.
pub fn eventbridge_event(
    source: &str,
    detail_type: &str,
    detail: Value,
) -> EventBridgeEvent<Value> {
    typed(eventbridge_json("e0", source, detail_type, &detail))
}

/// EventBridge events from `source` of type `detail_type`, one per `details`, delivered to an
/// SQS queue (a rule's SQS target): each message body is the event, ids `e0`, `e1`, ….
pub fn eventbridge_in_sqs(source: &str, detail_type: &str, details: &[Value]) -> SqsEvent {
    let bodies: Vec<String> = details
        .iter()
        .enumerate()
        .map(|(i, d)| eventbridge_json(&format!("e{i}"), source, detail_type, d).to_string())
        .collect();
    sqs_event(&bodies.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A Kinesis event of stream `stream`, one record per `(partition key, data)`, on shard
/// `shardId-000000000000`, sequence numbers 1, 2, … (21 digits).
#[cfg(feature = "kinesis")]
pub fn kinesis_event(
    stream: &str,
    records: &[(&str, &str)],
) -> aws_lambda_events::event::kinesis::KinesisEvent {
    let records: Vec<Value> = records
        .iter()
        .enumerate()
        .map(|(i, (key, data))| {
            let seq = format!("{:021}", i + 1);
            json!({
                "eventSource": "aws:kinesis", "eventVersion": "1.0",
                "eventID": format!("shardId-000000000000:{seq}"),
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": format!("arn:aws:iam::{ACCOUNT}:role/function"),
                "awsRegion": REGION,
                "eventSourceARN": format!("arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{stream}"),
                "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": key,
                            "sequenceNumber": seq, "data": base64(data),
                            "approximateArrivalTimestamp": millis_now() as f64 / 1000.0},
            })
        })
        .collect();
    typed(json!({ "Records": records }))
}

/// A DynamoDB stream record as Lambda hands it over: `event_name` (`INSERT`, `MODIFY`,
/// `REMOVE`) with `new_image` (DynamoDB JSON), for the tests of what a relay reads of one.
#[cfg(feature = "dynamodb-streams")]
pub fn stream_record(
    event_name: &str,
    new_image: Value,
) -> aws_lambda_events::event::dynamodb::EventRecord {
    typed(json!({
        "awsRegion": REGION, "eventID": "1", "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {"ApproximateCreationDateTime": 1_700_000_000, "Keys": {},
                     "NewImage": new_image, "SequenceNumber": "100", "SizeBytes": 10,
                     "StreamViewType": "NEW_AND_OLD_IMAGES"}
    }))
}

/// A DynamoDB stream `INSERT` record (JSON, as in a stream event's `Records`) with sequence
/// number `seq`, `keys` and `new_image` in DynamoDB JSON: for the tests of a stream service.
pub fn insert_record(seq: u64, keys: Value, new_image: Value) -> Value {
    json!({"eventID": format!("e{seq}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
           "awsRegion": REGION,
           "eventSourceARN": format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/orders/stream/x"),
           "dynamodb": {"ApproximateCreationDateTime": 1_700_000_000, "Keys": keys,
                        "NewImage": new_image, "SequenceNumber": format!("{seq:021}"),
                        "SizeBytes": 40, "StreamViewType": "NEW_IMAGE"}})
}

/// A DynamoDB Streams event of `records` ([`insert_record`]s, or records of your own in the
/// same JSON shape).
#[cfg(feature = "dynamodb-streams")]
pub fn dynamodb_stream_event(records: Vec<Value>) -> aws_lambda_events::event::dynamodb::Event {
    typed(json!({ "Records": records }))
}

/// A Kafka event (Amazon MSK) of `topic`, partition `partition`, one record per value, offsets
/// 0, 1, …, no keys or headers.
#[cfg(feature = "kafka")]
pub fn kafka_event(
    topic: &str,
    partition: i64,
    values: &[&str],
) -> aws_lambda_events::event::kafka::KafkaEvent {
    let records: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(offset, value)| {
            json!({"topic": topic, "partition": partition, "offset": offset,
                   "timestamp": millis_now(), "timestampType": "CREATE_TIME",
                   "value": base64(value), "headers": []})
        })
        .collect();
    typed(json!({
        "eventSource": "aws:kafka",
        "eventSourceArn": format!("arn:aws:kafka:{REGION}:{ACCOUNT}:cluster/cluster/id"),
        "bootstrapServers": "b-1.cluster.kafka.us-east-1.amazonaws.com:9092",
        "records": { format!("{topic}-{partition}"): records },
    }))
}

/// An S3 event of `ObjectCreated:Put` notifications from `bucket`, one per `(key, sequencer)`
/// (the key URL-encoded as S3 sends it).
#[cfg(feature = "s3")]
pub fn s3_event(bucket: &str, objects: &[(&str, &str)]) -> aws_lambda_events::event::s3::S3Event {
    let records: Vec<Value> = objects
        .iter()
        .map(|(key, sequencer)| {
            let encoded =
                percent_encoding::utf8_percent_encode(key, percent_encoding::NON_ALPHANUMERIC)
                    .to_string();
            json!({
                "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": REGION,
                "eventTime": rfc3339_now(), "eventName": "ObjectCreated:Put",
                "userIdentity": {"principalId": "EXAMPLE"},
                "requestParameters": {"sourceIPAddress": "127.0.0.1"},
                "responseElements": {"x-amz-request-id": "0", "x-amz-id-2": "0"},
                "s3": {"s3SchemaVersion": "1.0", "configurationId": "rule",
                       "bucket": {"name": bucket, "ownerIdentity": {"principalId": "EXAMPLE"},
                                  "arn": format!("arn:aws:s3:::{bucket}")},
                       "object": {"key": encoded, "size": 1, "eTag": "0",
                                  "sequencer": sequencer}},
            })
        })
        .collect();
    typed(json!({ "Records": records }))
}

/// An Amazon MQ for ActiveMQ event from queue `queue`, one text message per `(message id,
/// data)`.
#[cfg(feature = "mq")]
pub fn activemq_event(
    queue: &str,
    messages: &[(&str, &str)],
) -> aws_lambda_events::event::activemq::ActiveMqEvent {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(id, data)| {
            json!({"messageID": id, "messageType": "jms/text-message", "timestamp": millis_now(),
                   "deliveryMode": 1, "correlationID": "", "replyTo": "null",
                   "destination": {"physicalName": queue}, "redelivered": false, "type": "",
                   "expiration": 0, "priority": 0, "data": base64(data),
                   "brokerInTime": millis_now(), "brokerOutTime": millis_now(),
                   "properties": {}})
        })
        .collect();
    typed(json!({
        "eventSource": "aws:mq",
        "eventSourceArn": format!("arn:aws:mq:{REGION}:{ACCOUNT}:broker:broker:b-0"),
        "messages": messages,
    }))
}

/// An Amazon MQ for RabbitMQ event from queue `queue` (virtual host `/`), one message per
/// `(message id, data)`.
#[cfg(feature = "mq")]
pub fn rabbitmq_event(
    queue: &str,
    messages: &[(&str, &str)],
) -> aws_lambda_events::event::rabbitmq::RabbitMqEvent {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(id, data)| {
            json!({"basicProperties": {"contentType": "application/json", "headers": {},
                                       "deliveryMode": 2, "priority": 0, "messageId": id,
                                       "bodySize": data.len()},
                   "redelivered": false, "data": base64(data)})
        })
        .collect();
    typed(json!({
        "eventSource": "aws:rmq",
        "eventSourceArn": format!("arn:aws:mq:{REGION}:{ACCOUNT}:broker:broker:b-0"),
        "rmqMessagesByQueue": { format!("{queue}::/"): messages },
    }))
}

/// An HTTP request a test sends through a front: method, path, headers (a name may repeat) and
/// body.
#[cfg(feature = "http")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

#[cfg(feature = "http")]
impl HttpRequest {
    /// A `POST` of `body` to `path`.
    pub fn post(path: &str, body: &str) -> Self {
        Self {
            method: "POST".into(),
            path: path.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(body.into()),
        }
    }

    /// A request of `method` to `path`, no body.
    pub fn new(method: &str, path: &str) -> Self {
        Self {
            method: method.into(),
            path: path.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// With the header `name: value` (another value of a name already there is added, as a
    /// client sending it twice does).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// With `Idempotency-Key: "key"` (a structured-field string, as the draft asks).
    pub fn idempotency_key(self, key: &str) -> Self {
        self.header("idempotency-key", &format!("\"{key}\""))
    }

    /// Each header's values, names in lower case, first seen first.
    fn grouped(&self) -> Vec<(String, Vec<&str>)> {
        let mut grouped: Vec<(String, Vec<&str>)> = Vec::new();
        for (name, value) in &self.headers {
            let name = name.to_ascii_lowercase();
            match grouped.iter_mut().find(|(n, _)| *n == name) {
                Some((_, values)) => values.push(value),
                None => grouped.push((name, vec![value])),
            }
        }
        grouped
    }

    /// Headers as payload 1.0 carries them: `headers` (each name's last value) and
    /// `multiValueHeaders` (all of them).
    fn v1_headers(&self) -> (Value, Value) {
        let grouped = self.grouped();
        let single = grouped.iter().map(|(n, v)| (n.clone(), json!(v.last())));
        let multi = grouped.iter().map(|(n, v)| (n.clone(), json!(v)));
        (
            Value::Object(single.collect()),
            Value::Object(multi.collect()),
        )
    }

    /// Headers as payload 2.0 carries them: each name's values joined by commas.
    fn v2_headers(&self) -> Value {
        let grouped = self.grouped();
        let joined = grouped.into_iter().map(|(n, v)| (n, json!(v.join(","))));
        Value::Object(joined.collect())
    }

    fn v2(&self, request_id: &str, domain: &str, api_id: &str) -> Value {
        json!({
            "version": "2.0", "routeKey": "$default", "rawPath": self.path,
            "rawQueryString": "", "headers": self.v2_headers(),
            "requestContext": {
                "accountId": ACCOUNT, "apiId": api_id, "domainName": domain,
                "domainPrefix": api_id,
                "http": {"method": self.method, "path": self.path, "protocol": "HTTP/1.1",
                         "sourceIp": "192.0.2.1", "userAgent": "test"},
                "requestId": request_id, "routeKey": "$default", "stage": "$default",
                "time": "06/Dec/2026:12:00:00 +0000", "timeEpoch": millis_now(),
            },
            "body": self.body, "isBase64Encoded": false,
        })
    }
}

/// `request` as an API Gateway REST API (payload 1.0) sends it, on the `$default` stage with
/// resource `/{proxy+}`: `headers` holds each header's last value, `multiValueHeaders` all of
/// them; `principal`, when given, is a Lambda authorizer's `principalId`.
#[cfg(feature = "http")]
pub fn apigw_rest(
    request: &HttpRequest,
    principal: Option<&str>,
) -> lambda_http::aws_lambda_events::apigw::ApiGatewayProxyRequest {
    let (headers, multi) = request.v1_headers();
    let authorizer = principal.map_or(json!(null), |p| json!({ "principalId": p }));
    typed(json!({
        "resource": "/{proxy+}", "path": request.path, "httpMethod": request.method,
        "headers": headers, "multiValueHeaders": multi,
        "queryStringParameters": null, "multiValueQueryStringParameters": null,
        "pathParameters": null, "stageVariables": null,
        "requestContext": {
            "accountId": ACCOUNT, "resourceId": "r0", "stage": "$default",
            "requestId": "rest-0", "identity": {"sourceIp": "192.0.2.1", "userAgent": "test"},
            "resourcePath": "/{proxy+}", "httpMethod": request.method, "apiId": "restapi",
            "path": request.path, "protocol": "HTTP/1.1", "requestTimeEpoch": millis_now(),
            "authorizer": authorizer,
        },
        "body": request.body, "isBase64Encoded": false,
    }))
}

/// `request` as an API Gateway HTTP API (payload 2.0) sends it, on its `$default` route and
/// stage: repeated headers joined by commas.
#[cfg(feature = "http")]
pub fn apigw_http(
    request: &HttpRequest,
) -> lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    typed(request.v2(
        "http-0",
        "httpapi.execute-api.us-east-1.amazonaws.com",
        "httpapi",
    ))
}

/// `request` as a Lambda Function URL sends it (payload 2.0, the URL's own domain; no
/// authorizer: `AuthType` NONE).
#[cfg(feature = "http")]
pub fn function_url(
    request: &HttpRequest,
) -> lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    typed(request.v2(
        "url-0",
        "functionurl.lambda-url.us-east-1.on.aws",
        "functionurl",
    ))
}

/// `request` as an Application Load Balancer sends it (multi-value headers off: each header's
/// last value).
#[cfg(feature = "http")]
pub fn alb(request: &HttpRequest) -> lambda_http::aws_lambda_events::alb::AlbTargetGroupRequest {
    let (headers, _) = request.v1_headers();
    typed(json!({
        "requestContext": {"elb": {"targetGroupArn":
            format!("arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:targetgroup/tg/0")}},
        "httpMethod": request.method, "path": request.path, "queryStringParameters": {},
        "headers": headers, "body": request.body.clone().unwrap_or_default(),
        "isBase64Encoded": false,
    }))
}

/// A webhook request as a Standard Webhooks sender sends it now: `webhook-id`,
/// `webhook-timestamp` and `webhook-signature` over `{id}.{timestamp}.{body}` with `secret`
/// (`whsec_…`). (The end-to-end tests sign with the sender's own library; this is for the
/// tests of the wiring.)
#[cfg(feature = "webhook")]
pub fn signed_webhook(secret: &str, id: &str, body: &str) -> lambda_http::Request {
    use lambda_dedup_signature::{Scheme, sign};
    let now = lambda_dedup::clock::epoch_secs(now());
    let signature = sign(Scheme::StandardWebhooks, secret, id, now, body.as_bytes())
        .expect("a whsec_ secret of 16 bytes or more");
    lambda_http::http::Request::builder()
        .method("POST")
        .header("webhook-id", id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(lambda_http::Body::Text(body.to_owned()))
        .expect("a request")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The JSON paths of `value`'s non-null fields (an array by its first element; not into maps
    /// keyed by data: headers, images, details; Kafka's partitions and RabbitMQ's queues as `*`).
    fn paths(value: &Value) -> BTreeSet<String> {
        fn walk(value: &Value, at: &str, out: &mut BTreeSet<String>) {
            match value {
                Value::Object(map) => {
                    let data = [
                        "/headers",
                        "/multiValueHeaders",
                        "/properties",
                        "/messageAttributes",
                        "/stageVariables",
                        "/pathParameters",
                        "/queryStringParameters",
                        "/multiValueQueryStringParameters",
                        "/NewImage",
                        "/Keys",
                        "/OldImage",
                        "/detail",
                    ];
                    if data.iter().any(|k| at.ends_with(k)) {
                        // What the data holds is the test's, not the shape's.
                        return;
                    }
                    // Kafka's records by partition, RabbitMQ's by queue.
                    let by_name = ["/records", "/rmqMessagesByQueue"].contains(&at);
                    for (k, v) in map {
                        let here = format!("{at}/{}", if by_name { "*" } else { k });
                        if !v.is_null() {
                            out.insert(here.clone());
                        }
                        walk(v, &here, out);
                    }
                }
                Value::Array(items) => {
                    if let Some(first) = items.first() {
                        walk(first, &format!("{at}/0"), out);
                    }
                }
                _ => {}
            }
        }
        let mut out = BTreeSet::new();
        walk(value, "", &mut out);
        out
    }

    fn sample(name: &str) -> Value {
        crate::testing::read_json(format!(
            "{}/../../events/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
    }

    /// Every field AWS's sample `name` has (read as the event type `E`, so both sides are
    /// written the same way), the builder's event has too, but those in `left_out`.
    fn same_shape<E: serde::de::DeserializeOwned + serde::Serialize>(
        name: &str,
        built: &E,
        left_out: &[&str],
    ) {
        let sample = serde_json::to_value(typed::<E>(sample(name))).expect("json");
        let built = serde_json::to_value(built).expect("json");
        let (want, have) = (paths(&sample), paths(&built));
        let missing: Vec<&String> = want
            .difference(&have)
            .filter(|p| !left_out.iter().any(|l| p.starts_with(l)))
            .collect();
        assert!(
            missing.is_empty(),
            "{name}: the builder's event lacks {missing:?}"
        );
    }

    /// Each door's builder gives the event in the shape of AWS's sample for it.
    #[test]
    fn every_builder_has_the_shape_of_the_aws_sample() {
        same_shape(
            "example-sqs-event-obj.json",
            &sqs_event(&["{}"]),
            &[
                "/Records/0/md5OfMessageAttributes",
                "/Records/0/messageAttributes/",
            ],
        );
        let sns = sns_in_sqs("topic", &["hello"]);
        let body: Value = serde_json::from_str(sns.records[0].body.as_deref().unwrap_or_default())
            .expect("an SNS envelope");
        let envelope = &sample("example-sns-event.json")["Records"][0]["Sns"];
        let (want, have) = (paths(envelope), paths(&body));
        let missing: Vec<&String> = want
            .difference(&have)
            .filter(|p| *p != "/Subject")
            .collect();
        assert!(missing.is_empty(), "SNS in SQS lacks {missing:?}");
        same_shape(
            "example-eventbridge-event-obj.json",
            &eventbridge_event("aws.ec2", "t", json!({"k": 1})),
            &[],
        );
        let in_sqs = eventbridge_in_sqs("s", "t", &[json!({"k": 1})]);
        let body: EventBridgeEvent<Value> =
            serde_json::from_str(in_sqs.records[0].body.as_deref().unwrap_or_default())
                .expect("an EventBridge event");
        assert_eq!(
            (body.source.as_str(), body.detail["k"].as_i64()),
            ("s", Some(1))
        );
        same_shape(
            "ledger-kinesis.json",
            &kinesis_event("ledger", &[("k", "{}")]),
            &[],
        );
        let image = json!({"order_id": {"S": "o-1"}});
        same_shape(
            "intent-insert.json",
            &dynamodb_stream_event(vec![insert_record(1, image.clone(), image)]),
            &[
                "/Records/0/userIdentity",
                "/Records/0/eventVersion",
                "/Records/0/dynamodb/OldImage",
            ],
        );
        same_shape(
            "example-kafka-event.json",
            &kafka_event("t", 0, &["{}"]),
            &["/records/*/0/key", "/records/*/0/headers"],
        );
        same_shape(
            "example-s3-event.json",
            &s3_event("b", &[("k", "01")]),
            &["/Records/0/s3/object/versionId"],
        );
        same_shape(
            "example-activemq-event.json",
            &activemq_event("q", &[("ID:1", "{}")]),
            &[],
        );
        same_shape(
            "example-rabbitmq-event.json",
            &rabbitmq_event("q", &[("m-1", "{}")]),
            &[
                "/rmqMessagesByQueue/*/0/basicProperties/expiration",
                "/rmqMessagesByQueue/*/0/basicProperties/userId",
                "/rmqMessagesByQueue/*/0/basicProperties/timestamp",
                "/rmqMessagesByQueue/*/0/basicProperties/contentEncoding",
            ],
        );
        let request = HttpRequest::post("/orders", "{}").idempotency_key("k-1");
        same_shape(
            "apigw-rest-request.json",
            &apigw_rest(&request, Some("shop-1")),
            &[
                "/requestContext/identity",
                "/requestContext/domainName",
                "/requestContext/domainPrefix",
                "/requestContext/requestTime",
                "/requestContext/authorizer",
                "/queryStringParameters",
                "/multiValueQueryStringParameters",
                "/pathParameters",
                "/stageVariables",
            ],
        );
        same_shape(
            "apigw-v2-request-no-authorizer.json",
            &apigw_http(&request),
            &[
                "/requestContext/authentication",
                "/cookies",
                "/queryStringParameters",
                "/pathParameters",
                "/stageVariables",
            ],
        );
        same_shape(
            "apigw-v2-request-no-authorizer.json",
            &function_url(&request),
            &[
                "/requestContext/authentication",
                "/cookies",
                "/queryStringParameters",
                "/pathParameters",
                "/stageVariables",
            ],
        );
    }

    /// A header sent twice is in REST's `multiValueHeaders` twice and its last value in
    /// `headers`; HTTP APIs join the values with a comma.
    #[test]
    fn a_repeated_header_is_where_each_front_puts_it() {
        let request = HttpRequest::post("/orders", "{}")
            .idempotency_key("a")
            .idempotency_key("b");
        let rest = serde_json::to_value(apigw_rest(&request, None)).expect("json");
        assert_eq!(
            rest["multiValueHeaders"]["idempotency-key"],
            json!(["\"a\"", "\"b\""])
        );
        assert_eq!(rest["headers"]["idempotency-key"], "\"b\"");
        let http = serde_json::to_value(apigw_http(&request)).expect("json");
        assert_eq!(http["headers"]["idempotency-key"], "\"a\",\"b\"");
        let from_alb = serde_json::to_value(alb(&request)).expect("json");
        assert_eq!(from_alb["headers"]["idempotency-key"], "\"b\"");
        assert!(from_alb["requestContext"]["elb"]["targetGroupArn"].is_string());
    }
}
