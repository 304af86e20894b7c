//! The dispatcher's permanent faults, each costing only the message that caused it: a message
//! whose key cannot be made, a start Lambda refuses for good, and a start Lambda never answers;
//! and a start the deployment denies, which costs none.
//! The dispatcher is built as `order-dispatcher`'s `main` builds it (`dispatcher` with a
//! `LambdaStarter`), its marks on the local DynamoDB, Lambda played by a local HTTP server that
//! answers `Invoke` as Lambda does (202 and the execution's ARN; `RequestTooLargeException`; a
//! name it has with another payload, `DurableExecutionAlreadyStartedException`) or never.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_sdk_lambda::config::{BehaviorVersion, Credentials, Region};
use example_durable_order::dispatcher;
use lambda_dedup_runtime::durable::LambdaStarter;
use lambda_dedup_runtime::events::SqsEvent;
use lambda_dedup_runtime::store::Items;
use lambda_dedup_runtime::{Dedup, Env, SqsService};
use lambda_dedup_testkit::dynamodb::LocalDynamoDb;
use lambda_dedup_testkit::{Outcome, events, with_outcomes};
use lambda_runtime::LambdaEvent;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The order whose start Lambda refuses for good: its payload over `Invoke`'s bound.
const TOO_LARGE: &str = "o-too-large";
/// The order whose start Lambda never answers while `Lambda::hangs`.
const HUNG: &str = "o-hung";

/// Lambda's durable executions as the local server keeps them, by name: the payload each
/// started with, and every `Invoke` it was sent, by the order it named.
#[derive(Debug, Default)]
struct Lambda {
    executions: Mutex<BTreeMap<String, Vec<u8>>>,
    invokes: Mutex<Vec<String>>,
    hangs: AtomicBool,
    /// Every `Invoke` denied (`AccessDeniedException`): the dispatcher's role misdeployed.
    denies: AtomicBool,
}

impl Lambda {
    fn executions(&self) -> Vec<String> {
        self.executions
            .lock()
            .expect("lock")
            .keys()
            .cloned()
            .collect()
    }

    fn invokes(&self) -> Vec<String> {
        self.invokes.lock().expect("lock").clone()
    }

    /// Lambda's answer to an `Invoke` of the execution `name` with `payload`: `None` for one
    /// it never answers.
    fn answer(&self, name: &str, payload: &[u8]) -> Option<String> {
        let order = serde_json::from_slice::<serde_json::Value>(payload)
            .ok()
            .and_then(|v| v.get("order_id")?.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.invokes.lock().expect("lock").push(order.clone());
        if order == HUNG && self.hangs.load(Ordering::SeqCst) {
            return None;
        }
        if self.denies.load(Ordering::SeqCst) {
            return Some(error("403 Forbidden", "AccessDeniedException"));
        }
        if order == TOO_LARGE {
            return Some(error(
                "413 Request Entity Too Large",
                "RequestTooLargeException",
            ));
        }
        let mut executions = self.executions.lock().expect("lock");
        match executions.get(name) {
            Some(started) if started.as_slice() != payload => Some(error(
                "409 Conflict",
                "DurableExecutionAlreadyStartedException",
            )),
            _ => {
                executions.insert(name.to_owned(), payload.to_vec());
                Some(format!(
                    "HTTP/1.1 202 Accepted\r\nX-Amz-Durable-Execution-Arn: \
                     arn:aws:lambda:eu-west-1:123456789012:function:durable-order:live/\
                     durable-execution/{name}/1\r\ncontent-length: 0\r\n\r\n"
                ))
            }
        }
    }

    /// Serves Lambda's `Invoke` on a local port: its endpoint.
    async fn serve(self: &Arc<Self>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let lambda = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(lambda.clone().connection(stream));
            }
        });
        url
    }

    /// One connection's requests, in turn; a request it never answers holds the connection.
    async fn connection(self: Arc<Self>, mut stream: TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some((head, body)) = request(&mut stream, &mut buf).await else {
                return;
            };
            let name = head
                .lines()
                .find_map(|l| {
                    let (h, v) = l.split_once(':')?;
                    h.eq_ignore_ascii_case("x-amz-durable-execution-name")
                        .then(|| v.trim().to_owned())
                })
                .unwrap_or_default();
            match self.answer(&name, &body) {
                Some(answer) => {
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
    }
}

/// A JSON error as Lambda's REST API answers one.
fn error(status: &str, code: &str) -> String {
    let body = format!(r#"{{"Type":"User","message":"{code}"}}"#);
    format!(
        "HTTP/1.1 {status}\r\nx-amzn-ErrorType: {code}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The next request on `stream`: its head and body (`buf` keeps what was read past it).
async fn request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|l| {
                    let (h, v) = l.split_once(':')?;
                    h.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let mut chunk = [0u8; 4096];
                let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + length].to_vec();
            buf.drain(..end + 4 + length);
            return Some((head, body));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The dispatcher as `main` builds it, on the local DynamoDB's mark table, starting executions
/// of `durable-order:live` at `lambda`. The provider's bound (`PROVIDER_TIMEOUT_MS`) is longer
/// than any test's deadline: what ends a start that never answers is the invocation's deadline.
fn order_dispatcher(dynamodb: &LocalDynamoDb, lambda: &str) -> SqsService {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("PROVIDER_TIMEOUT_MS", "600000"),
        ("DEDUP_LEASE_SECONDS", "900"),
        ("DEDUP_CLOCK_SKEW_MS", "1000"),
    ]);
    let dedup = Dedup::read(&env, "order-dispatcher").expect("settings");
    let items = Items::dynamodb(dynamodb.client(), dedup.settings());
    let conf = aws_sdk_lambda::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(lambda)
        .build();
    let client = aws_sdk_lambda::Client::from_conf(conf);
    let starter = LambdaStarter::new(client, "durable-order:live");
    dispatcher(dedup.on(items), starter).expect("dispatcher")
}

async fn setup() -> (LocalDynamoDb, Arc<Lambda>, SqsService) {
    let dynamodb = LocalDynamoDb::start().expect("local DynamoDB");
    dynamodb.create_mark_table("marks").await.expect("marks");
    let lambda = Arc::new(Lambda::default());
    let url = lambda.serve().await;
    let service = order_dispatcher(&dynamodb, &url);
    (dynamodb, lambda, service)
}

fn order(id: &str) -> String {
    format!(r#"{{"order_id": "{id}", "sku": "sku-7", "quantity": 1, "cents": 100}}"#)
}

fn batch(records: &[(&str, &str)]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records
        .iter()
        .map(|(id, body)| events::sqs_record(id, body))
        .collect();
    event
}

/// One invocation due `due` from now, as Lambda sends its deadline: the batch's failures and
/// each message's outcome. A test bound ends the test rather than let a hang hang it.
async fn invoke(
    service: &SqsService,
    event: SqsEvent,
    due: Duration,
) -> (Vec<String>, BTreeMap<String, Outcome>) {
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + due)
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64;
    let mut service = service.clone();
    let call = lambda_runtime::Service::call(&mut service, LambdaEvent::new(event, context));
    let (answer, outcomes) = tokio::time::timeout(due * 4, with_outcomes(call))
        .await
        .expect("the invocation answered");
    let failures = answer.expect("an answer").batch_item_failures;
    let failures = failures.into_iter().map(|f| f.item_identifier).collect();
    (failures, outcomes.into_iter().collect())
}

fn labels(outcomes: &BTreeMap<String, Outcome>) -> BTreeMap<&str, &'static str> {
    outcomes
        .iter()
        .map(|(id, o)| (id.as_str(), o.label()))
        .collect()
}

const DUE: Duration = Duration::from_secs(30);
/// `DEDUP_CLOCK_SKEW_MS`: how long past its end a lease is recorded as held.
const SKEW: Duration = Duration::from_millis(1000);

/// A message with no key (not JSON; no `order_id`) is rejected alone, before any start: the
/// dead-letter queue gets it through the redrive policy, the others start.
#[tokio::test]
async fn a_message_whose_key_cannot_be_made_costs_only_itself() {
    let (_dynamodb, lambda, service) = setup().await;
    let (o1, o2) = (order("o-1"), order("o-2"));
    let event = batch(&[
        ("m1", &o1),
        ("m2", "not json"),
        ("m3", r#"{"sku": "sku-7", "quantity": 1}"#),
        ("m4", &o2),
    ]);
    let (failures, outcomes) = invoke(&service, event, DUE).await;
    assert_eq!(failures, ["m2", "m3"], "{outcomes:?}");
    assert_eq!(
        labels(&outcomes),
        BTreeMap::from([
            ("m1", "applied"),
            ("m2", "rejected"),
            ("m3", "rejected"),
            ("m4", "applied")
        ])
    );
    let mut invoked = lambda.invokes();
    invoked.sort();
    assert_eq!(invoked, ["o-1", "o-2"], "no start without a key");
    assert_eq!(lambda.executions().len(), 2);
}

/// Lambda refusing a start for good (`RequestTooLargeException`) rejects that message alone:
/// reported failed (to the dead-letter queue after its receives), counted rejected, its claim
/// released; the others of the batch start, and their redelivery starts nothing again.
#[tokio::test]
async fn a_start_lambda_refuses_for_good_costs_only_its_message() {
    let (_dynamodb, lambda, service) = setup().await;
    let (o1, big, o2) = (order("o-1"), order(TOO_LARGE), order("o-2"));
    let records = [("m1", o1.as_str()), ("m2", &big), ("m3", &o2)];
    let (failures, outcomes) = invoke(&service, batch(&records), DUE).await;
    assert_eq!(failures, ["m2"], "{outcomes:?}");
    let m2 = outcomes.get("m2").expect("m2's outcome");
    assert!(matches!(m2, Outcome::Rejected { .. }), "{m2:?}");
    assert_eq!(lambda.executions().len(), 2);
    // The queue redelivers the batch's failure with the rest (a new invocation): the refused
    // start is tried again and refused again, the others are duplicates.
    let (failures, outcomes) = invoke(&service, batch(&records), DUE).await;
    assert_eq!(failures, ["m2"], "{outcomes:?}");
    assert_eq!(
        labels(&outcomes),
        BTreeMap::from([("m1", "duplicate"), ("m2", "rejected"), ("m3", "duplicate")])
    );
    let mut invoked = lambda.invokes();
    invoked.sort();
    assert_eq!(invoked, ["o-1", "o-2", TOO_LARGE, TOO_LARGE]);
}

/// A dispatcher whose role may not invoke the durable function (misdeployed) blames no message:
/// every start is retried, none rejected (a dead-lettered order would be lost to a fault of the
/// deployment's); once the role is mended, the redelivery starts each order once.
#[tokio::test]
async fn a_start_denied_by_the_deployment_rejects_no_message() {
    let (_dynamodb, lambda, service) = setup().await;
    let (o1, o2) = (order("o-1"), order("o-2"));
    let records = [("m1", o1.as_str()), ("m2", &o2)];
    lambda.denies.store(true, Ordering::SeqCst);
    let (failures, outcomes) = invoke(&service, batch(&records), DUE).await;
    assert_eq!(failures, ["m1", "m2"], "{outcomes:?}");
    assert_eq!(
        labels(&outcomes),
        BTreeMap::from([("m1", "retry"), ("m2", "retry")])
    );
    lambda.denies.store(false, Ordering::SeqCst);
    let (failures, outcomes) = invoke(&service, batch(&records), DUE).await;
    assert!(failures.is_empty(), "{outcomes:?}");
    assert_eq!(lambda.executions().len(), 2);
}

/// A start Lambda never answers is ended by the invocation's deadline: only that message is
/// reported for redelivery (abandoned, a retry), the others of the batch start; once its lease
/// (cut to the deadline) is over, its redelivery starts it, under the same name: one execution
/// per order, nothing lost.
#[tokio::test]
async fn a_start_that_never_answers_is_ended_by_the_deadline_and_costs_only_its_message() {
    let (_dynamodb, lambda, service) = setup().await;
    lambda.hangs.store(true, Ordering::SeqCst);
    let (o1, hung, o2) = (order("o-1"), order(HUNG), order("o-2"));
    let records = [("m1", o1.as_str()), ("m2", &hung), ("m3", &o2)];
    let due = Duration::from_secs(4);
    let deadline = tokio::time::Instant::now() + due;
    let (failures, outcomes) = invoke(&service, batch(&records), due).await;
    assert_eq!(failures, ["m2"], "{outcomes:?}");
    match outcomes.get("m2").expect("m2's outcome") {
        Outcome::Retry { reason, .. } => {
            assert!(
                reason.contains("deadline"),
                "ended by the deadline: {reason}"
            );
        }
        other => panic!("m2: {other:?}"),
    }
    assert_eq!(lambda.executions().len(), 2, "the others started");
    // Lambda answers again; the queue redelivers m2 after its visibility timeout, by which
    // time the lease the abandoned start held (to the deadline, recorded with the clock-skew
    // allowance) is over.
    lambda.hangs.store(false, Ordering::SeqCst);
    tokio::time::sleep_until(deadline + SKEW + Duration::from_millis(200)).await;
    let (failures, outcomes) = invoke(&service, batch(&[("m2", &hung)]), DUE).await;
    assert!(failures.is_empty(), "{outcomes:?}");
    assert_eq!(labels(&outcomes), BTreeMap::from([("m2", "applied")]));
    assert_eq!(lambda.executions().len(), 3);
    let mut invoked = lambda.invokes();
    invoked.sort();
    assert_eq!(invoked, ["o-1", "o-2", HUNG, HUNG]);
}
