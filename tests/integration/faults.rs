//! Faults the local DynamoDB cannot produce (S13): throttling, `TransactionConflict`, server errors
//! via `aws-smithy-mocks` with DynamoDB's real wire format (so the SDK's own deserializer
//! classifies them), and timeouts / broken connections via real loopback sockets. Every one must
//! come back as a retryable error, never as claimed, applied or duplicate.

use std::net::TcpListener;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_mocks::{MockResponseInterceptor, Rule, RuleMode, create_mock_http_client, mock};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use dedup_tests::{aws_error, cancelled, retention, scope};
use lambda_dedup::{DedupKey, Effect, Item};
use lambda_dedup_dynamodb::{DynamoStore, Error, FaultKind};

fn base_config() -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("a", "b", None, None, "faults"))
        // The SDK retries transient faults itself first; two attempts keep the tests quick.
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(2)
                .with_initial_backoff(Duration::from_millis(1)),
        )
}

fn mocked(rule: &Rule) -> Client {
    let conf = base_config()
        .http_client(create_mock_http_client())
        .interceptor(
            MockResponseInterceptor::new()
                .rule_mode(RuleMode::MatchAny)
                .with_rule(rule),
        )
        .build();
    Client::from_conf(conf)
}

fn error_type(name: &str, status: u16) -> impl Fn() -> HttpResponse + Send + Sync + 'static {
    let body = format!(
        r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{name}","message":"injected {name}"}}"#
    );
    move || aws_error(status, &body)
}

fn store(client: Client) -> DynamoStore {
    DynamoStore::new(client, "marks", retention())
}

fn key() -> DedupKey {
    DedupKey::new(&scope(), "t", &["fault", "evt-1"])
}

fn effect() -> Effect {
    Effect::update("balances", Item::new().with("account", "a"))
        .expression("ADD #b :one")
        .name("#b", "balance")
        .value(":one", 1)
}

/// A claim of `key()` on a store whose every `UpdateItem` is answered with `response`, and how
/// many requests the SDK sent.
async fn claim_answered(
    response: impl Fn() -> HttpResponse + Send + Sync + 'static,
) -> (Result<lambda_dedup::Claim, Error>, usize) {
    let rule = mock!(Client::update_item)
        .sequence()
        .http_response(response)
        .repeatedly()
        .build();
    let result = store(mocked(&rule)).claim(&key(), None, None).await;
    (result, rule.num_calls())
}

/// A commit of `effect()` under `key()` to store `s`.
async fn commit_one(s: &DynamoStore) -> Result<lambda_dedup::Commit, Error> {
    s.commit(lambda_dedup::CommitRequest {
        key: &key(),
        fingerprint: None,
        result: None,
        effects: &[effect()],
    })
    .await
}

/// [`commit_one`] on a store whose every `TransactWriteItems` is answered with `response`.
async fn commit_answered(
    response: impl Fn() -> HttpResponse + Send + Sync + 'static,
) -> Result<lambda_dedup::Commit, Error> {
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .http_response(response)
        .repeatedly()
        .build();
    commit_one(&store(mocked(&rule))).await
}

fn assert_transient(result: Result<impl std::fmt::Debug, Error>, kind: FaultKind) {
    match result {
        Err(e) => {
            assert_eq!(e.fault_kind(), Some(kind), "{e}");
            assert!(e.is_retryable(), "{e} must be retryable");
        }
        Ok(v) => panic!("a fault must never look like an outcome, got {v:?}"),
    }
}

/// S13: throttling on a claim is a retryable error (after the SDK's own retries), not a claim.
#[tokio::test]
async fn s13_throttled_claim_is_retryable() {
    for name in [
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    ] {
        let (result, calls) = claim_answered(error_type(name, 400)).await;
        assert_transient(result, FaultKind::Throttled);
        assert_eq!(calls, 2, "{name}: the SDK retried once first");
    }
}

/// S13: a transaction cancelled for a `TransactionConflict` (another transaction on the same
/// item) is retryable; it is neither applied nor a duplicate.
#[tokio::test]
async fn s13_transaction_conflict_is_retryable() {
    let result = commit_answered(cancelled(&["None", "TransactionConflict"])).await;
    assert_transient(result, FaultKind::TransactionConflict);

    let (result, _) = claim_answered(error_type("TransactionConflictException", 400)).await;
    assert_transient(result, FaultKind::TransactionConflict);
}

/// S13: a transaction cancelled for throttling, and server errors, are retryable.
#[tokio::test]
async fn s13_throttled_transaction_and_server_errors_are_retryable() {
    let result = commit_answered(cancelled(&["ThrottlingError", "None"])).await;
    assert_transient(result, FaultKind::Throttled);

    let result = commit_answered(error_type("InternalServerError", 500)).await;
    assert_transient(result, FaultKind::ServerError);
}

/// A refused request (validation, missing table) is an error that retrying will not fix; it is
/// still never an outcome.
#[tokio::test]
async fn refused_requests_are_errors_but_not_retryable() {
    let (result, _) = claim_answered(error_type("ResourceNotFoundException", 400)).await;
    let err = result.expect_err("refused");
    assert_eq!(err.fault_kind(), Some(FaultKind::Refused));
    assert!(!err.is_retryable());
}

/// S13: no answer in time is a retryable timeout. A real socket that accepts and never answers.
#[tokio::test]
async fn s13_a_store_that_never_answers_times_out_retryably() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    let hold = std::thread::spawn(move || {
        // Accept and hold the connections open without a byte of answer.
        let mut held = Vec::new();
        for _ in 0..2 {
            if let Ok((s, _)) = listener.accept() {
                held.push(s);
            }
        }
        std::thread::sleep(Duration::from_secs(3));
    });
    let client = Client::from_conf(
        base_config()
            .endpoint_url(endpoint)
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_millis(300))
                    .build(),
            )
            .build(),
    );
    let s = store(client);
    assert_transient(s.claim(&key(), None, None).await, FaultKind::Timeout);
    drop(hold);
}

/// S13: a store that is gone (connection refused) is a retryable network fault.
#[tokio::test]
async fn s13_an_unreachable_store_is_a_retryable_network_fault() {
    // Bind then drop: nothing listens on this port any more.
    let port = dedup_tests::free_port();
    let client = Client::from_conf(
        base_config()
            .endpoint_url(format!("http://127.0.0.1:{port}"))
            .build(),
    );
    let s = store(client);
    assert_transient(commit_one(&s).await, FaultKind::Network);
    assert_transient(s.claim(&key(), None, None).await, FaultKind::Network);
}
