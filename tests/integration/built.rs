//! A built function or example, started as Lambda starts an execution environment: the
//! unmodified binary polling a runtime API of the test's own ([`local_lambda::concurrent`]),
//! with Lambda's variables, local credentials, the DynamoDB endpoint and the test's own
//! settings; its standard output kept, for the EMF lines it prints.

use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dedup_tests as support;
use local_lambda::concurrent::ConcurrentApi;
use tokio::io::AsyncBufReadExt;

/// A ledger example's tables, the test's own: marks and balances (keyed by `account`) on the
/// local DynamoDB at `endpoint`, and a client for reading them back.
pub(crate) struct Ledger {
    pub(crate) client: aws_sdk_dynamodb::Client,
    pub(crate) marks: String,
    pub(crate) balances: String,
}

impl Ledger {
    /// Creates the tables on the local DynamoDB at `endpoint`.
    pub(crate) async fn tables(endpoint: &str) -> Self {
        let client = support::client_at(endpoint);
        let marks = support::mark_table(&client).await;
        let balances = support::effect_table(&client, "account").await;
        Ledger {
            client,
            marks,
            balances,
        }
    }

    /// The variables every ledger example reads: a namespace of its own (`name`, made unique),
    /// the mark table and the balances table.
    pub(crate) fn vars(&self, name: &str) -> [(&'static str, String); 3] {
        [
            ("DEDUP_NAMESPACE", support::unique(name)),
            ("DEDUP_MARK_TABLE", self.marks.clone()),
            ("BALANCES_TABLE", self.balances.clone()),
        ]
    }

    /// The balance of `account`, if it has one.
    pub(crate) async fn balance(&self, account: &str) -> Option<i64> {
        support::balance(&self.client, &self.balances, account).await
    }

    /// How many marks the example has written.
    pub(crate) async fn marks(&self) -> usize {
        support::mark_keys(&self.client, &self.marks).await.len()
    }
}

/// The folder of the built functions (`DEDUP_FUNCTIONS_DIR`, which `cargo xtask test` sets);
/// `None`, with a line saying `test` is skipped, when it is not set.
pub(crate) fn functions_dir(test: &str) -> Option<String> {
    let dir = std::env::var("DEDUP_FUNCTIONS_DIR").ok();
    if dir.is_none() {
        eprintln!(
            "{test} skipped: DEDUP_FUNCTIONS_DIR (the built functions) is not set; `cargo xtask test` sets it"
        );
    }
    dir
}

/// [`functions_dir`], when the whole local stack is up as well ([`crate::e2e::stack_is_up`]).
pub(crate) fn functions_on_stack(test: &str) -> Option<String> {
    functions_dir(test).filter(|_| crate::e2e::stack_is_up())
}

/// `data` in base64, as the brokers' events carry a message's body.
pub(crate) fn base64(data: &str) -> serde_json::Value {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .encode(data)
        .into()
}

/// AWS's published sample event `file` (in `events/`).
pub(crate) fn sample(file: &str) -> serde_json::Value {
    let path = format!("{}/../events/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("the sample event")
}

/// A broker's sample `file` with the list of messages at `pointer` made of one copy of its first
/// message per `(item, data)`: `data` in base64 as its body, changed by `fill` with `item`.
pub(crate) fn sample_messages<T>(
    file: &str,
    pointer: &str,
    messages: &[(T, &str)],
    fill: impl Fn(&mut serde_json::Value, &T),
) -> serde_json::Value {
    let mut sample = sample(file);
    let list = sample.pointer_mut(pointer).expect("the sample's messages");
    let first = list[0].clone();
    *list = messages
        .iter()
        .map(|(item, data)| {
            let mut m = first.clone();
            m["data"] = base64(data);
            fill(&mut m, item);
            m
        })
        .collect();
    sample
}

/// The invocation `run` was answered with no payload (a batch or event acknowledged); else
/// `what` and `run` are the failure.
pub(crate) fn assert_acknowledged(run: &local_lambda::concurrent::Invocation, what: &str) {
    assert!(
        matches!(
            run.answer,
            local_lambda::concurrent::Answer::Response(serde_json::Value::Null)
        ),
        "{what}: {run:?}"
    );
}

/// A credit of `amount` to `account`, as the ledger examples read it.
pub(crate) fn credit(account: &str, amount: i64) -> String {
    serde_json::json!({"account": account, "amount": amount}).to_string()
}

/// The ledger example of `door` (`{dir}/example-{door}-ledger`), started as function
/// `{door}-ledger` on tables of its own on the shared local DynamoDB (which it reaches at
/// `dynamodb`: that one, or a gate before it), with `vars` over the ledger's; polling the
/// returned runtime API.
pub(crate) async fn ledger_example(
    dir: &str,
    door: &str,
    dynamodb: Option<String>,
    vars: impl IntoIterator<Item = (&'static str, String)>,
) -> (ConcurrentApi, Built, Ledger) {
    let endpoint = local_dynamodb::shared().endpoint();
    let ledger = Ledger::tables(&endpoint).await;
    let (api, function) = Built::start(
        format!("{dir}/example-{door}-ledger"),
        &format!("{door}-ledger"),
        dynamodb.unwrap_or(endpoint),
        ledger.vars(door).into_iter().chain(vars),
    )
    .await;
    (api, function, ledger)
}

/// [`ledger_example`] parking in a queue of its own on the local SQS (`{door}-parking`), whose
/// URL comes last.
pub(crate) async fn ledger_example_parking(
    dir: &str,
    door: &str,
    dynamodb: Option<String>,
    vars: impl IntoIterator<Item = (&'static str, String)>,
) -> (ConcurrentApi, Built, Ledger, String) {
    let (url, parking) = parking(&crate::e2e::sqs(), &format!("{door}-parking")).await;
    let (api, function, ledger) =
        ledger_example(dir, door, dynamodb, parking.into_iter().chain(vars)).await;
    (api, function, ledger, url)
}

/// The string attributes of each message waiting (up to 10) on the queue `url`.
pub(crate) async fn parked(url: &str) -> Vec<std::collections::HashMap<String, String>> {
    let messages = crate::e2e::waiting(&crate::e2e::sqs(), url)
        .await
        .expect("receive");
    let attributes = |m: &aws_sdk_sqs::types::Message| {
        let all = m.message_attributes.clone().unwrap_or_default();
        all.into_iter()
            .filter_map(|(k, v)| Some((k, v.string_value?)))
            .collect()
    };
    messages.iter().map(attributes).collect()
}

/// A parking queue of the test's own on the local SQS (`name`, made unique), and the variables
/// that point a function at it: the SQS endpoint and `DEDUP_PARKING_QUEUE_URL`.
pub(crate) async fn parking(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
) -> (String, [(&'static str, String); 2]) {
    let url = sqs
        .create_queue()
        .queue_name(support::unique(name))
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("url");
    let endpoint = std::env::var("DEDUP_SQS_ENDPOINT").expect("the local SQS");
    let vars = [
        ("AWS_ENDPOINT_URL_SQS", endpoint),
        ("DEDUP_PARKING_QUEUE_URL", url.clone()),
    ];
    (url, vars)
}

/// A running binary, stopped when dropped.
pub(crate) struct Built {
    child: tokio::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Built {
    /// `program`, as function `name`, polling a runtime API of its own (returned with it), its
    /// DynamoDB at `dynamodb`, with `vars` over Lambda's own.
    pub(crate) async fn start(
        program: impl AsRef<OsStr>,
        name: &str,
        dynamodb: String,
        vars: impl IntoIterator<Item = (&'static str, String)>,
    ) -> (ConcurrentApi, Self) {
        let api = ConcurrentApi::start().await.expect("runtime API");
        let program = program.as_ref();
        let mut child = tokio::process::Command::new(program)
            .envs([
                ("AWS_LAMBDA_RUNTIME_API", api.runtime_api()),
                ("AWS_LAMBDA_FUNCTION_NAME", name.to_owned()),
                ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512".into()),
                ("AWS_REGION", "us-east-1".into()),
                ("AWS_ACCESS_KEY_ID", "local".into()),
                ("AWS_SECRET_ACCESS_KEY", "local".into()),
                ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb),
                ("RUST_LOG", "warn".into()),
            ])
            .envs(vars)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("the built {}: {e}", program.to_string_lossy()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("stdout");
        let reader = {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut read = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = read.next_line().await {
                    lines.lock().expect("lines").push(line);
                }
            })
        };
        let built = Built {
            child,
            lines,
            reader,
        };
        (api, built)
    }

    /// Stops it and returns the account lines it printed (EMF, one per invocation).
    pub(crate) async fn stop(mut self) -> Vec<serde_json::Value> {
        self.child.kill().await.expect("stopped");
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.reader).await;
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("_aws").is_some() && v.get("Received").is_some())
            .collect()
    }
}
