//! Every variable a lambda-dedup function reads, read once into typed structs: the runtime, the
//! operators' tool (`lambda-dedup`) and `cargo xtask check-infra` take these structs and read no
//! environment of their own. Each is read from an [`Env`] (the process environment in Lambda, a
//! fixed set in tests and in the tools, so they run the reading `main` runs) and refuses, naming
//! the variable, what cannot work ([`SettingsError`]): a function does not start on a bad
//! setting (S9), and a variable no longer read is refused too, naming the one that replaced it,
//! never silently ignored.
//!
//! Nothing is built here: no AWS client, no store, no network, no Lambda runtime. The runtime
//! (`lambda-dedup-runtime`) builds its stores and clients from these structs, and reads the
//! secrets a setting names (`WEBHOOK_SECRETS_ARN`) after the settings are read. The builder reads
//! the [`Settings`] from its `Env` and every other section from the same `Env`
//! (`Dedup::env`), each with its `read(&Env)`.
//!
//! | struct | what | read by |
//! | --- | --- | --- |
//! | [`Settings`] (`settings`) | every function's: keys, retention (S9), leases, the cache, the deadline margin, with [`SdkTimeouts`] and [`SideQueues`] | `Dedup::from_env` / `Dedup::read` |
//! | [`SdkTimeouts`] (`sdk`) | how long an AWS SDK call and its attempts may take | with the settings |
//! | [`SideQueues`] (`queues`) | the reconciliation and parking queues | with the settings |
//! | [`HttpConfig`] (`http`) | the HTTP `Idempotency-Key` door's key, caller, wait, fingerprint, body, replayed headers, retention | `HttpConfig::read(dedup.env())`, given to `Dedup::http` |
//! | [`WebhookConfig`] (`webhook`) | a webhook receiver's scheme, secrets, identity, inbox | `WebhookConfig::read(dedup.env())`, or with its secrets from Secrets Manager the runtime's `webhook::webhook_config(dedup.env())` ([`SecretsArn`]), given to `WebhookService::new` |
//! | [`RelayConfig`] (`relay`) | a relay's table, record budget and sweep | `RelayService::new`, from the builder's own `Env` |
//! | [`ForwarderConfig`] (`forwarder`) | the inbox forwarder's queue, and its relay's | `relay::forward::forwarder`, from the builder's own `Env` |
//! | [`DurableConfig`] (`durable`) | a durable function's execution timeout and history retention, checked against the marks' retention (S9) | the runtime's `Dedup::durable_steps` and `durable::starts` (feature `durable`) |
//! | [`PgConfig`], [`ValkeyConfig`] (`stores`) | the PostgreSQL or Valkey server of the marks | `Dedup::postgres`, `Dedup::valkey`, from the builder's own `Env` |
//!
//! # Every function ([`Settings`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DEDUP_NAMESPACE` | environment namespace of keys (`prod`, `dev`), S1 | required |
//! | `DEDUP_CONSUMER` | consumer name in keys, S1 | the function's name |
//! | `DEDUP_MARK_TABLE` | the mark table | required by every function that keeps marks in DynamoDB's mark table; not read by the webhook receiver, whose marks are its inbox items, nor by a relay, whose items are their own marks |
//! | `DEDUP_RETENTION_SECONDS` | how long marks are kept, S9 | 2592000 (30 days) |
//! | `DEDUP_QUEUE_RETENTION_SECONDS` | the source queue's message retention | 345600 (4 days) |
//! | `DEDUP_MAX_RECEIVE_COUNT` | the redrive policy's maxReceiveCount | 5 |
//! | `DEDUP_VISIBILITY_TIMEOUT_SECONDS` | the queue's visibility timeout | 180 |
//! | `DEDUP_DLQ_RETENTION_SECONDS` | the dead-letter queue's message retention: how long a message may wait there before a redrive | 1209600 (14 days) |
//! | `DEDUP_REPLAY_WINDOW_SECONDS` | how long after an event operators may replay it from an archive | 259200 (3 days) |
//! | `DEDUP_MAX_CONCURRENCY` | messages of a batch processed at once, S12 | 10 |
//! | `DEDUP_LEASE_SECONDS` | longest lease of the leased flow, S6; must exceed the provider timeout | 60 |
//! | `DEDUP_CLOCK_SKEW_MS` | how far ahead another instance's clock may run without taking over a live lease: each lease is recorded this long past the end its owner works to (S6); below the lease | 1000 |
//! | `PROVIDER_TIMEOUT_MS` | how long a call to an external API may take (functions that call out) | 5000 |
//! | `PROVIDER_KEY_RETENTION_SECONDS` | how long the external API keeps idempotency keys; a takeover of an event first attempted longer ago goes to reconciliation instead of calling (S16); must exceed the lease | 86400 (Stripe's 24 h) |
//! | `DEDUP_CACHE_SIZE` | completed marks kept in the warm container's cache (0: off) | 10000 |
//! | `DEDUP_CACHE_SECONDS` | longest a cached mark is trusted before the mark table is asked again: a mark an operator forgets (`lambda-dedup forget`) reaches every warm container within it | 60 |
//! | `DEDUP_PREFILTER_DUPLICATES` | batch-transaction mode: `true` reads the batch's marks first (one strongly consistent `BatchGetItem`) and leaves known duplicates out of its transactions, so a duplicate does not cancel a shared round; a filter only, the conditional write still decides (S4). Worth it for duplicate-heavy queues (docs/BENCHMARKS.md) | `false` |
//! | `DEDUP_MAX_BODY_BYTES` | largest message body processed; larger ones are rejected (`body_too_large`) | 1048576 (1 MiB, the SQS limit since 2026) |
//! | `DEDUP_EVENT_TIME_FROM` | where the event's own time is read, S10: `cloudevents` (its `time`), `json:/pointer`, `attribute:NAME`, or `none` (the producer declares no time; the mark table alone decides) | the key spec's own: `cloudevents` for CloudEvents functions |
//! | `DEDUP_EVENT_TIME_FORMAT` | how a `json:` or `attribute:` time is written: `rfc3339`, `epoch-seconds` or `epoch-millis` | `rfc3339` |
//! | `DEDUP_IN_PROGRESS_WAIT_MS` | the direct invoke door (`Dedup::invoke`): how long an invocation whose event another invocation is still handling waits for its response before it answers `InvokeError::InProgress`, which the caller retries; bounded by the deadline margin too | 0 (no wait) |
//! | `DEDUP_DEADLINE_MARGIN_MS` | the one deadline margin, of every service (a relay's too): the time kept before the invocation's deadline to answer; work not done by then is abandoned and reported for redelivery (a webhook: 503 with `retry-after`), see [`DeadlineMargin`] and the runtime's `bound` | 1500 |
//!
//! A retention that does not exceed queue retention + 2 × maxReceiveCount × visibility timeout +
//! DLQ retention + replay window (a message redriven from the DLQ comes back too) is refused at
//! start (S9): the function does not run with it. So are a lease not
//! longer than the provider timeout (the lease could expire while the call is still out, and a
//! second process would call again), a zero lease, provider timeout or concurrency, and a
//! retention over 100 years (`now + retention` must not overflow), a deadline margin over 15
//! minutes, and SDK timeouts that are zero or an attempt longer than its operation.
//!
//! # AWS SDK calls ([`SdkTimeouts`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DEDUP_SDK_OPERATION_TIMEOUT_MS` | longest AWS SDK call (DynamoDB, SQS), retries included; a timeout is a transient fault | 10000 |
//! | `DEDUP_SDK_ATTEMPT_TIMEOUT_MS` | longest attempt of an AWS SDK call; at most the operation timeout | 3000 |
//!
//! # Side queues ([`SideQueues`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DEDUP_RECONCILIATION_QUEUE_URL` | where events older than the retention go, S10 (`reconcile`) | none: to the DLQ |
//! | `DEDUP_PARKING_QUEUE_URL` | Stream functions on the builder (Kinesis, DynamoDB Streams): where records that can never apply are parked, whole, before the checkpoint passes them, S15 (`lambda_dedup_runtime::Parking`) | required: a stream service refuses to start without it |
//!
//! # The Kafka door (`source::Kafka`)
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DEDUP_KAFKA_CLUSTER_ID` | the name of a self-managed Kafka cluster (Kafka's `cluster.id`, or any name that stays with it), scoping its records' positions; an MSK event is named by its own `eventSourceArn`. Never the event's `bootstrapServers`, which changes when a broker is added | required by a Kafka door keyed by position (its default identity): it refuses to start without it |
//!
//! `DEDUP_RECONCILIATION_QUEUE_URL` is refused by the runtime built without an SQS client (its
//! feature `sqs-client`, which a function sending late events names): late events would go to
//! the DLQ instead of where it says.
//!
//! # A webhook receiver ([`WebhookConfig`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `WEBHOOK_SCHEME` | how the sender signs ([`Scheme`](lambda_dedup_signature::Scheme)): `standard-webhooks` (also under Svix's `svix-*` names), `stripe`, `github`, `shopify` or `slack`; anything else is refused at start | `standard-webhooks` |
//! | `WEBHOOK_SECRETS` | the sender's secrets, comma-separated, as the sender writes them: `whsec_<base64>` (Standard Webhooks: the key is the decoded bytes) or Stripe's `whsec_…` (the string's bytes), or GitHub's, Shopify's and Slack's secret as they show it (its bytes); each key 16 bytes or more; all accepted (rotation); for local use: refused beside `WEBHOOK_SECRETS_ARN` | required, unless `WEBHOOK_SECRETS_ARN` |
//! | `WEBHOOK_SECRETS_ARN` | the Secrets Manager secret (ARN, or name) whose text is the secrets as `WEBHOOK_SECRETS` writes them, read at init by the runtime after the settings (`webhook::webhook_config`, its feature `secrets-manager`); a secret missing, unreadable or not text refuses the start (`SettingsError::Secret`) | unset |
//! | `WEBHOOK_SECRETS_REFRESH_SECONDS` | the least time between two reads of that secret after init: a signature matching none of the secrets held reads it again (a rotation, no deploy) at most this often, however many fail; 1 to 3600 | 30 |
//! | `WEBHOOK_TOLERANCE_SECONDS` | how far a signature's timestamp may be from now, either way: 1 to 3600 (an hour, [`MAX_TOLERANCE`](lambda_dedup_signature::MAX_TOLERANCE)), anything else refused at start; not applied to GitHub and Shopify, which sign no time | 300 |
//! | `WEBHOOK_ID_FROM` | the event's identity, always covered by the signature: `header:webhook-id` (Standard Webhooks' signed id; `header:svix-id` is the same) or `json:</pointer>` into the signed body; any other header is refused (GitHub's and Shopify's id headers are unsigned) | `header:webhook-id`; Stripe: `json:/id` (the event's `evt_…`); Slack: `json:/event_id`; GitHub, Shopify: none, it must be set |
//! | `WEBHOOK_TENANT` | the sender (the keys' tenant) | required |
//! | `WEBHOOK_MAX_BODY_BYTES` | the largest body | 262144 |
//! | `INBOX_TABLE` | the inbox table (key `event_key`) | required |
//! | `WEBHOOK_INBOX_RETENTION_SECONDS` | how long an inbox item — the event's mark — is kept: each item carries `expires_at` (epoch seconds) for the table's TTL; at least [`MIN_INBOX_RETENTION`] (3 days, the longest retry horizon of the senders offered: Stripe retries for up to three days), since a sender's retry after its item expired would be a new event | 2592000 (30 days) |
//!
//! # The HTTP `Idempotency-Key` door ([`HttpConfig`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `HTTP_IDEMPOTENCY_KEY` | `required` (no key: 400) or `optional` (no key: the work runs unkeyed, nothing replayed) | `required` |
//! | `HTTP_CALLER_FROM` | who the caller is, the scope of every key: `authorizer` (a JWT's `iss`+`sub`, the IAM caller's principal id — a user's, or an assumed role's without the session name its caller chooses —, a Lambda authorizer's `principalId`, REST's included), `api-key` (a REST API's key), `header:<name>` (set by the front `HTTP_CALLER_FRONT` names), or `none` (one client); a request without it gets 401 | required |
//! | `HTTP_CALLER_FRONT` | with `header:<name>` only, and required with it: the front that verifies the header, which each request must show it came through (else 401 `caller_front_missing`): `alb` (an ALB that authenticates), `iam` (a SigV4-signing front to an `AWS_IAM` Function URL or route), `authorizer` (an API Gateway route with an authorizer), or `unverified` (said openly: nothing does; a local emulator's, refused by `check-infra`) | none |
//! | `HTTP_IN_FLIGHT_WAIT_MS` | how long a request whose key is in flight waits for the first's answer before 409; at most 10000 | 0 (409 at once) |
//! | `HTTP_FINGERPRINT` | what a key's request is (another one: 422): `request` (method, path, body), `body` (the same: method and path are always covered), or `json:/a,/b` (those values, with method and path; a value that cannot be read: 400 `fingerprint_unreadable`) | `request` |
//! | `HTTP_MAX_BODY_BYTES` | the largest body (413 over it); at most 6 MB | 262144 |
//! | `HTTP_REPLAY_HEADERS` | the answer's headers stored and replayed (never a credential's or a session's — `authorization`, `proxy-authorization`, `www-authenticate`, `cookie`, `set-cookie`, `x-amz-security-token`, `x-api-key`, any name holding `token`, `secret`, `session`, `auth`, `cookie`, `password`, `credential`, `api-key` or `apikey` — nor hop-by-hop ones: refused at start) | `content-type,location` |
//! | `HTTP_KEY_RETENTION_SECONDS` | how long a key is remembered (the marks' retention for this door, on DynamoDB, PostgreSQL and Valkey alike; no queue horizon applies, S9); at least 3600 | 86400 (Stripe's 24 h) |
//! | `HTTP_MARKS_UNTIL` | until this RFC 3339 time, the one-item door (`http_create_once`) writes its item in one transaction with the key's mark, conditioned on no mark in the mark table, so keys answered through `http` before an upgrade are still replayed; after it, one `PutItem`. A value that is not an RFC 3339 time refuses the start | unset |
//!
//! # Lambda durable functions ([`DurableConfig`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DURABLE_EXECUTION_TIMEOUT_SECONDS` | the template's `DurableConfig.ExecutionTimeout`: the longest an execution runs, so the longest after its first run a step may be replayed; `DEDUP_RETENTION_SECONDS` must exceed it (a step's mark outlives every replay, S9); 1 to 31622400 (a year) | 86400 |
//! | `DURABLE_RETENTION_DAYS` | the template's `DurableConfig.RetentionPeriodInDays`: how long Lambda keeps a closed execution, and so its name; 1 to 90; `PROVIDER_KEY_RETENTION_SECONDS` may not exceed it plus the timeout (the dispatcher's starts are idempotent at Lambda only while it keeps the name, S16) | 14 |
//!
//! # The marks on PostgreSQL or Valkey ([`PgConfig`], [`ValkeyConfig`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `DATABASE_URL` | `Dedup::postgres`: the server, `postgresql://user:password@host:5432/db` (RDS Proxy's endpoint works as it is); never shown | required |
//! | `PG_CA_BUNDLE` | a PEM file of the certificate authorities the server is verified with (for RDS, Amazon's RDS bundle) | one of the two is required |
//! | `PG_TLS` | `disabled`: plain TCP, for a server on loopback only (127.0.0.0/8, `::1`, `localhost`, a unix socket; `DATABASE_URL` naming any other host is refused, `SettingRule::PlainTextOffLoopback`); any other value is refused | one of the two is required |
//! | `VALKEY_URL` | `Dedup::valkey`: the server, `rediss://[user:password@]host:port[/db]` (TLS); plain-text `redis://` (or a unix socket) only to a server on loopback (127.0.0.0/8, `::1`, `localhost`), refused otherwise (`SettingRule::PlainTextOffLoopback`); never shown | required |
//! | `VALKEY_KEY_PREFIX` | the prefix of the mark keys | the store's own |
//! | `VALKEY_HASH_TAG` | Valkey Cluster: `none`, `event` (one slot per event: `{<dedup key>}`) or `fixed:<tag>` (one slot for every mark and effect); any other form refused | `none` |
//! | `VALKEY_REPLICAS` | how many replicas acknowledge each write (`WAIT n timeout`); a write they do not acknowledge in time is a retry | 0 (no wait) |
//! | `VALKEY_REPLICAS_TIMEOUT_MS` | how long a write waits for them: 1 to 4000 (the store's `WAIT_LIMIT`), only with `VALKEY_REPLICAS`, and never past the claim's deadline | 500 |
//! | `VALKEY_CA_BUNDLE` | a PEM file of the certificate authorities a `rediss://` server is verified with, in place of the system's roots (a private CA); refused with `redis://` or unreadable | the system's roots |
//!
//! # A relay ([`RelayConfig`]: `intent-relay`, the inbox's forwarder)
//! Each relay names its table and the prefix of its own two variables ([`RelayVars`]):
//! `intent-relay` `INTENTS_TABLE` and `RELAY_`, the inbox's forwarder `INBOX_TABLE` and
//! `FORWARDER_`. The one deadline margin is `DEDUP_DEADLINE_MARGIN_MS`, as for every function.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `INTENTS_TABLE`, `INBOX_TABLE` | the relay's table, whose items carry their own settle status | required |
//! | `RELAY_RECORD_BUDGET_MS`, `FORWARDER_RECORD_BUDGET_MS` | the time one record needs, whole — its action (for `intent-relay`, one provider call of `PROVIDER_TIMEOUT_MS`, which it must exceed) and the writes around it: a record is started only with this much left before the deadline; at most 15 minutes | `intent-relay` 7000, the forwarder 3000 |
//! | `RELAY_REDRIVE_AFTER_SECONDS`, `FORWARDER_REDRIVE_AFTER_SECONDS` | how long an item may wait before the scheduled sweep re-drives it | 3600 |
//! | `RELAY_DEADLINE_MARGIN_MS`, `FORWARDER_DEADLINE_MARGIN_MS` | no longer read (they were the record budget): refused at start, naming the budget's variable | — |
//!
//! # The inbox's forwarder ([`ForwarderConfig`])
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `FORWARD_QUEUE_URL` | the queue the inbox's items are handed to | required |
//!
//! Its relay's variables are in the table above (`INBOX_TABLE`, `FORWARDER_*`).

mod durable;
mod env;
mod forwarder;
mod http;
mod keys;
mod margin;
mod queues;
mod relay;
mod rule;
mod sdk;
mod secret;
mod settings;
mod stores;
mod value;
mod webhook;

pub use durable::{DURABLE_RETENTION_VAR, DURABLE_TIMEOUT_VAR, DurableConfig};
pub use env::{Env, millis};
pub use forwarder::{FORWARD_QUEUE_VAR, FORWARDER, ForwarderConfig};
pub use http::{
    CallerFrom, CallerFront, DEFAULT_HTTP_MAX_BODY_BYTES, DEFAULT_KEY_RETENTION_SECS,
    DEFAULT_REPLAY_HEADERS, HttpConfig, HttpFingerprint, KeyRequirement, MAX_HTTP_BODY_BYTES,
    MAX_IN_FLIGHT_WAIT, MIN_KEY_RETENTION,
};
pub use keys::{KeySpecTextError, cloudevents_key_spec};
pub use margin::{DeadlineMargin, MARGIN_VAR};
pub use queues::{PARKING_QUEUE_VAR, RECONCILIATION_QUEUE_VAR, SideQueues};
pub use relay::{RelayConfig, RelayVars};
pub use rule::SettingRule;
pub use sdk::{ATTEMPT_TIMEOUT_VAR, OPERATION_TIMEOUT_VAR, SdkTimeouts};
pub use secret::{SecretError, secrets_in};
pub use settings::{
    DLQ_RETENTION_VAR, MARK_TABLE_VAR, MAX_RECEIVE_COUNT_VAR, QUEUE_RETENTION_VAR, Settings,
    SettingsError, VISIBILITY_TIMEOUT_VAR, provider_timeout_in,
};
pub use stores::{
    DEFAULT_VALKEY_REPLICAS_TIMEOUT_MS, MAX_VALKEY_REPLICAS_TIMEOUT_MS, PG_CA_BUNDLE_VAR,
    PG_TLS_VAR, PG_URL_VAR, PgConfig, PgTls, VALKEY_CA_BUNDLE_VAR, VALKEY_HASH_TAG_VAR,
    VALKEY_PREFIX_VAR, VALKEY_REPLICAS_TIMEOUT_VAR, VALKEY_REPLICAS_VAR, VALKEY_URL_VAR,
    ValkeyConfig, ValkeyHashTag,
};
pub use value::ValueError;
pub use webhook::{
    DEFAULT_INBOX_RETENTION_SECS, DEFAULT_MAX_BODY_BYTES, DEFAULT_SECRETS_REFRESH_SECS,
    DEFAULT_TOLERANCE_SECS, Headers, IdentityFrom, MAX_SECRETS_REFRESH_SECS, MIN_INBOX_RETENTION,
    SECRETS_ARN_VAR, SECRETS_REFRESH_VAR, SECRETS_VAR, SecretsArn, SecretsRotation, WebhookConfig,
};
