//! The operators' tool, `lambda-dedup`, run as a built binary against the local stack with the
//! functions' own environment (`functions.env`, as an operator would export it), on
//! `ledger-projector` (S2, S8, S10, S11, S14). Each test uses its own event ids, accounts and
//! dead-letter queue, so nothing else's messages are moved.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use dedup_tests::{client, get_item};
use serde_json::{Value, json};

use crate::e2e::{Run, e2e_run, env, eventually, late_event, ledger_credit, send, sqs};

/// The functions' environment, as the stack wrote it beside their log.
fn function_env() -> Vec<(String, String)> {
    let log = std::path::PathBuf::from(env("DEDUP_FUNCTIONS_LOG"));
    let text = std::fs::read_to_string(log.with_file_name("functions.env")).expect("functions.env");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The project's template: the function's entry declares its key spec and flow for the tool.
const TEMPLATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");

/// Runs `lambda-dedup -f ledger-projector --template infra/template.yaml <args>` with the
/// function's environment (and `extra`), as an operator does.
async fn cli(args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut vars = function_env();
    vars.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    cli_in(args, vars).await
}

/// Runs `lambda-dedup -f ledger-projector --template infra/template.yaml <args>` with exactly
/// `vars` in its environment.
async fn cli_in(args: &[&str], vars: Vec<(String, String)>) -> Output {
    // A separate process; the test waits for it as a shell would.
    std::process::Command::new(env("DEDUP_CLI"))
        .env_clear()
        .envs(vars)
        .args(["--function", "ledger-projector", "--template", TEMPLATE])
        .args(args)
        .output()
        .expect("lambda-dedup runs")
}

fn as_refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `--json redrive` from `dlq` to `source`, holding what it reads for `hold` seconds, with
/// `extra`.
fn redrive_args(dlq: &str, source: &str, hold: &str, extra: &[&str]) -> Vec<String> {
    let args = ["--json", "redrive", "--dlq", dlq, "--source", source];
    let args = args.into_iter().chain(["--hold-seconds", hold]);
    args.chain(extra.iter().copied())
        .map(str::to_owned)
        .collect()
}

/// A fresh DLQ of the run `run` holding two credits of `account` (of 1 and 2), and the credits.
async fn dlq_with_two_credits(run: &str, account: &str) -> (String, [String; 2]) {
    let dlq = queue(&format!("{run}-dlq")).await;
    let bodies = [
        ledger_credit("/e2e", &format!("{run}-1"), account, 1),
        ledger_credit("/e2e", &format!("{run}-2"), account, 2),
    ];
    put(&dlq, &bodies.iter().collect::<Vec<_>>()).await;
    (dlq, bodies)
}

/// Sends `credit` (of 5 to `account`) to ledger-projector and waits until it is applied.
async fn first_credit_applied(credit: &String, account: &str) {
    send("DEDUP_QUEUE_LEDGER_PROJECTOR", std::slice::from_ref(credit)).await;
    balance_is("the first credit", account, 5).await;
}

/// The command exited 0 (else its stderr is the failure).
fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The command exited with `code` (else its stderr is the failure).
fn exited(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

async fn balance(account: &str) -> Option<i64> {
    let key = lambda_dedup::tenant_scoped("t1", account);
    let item = get_item(&client(), &env("DEDUP_TABLE_BALANCES"), "account", &key).await?;
    item.get("balance")?.as_n().ok()?.parse().ok()
}

async fn balance_is(what: &str, account: &str, want: i64) {
    eventually(what, Duration::from_secs(60), || async {
        balance(account).await.filter(|b| *b == want)
    })
    .await;
}

/// A queue of this test's own.
async fn queue(name: &str) -> String {
    sqs()
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("url")
}

async fn put(queue: &str, bodies: &[&String]) {
    for b in bodies {
        sqs()
            .send_message()
            .queue_url(queue)
            .message_body(*b)
            .send()
            .await
            .expect("send");
    }
}

/// Every body in `queue` (received, then made visible again).
async fn bodies_in(queue: &str) -> Vec<String> {
    let sqs = sqs();
    let mut found = Vec::new();
    let mut empty = 0;
    while empty < 2 {
        let out = sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .visibility_timeout(20)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive");
        if out.messages().is_empty() {
            empty += 1;
        }
        for m in out.messages() {
            found.push(m.body().unwrap_or_default().to_owned());
            let _ = sqs
                .change_message_visibility()
                .queue_url(queue)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .visibility_timeout(0)
                .send()
                .await;
        }
        // Made visible again: stop once everything was seen.
        if found.len() >= 50 {
            break;
        }
    }
    found.sort();
    found.dedup();
    found
}

fn counts(report: &Value) -> BTreeMap<String, u64> {
    report["counts"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

fn ids(report: &Value, list: &str) -> Vec<String> {
    report[list]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["message_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// S2, S8, S10, S11: a dead-letter queue holding what a bad day leaves — three events that
/// failed under a bug since fixed (no mark: they would apply), an event applied already, a
/// conflicting payload under an applied event's key, a late event and a malformed message.
/// `redrive --dry-run` classifies each and changes nothing; a redrive killed after its first
/// send loses nothing; the next redrive moves the rest, the late one to reconciliation, leaves
/// the duplicate, the conflict, the malformed message and the copy the killed run had sent
/// (now a duplicate by key), and each good event moves its balance exactly once.
#[tokio::test]
async fn e2e_operator_redrive_moves_each_good_message_once_even_when_interrupted() {
    let Some(Run { id: run, account }) = e2e_run("redrive") else {
        return;
    };
    let credit =
        |id: &str, amount: i64| ledger_credit("/e2e", &format!("{run}-{id}"), &account, amount);
    let applied = credit("applied", 5);
    first_credit_applied(&applied, &account).await;

    let dlq = queue(&format!("{run}-dlq")).await;
    let fixed = [credit("p1", 1), credit("p10", 10), credit("p100", 100)];
    let conflict = credit("applied", 500);
    let late = late_event(
        "credit",
        &format!("{run}-late"),
        json!({"account": account, "amount": 1000}),
    );
    let malformed = format!("{{\"broken\": \"{run}\"");
    let all: Vec<&String> = fixed
        .iter()
        .chain([&applied, &conflict, &late, &malformed])
        .collect();
    put(&dlq, &all).await;
    let source = env("DEDUP_QUEUE_LEDGER_PROJECTOR");
    let redrive = |extra: &[&str]| redrive_args(&dlq, &source, "5", extra);

    // The dry run: each classified, nothing moved.
    let args = redrive(&["--dry-run"]);
    let out = cli(&as_refs(&args), &[]).await;
    succeeded(&out);
    let report = json_of(&out);
    assert_eq!(
        counts(&report),
        BTreeMap::from([
            ("would_apply".into(), 3),
            ("duplicate".into(), 1),
            ("conflict".into(), 1),
            ("late".into(), 1),
            ("no_identity".into(), 1),
        ]),
        "{report:#}"
    );
    assert!(ids(&report, "moved").is_empty());
    // One of them by id, read from the queue and left there, as explain sees it.
    let conflicting = report["left"]
        .as_array()
        .expect("left")
        .iter()
        .find(|r| r["verdict"] == "conflict")
        .and_then(|r| r["message_id"].as_str())
        .expect("the conflict's id")
        .to_owned();
    let out = cli(
        &[
            "--json",
            "explain",
            "--queue",
            &dlq,
            "--message-id",
            &conflicting,
        ],
        &[],
    )
    .await;
    succeeded(&out);
    let explained = json_of(&out);
    assert_eq!(explained["verdict"], "conflict", "{explained:#}");
    assert_eq!(explained["fingerprint_matches"], false);
    assert_eq!(
        bodies_in(&dlq).await.len(),
        7,
        "the dry run changed nothing"
    );
    assert_eq!(balance(&account).await, Some(5));

    // Killed right after its first send, before the delete.
    let args = redrive(&[]);
    let out = cli(&as_refs(&args), &[("LAMBDA_DEDUP_EXIT_AFTER_SENDS", "1")]).await;
    exited(&out, 3);
    // The sent one is applied once; every message is still in the DLQ (the held ones come
    // back when their hold ends).
    let once = eventually(
        "the first send applied",
        Duration::from_secs(60),
        || async { balance(&account).await.filter(|b| [6, 15, 105].contains(b)) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        bodies_in(&dlq).await.len(),
        7,
        "nothing lost: the sent copy is still in the DLQ"
    );

    // The redrive again, to the end.
    let report_file = std::env::temp_dir().join(format!("{run}-report.json"));
    let mut args = redrive(&[]);
    args.extend(["--report".to_owned(), report_file.display().to_string()]);
    let out = cli(&as_refs(&args), &[]).await;
    succeeded(&out);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_file).expect("report"))
            .expect("json");
    assert_eq!(report, json_of(&out), "the report file is what was printed");
    let moved: Vec<(String, String)> = report["moved"]
        .as_array()
        .expect("moved")
        .iter()
        .map(|r| {
            (
                r["verdict"].as_str().unwrap_or_default().to_owned(),
                r["moved_to"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut moved_sorted = moved.clone();
    moved_sorted.sort();
    assert_eq!(
        moved_sorted,
        [
            ("late".to_owned(), "reconciliation".to_owned()),
            ("would_apply".to_owned(), "source".to_owned()),
            ("would_apply".to_owned(), "source".to_owned()),
        ],
        "{report:#}"
    );
    assert_eq!(
        counts(&report).get("duplicate"),
        Some(&2),
        "the applied one and the killed run's sent copy: {report:#}"
    );
    assert_eq!(ids(&report, "left").len(), 4, "{report:#}");

    balance_is("every fixed event applied once", &account, 5 + 1 + 10 + 100).await;
    assert_ne!(once, 116);
    let left = bodies_in(&dlq).await;
    let mut want: Vec<String> = vec![applied.clone(), conflict.clone(), malformed.clone()];
    let killed_copy = fixed
        .iter()
        .find(|b| {
            let amount = serde_json::from_str::<Value>(b).expect("json")["data"]["amount"]
                .as_i64()
                .unwrap_or(0);
            amount == once - 5
        })
        .expect("the killed run's message");
    want.push(killed_copy.clone());
    want.sort();
    assert_eq!(
        left, want,
        "left: the duplicates, the conflict and the malformed one"
    );

    // The late event went to reconciliation, tagged, with its key; never to the balance.
    let recon = env("DEDUP_QUEUE_RECONCILIATION");
    let tagged = eventually(
        "the late event in reconciliation",
        Duration::from_secs(30),
        async || {
            crate::e2e::waiting(&sqs(), &recon)
                .await?
                .iter()
                .find(|m| m.body() == Some(late.as_str()))
                .map(|m| {
                    let a = m.message_attributes().cloned().unwrap_or_default();
                    let get = |k: &str| a.get(k).and_then(|v| v.string_value()).map(str::to_owned);
                    (get("dedup-reason"), get("dedup-key"))
                })
        },
    )
    .await;
    assert_eq!(tagged.0.as_deref(), Some("late_event"));
    assert!(
        tagged
            .1
            .is_some_and(|k| k.starts_with("demo#ledger-projector#"))
    );

    // Redriving what is left moves nothing.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let args = redrive(&[]);
    let out = cli(&as_refs(&args), &[]).await;
    let again = json_of(&out);
    assert!(ids(&again, "moved").is_empty(), "{again:#}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(balance(&account).await, Some(116), "nothing applied twice");
}

/// S8, S14: `explain` says an applied event is a duplicate and shows its mark; `forget`
/// removes the mark with an audit item (refusing a live lease without `--force`); the event
/// redelivered is applied again exactly once; and `account` still closes, because it
/// subtracts the forgotten mark.
#[tokio::test]
async fn e2e_operator_forget_then_redelivery_applies_once_and_the_account_closes() {
    let Some(Run { id: run, account }) = e2e_run("forget") else {
        return;
    };
    let event = ledger_credit("/e2e", &format!("{run}-1"), &account, 7);
    let file = std::env::temp_dir().join(format!("{run}.json"));
    std::fs::write(&file, &event).expect("write");
    let path = file.display().to_string();

    let out = cli(&["--json", "explain", &path], &[]).await;
    succeeded(&out);
    assert_eq!(json_of(&out)["verdict"], "would_apply");

    send("DEDUP_QUEUE_LEDGER_PROJECTOR", std::slice::from_ref(&event)).await;
    balance_is("the credit", &account, 7).await;

    let out = cli(&["--json", "explain", &path], &[]).await;
    let explained = json_of(&out);
    assert_eq!(explained["verdict"], "duplicate", "{explained:#}");
    assert_eq!(explained["mark"]["status"], "COMPLETED");
    assert_eq!(explained["fingerprint_matches"], true);
    let key = explained["key"].as_str().expect("key").to_owned();
    // For people: one line of verdict.
    let out = cli(&["explain", &path], &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("verdict: is a duplicate of the event first processed at"),
        "{text}"
    );
    // From the function's entry in the template, with only what a deployment knows (the
    // table, the namespace) and the endpoints in the environment: the same verdict.
    let only: Vec<(String, String)> = function_env()
        .into_iter()
        .filter(|(k, _)| k.starts_with("AWS_") || k == "DEDUP_MARK_TABLE" || k == "DEDUP_NAMESPACE")
        .collect();
    let out = cli_in(&["--json", "explain", &path], only).await;
    succeeded(&out);
    assert_eq!(json_of(&out)["verdict"], "duplicate");
    assert_eq!(json_of(&out)["key"], key.as_str());
    // By key, as a log line gives it.
    let out = cli(&["--json", "explain", "--key", &key], &[]).await;
    assert_eq!(json_of(&out)["mark"]["status"], "COMPLETED");
    // By its digest alone.
    let digest = key.rsplit('#').next().expect("digest");
    let out = cli(&["--json", "explain", "--key", digest], &[]).await;
    assert_eq!(json_of(&out)["mark"]["key"], key.as_str());

    // A live lease is refused without --force, and nothing is written.
    let ddb = client();
    let marks = env("DEDUP_TABLE_MARKS");
    let held = format!("demo#ledger-projector#{run}-held");
    let far = (std::time::SystemTime::now() + Duration::from_secs(3600))
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time");
    ddb.put_item()
        .table_name(&marks)
        .item("pk", AttributeValue::S(held.clone()))
        .item("status", AttributeValue::S("IN_PROGRESS".into()))
        .item("owner", AttributeValue::S("someone".into()))
        .item(
            "lease_expires_at",
            AttributeValue::N(far.as_millis().to_string()),
        )
        .item("expires_at", AttributeValue::N(far.as_secs().to_string()))
        .item("first_seen_at", AttributeValue::N("1".into()))
        .send()
        .await
        .expect("put");
    let out = cli(&["--json", "forget", &held, "--reason", "test"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["why"], "live_lease");
    assert!(
        get_item(&ddb, &marks, "pk", &held).await.is_some(),
        "not removed"
    );
    let out = cli(
        &[
            "--json", "forget", &held, "--reason", "test", "--force", "--yes",
        ],
        &[],
    )
    .await;
    assert_eq!(json_of(&out)["forgotten"], true);

    // 36.7: a dry run says what it would forget and writes nothing; off a terminal (as here) a
    // forget without --yes is refused, naming it, and writes nothing either.
    let out = cli(
        &["--json", "forget", &key, "--reason", "look", "--dry-run"],
        &[],
    )
    .await;
    succeeded(&out);
    assert_eq!(json_of(&out)["would_forget"], true);
    let out = cli(&["forget", &key, "--reason", "unconfirmed"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--yes"),
        "{out:?}"
    );
    assert!(
        get_item(&ddb, &marks, "pk", &key).await.is_some(),
        "neither the dry run nor the unconfirmed forget removed the mark"
    );

    // Forget the applied one, on purpose.
    let out = cli(
        &[
            "--json",
            "forget",
            &key,
            "--reason",
            "ticket 42: re-apply",
            "--by",
            "ops",
            "--yes",
        ],
        &[],
    )
    .await;
    succeeded(&out);
    let forgotten = json_of(&out);
    let audit_key = forgotten["audit_key"].as_str().expect("audit key");
    let audit = get_item(&ddb, &marks, "pk", audit_key)
        .await
        .expect("audit item");
    let s = |k: &str| audit.get(k).and_then(|v| v.as_s().ok()).cloned();
    assert_eq!(s("status").as_deref(), Some("FORGOTTEN"));
    // 36.7: the caller as AWS authenticated it (moto's STS, asked here with the same
    // credentials), `--by` kept as a note; and the audit item under a key no function role's
    // dynamodb:LeadingKeys (`demo#<consumer>#*`) covers.
    let sts = lambda_dedup_testkit::local_client!(aws_sdk_sts, env("DEDUP_SQS_ENDPOINT"));
    let me = sts.get_caller_identity().send().await.expect("moto's STS");
    assert_eq!(
        s("forgotten_by_caller").as_deref(),
        me.arn(),
        "the caller, by STS"
    );
    assert_eq!(forgotten["caller"].as_str(), me.arn());
    assert_eq!(s("forgotten_by").as_deref(), Some("ops"), "--by, a note");
    assert!(
        audit_key.starts_with("!audit#") && !audit_key.starts_with("demo#"),
        "{audit_key}"
    );
    assert_eq!(s("reason").as_deref(), Some("ticket 42: re-apply"));
    assert_eq!(s("mark_status").as_deref(), Some("COMPLETED"));
    assert!(
        s("mark").is_some_and(|m| m.contains(&key)),
        "the mark as it was"
    );
    assert!(
        get_item(&ddb, &marks, "pk", &key).await.is_none(),
        "the mark is gone"
    );
    let out = cli(&["--json", "forget", &key, "--reason", "again"], &[]).await;
    assert_eq!(json_of(&out)["why"], "no_mark");

    // Redelivered (twice) once warm caches ask the table again: applied again exactly once.
    let wait = forgotten["effective_after_seconds"]
        .as_u64()
        .expect("seconds");
    assert!(wait <= 10, "the local stack's DEDUP_CACHE_SECONDS");
    tokio::time::sleep(Duration::from_secs(wait + 1)).await;
    send(
        "DEDUP_QUEUE_LEDGER_PROJECTOR",
        &[event.clone(), event.clone()],
    )
    .await;
    balance_is("the credit applied again", &account, 14).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(balance(&account).await, Some(14), "once, not twice");

    // The account closes, with the forgotten mark subtracted (EMF lines reach the log after
    // the marks commit, so it is read until it does).
    let log = env("DEDUP_FUNCTIONS_LOG");
    let closed = eventually(
        "the account to close",
        Duration::from_secs(60),
        async || {
            let out = cli(&["--json", "account", "--log", &log], &[]).await;
            let v = json_of(&out);
            (v["closes"] == true).then_some(v)
        },
    )
    .await;
    assert!(closed["forgotten"].as_u64() >= Some(1), "{closed:#}");
}

/// Runs `lambda-dedup` as [`cli`] does, but gives up after `limit`: `None` if it had not
/// finished by then (it is killed).
async fn cli_within(limit: Duration, args: &[&str]) -> Option<Output> {
    let mut child = std::process::Command::new(env("DEDUP_CLI"))
        .env_clear()
        .envs(function_env())
        .args(["--function", "ledger-projector", "--template", TEMPLATE])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lambda-dedup runs");
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A FIFO queue of this test's own (`name` without the `.fifo`), deduplicating by the ids its
/// senders give.
async fn fifo_queue(name: &str) -> String {
    sqs()
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("create FIFO queue")
        .queue_url
        .expect("url")
}

/// A queue URL where no queue is: every send to it fails.
fn no_queue(beside: &str) -> String {
    let (base, _) = beside.rsplit_once('/').expect("a queue URL");
    format!("{base}/no-such-queue-{}", beside.len())
}

/// The queue's approximate counts: (visible, in flight).
async fn depth(queue: &str) -> (u64, u64) {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs()
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("attributes");
    let get = |a: A| {
        out.attributes()
            .and_then(|m| m.get(&a))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        get(A::ApproximateNumberOfMessages),
        get(A::ApproximateNumberOfMessagesNotVisible),
    )
}

/// 36.16: a hold shorter than the scan makes the held messages visible again while the scan
/// goes on; they are received again, but not classified again, and the redrive ends (it used
/// to go on for ever), counting each message once.
#[tokio::test]
async fn e2e_operator_redrive_ends_when_its_hold_is_shorter_than_its_scan() {
    let Some(Run { id: run, account }) = e2e_run("redrive-hold") else {
        return;
    };
    let (dlq, _) = dlq_with_two_credits(&run, &account).await;
    let source = env("DEDUP_QUEUE_LEDGER_PROJECTOR");
    let args = redrive_args(&dlq, &source, "1", &["--dry-run"]);
    let out = cli_within(Duration::from_secs(30), &as_refs(&args))
        .await
        .expect("the redrive ends");
    succeeded(&out);
    let report = json_of(&out);
    assert_eq!(
        counts(&report),
        BTreeMap::from([("would_apply".into(), 2)]),
        "{report:#}"
    );
    assert_eq!(ids(&report, "left").len(), 2, "{report:#}");
}

/// 36.16: messages that would apply but cannot be sent (the source queue is gone) stay in the
/// DLQ, and the redrive says it failed: exit status 1, not "moved 0, left 2" and 0.
#[tokio::test]
async fn e2e_operator_redrive_that_could_not_send_exits_non_zero_and_keeps_the_messages() {
    let Some(Run { id: run, account }) = e2e_run("redrive-unsent") else {
        return;
    };
    let (dlq, bodies) = dlq_with_two_credits(&run, &account).await;
    let gone = no_queue(&dlq);
    let out = cli(&as_refs(&redrive_args(&dlq, &gone, "5", &[])), &[]).await;
    exited(&out, 1);
    let report = json_of(&out);
    assert!(ids(&report, "moved").is_empty(), "{report:#}");
    assert_eq!(report["not_moved"], 2, "{report:#}");
    let mut want: Vec<String> = bodies.to_vec();
    want.sort();
    assert_eq!(bodies_in(&dlq).await, want, "both still in the DLQ");
}

/// 36.5: a redrive to a FIFO source queue sends each message with its group id, in its
/// group's order, deduplicated by an id derived from its dedup key (it used to send without
/// them: nothing moved).
#[tokio::test]
async fn e2e_operator_fifo_redrive_keeps_each_group_its_order_and_a_key_derived_dedup_id() {
    let Some(Run { id: run, account }) = e2e_run("redrive-fifo") else {
        return;
    };
    let dlq = fifo_queue(&format!("{run}-dlq")).await;
    let source = fifo_queue(&format!("{run}-src")).await;
    let credit =
        |id: &str, amount: i64| ledger_credit("/e2e", &format!("{run}-{id}"), &account, amount);
    let sent = [
        ("a", credit("a1", 1)),
        ("a", credit("a2", 2)),
        ("b", credit("b1", 3)),
        ("a", credit("a3", 4)),
    ];
    for (i, (group, body)) in sent.iter().enumerate() {
        sqs()
            .send_message()
            .queue_url(&dlq)
            .message_body(body)
            .message_group_id(*group)
            .message_deduplication_id(format!("d{i}"))
            .send()
            .await
            .expect("send");
    }
    let out = cli(&as_refs(&redrive_args(&dlq, &source, "5", &[])), &[]).await;
    succeeded(&out);
    let report = json_of(&out);
    assert_eq!(ids(&report, "moved").len(), 4, "{report:#}");

    let mut got: Vec<(String, String, String)> = Vec::new();
    for _ in 0..10 {
        let out = sqs()
            .receive_message()
            .queue_url(&source)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive");
        for m in out.messages() {
            let attr = |a| {
                m.attributes()
                    .and_then(|x| x.get(&a))
                    .cloned()
                    .unwrap_or_default()
            };
            got.push((
                attr(aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId),
                m.body().unwrap_or_default().to_owned(),
                attr(aws_sdk_sqs::types::MessageSystemAttributeName::MessageDeduplicationId),
            ));
            // Deleted, so the group's next messages are handed out.
            sqs()
                .delete_message()
                .queue_url(&source)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("delete");
        }
        if got.len() == sent.len() {
            break;
        }
    }
    for group in ["a", "b"] {
        let want: Vec<&str> = sent
            .iter()
            .filter(|(g, _)| *g == group)
            .map(|(_, b)| b.as_str())
            .collect();
        let have: Vec<&str> = got
            .iter()
            .filter(|(g, _, _)| g == group)
            .map(|(_, b, _)| b.as_str())
            .collect();
        assert_eq!(have, want, "group {group}, in order");
    }
    for (_, body, dedup_id) in &got {
        let key = crate::e2e::key_of("ledger-projector", body);
        assert_eq!(dedup_id, &key.idempotency_key(), "derived from its key");
    }
}

/// 36.8: an accepted conflict whose send fails keeps its mark: the tool forgets a mark only
/// once the new payload is sent (it used to forget first, so the original's next redelivery
/// would apply it twice), and says it failed.
#[tokio::test]
async fn e2e_operator_accepted_conflict_keeps_its_mark_when_its_send_fails() {
    let Some(Run { id: run, account }) = e2e_run("redrive-accept") else {
        return;
    };
    let applied = ledger_credit("/e2e", &format!("{run}-c"), &account, 5);
    first_credit_applied(&applied, &account).await;
    let dlq = queue(&format!("{run}-dlq")).await;
    let conflict = ledger_credit("/e2e", &format!("{run}-c"), &account, 500);
    put(&dlq, &[&conflict]).await;
    let gone = no_queue(&dlq);
    let accept = ["--accept-conflicts", "--reason", "test: accepted"];
    let out = cli(&as_refs(&redrive_args(&dlq, &gone, "5", &accept)), &[]).await;
    exited(&out, 1);
    let report = json_of(&out);
    assert_eq!(counts(&report).get("conflict"), Some(&1), "{report:#}");
    let key = crate::e2e::key_of("ledger-projector", &applied);
    let mark = get_item(&client(), &env("DEDUP_TABLE_MARKS"), "pk", key.as_str()).await;
    assert!(mark.is_some(), "the applied event's mark is kept");
    assert_eq!(bodies_in(&dlq).await, [conflict], "still in the DLQ");
}

/// 36.9: `explain --queue` on a queue with a redrive policy (a function's source queue) is
/// refused unless `--live-queue`: its receives raise the receive count that dead-letters, and
/// its holds hide messages from the function. Asked, it reads the message and lets it go at
/// once.
#[tokio::test]
async fn e2e_operator_explain_leaves_a_live_queue_alone_unless_asked() {
    let Some(Run { id: run, account }) = e2e_run("explain-live") else {
        return;
    };
    let dlq = queue(&format!("{run}-dlq")).await;
    let arn = sqs()
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("attributes")
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
        .cloned()
        .expect("arn");
    let live = sqs()
        .create_queue()
        .queue_name(format!("{run}-live"))
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy,
            json!({"deadLetterTargetArn": arn, "maxReceiveCount": 1}).to_string(),
        )
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("url");
    let body = ledger_credit("/e2e", &format!("{run}-1"), &account, 1);
    let id = sqs()
        .send_message()
        .queue_url(&live)
        .message_body(&body)
        .send()
        .await
        .expect("send")
        .message_id
        .expect("id");
    let explain = ["--json", "explain", "--queue", &live, "--message-id", &id];
    let out = cli(&explain, &[]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "refused: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--live-queue"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(depth(&live).await, (1, 0), "nothing received");

    let mut asked = explain.to_vec();
    asked.push("--live-queue");
    let out = cli(&asked, &[]).await;
    succeeded(&out);
    assert_eq!(json_of(&out)["verdict"], "would_apply");
    assert_eq!(depth(&live).await, (1, 0), "visible again at once");
    assert_eq!(depth(&dlq).await, (0, 0), "nothing dead-lettered");
}
