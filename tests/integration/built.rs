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
    /// `program`, as function `name`, polling `api`, its DynamoDB at `dynamodb`, with `vars`
    /// over Lambda's own.
    pub(crate) fn start(
        program: impl AsRef<OsStr>,
        name: &str,
        api: &ConcurrentApi,
        dynamodb: String,
        vars: impl IntoIterator<Item = (&'static str, String)>,
    ) -> Self {
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
        Built {
            child,
            lines,
            reader,
        }
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
