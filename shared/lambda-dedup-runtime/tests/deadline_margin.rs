//! `DEDUP_DEADLINE_MARGIN_MS` through the wiring a function's `main` takes: the setting is read
//! from the process environment (by `Dedup::from_env`, which refuses a bad value, as `main`
//! does), so each case runs this test binary again as a child process with the variable set,
//! and the child answers an SQS invocation whose every call hangs, its deadline sent as Lambda
//! sends it (epoch milliseconds).

use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The deadline the child's invocation gets, from its start.
const DEADLINE: Duration = Duration::from_millis(4000);

/// The child: one invocation of a function's SQS service, built as `main` builds it, over two
/// messages whose provider calls never end. Prints what it answered; run only by the parent test
/// below.
#[tokio::test]
#[ignore = "run by the_margin_setting_decides_when_a_hung_invocation_answers"]
async fn child_answers_a_hung_invocation() {
    use lambda_runtime::Service as _;
    let dedup = match lambda_dedup_runtime::Dedup::from_env("margin-test") {
        Ok(dedup) => dedup,
        Err(e) => {
            println!("REFUSED {e}");
            return;
        }
    };
    let store = lambda_dedup_memory::MemoryStore::new(dedup.settings().retention)
        .with_lease(dedup.settings().lease);
    let mut service = dedup
        .identity("/id")
        .on(lambda_dedup_runtime::store::Items::new(store))
        .sqs(lambda_dedup_runtime::flow::calls(
            |_: lambda_dedup_runtime::Event<serde_json::Value>, _| {
                std::future::pending::<Result<Option<String>, lambda_dedup_runtime::HandlerError>>()
            },
        ))
        .expect("the service");
    let event: aws_lambda_events::event::sqs::SqsEvent =
        serde_json::from_value(serde_json::json!({"Records": [
            {"messageId": "m1", "body": r#"{"id": "a"}"#, "attributes": {}, "messageAttributes": {}},
            {"messageId": "m2", "body": r#"{"id": "b"}"#, "attributes": {}, "messageAttributes": {}}
        ]}))
        .expect("event");
    let started = Instant::now();
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + DEADLINE)
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64;
    std::future::poll_fn(|cx| service.poll_ready(cx))
        .await
        .expect("ready");
    let answer = service
        .call(lambda_runtime::LambdaEvent::new(event, context))
        .await
        .expect("an answer");
    println!(
        "ANSWERED after_ms={} failures={}",
        started.elapsed().as_millis(),
        answer.batch_item_failures.len()
    );
}

/// What the child printed: `Ok((elapsed, failures))`, or `Err(what it said)`.
fn child(margin: &str) -> Result<(Duration, usize), String> {
    let exe = std::env::current_exe().expect("this test binary");
    let mut child = Command::new(exe)
        .args([
            "child_answers_a_hung_invocation",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DEDUP_DEADLINE_MARGIN_MS", margin)
        .env("DEDUP_NAMESPACE", "test")
        .env("DEDUP_MARK_TABLE", "marks")
        // The provider's own bound is longer than the deadline: the margin decides.
        .env("PROVIDER_TIMEOUT_MS", "10000")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the child starts");
    // Today's runner never answers a hung invocation: the child is stopped past its deadline.
    let limit = Instant::now() + DEADLINE + Duration::from_secs(3);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err("no answer by the deadline".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if let Some(line) = text.lines().find(|l| l.starts_with("REFUSED")) {
        return Err(line.to_owned());
    }
    let line = text
        .lines()
        .find(|l| l.starts_with("ANSWERED"))
        .ok_or_else(|| format!("the child printed no answer: {text}"))?;
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    Ok((
        Duration::from_millis(field("after_ms=")),
        field("failures=") as usize,
    ))
}

/// The margin decides when an invocation whose calls hang answers: `deadline - margin`, with
/// every unfinished message reported failed for redelivery; a value that cannot work refuses
/// the start.
#[test]
fn the_margin_setting_decides_when_a_hung_invocation_answers() {
    let (early, failed) = child("2500").expect("answered");
    assert_eq!(failed, 2, "both messages reported for redelivery");
    assert!(
        early >= Duration::from_millis(1300) && early < Duration::from_millis(2300),
        "margin 2500 of a 4000 ms deadline: answered after {early:?}"
    );
    let (late, failed) = child("500").expect("answered");
    assert_eq!(failed, 2);
    assert!(
        late >= Duration::from_millis(3300) && late < DEADLINE,
        "margin 500: answered after {late:?}, before the deadline"
    );
    let refused = child("soon").expect_err("refused");
    assert!(refused.contains("DEDUP_DEADLINE_MARGIN_MS"), "{refused}");
}
