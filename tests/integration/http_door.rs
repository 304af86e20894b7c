//! The HTTP `Idempotency-Key` door on DynamoDB (the local emulator, Dynoxide), as `orders-api`'s
//! `main` wires it (`Dedup::read(..).on(Items::dynamodb(..))`, `orders_api::service`): requests
//! racing under one key create one order, committed with the key's mark (S4, S5).

use lambda_dedup_runtime::HttpEvent;
use lambda_http::tower::ServiceExt;
use lambda_http::{Body, Request};

fn post(key: &str, body: &str) -> Request {
    dedup_tests::order_post("shop-race", key, body)
}

/// S4, S5 against the real emulator: eight requests racing under one key end with one order in
/// the table and one completed mark; every 201 carries that order (the first's answer, or its
/// replay), and any other answer is the draft's 409 with nothing written.
#[tokio::test]
async fn s5_idempotency_key_requests_racing_on_dynamodb_create_one_order() {
    let client = dedup_tests::client();
    let (dedup, config, orders) = dedup_tests::orders_door(&client).await;
    let service = orders_api::service(dedup, config).expect("service");
    let key = dedup_tests::unique("race");
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let racers = (0..8).map(|_| {
        let s = service.clone();
        let r = post(&key, body);
        tokio::spawn(async move {
            let answer = s.oneshot(r).await.expect("answer");
            let status = answer.status().as_u16();
            let text = match answer.body() {
                Body::Text(t) => t.clone(),
                other => format!("{other:?}"),
            };
            (status, text)
        })
    });
    // Spawned together, before any is awaited.
    let racers: Vec<_> = racers.collect();
    let mut answers = Vec::new();
    for r in racers {
        answers.push(r.await.expect("racer"));
    }
    let created: Vec<&String> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert!(!created.is_empty(), "{answers:?}");
    assert!(
        created.iter().all(|b| *b == created[0]),
        "one order answered: {answers:?}"
    );
    assert!(
        answers.iter().all(|(s, _)| *s == 201 || *s == 409),
        "{answers:?}"
    );
    let items = lambda_dedup_testkit::dynamodb::items::scan(&client, &orders)
        .await
        .expect("scan");
    assert_eq!(items.len(), 1, "one order for one key: {answers:?}");
    let id: serde_json::Value = serde_json::from_str(created[0]).expect("json");
    assert_eq!(
        items[0]
            .get("order_id")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        id["id"].as_str()
    );
    // And the retry after the race is the stored answer.
    let again = service
        .clone()
        .oneshot(post(&key, body))
        .await
        .expect("answer");
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap_or("")),
        Some("true")
    );
}

/// Issue 45: the door claims nothing, so two requests under one key both run their work and
/// race to one commit (the mark holding the answer, with the order, in one transaction). One
/// order is written; the loser learns the winner's answer from the failed condition
/// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) and replays it: both 201 with the same
/// body, exactly one `idempotent-replayed`. (A door that claimed first would answer the second
/// 409 while the first ran.)
#[tokio::test]
async fn s4_idempotency_key_concurrent_loser_replays_the_winners_answer() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (_meter, client, marks, orders) = held_tables().await;
    let ran = Arc::new(AtomicUsize::new(0));
    // Two containers of the function, each its own warm cache.
    let container = || {
        let (dedup, config) = dedup_tests::orders_door_on(&client, &marks, &orders);
        let (runs, table) = (ran.clone(), orders.clone());
        let work = move |e: HttpEvent<orders_api::order::NewOrder>| {
            runs.fetch_add(1, Ordering::SeqCst);
            orders_api::order::create(&table, e)
        };
        dedup.http(config, work).expect("service")
    };
    let key = dedup_tests::unique("loser");
    let answers = race(&[container(), container()], &key).await;
    assert_eq!(ran.load(Ordering::SeqCst), 2, "both works ran: {answers:?}");
    one_order_and_one_replay(&client, &orders, &answers).await;
}

/// Issue 45, one-item mode as `orders-api` runs it: two containers racing under one key both
/// run their work and send one conditional `PutItem` each (every request held 200 ms, so both
/// are in flight at once). One order is written, its own mark: it carries the key, and the mark
/// table holds nothing. The loser learns the winner's answer from the item the failed condition
/// returns (`ALL_OLD`) and replays it; the key with another body in a third container is 422.
#[tokio::test]
async fn s4_one_item_mode_loser_replays_from_the_item_and_no_mark_is_written() {
    let (_meter, client, marks, orders) = held_tables().await;
    let container = || {
        let (dedup, config) = dedup_tests::orders_door_on(&client, &marks, &orders);
        orders_api::service(dedup, config).expect("service")
    };
    let key = dedup_tests::unique("one-item");
    let answers = race(&[container(), container()], &key).await;
    let order = one_order_and_one_replay(&client, &orders, &answers).await;
    let order_id = order.get("order_id").and_then(|v| v.as_s().ok());
    let created_by = order.get(lambda_dedup::create_once::CREATED_KEY);
    let created_by = created_by
        .and_then(|v| v.as_s().ok())
        .expect("the item's key");
    let derived = lambda_dedup::DedupKey::from_stored(created_by.clone()).idempotency_key();
    assert_eq!(order_id, Some(&derived), "the id derived from the key");
    let marks_written = lambda_dedup_testkit::dynamodb::items::scan(&client, &marks)
        .await
        .expect("scan");
    assert!(marks_written.is_empty(), "no mark item: {marks_written:?}");
    let other = container()
        .oneshot(post(&key, r#"{"sku":"book-2","quantity":1}"#))
        .await
        .expect("answer");
    assert_eq!(other.status().as_u16(), 422);
}

/// Issue 45, one-item mode on DynamoDB: an order with the key's derived id that this key did
/// not create (written by other means) is refused as create-once refuses (500, nothing
/// written), never overwritten.
#[tokio::test]
async fn one_item_mode_never_overwrites_an_item_the_key_did_not_create() {
    let client = dedup_tests::client();
    let (dedup, config, orders) = dedup_tests::orders_door(&client).await;
    let service = orders_api::service(dedup, config).expect("service");
    let key = dedup_tests::unique("theirs");
    let scope = lambda_dedup::Scope::new("t", orders_api::FUNCTION).expect("scope");
    let held =
        lambda_dedup::DedupKey::new(&scope, "header:9:shop-race", &["idempotency-key", &key]);
    let id = held.idempotency_key();
    client
        .put_item()
        .table_name(&orders)
        .item(
            "order_id",
            aws_sdk_dynamodb::types::AttributeValue::S(id.clone()),
        )
        .item(
            "sku",
            aws_sdk_dynamodb::types::AttributeValue::S("theirs".into()),
        )
        .send()
        .await
        .expect("put");
    let answer = text_of(
        service
            .oneshot(post(&key, r#"{"sku":"book-1","quantity":1}"#))
            .await
            .expect("answer"),
    );
    assert_eq!(answer.0, 500, "{answer:?}");
    let items = lambda_dedup_testkit::dynamodb::items::scan(&client, &orders)
        .await
        .expect("scan");
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0]
            .get("sku")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        Some("theirs"),
        "untouched"
    );
}

/// `orders-api` on the tables `marks` and `orders` with `HTTP_MARKS_UNTIL` at `until`.
fn orders_api_with_marks_until(
    client: &aws_sdk_dynamodb::Client,
    marks: &str,
    orders: &str,
    until: &str,
) -> lambda_dedup_runtime::HttpService {
    let extra = [("HTTP_MARKS_UNTIL", until)];
    let (dedup, config) = dedup_tests::orders_door_with(client, marks, orders, &extra);
    orders_api::service(dedup, config).expect("service")
}

/// Issue 45, the upgrade: a key answered through the transaction path (its mark in the mark
/// table, its order under an id of the old kind) and retried after the one-item door is
/// deployed with `HTTP_MARKS_UNTIL` ahead is replayed, no second order; a key first answered in
/// that window commits its order with a mark, and retried after the window (the single
/// `PutItem`) is replayed from its order.
#[tokio::test]
async fn one_item_mode_upgrade_window_replays_the_transaction_paths_keys() {
    use lambda_dedup_runtime::http::Reply;
    use lambda_dedup_runtime::{Effect, HandlerError, Item};
    let client = dedup_tests::client();
    let (dedup, config, orders) = dedup_tests::orders_door(&client).await;
    let marks = dedup.settings().mark_table.clone().expect("a mark table");
    let table = orders.clone();
    // Before: ids of its own choosing, the mark in the mark table.
    let before = dedup
        .http(config, move |e: HttpEvent<orders_api::order::NewOrder>| {
            let id = format!("ord_old_{}", dedup_tests::unique("o"));
            let order = Item::new()
                .with("order_id", id.as_str())
                .with("sku", e.payload.sku.as_str());
            Ok::<_, HandlerError>(
                Reply::created(serde_json::json!({ "id": id })).effect(Effect::put(&table, order)),
            )
        })
        .expect("service");
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let (old_key, new_key) = (dedup_tests::unique("old"), dedup_tests::unique("new"));
    let answered_before = text_of(before.oneshot(post(&old_key, body)).await.expect("answer"));
    assert_eq!(answered_before.0, 201);

    let window = orders_api_with_marks_until(&client, &marks, &orders, "2999-01-01T00:00:00Z");
    let again = text_of(
        window
            .clone()
            .oneshot(post(&old_key, body))
            .await
            .expect("answer"),
    );
    assert_eq!(
        again,
        (201, true, answered_before.2.clone()),
        "replayed, no second order"
    );
    let count = || async {
        lambda_dedup_testkit::dynamodb::items::scan(&client, &orders)
            .await
            .expect("scan")
            .len()
    };
    assert_eq!(count().await, 1);
    let first = text_of(window.oneshot(post(&new_key, body)).await.expect("answer"));
    assert_eq!((first.0, first.1), (201, false), "{first:?}");
    assert_eq!(count().await, 2);

    let after = orders_api_with_marks_until(&client, &marks, &orders, "2000-01-01T00:00:00Z");
    let replayed = text_of(after.oneshot(post(&new_key, body)).await.expect("answer"));
    assert_eq!(replayed, (201, true, first.2), "replayed from its order");
    assert_eq!(count().await, 2);
}

/// The metering proxy in front of the local DynamoDB, every request held 200 ms on its way (so
/// racing requests are in flight at once), a client through it, and a mark table and an orders
/// table on it. The proxy lives as long as its value.
async fn held_tables() -> (
    local_dynamodb::meter::Meter,
    aws_sdk_dynamodb::Client,
    String,
    String,
) {
    let meter = local_dynamodb::meter::Meter::start(
        &dedup_tests::endpoint(),
        std::time::Duration::from_millis(200),
    )
    .expect("meter");
    let client = dedup_tests::client_at(&meter.endpoint());
    let marks = dedup_tests::mark_table(&client).await;
    let orders = dedup_tests::effect_table(&client, "order_id").await;
    (meter, client, marks, orders)
}

/// The same order posted under `key` to each of `services` at once (spawned together, before
/// any is awaited): each answer.
async fn race(
    services: &[lambda_dedup_runtime::HttpService],
    key: &str,
) -> Vec<(u16, bool, String)> {
    let body = r#"{"sku":"book-1","quantity":1}"#;
    let racers: Vec<_> = services
        .iter()
        .map(|s| {
            let (s, r) = (s.clone(), post(key, body));
            tokio::spawn(async move { text_of(s.oneshot(r).await.expect("answer")) })
        })
        .collect();
    let mut answers = Vec::new();
    for r in racers {
        answers.push(r.await.expect("racer"));
    }
    answers
}

/// A race's end: every answer 201 with one body, exactly one of them replayed, and one order in
/// `orders`, whose id the answer names. Returns the order.
async fn one_order_and_one_replay(
    client: &aws_sdk_dynamodb::Client,
    orders: &str,
    answers: &[(u16, bool, String)],
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    assert!(answers.iter().all(|(s, _, _)| *s == 201), "{answers:?}");
    assert_eq!(answers[0].2, answers[1].2, "one answer: {answers:?}");
    let replays = answers.iter().filter(|(_, r, _)| *r).count();
    assert_eq!(replays, 1, "the loser replays: {answers:?}");
    let mut items = lambda_dedup_testkit::dynamodb::items::scan(client, orders)
        .await
        .expect("scan");
    assert_eq!(items.len(), 1, "one order: {answers:?}");
    let order = items.remove(0);
    let id: serde_json::Value = serde_json::from_str(&answers[0].2).expect("json");
    assert_eq!(
        order
            .get("order_id")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        id["id"].as_str()
    );
    order
}

/// An answer's status, whether it is a replay, and its body.
fn text_of(answer: lambda_http::Response<Body>) -> (u16, bool, String) {
    let replayed = answer.headers().contains_key("idempotent-replayed");
    let text = match answer.body() {
        Body::Text(t) => t.clone(),
        other => format!("{other:?}"),
    };
    (answer.status().as_u16(), replayed, text)
}

/// The door on a store of marks only (PostgreSQL, Valkey): `Dedup::read(..).postgres()` or
/// `.valkey()`, then `http`, as a function on that store wires it.
mod marks_only {
    use std::time::{Duration, SystemTime};

    use lambda_dedup_runtime::http::{HttpConfig, Reply};
    use lambda_dedup_runtime::{BuildError, Dedup, Env, HandlerError, HttpEvent};
    use lambda_http::tower::ServiceExt;
    use lambda_http::{Body, Request, Response, Service};

    /// The retention `HTTP_KEY_RETENTION_SECONDS` asks for, two hours: neither its default
    /// (a day) nor the settings' retention (30 days).
    const KEY_RETENTION: Duration = Duration::from_secs(7_200);
    const BODY: &str = r#"{"sku":"book-1"}"#;

    fn env(pairs: &[(&str, &str)]) -> Env {
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "t"),
            ("HTTP_CALLER_FROM", "header:x-caller-id"),
            ("HTTP_CALLER_FRONT", "unverified"),
            ("HTTP_KEY_RETENTION_SECONDS", "7200"),
        ]);
        pairs
            .iter()
            .fold(env, |env, (name, value)| env.with(name, *value))
    }

    fn created<E>(e: HttpEvent<serde_json::Value>) -> Result<Reply<E>, HandlerError> {
        Ok(Reply::created(e.payload))
    }

    /// Posts one new key to the door `http` built and checks that it answers 201 (created).
    async fn one_order_created<S>(service: Result<S, BuildError>)
    where
        S: Service<Request, Response = Response<Body>, Error = lambda_http::Error>,
    {
        let key = dedup_tests::unique("kept");
        let answer = service
            .expect("service")
            .oneshot(super::post(&key, BODY))
            .await;
        assert_eq!(answer.expect("answer").status().as_u16(), 201);
    }

    /// Whether `expires_at` is now plus the key retention, give or take a minute.
    fn kept_for_the_key_retention(expires_at: SystemTime) -> bool {
        let wanted = SystemTime::now() + KEY_RETENTION;
        let off = match expires_at.duration_since(wanted) {
            Ok(later) => later,
            Err(earlier) => earlier.duration(),
        };
        off < Duration::from_secs(60)
    }

    /// S9 on PostgreSQL: the key's mark expires after `HTTP_KEY_RETENTION_SECONDS`, not after
    /// the settings' retention (`DEDUP_RETENTION_SECONDS`).
    #[tokio::test]
    async fn http_key_retention_on_postgres_is_the_marks_expiry() {
        let how = "`cargo xtask test -p dedup-tests -- http_key_retention` starts PostgreSQL";
        let Some(url) = lambda_dedup_conformance::server("DEDUP_POSTGRES_URL", "postgres", how)
        else {
            return;
        };
        let marks = lambda_dedup_conformance::unique("http_marks");
        let env = env(&[
            ("DEDUP_MARK_TABLE", &marks),
            ("DATABASE_URL", &url),
            ("PG_TLS", "disabled"),
        ]);
        let dedup = Dedup::read(&env, "orders-api").expect("settings");
        lambda_dedup_postgres::PgStore::from_url(
            &url,
            lambda_dedup_postgres::Tls::Disabled,
            dedup.settings().retention,
        )
        .and_then(|store| store.with_table(&marks))
        .expect("store")
        .create_table()
        .await
        .expect("the marks table");
        let config = HttpConfig::read(&env).expect("config");
        one_order_created(dedup.postgres().expect("postgres").http(config, created)).await;

        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        let rows = client
            .query(&format!("SELECT expires_at FROM \"{marks}\""), &[])
            .await
            .expect("read");
        assert_eq!(rows.len(), 1, "one mark for one key");
        let secs: i64 = rows[0].get(0);
        let secs = u64::try_from(secs).expect("after the epoch");
        assert!(
            kept_for_the_key_retention(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
            "the mark expires at {secs}, not the key retention's {KEY_RETENTION:?} from now"
        );
    }

    /// S9 on Valkey: the key's mark expires (its `PEXPIRE`) after `HTTP_KEY_RETENTION_SECONDS`,
    /// not after the settings' retention.
    #[tokio::test]
    async fn http_key_retention_on_valkey_is_the_marks_expiry() {
        use redis::AsyncCommands;
        let how = "`cargo xtask test -p dedup-tests -- http_key_retention` starts Valkey";
        let Some(url) = lambda_dedup_conformance::server("DEDUP_VALKEY_URL", "valkey", how) else {
            return;
        };
        let prefix = format!("{}:", lambda_dedup_conformance::unique("http_marks"));
        let env = env(&[("VALKEY_URL", &url), ("VALKEY_KEY_PREFIX", &prefix)]);
        let dedup = Dedup::read(&env, "orders-api").expect("settings");
        let config = HttpConfig::read(&env).expect("config");
        one_order_created(dedup.valkey().expect("valkey").http(config, created)).await;

        let mut conn = redis::Client::open(url.as_str())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let keys: Vec<String> = conn.keys(format!("{prefix}*")).await.expect("keys");
        assert_eq!(keys.len(), 1, "one mark for one key: {keys:?}");
        let ms: i64 = conn.pttl(&keys[0]).await.expect("pttl");
        let ms = u64::try_from(ms).expect("an expiry");
        assert!(
            kept_for_the_key_retention(SystemTime::now() + Duration::from_millis(ms)),
            "the mark expires in {ms} ms, not the key retention's {KEY_RETENTION:?}"
        );
    }
}
