//! Shared set-up for the integration tests: a client for the local DynamoDB (the one
//! `cargo xtask test` started, or one of this test binary's own), and fresh tables per test so
//! tests run in parallel.
//!
//! The tests read and write effect items with the SDK directly: state is checked through a path
//! independent of the library under test.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

/// The SDK client the tests read and write with.
pub use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_dedup::{Derived, Effect, Item, ItemStore, KeySpec, Message, Retention, Scope};
use lambda_dedup_engine::{HandlerError, Plan};

/// The endpoint of the DynamoDB the tests run against: `DEDUP_DYNAMODB_ENDPOINT` when set (by
/// `cargo xtask test`, whose stack the end-to-end tests share), else a local DynamoDB (Dynoxide)
/// started in this test binary on first use. So plain `cargo test` needs nothing set up.
pub fn endpoint() -> String {
    std::env::var("DEDUP_DYNAMODB_ENDPOINT").unwrap_or_else(|_| local_dynamodb::shared().endpoint())
}

/// A client for the DynamoDB at [`endpoint`].
pub fn client() -> Client {
    client_at(&endpoint())
}

/// A client for the DynamoDB at `endpoint` (a metering proxy in front of [`endpoint`]).
pub fn client_at(endpoint: &str) -> Client {
    lambda_dedup_testkit::local_client!(aws_sdk_dynamodb, endpoint)
}

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A DynamoDB error response as the service sends it (awsJson1_0), for `aws-smithy-mocks`.
pub fn aws_error(
    status: u16,
    body: &str,
) -> aws_smithy_runtime_api::client::orchestrator::HttpResponse {
    let mut resp = aws_smithy_runtime_api::client::orchestrator::HttpResponse::new(
        aws_smithy_runtime_api::http::StatusCode::try_from(status).expect("status"),
        aws_smithy_types::body::SdkBody::from(body.to_owned()),
    );
    resp.headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    resp
}

/// A `TransactWriteItems` answer cancelled with these reasons (one per item), in DynamoDB's
/// wire format.
pub fn cancelled(
    codes: &[&str],
) -> impl Fn() -> aws_smithy_runtime_api::client::orchestrator::HttpResponse + Send + Sync + 'static
{
    let reasons: Vec<String> = codes
        .iter()
        .map(|c| format!(r#"{{"Code":"{c}","Message":"injected"}}"#))
        .collect();
    let body = format!(
        r#"{{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled","CancellationReasons":[{}]}}"#,
        reasons.join(",")
    );
    move || aws_error(400, &body)
}

/// A loopback port nothing listens on (free when asked; a server of the test's own may take it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A fresh mark table (TTL on `expires_at`).
pub async fn mark_table(client: &Client) -> String {
    let name = unique("marks");
    lambda_dedup_dynamodb::provision::create_mark_table(client, &name, false)
        .await
        .expect("create mark table");
    name
}

/// The DynamoDB store on a fresh mark table ([`mark_table`]), with an hour's [`retention`].
pub async fn fresh_store(client: &Client) -> lambda_dedup_dynamodb::DynamoStore {
    lambda_dedup_dynamodb::DynamoStore::new(client.clone(), mark_table(client).await, retention())
}

/// A deduplicator of consumer `consumer` ([`cloudevents_spec`]) on a [`fresh_store`].
pub async fn fresh_dedup(client: &Client, consumer: &str) -> lambda_dedup_engine::Deduplicator {
    lambda_dedup_engine::Deduplicator::new(cloudevents_spec(consumer), fresh_store(client).await)
}

/// A fresh effect table keyed by the string attribute `key_attr`.
pub async fn effect_table(client: &Client, key_attr: &str) -> String {
    let name = unique("effects");
    lambda_dedup_dynamodb::provision::create_table(client, &name, key_attr, false)
        .await
        .expect("create effect table");
    name
}

/// The partition keys of every mark in the mark table `table`.
pub async fn mark_keys(client: &Client, table: &str) -> Vec<String> {
    let items = lambda_dedup_testkit::dynamodb::items::scan(client, table).await;
    let items = items.expect("scan");
    items
        .iter()
        .filter_map(|i| i.get("pk")?.as_s().ok().cloned())
        .collect()
}

/// Deletes the mark `pk` of the mark table `table`, behind the library's back.
pub async fn delete_mark(client: &Client, table: &str, pk: &str) {
    client
        .delete_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.into()))
        .send()
        .await
        .expect("delete");
}

/// Reads an item by its string key, strongly consistent.
pub async fn get_item(
    client: &Client,
    table: &str,
    key_attr: &str,
    key: &str,
) -> Option<HashMap<String, AttributeValue>> {
    lambda_dedup_testkit::dynamodb::items::get(client, table, key_attr, key)
        .await
        .expect("get_item")
}

/// A numeric attribute of an item, or `None` if the item or attribute is absent.
pub async fn get_number(
    client: &Client,
    table: &str,
    key_attr: &str,
    key: &str,
    attr: &str,
) -> Option<i64> {
    let item = get_item(client, table, key_attr, key).await?;
    let n = item.get(attr)?.as_n().ok()?;
    Some(n.parse().expect("number"))
}

/// The balance of `account` in the effect table `balances` (keyed by `account`).
pub async fn balance(client: &Client, balances: &str, account: &str) -> Option<i64> {
    get_number(client, balances, "account", account, "balance").await
}

/// A CloudEvents credit of `amount` to `account` (source `/bank`, tenant `acme`).
pub fn credit(message_id: &str, id: &str, account: &str, amount: i64) -> Message {
    Message {
        message_id: message_id.into(),
        body:
            serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank", "id": id,
                     "tenantid": "acme", "data": {"account": account, "amount": amount}})
            .to_string()
            .into_bytes(),
        ..Message::default()
    }
}

/// `data.account` and `data.amount` of a credit event, or why the payload is invalid.
pub fn credit_data(event: &Derived) -> Result<(&str, i64), HandlerError> {
    let data = HandlerError::data(event)?;
    let account = data["account"]
        .as_str()
        .ok_or_else(|| HandlerError::invalid("data.account must be a string"))?;
    let amount = data["amount"]
        .as_i64()
        .ok_or_else(|| HandlerError::invalid("data.amount must be an integer"))?;
    Ok((account, amount))
}

/// The effect of a credit: `ADD amount` to the balance of `account` in `balances`.
pub fn credit_effect(balances: &str, account: &str, amount: i64) -> Effect {
    Effect::update(balances, Item::new().with("account", account))
        .expression("ADD #b :a")
        .name("#b", "balance")
        .value(":a", amount)
}

/// The plan of a credit event: its one balance update, in `balances`.
pub fn credit_plan(balances: &str) -> impl Fn(&Derived) -> Result<Plan, HandlerError> + '_ {
    move |event| {
        let (account, amount) = credit_data(event)?;
        Ok(Plan {
            effects: vec![credit_effect(balances, account, amount)],
            result: None,
        })
    }
}

/// A batch of `n` [`credit`]s: message `m{i}`, event `{run}-{i}`, to `account(i)` by
/// `amount(i)`.
pub fn credits(
    run: &str,
    n: i64,
    account: impl Fn(i64) -> String,
    amount: impl Fn(i64) -> i64,
) -> Vec<Message> {
    (0..n)
        .map(|i| {
            credit(
                &format!("m{i}"),
                &format!("{run}-{i}"),
                &account(i),
                amount(i),
            )
        })
        .collect()
}

/// [`credit_plan`], except that an amount of 0 is a debit that requires funds no account has
/// (its condition fails): an event whose effect DynamoDB refuses.
pub fn credit_or_refused_plan(
    balances: &str,
) -> impl Fn(&Derived) -> Result<Plan, HandlerError> + '_ {
    move |e| {
        let (account, amount) = credit_data(e)?;
        let effect = if amount == 0 {
            credit_effect(balances, account, -1_000_000)
                .condition("#b >= :need")
                .value(":need", 1_000_000)
        } else {
            credit_effect(balances, account, amount)
        };
        Ok(Plan {
            effects: vec![effect],
            result: None,
        })
    }
}

/// S5, S12, S15 on any store, as a function runs the transactional batch flow: one batch of
/// credits of 5 to `a1`, 1 to `poisoned` (an account whose balance the caller made text, so that
/// the store refuses its effect) and 2 to `a2`. The goods apply, the poisoned one is rejected
/// alone, and a second delivery of the whole batch is duplicates. The balances are the
/// caller's to read back.
pub async fn poisoned_batch_judged_alone<E: Send + Sync + 'static, P>(
    dedup: &lambda_dedup_engine::Deduplicator<E>,
    plan: P,
) where
    P: Fn(&Derived) -> Result<Plan<E>, HandlerError> + Copy,
{
    use lambda_dedup_engine::{Outcome, Reason};
    let run = unique("run");
    let batch = vec![
        credit("m1", &format!("{run}-1"), "a1", 5),
        credit("m2", &format!("{run}-2"), "poisoned", 1),
        credit("m3", &format!("{run}-3"), "a2", 2),
    ];
    let outcomes = dedup.transactional_batch(&batch, 4, plan).await;
    assert!(matches!(outcomes[0], Outcome::Applied), "{outcomes:?}");
    assert!(
        matches!(
            outcomes[1],
            Outcome::Rejected {
                code: Reason::EffectRefused,
                ..
            }
        ),
        "{outcomes:?}"
    );
    assert!(matches!(outcomes[2], Outcome::Applied), "{outcomes:?}");
    let again = dedup.transactional_batch(&batch, 4, plan).await;
    assert!(matches!(again[0], Outcome::Duplicate { .. }), "{again:?}");
    assert!(matches!(again[2], Outcome::Duplicate { .. }), "{again:?}");
}

/// `store`'s commit of `effects` under `key` with no stored result, as the flows send it;
/// panics with `what` when the store fails.
pub async fn commit_with(
    store: &dyn lambda_dedup::MarkStore,
    key: &lambda_dedup::DedupKey,
    fingerprint: Option<&lambda_dedup::Fingerprint>,
    effects: &[Effect],
    what: &str,
) -> lambda_dedup::Commit {
    store
        .commit(lambda_dedup::CommitRequest {
            key,
            fingerprint,
            result: None,
            effects,
        })
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// How many generated schedules a model-based test runs: `DEDUP_MODEL_CASES` (set by
/// `cargo xtask soak`), else `default` (what `cargo xtask test` runs).
pub fn model_cases(default: u32) -> u32 {
    std::env::var("DEDUP_MODEL_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

/// The proptest configuration of a model-based test: [`model_cases`] schedules.
pub fn model_config(default: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: model_cases(default),
        ..proptest::test_runner::Config::default()
    }
}

/// Runs `future` to completion on a fresh two-worker runtime (for proptest bodies).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// The scope used by the tests.
pub fn scope() -> Scope {
    Scope::new("test", "integration").expect("scope")
}

/// One hour of retention, no horizon (tests state their own where they need one).
pub fn retention() -> Retention {
    Retention::unchecked(Duration::from_secs(3600)).expect("retention")
}

/// The key spec the functions use, for consumer `consumer` of namespace `test`: structured
/// CloudEvents, tenant from the `tenantid` extension, fingerprint of `data`.
pub fn cloudevents_spec(consumer: &str) -> KeySpec {
    KeySpec::cloudevents(Scope::new("test", consumer).expect("scope"), "tenantid")
}

/// A client for a port nothing listens on, with no SDK retries: a store that is down (S13).
pub fn unreachable_client() -> Client {
    let port = free_port();
    Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("a", "b", None, None, "unreachable"))
            .endpoint_url(format!("http://127.0.0.1:{port}"))
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
            .build(),
    )
}

/// Which mark store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `DynamoStore` on the local DynamoDB.
    DynamoDb,
    /// `MemoryStore`.
    Memory,
}

impl StoreKind {
    /// `DEDUP_STORE=memory` or `dynamodb` (the default): the store the model schedules run on.
    pub fn from_env() -> Self {
        match std::env::var("DEDUP_STORE").as_deref() {
            Ok("memory") => StoreKind::Memory,
            _ => StoreKind::DynamoDb,
        }
    }
}

/// A mark store and its effect tables on either backend, on one manual clock: what the
/// conformance suite and the model schedules need from a store, and nothing that tells the two
/// apart. Effect items are read back through the backend's own access path (the SDK, or the
/// memory store's tables), not through the `MarkStore` under test.
#[derive(Debug)]
pub struct Stores {
    /// The clock every store built here reads.
    pub clock: std::sync::Arc<lambda_dedup::ManualClock>,
    retention: Retention,
    backend: Backend,
}

/// Where the marks and effect tables are.
#[derive(Debug)]
enum Backend {
    /// The local DynamoDB, with this mark table.
    DynamoDb { client: Client, marks: String },
    /// One memory store: its marks and its effect tables.
    Memory(lambda_dedup_memory::MemoryStore),
}

impl Stores {
    /// A fresh mark table on `kind`, keeping marks for `retention`.
    pub async fn new(kind: StoreKind, retention: Retention) -> Self {
        let clock = std::sync::Arc::new(lambda_dedup::ManualClock::new(SystemTime::now()));
        Self::on_clock(kind, retention, clock).await
    }

    /// [`new`](Self::new), every store built here reading `clock`.
    pub async fn on_clock(
        kind: StoreKind,
        retention: Retention,
        clock: std::sync::Arc<lambda_dedup::ManualClock>,
    ) -> Self {
        let backend = match kind {
            StoreKind::DynamoDb => {
                let client = client();
                let marks = mark_table(&client).await;
                Backend::DynamoDb { client, marks }
            }
            StoreKind::Memory => Backend::Memory(
                lambda_dedup_memory::MemoryStore::new(retention).with_clock(clock.clone()),
            ),
        };
        Self {
            clock,
            retention,
            backend,
        }
    }

    /// A store on the mark table, with leases of at most `lease`.
    pub fn store(&self, lease: Duration) -> std::sync::Arc<dyn lambda_dedup::MarkStore> {
        match &self.backend {
            Backend::DynamoDb { client: c, marks } => std::sync::Arc::new(
                lambda_dedup_dynamodb::DynamoStore::new(c.clone(), marks.clone(), self.retention)
                    .with_clock(self.clock.clone())
                    .with_lease(lease),
            ),
            Backend::Memory(m) => std::sync::Arc::new(m.clone().with_lease(lease)),
        }
    }

    /// A store that cannot be reached (S13).
    pub fn unreachable(&self) -> std::sync::Arc<dyn lambda_dedup::MarkStore> {
        match &self.backend {
            Backend::Memory(m) => std::sync::Arc::new(m.unreachable()),
            Backend::DynamoDb { .. } => std::sync::Arc::new(
                lambda_dedup_dynamodb::DynamoStore::new(
                    unreachable_client(),
                    "marks",
                    self.retention,
                )
                .with_clock(self.clock.clone()),
            ),
        }
    }

    /// The mark table's name (DynamoDB; the memory store has one mark table per store).
    pub fn mark_table(&self) -> String {
        match &self.backend {
            Backend::DynamoDb { marks, .. } => marks.clone(),
            Backend::Memory(_) => "marks".into(),
        }
    }

    /// The memory store, when that is the backend (to inject faults).
    pub fn memory(&self) -> Option<&lambda_dedup_memory::MemoryStore> {
        match &self.backend {
            Backend::Memory(m) => Some(m),
            Backend::DynamoDb { .. } => None,
        }
    }

    /// A fresh effect table keyed by the string attribute `key_attr`.
    pub async fn table(&self, key_attr: &str) -> String {
        match &self.backend {
            Backend::DynamoDb { client: c, .. } => effect_table(c, key_attr).await,
            Backend::Memory(m) => {
                let name = unique("effects");
                m.create_table(&name, key_attr);
                name
            }
        }
    }

    /// Writes `item` to `table` unconditionally (seeding).
    pub async fn put(&self, table: &str, item: Item) {
        match &self.backend {
            Backend::DynamoDb { client: c, .. } => {
                let put = [Effect::put(table, item)];
                let written = lambda_dedup_dynamodb::write_effects(c, &put).await;
                assert!(
                    written.expect("put_item"),
                    "an unconditional put is written"
                );
            }
            Backend::Memory(m) => m.put_item(table, item).expect("put_item"),
        }
    }

    /// The item at `key` in `table`, read strongly consistently.
    pub async fn read(&self, table: &str, key: &Item) -> Option<Item> {
        match &self.backend {
            Backend::DynamoDb { client: c, .. } => {
                let items = lambda_dedup_dynamodb::DynamoItems::new(c);
                items.read(table, key).await.expect("get_item")
            }
            Backend::Memory(m) => m.item(table, key),
        }
    }

    /// Whether a mark of `key` is stored at all, live or past its TTL.
    pub async fn stored_mark(&self, key: &lambda_dedup::DedupKey) -> bool {
        match &self.backend {
            Backend::DynamoDb { client: c, marks } => {
                get_item(c, marks, "pk", key.as_str()).await.is_some()
            }
            Backend::Memory(m) => m.marks().iter().any(|mark| &mark.key == key),
        }
    }

    /// A number attribute of the item at `key_attr = key` in `table`.
    pub async fn number(&self, table: &str, key_attr: &str, key: &str, attr: &str) -> Option<i64> {
        let item = self.read(table, &Item::new().with(key_attr, key)).await?;
        match item.0.get(attr)? {
            lambda_dedup::Value::N(n) => n.parse().ok(),
            _ => None,
        }
    }
}

/// A metering proxy (no added latency) in front of [`endpoint`], for counting what one store
/// sends: a store built on [`Metered::client`] goes through it; reads made on [`client`] do not.
#[derive(Debug)]
pub struct Metered(local_dynamodb::meter::Meter);

impl Metered {
    /// Starts the proxy.
    pub fn start() -> Self {
        Self(local_dynamodb::meter::Meter::start(&endpoint(), Duration::ZERO).expect("meter"))
    }

    /// A client whose requests the proxy counts.
    pub fn client(&self) -> Client {
        client_at(&self.0.endpoint())
    }

    /// Requests sent through the proxy so far.
    pub fn calls(&self) -> u64 {
        self.0.usage().requests
    }
}

/// A `POST /orders` under the `Idempotency-Key` `key`, from the caller `caller` (the
/// `x-caller-id` header [`orders_door`] reads callers from).
pub fn order_post(caller: &str, key: &str, body: &str) -> lambda_http::Request {
    lambda_http::http::Request::builder()
        .method("POST")
        .uri("/orders")
        .header("idempotency-key", format!("\"{key}\""))
        .header("x-caller-id", caller)
        .body(lambda_http::Body::Text(body.to_owned()))
        .expect("request")
}

/// `orders-api`'s settings on a fresh mark table and a fresh order table (returned) through
/// `client`, read as its `main` reads them: the deduplicator on DynamoDB and the HTTP door's
/// configuration. The caller is the `x-caller-id` header, which nothing verifies here (as on
/// the local stack), said openly.
pub async fn orders_door(
    client: &Client,
) -> (
    lambda_dedup_runtime::Dedup,
    lambda_dedup_runtime::http::HttpConfig,
    String,
) {
    let marks = mark_table(client).await;
    let orders = effect_table(client, "order_id").await;
    let (dedup, config) = orders_door_on(client, &marks, &orders);
    (dedup, config, orders)
}

/// [`orders_door`] on the tables `marks` and `orders`: another container of the same function
/// (its own warm cache), as often as it is called.
pub fn orders_door_on(
    client: &Client,
    marks: &str,
    orders: &str,
) -> (
    lambda_dedup_runtime::Dedup,
    lambda_dedup_runtime::http::HttpConfig,
) {
    orders_door_with(client, marks, orders, &[])
}

/// [`orders_door_on`] with the settings `extra` added (`HTTP_MARKS_UNTIL`, say).
pub fn orders_door_with(
    client: &Client,
    marks: &str,
    orders: &str,
    extra: &[(&str, &str)],
) -> (
    lambda_dedup_runtime::Dedup,
    lambda_dedup_runtime::http::HttpConfig,
) {
    use lambda_dedup_runtime::{Dedup, Env, http::HttpConfig, store::Items};
    let settings = [
        ("DEDUP_NAMESPACE", "t"),
        ("DEDUP_MARK_TABLE", marks),
        ("ORDERS_TABLE", orders),
        ("HTTP_CALLER_FROM", "header:x-caller-id"),
        ("HTTP_CALLER_FRONT", "unverified"),
    ];
    let env = Env::from_pairs(settings.into_iter().chain(extra.iter().copied()));
    let dedup = Dedup::read(&env, orders_api::FUNCTION).expect("settings");
    let config = HttpConfig::read(&env).expect("config");
    let store = Items::dynamodb(client.clone(), dedup.settings());
    (dedup.on(store), config)
}
