//! End to end, through the SQS emulator, the local trigger and the functions under
//! `cargo lambda watch`, as started by `cargo xtask test` (S5–S8, S12, S14). Each test uses its
//! own event ids and accounts, so the tests can share the functions and queues.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use dedup_tests::{client, get_item, unique};
use lambda_dedup::{KeySpec, Message, Scope};
use serde_json::{Value, json};

/// Whether the whole local stack is up (`cargo xtask test` sets its endpoints). Without it the
/// end-to-end tests say how to run them and pass: plain `cargo test` has no SQS emulator, no
/// functions and no triggers.
/// The test that is skipped is named by its thread (the test harness names each test's thread
/// after the test), so no test writes its own name out.
pub(crate) fn stack_is_up() -> bool {
    let up = std::env::var_os("DEDUP_SQS_ENDPOINT").is_some();
    if !up {
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("this end-to-end test");
        eprintln!(
            "skipped {test}: it needs the whole local stack; run it with `cargo xtask test e2e`"
        );
    }
    up
}

/// Up to 10 of the messages waiting on the queue `url`, with their message attributes; `None`
/// when the receive fails.
pub(crate) async fn waiting(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
) -> Option<Vec<aws_sdk_sqs::types::Message>> {
    let out = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .ok()?;
    Some(out.messages.unwrap_or_default())
}

/// The messages of the run `run` that reach the DLQ of `var` (each body containing `run`),
/// `want` of them, taken off it: (SQS messageId, body).
pub(crate) async fn dead_lettered(var: &str, run: &str, want: usize) -> Vec<(String, String)> {
    let (sqs, dlq) = (sqs(), env(var));
    let found = std::sync::Mutex::new(Vec::new());
    eventually(
        "the run's messages in the DLQ",
        Duration::from_secs(120),
        async || {
            for m in waiting(&sqs, &dlq).await? {
                let body = m.body().unwrap_or_default();
                if body.contains(run) {
                    let id = m.message_id().unwrap_or_default().to_owned();
                    found.lock().expect("lock").push((id, body.to_owned()));
                    if let Some(h) = m.receipt_handle() {
                        let _ = sqs
                            .delete_message()
                            .queue_url(&dlq)
                            .receipt_handle(h)
                            .send()
                            .await;
                    }
                }
            }
            (found.lock().expect("lock").len() >= want).then_some(())
        },
    )
    .await;
    found.into_inner().expect("lock")
}

/// A fresh run of an end-to-end test: `id` names its events, `account` is an account of its own.
pub(crate) struct Run {
    pub(crate) id: String,
    /// `{id}-acct`.
    pub(crate) account: String,
}

/// The opening of an end-to-end test: a fresh [`Run`] named `name` when the whole local stack is
/// up; `None`, the test skipped and saying so, when it is not.
pub(crate) fn e2e_run(name: &str) -> Option<Run> {
    stack_is_up().then(|| {
        let id = unique(name);
        let account = format!("{id}-acct");
        Run { id, account }
    })
}

/// The key `function` of the stack derives for `body` (namespace `demo`, consumer = function
/// name, tenant from `tenantid`).
pub(crate) fn key_of(function: &str, body: &str) -> lambda_dedup::DedupKey {
    let spec = KeySpec::cloudevents(Scope::new("demo", function).expect("scope"), "tenantid");
    let message = Message {
        body: body.as_bytes().to_vec(),
        ..Message::default()
    };
    spec.derive(&message).expect("key").key
}

/// The keys `function` derives for `bodies`, in order ([`key_of`]).
pub(crate) fn keys(function: &str, bodies: &[String]) -> Vec<lambda_dedup::DedupKey> {
    bodies.iter().map(|b| key_of(function, b)).collect()
}

pub(crate) fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: the end-to-end tests run inside `cargo xtask test`")
    })
}

pub(crate) fn sqs() -> aws_sdk_sqs::Client {
    lambda_dedup_testkit::local_client!(aws_sdk_sqs, env("DEDUP_SQS_ENDPOINT"))
}

pub(crate) async fn send(queue_var: &str, bodies: &[String]) {
    let sqs = sqs();
    let url = env(queue_var);
    for chunk in bodies.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, b)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(b)
                    .build()
                    .expect("entry")
            })
            .collect();
        sqs.send_message_batch()
            .queue_url(&url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("send");
    }
}

/// Invokes `function` with the sample scheduled event (`events/relay-sweep.json`) through the
/// invoke API, as its schedule would, and returns its answer.
pub(crate) async fn invoke_schedule(function: &str) -> Value {
    let event: Value =
        serde_json::from_str(include_str!("../../events/relay-sweep.json")).expect("sample event");
    reqwest::Client::new()
        .post(format!(
            "{}/2015-03-31/functions/{function}/invocations",
            env("DEDUP_INVOKE_URL")
        ))
        .json(&event)
        .send()
        .await
        .expect("invoke")
        .json()
        .await
        .expect("the sweep's answer")
}

/// Polls `check` until it returns `Some`, or fails after `limit`.
pub(crate) async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

pub(crate) fn ce(kind: &str, source: &str, id: &str, tenant: &str, data: Value) -> String {
    json!({"specversion": "1.0", "type": kind, "source": source, "id": id, "tenantid": tenant, "data": data})
        .to_string()
}

/// A CloudEvent from `/e2e` (tenant `t1`) whose time is two days ago: older than the local
/// stack's retention window (one day).
pub(crate) fn late_event(kind: &str, id: &str, data: Value) -> String {
    let two_days_ago = std::time::SystemTime::now() - Duration::from_secs(2 * 86_400);
    json!({"specversion": "1.0", "type": kind, "source": "/e2e", "id": id,
    "tenantid": "t1", "data": data,
    "time": chrono::DateTime::<chrono::Utc>::from(two_days_ago)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)})
    .to_string()
}

/// A ledger credit of `amount` to `account` (tenant `t1`) as the senders send it: a CloudEvent
/// from `source`.
pub(crate) fn ledger_credit(source: &str, id: &str, account: &str, amount: i64) -> String {
    ce(
        "credit",
        source,
        id,
        "t1",
        json!({"account": account, "amount": amount}),
    )
}

/// The JSON `url` answers (a local service's admin endpoint: `what`).
pub(crate) async fn get_json(url: &str, what: &str) -> Value {
    let answer = reqwest::get(url).await.expect(what);
    answer.json().await.expect("json")
}

pub(crate) async fn provider_effects() -> BTreeMap<String, u64> {
    let url = format!("{}/_admin/effects", env("DEDUP_PROVIDER_URL"));
    let v = get_json(&url, "provider").await;
    v["effects"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, e)| (k.clone(), e["count"].as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// The balance of `account` of tenant `t1` (every ledger event of these tests is `t1`'s;
/// balances are kept per tenant, S1).
async fn balance(account: &str) -> Option<i64> {
    let key = lambda_dedup::tenant_scoped("t1", account);
    let item = get_item(&client(), &env("DEDUP_TABLE_BALANCES"), "account", &key).await?;
    item.get("balance")?.as_n().ok()?.parse().ok()
}

/// S5, S8, S12: a workload replayed twice, interleaved, with a producer retry, leaves the balances
/// of a single pass, and they stay there.
#[tokio::test]
async fn e2e_ledger_replayed_workload_equals_one_pass() {
    let Some(Run { id: run, .. }) = e2e_run("ledger") else {
        return;
    };
    let events: Vec<(String, String, i64)> = (0..6)
        .map(|i| {
            (
                format!("{run}-e{i}"),
                format!("{run}-acct-{}", i % 3),
                10 + i,
            )
        })
        .collect();
    let bodies: Vec<String> = events
        .iter()
        .map(|(id, acct, n)| ledger_credit("/e2e", id, acct, *n))
        .collect();
    let interleaved: Vec<String> = bodies.iter().flat_map(|b| [b.clone(), b.clone()]).collect();
    send("DEDUP_QUEUE_LEDGER_PROJECTOR", &interleaved).await;
    send("DEDUP_QUEUE_LEDGER_PROJECTOR", &bodies[..2]).await; // producer retries

    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for (_, acct, n) in &events {
        *expected.entry(acct.clone()).or_default() += n;
    }
    for (acct, want) in &expected {
        let got = eventually(
            &format!("balance of {acct}"),
            Duration::from_secs(90),
            || async { balance(acct).await.filter(|b| b == want) },
        )
        .await;
        assert_eq!(got, *want);
    }
    // Redeliveries have had time to arrive: nothing moved twice.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for (acct, want) in &expected {
        assert_eq!(
            balance(acct).await,
            Some(*want),
            "{acct} moved after settling"
        );
    }
}

/// S2, S11: a malformed message and a payload conflict end in the DLQ through the redrive policy
/// (never acknowledged, never applied); the original payload stays applied once.
#[tokio::test]
async fn e2e_malformed_and_conflicting_messages_are_dead_lettered() {
    let Some(Run { id: run, account }) = e2e_run("dlq") else {
        return;
    };
    let first = ledger_credit("/e2e", &format!("{run}-1"), &account, 5);
    send("DEDUP_QUEUE_LEDGER_PROJECTOR", &[first]).await;
    eventually("first credit", Duration::from_secs(60), || async {
        balance(&account).await.filter(|b| *b == 5)
    })
    .await;
    let conflict = ledger_credit("/e2e", &format!("{run}-1"), &account, 500);
    let malformed = format!("{{\"broken\": \"{run}\"");
    send("DEDUP_QUEUE_LEDGER_PROJECTOR", &[conflict, malformed]).await;

    let found: Vec<String> = dead_lettered("DEDUP_DLQ_LEDGER_PROJECTOR", &run, 2)
        .await
        .into_iter()
        .map(|(_, body)| body)
        .collect();
    assert!(
        found.iter().any(|b| b.contains("500")),
        "the conflict: {found:?}"
    );
    assert!(
        found.iter().any(|b| b.contains("broken")),
        "the malformed one: {found:?}"
    );
    assert_eq!(
        balance(&account).await,
        Some(5),
        "the conflicting payload was never applied"
    );
}

/// Three events of a fresh run named `prefix` (`event(n, id)` for the `n`th, whose id is
/// `{run}-{n}`), each sent to `queue` twice in one batch, as a redelivering producer would; their
/// bodies.
async fn three_sent_twice(
    queue: &str,
    prefix: &str,
    event: impl Fn(usize, &str) -> String,
) -> Vec<String> {
    let run = unique(prefix);
    let bodies: Vec<String> = (0..3).map(|n| event(n, &format!("{run}-{n}"))).collect();
    let twice: Vec<String> = bodies.iter().flat_map(|b| [b.clone(), b.clone()]).collect();
    send(queue, &twice).await;
    bodies
}

/// `item`, if its `status` is `status`.
fn with_status(
    item: std::collections::HashMap<String, AttributeValue>,
    status: &str,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    (item.get("status") == Some(&AttributeValue::S(status.into()))).then_some(item)
}

/// S6: payment requests delivered twice, concurrently, reach the payments API once each, with the
/// idempotency key derived from the event; the receipt is stored with the mark.
#[tokio::test]
async fn e2e_payments_reach_the_provider_once_each() {
    if !stack_is_up() {
        return;
    }
    let bodies = three_sent_twice("DEDUP_QUEUE_PAYMENT_DISPATCHER", "pay", |_, id| {
        ce(
            "payment.requested",
            "/e2e",
            id,
            "shop",
            json!({"amount_cents": 1200, "currency": "EUR", "customer_ref": "c-1"}),
        )
    })
    .await;

    let keys = keys("payment-dispatcher", &bodies);
    let marks = env("DEDUP_TABLE_MARKS");
    for key in &keys {
        let mark = eventually("a completed mark", Duration::from_secs(90), || async {
            with_status(
                get_item(&client(), &marks, "pk", key.as_str()).await?,
                "COMPLETED",
            )
        })
        .await;
        let receipt = mark
            .get("result")
            .and_then(|r| r.as_s().ok())
            .expect("receipt stored");
        assert!(
            receipt.contains(&key.idempotency_key()),
            "the provider's receipt: {receipt}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let effects = provider_effects().await;
    for key in &keys {
        assert_eq!(
            effects.get(&key.idempotency_key()),
            Some(&1),
            "one payment per event"
        );
    }
}

/// S5, S7: fine notices delivered twice write one fine and one intent each, in one transaction
/// with the mark; the relay applies each intent to the collection API once and confirms it.
#[tokio::test]
async fn e2e_fines_and_intents_are_applied_once_through_the_relay() {
    if !stack_is_up() {
        return;
    }
    let bodies = three_sent_twice("DEDUP_QUEUE_FINE_NOTICES", "fine", |n, id| {
        ce(
            "fine.notice",
            "/e2e-dgt",
            id,
            "city",
            json!({
        "notice_number": format!("N-{n}"), "plate": "0000-XYZ", "offence": "parking",
        "amount_cents": 5000, "issued_at": "2026-11-01T00:00:00Z"}),
        )
    })
    .await;

    let intents = env("DEDUP_TABLE_INTENTS");
    for b in &bodies {
        let key = key_of("fine-notices", b);
        let intent_id = key.idempotency_key();
        eventually("a confirmed intent", Duration::from_secs(90), || async {
            let item = get_item(&client(), &intents, "intent_id", &intent_id).await?;
            with_status(item, "CONFIRMED").map(drop)
        })
        .await;
        let effects = provider_effects().await;
        assert_eq!(
            effects.get(&intent_id),
            Some(&1),
            "one collection task per fine"
        );
    }
}

/// S1: tenants stay apart in the effects. Two tenants credit an account of the same name: each
/// tenant's balance moves by its own credits only, so one tenant's message cannot touch another
/// tenant's balance by naming its account.
#[tokio::test]
async fn e2e_one_tenant_cannot_move_another_tenants_balance() {
    let Some(Run { id: run, account }) = e2e_run("tenants") else {
        return;
    };
    let credit = |tenant: &str, id: &str, amount: i64| {
        ce(
            "credit",
            "/e2e",
            &format!("{run}-{id}"),
            tenant,
            json!({"account": account, "amount": amount}),
        )
    };
    send(
        "DEDUP_QUEUE_LEDGER_PROJECTOR",
        &[
            credit("t1", "1", 5),
            credit("intruder", "2", 1000),
            credit("t1", "3", 2),
        ],
    )
    .await;
    eventually("t1's balance", Duration::from_secs(60), || async {
        balance(&account).await.filter(|b| *b == 7)
    })
    .await;
    let intruder = lambda_dedup::tenant_scoped("intruder", &account);
    let theirs = eventually(
        "the intruder's own balance",
        Duration::from_secs(60),
        || async {
            let item = get_item(
                &client(),
                &env("DEDUP_TABLE_BALANCES"),
                "account",
                &intruder,
            )
            .await?;
            item.get("balance")?.as_n().ok()?.parse::<i64>().ok()
        },
    )
    .await;
    assert_eq!(
        theirs, 1000,
        "the intruder's credit landed in its own tenant"
    );
    assert_eq!(
        balance(&account).await,
        Some(7),
        "t1's balance moved by t1's credits only"
    );
}

/// S14: a completed mark deleted by DynamoDB's TTL (a `REMOVE` by the DynamoDB service on the
/// mark table's stream; the local DynamoDB's sweep runs every half second) is counted as purged
/// by `mark-auditor`, for its consumer.
#[tokio::test]
async fn e2e_ttl_purges_are_counted_by_the_mark_auditor() {
    let Some(Run { id: consumer, .. }) = e2e_run("audit") else {
        return;
    };
    let pk = format!("demo#{consumer}#{}", "ab".repeat(32));
    let past = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("epoch")
        .as_secs()
        - 60;
    client()
        .put_item()
        .table_name(env("DEDUP_TABLE_MARKS"))
        .item("pk", AttributeValue::S(pk))
        .item("status", AttributeValue::S("COMPLETED".into()))
        .item("expires_at", AttributeValue::N(past.to_string()))
        .send()
        .await
        .expect("put an expired mark");
    let log = env("DEDUP_FUNCTIONS_LOG");
    let line = eventually(
        "mark-auditor's purge count",
        Duration::from_secs(90),
        async || {
            let text = std::fs::read_to_string(&log).ok()?;
            text.lines()
                .filter(|l| l.starts_with('{'))
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v.get("_aws").is_some())
                .find(|v| v["Function"] == consumer.as_str() && v.get("Purged").is_some())
        },
    )
    .await;
    assert_eq!(line["Purged"], 1);
}

/// One receive from the reconciliation queue: each message's body and its `dedup-reason`.
pub(crate) async fn reconciled() -> Vec<(String, String)> {
    let Ok(out) = sqs()
        .receive_message()
        .queue_url(env("DEDUP_QUEUE_RECONCILIATION"))
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
    else {
        return Vec::new();
    };
    out.messages()
        .iter()
        .filter_map(|m| {
            let reason = m
                .message_attributes()?
                .get("dedup-reason")?
                .string_value()?;
            Some((m.body()?.to_owned(), reason.to_owned()))
        })
        .collect()
}

/// S10: an event older than the retention window (the local stack keeps marks for one day) is
/// not applied: each SQS function (`ledger-projector`, `fine-notices`, `payment-dispatcher`)
/// sends it to the reconciliation queue, tagged `dedup-reason: late_event`, and acknowledges it.
#[tokio::test]
async fn e2e_late_events_go_to_reconciliation_not_to_the_balance() {
    let Some(Run { id: run, account }) = e2e_run("late") else {
        return;
    };
    let late = |kind: &str, data: Value| late_event(kind, &format!("{run}-{kind}"), data);
    let bodies = [
        (
            "DEDUP_QUEUE_LEDGER_PROJECTOR",
            late("credit", json!({"account": account, "amount": 7})),
        ),
        (
            "DEDUP_QUEUE_FINE_NOTICES",
            late("fine", json!({"notice_number": format!("{run}-n")})),
        ),
        (
            "DEDUP_QUEUE_PAYMENT_DISPATCHER",
            late("payment", json!({"amount_cents": 100})),
        ),
    ];
    for (queue, body) in &bodies {
        send(queue, std::slice::from_ref(body)).await;
    }
    let reasons: std::sync::Mutex<BTreeMap<String, String>> = std::sync::Mutex::default();
    eventually(
        "the late events in the reconciliation queue",
        Duration::from_secs(60),
        || async {
            let received = reconciled().await;
            let mut reasons = reasons.lock().expect("lock");
            for (body, reason) in received {
                if bodies.iter().any(|(_, b)| *b == body) {
                    reasons.insert(body, reason);
                }
            }
            (reasons.len() == bodies.len()).then_some(())
        },
    )
    .await;
    let reasons = reasons.into_inner().expect("lock");
    assert!(reasons.values().all(|r| r == "late_event"), "{reasons:?}");
    assert_eq!(balance(&account).await, None, "a late event moves nothing");
}

/// S16, through the built `payment-dispatcher` with the local stack's settings (the provider
/// keeps idempotency keys for an hour, `PROVIDER_KEY_RETENTION_SECONDS=3600`): a payment whose
/// first attempt claimed it two hours ago and died while its call was out (its lease long
/// expired) is redelivered. Calling the payments API again could charge twice — the provider
/// may have forgotten the key — so the function does not call: the event goes to the
/// reconciliation queue as `provider_key_expired`, and the provider sees no request for it.
#[tokio::test]
async fn e2e_a_takeover_past_the_provider_key_retention_goes_to_reconciliation() {
    let Some(Run { id, .. }) = e2e_run("pay-forgotten") else {
        return;
    };
    let body = json!({"specversion": "1.0", "type": "payment.requested", "source": "/e2e",
        "id": id, "tenantid": "shop",
        "data": {"amount_cents": 4200, "currency": "EUR", "customer_ref": "c-7"}})
    .to_string();
    let key = key_of("payment-dispatcher", &body);
    // The first attempt, two hours ago, under the stack's 4 s lease: it claimed and died.
    let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    let crashed = lambda_dedup_dynamodb::DynamoStore::new(
        client(),
        env("DEDUP_TABLE_MARKS"),
        lambda_dedup::Retention::unchecked(Duration::from_secs(86_400)).expect("retention"),
    )
    .with_lease(Duration::from_secs(4))
    .with_clock(std::sync::Arc::new(lambda_dedup::ManualClock::new(
        two_hours_ago,
    )));
    assert!(matches!(
        lambda_dedup::MarkStore::claim(&crashed, &key, None, None)
            .await
            .expect("claim"),
        lambda_dedup::Claim::Claimed(_)
    ));
    send(
        "DEDUP_QUEUE_PAYMENT_DISPATCHER",
        std::slice::from_ref(&body),
    )
    .await;

    let reason = eventually(
        "the takeover in the reconciliation queue",
        Duration::from_secs(60),
        || async {
            reconciled()
                .await
                .into_iter()
                .find_map(|(b, reason)| (b == body).then_some(reason))
        },
    )
    .await;
    assert_eq!(reason, "provider_key_expired");
    assert_eq!(
        provider_effects().await.get(&key.idempotency_key()),
        None,
        "the payments API was not called again"
    );
}

/// The relay's scheduled sweep, invoked through the local runtime's invoke API with the sample
/// event of `events/`: it scans for intents left pending and reports what it found.
#[tokio::test]
async fn e2e_the_relay_sweep_runs_on_its_schedule_event() {
    if !stack_is_up() {
        return;
    }
    let answer = invoke_schedule("intent-relay").await;
    assert!(answer["pending"].is_u64(), "{answer}");
    assert!(answer["redriven"].is_u64(), "{answer}");
}
