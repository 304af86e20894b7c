//! The builder: one function's deduplication, built from its settings in `main`, as a
//! [`tower::Service`](lambda_runtime::Service) per source that `lambda_runtime::run` takes directly.
//!
//! ```no_run
//! use lambda_dedup_runtime::{Dedup, Effect, Event, HandlerError, Tenant};
//!
//! #[derive(serde::Deserialize)]
//! struct Credit { account: String, amount: i64 }
//!
//! fn credit(balances: &str, e: Event<Credit>) -> Result<Effect, HandlerError> {
//!     let account = e.scoped(&e.payload.account);
//!     Ok(Effect::add(balances, ("account", account), "balance", e.payload.amount))
//! }
//!
//! # async fn run() -> Result<(), lambda_runtime::Error> {
//! // The tenant is the payload's: the queue's policy names the producers, declared trusted.
//! let dedup = Dedup::from_env("sqs-credit")?
//!     .tenant(Tenant::extension("tenantid"))
//!     .trusted_producers()
//!     .dynamodb()
//!     .await;
//! let balances = dedup.env().required("BALANCES_TABLE")?;
//! lambda_runtime::run(dedup.sqs(move |e| credit(&balances, e))?).await
//! # }
//! ```
//!
//! [`Dedup::from_env`] reads every setting of [`lambda_dedup_config`] and refuses to start on a bad
//! one (S9); the store is chosen once, bound to the settings ([`Dedup::on`]: `.dynamodb().await`
//! in Lambda, an [`Items`] of a `MemoryStore` in tests), and every guard the settings document is applied to the service it
//! builds. The work per event is a plain function of a typed [`Event`]: the payload deserialised
//! into the user's own type, with its tenant, key, time and provenance (who vouched for the
//! tenant).
//!
//! | source | service | flows ([`flow`]) |
//! | --- | --- | --- |
//! | SQS, standard and FIFO | [`Dedup::sqs`] | every flow: a closure or [`flow::transact`] (`.one_transaction_per_batch()`, `.then(..)`, `.then_call(..)`), [`flow::calls`], [`flow::calls_service`], [`flow::create_once`], [`flow::sequence`] (FIFO) |
//! | SNS → SQS, EventBridge → SQS | [`Dedup::envelope`] then [`Dedup::sqs`] | as SQS; the payload and pointers the inner message's |
//! | SNS (direct subscription), EventBridge (target) | `dedup.door(Sns, flow)`, `dedup.door(EventBridge, flow)` ([`door`](crate::door)) | every flow that goes message by message; Ok only when all are acknowledged |
//! | Kinesis, DynamoDB Streams (features `kinesis`, `dynamodb-streams`) | `dedup.door(Kinesis, flow)`, `dedup.door(DynamoDbStream, flow)` | every flow that keeps order: all but a batch-wide transaction |
//! | Kafka, Amazon MQ (features `kafka`, `mq`) | `dedup.door(Kafka::on(&dedup)?, flow)`, `dedup.door(ActiveMq, flow)`, `dedup.door(RabbitMq, flow)` | as Kinesis |
//! | S3 notifications (feature `s3`) | `dedup.door(S3, latest_wins(work))` | latest wins only |
//! | a door of your own ([`Door`](crate::door::Door)) | [`Dedup::door`] | as its ordering allows |
//! | direct invoke (any JSON, any serde response), in a key space chosen openly ([`InvokeScope`]) | [`Dedup::invoke`] | a leased work whose response duplicates get back |
//! | HTTP, signed webhooks (feature `webhook`) | `WebhookService::new(dedup, config)` | the inbox item created once |
//! | HTTP APIs with `Idempotency-Key` (feature `http`: API Gateway REST/HTTP, ALB, Function URL) | `Dedup::http` | the work's `Reply`: its effects committed with the mark, its answer replayed |
//! | DynamoDB Streams of items that settle themselves (feature `dynamodb-streams`) | `RelayService::new(dedup, &vars, layout, act)` | an action per record, settled on the item |
//!
//! A flow a store cannot do ([`flow::create_once`] and [`flow::sequence`] on PostgreSQL or
//! Valkey) does not compile, nor does a batch-wide transaction on a stream.

use std::sync::Arc;

use lambda_dedup::{FingerprintSource, IdentitySource, KeySpec, MarkStore, Scope, TenantSource};
use lambda_dedup_engine::{Deduplicator, LeasedDeduplicator};
pub use lambda_dedup_engine::{HandlerError, Invalid, Transient};

use crate::aws::FromSettings as _;
use crate::store::{Items, Marks, NoStore};
use account::{Accounting, Reconciliation};
use lambda_dedup_config::{Env, Settings, SettingsError};

pub(crate) mod account;
mod event;
pub mod flow;
mod invoke;
mod runner;

use event::PayloadAt;
pub use event::{Event, IntoPlan, parse};
pub use invoke::{InvokeError, InvokeScope, InvokeScopeError};
pub(crate) use runner::Runner;
pub use runner::{Service, SqsService};
#[cfg(feature = "webhook")]
pub(crate) mod request;

/// One function's deduplication: its settings, how keys are derived, the store `S`, and where
/// the account and late events go. Build it in `main`; turn it into the service of its source.
///
/// Without a store there is no service: a `Dedup<NoStore>` has no `sqs` (nor any other source).
///
/// ```compile_fail
/// # fn f(env: &lambda_dedup_runtime::Env) {
/// use lambda_dedup_runtime::{Dedup, Effect, Event};
/// let dedup = Dedup::read(env, "orders").unwrap();
/// // No `.on(…)` (nor `.dynamodb().await`): does not compile.
/// let _ = dedup.sqs(|_: Event<serde_json::Value>| Vec::<Effect>::new());
/// # }
/// ```
pub struct Dedup<S = Items> {
    pub(crate) function: String,
    pub(crate) env: Env,
    pub(crate) settings: Settings,
    identity: IdentitySource,
    /// Whether the identity was chosen ([`Dedup::identity`]), or is the default: a door
    /// with a default of its own (Kafka's position, S3's event) takes it then, and never
    /// replaces a choice.
    identity_chosen: bool,
    tenant: TenantSource,
    /// Whether the function declared its producers trusted to name the tenant in the payload
    /// ([`Dedup::trusted_producers`]).
    producers_trusted: bool,
    fingerprint: Option<FingerprintSource>,
    pub(crate) store: S,
    accounting: Accounting,
    #[cfg(feature = "parking")]
    parking: Option<Arc<crate::parking::Parking>>,
    /// Whether a CloudEvent's payload is the whole body ([`Identity::cloudevents_whole_body`]).
    whole_body: bool,
    pub(crate) envelope: Option<Envelope>,
}

/// The envelope an SQS message's body is in (`Dedup::envelope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Envelope {
    /// An SNS notification (a topic's SQS subscription without raw message delivery): the
    /// payload is its `Message` string, the attributes its `MessageAttributes`. With raw
    /// delivery there is no envelope: the body is the message and SNS's attributes are the
    /// SQS message's, so set none.
    Sns,
    /// An EventBridge event (a rule's SQS target): the payload is its `detail`.
    EventBridge,
    /// An S3 event notification sent to an SQS queue (feature `s3`): the payload is its one
    /// record, read as the S3 door reads it; pair it with
    /// `.identity(Identity::attribute(s3::IDENTITY_ATTRIBUTE))` and the `latest_wins` flow. A body of
    /// another shape — S3's `s3:TestEvent`, sent when the notification is configured, or a
    /// body of several records — is refused `envelope_malformed`.
    #[cfg(feature = "s3")]
    S3,
}

impl<S> std::fmt::Debug for Dedup<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedup")
            .field("function", &self.function)
            .field("identity", &self.identity)
            .field("store", &std::any::type_name::<S>())
            .finish_non_exhaustive()
    }
}

/// Where an event's identity is read, for [`Dedup::identity`]: a `&str` is a JSON pointer into
/// the body (`"/order_id"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    source: IdentitySource,
    /// A CloudEvent's payload is the whole body, not its `data`.
    whole_body: bool,
}

impl Identity {
    /// The event is a structured CloudEvent: its identity is `source` + `id`, its fingerprint
    /// the `data`, its time the `time`, and the work's payload the `data`. The default; choose
    /// it to keep it on a door with a default identity of its own (Kafka's position, S3's
    /// event).
    pub fn cloudevents() -> Self {
        Self::of(IdentitySource::CloudEvents)
    }

    /// As [`cloudevents`](Self::cloudevents), but the work's payload is the whole event, its
    /// envelope too (work that reads its `type`).
    pub fn cloudevents_whole_body() -> Self {
        Self {
            source: IdentitySource::CloudEvents,
            whole_body: true,
        }
    }

    fn of(source: IdentitySource) -> Self {
        Self {
            source,
            whole_body: false,
        }
    }

    /// The message attribute `name` (an SQS message attribute, a Kafka header, an Amazon MQ
    /// property or header).
    pub fn attribute(name: &str) -> Self {
        Self::of(IdentitySource::MessageAttribute(name.to_owned()))
    }

    /// The id of the envelope the message came in: the SNS `MessageId`, the EventBridge `id`, a
    /// direct invocation's request id. **Opt-in, and only for producers with no identity of
    /// their own**: it catches the broker's redelivery (SNS's retries, Lambda's async retries),
    /// not a producer that publishes again (S1).
    pub fn envelope_id() -> Self {
        Self::of(IdentitySource::EnvelopeId)
    }
}

impl From<&str> for Identity {
    /// The value at the JSON pointer `pointer` (e.g. `/order_id`).
    fn from(pointer: &str) -> Self {
        Self::of(IdentitySource::JsonPointer(pointer.to_owned()))
    }
}

/// Where an event's tenant is read, for [`Dedup::tenant`]: a `&str` is a JSON pointer into the
/// body (`"/tenant"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(TenantSource);

impl Tenant {
    /// The CloudEvents extension attribute `name` (e.g. `tenantid`) of a structured CloudEvent.
    pub fn extension(name: &str) -> Self {
        Self(TenantSource::CloudEventsExtension(name.to_owned()))
    }
}

impl From<&str> for Tenant {
    /// The value at the JSON pointer `pointer` (e.g. `/tenant`).
    fn from(pointer: &str) -> Self {
        Self(TenantSource::JsonPointer(pointer.to_owned()))
    }
}

/// What the builder refuses: a setting (S9 and the rest of [`lambda_dedup_config`]). A service
/// without a store is not refused: it does not compile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting is missing or invalid.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The identity chosen is one the door's records cannot carry (the envelope id on a door
    /// whose records have no envelope): refused, never replaced by the door's own.
    #[error("the {door} door's records carry no {identity}: choose another identity")]
    IdentityUnavailable {
        /// The door.
        door: &'static str,
        /// The identity chosen.
        identity: &'static str,
    },
    /// The tenant is read from the message, which only the payload vouches for, and the function
    /// did not declare its producers trusted ([`Dedup::trusted_producers`]): any sender that
    /// reached the door could name any tenant (S1).
    #[error(
        "{function}: the tenant is read from the message and only the payload vouches for it; \
         declare the producers trusted (Dedup::trusted_producers) where the door's policy names \
         them, or take the tenant from a verified source"
    )]
    UnvouchedTenant {
        /// The function.
        function: String,
    },
    /// The direct invoke door's scope ([`InvokeScope`]) cannot be kept.
    #[error(transparent)]
    InvokeScope(#[from] InvokeScopeError),
}

impl Dedup<NoStore> {
    /// The deduplication of `function` from the process environment: every setting of
    /// [`lambda_dedup_config`] read and checked, or the reason it cannot start. Events are
    /// CloudEvents (identity `source` + `id`, single tenant) until told otherwise.
    pub fn from_env(function: &str) -> Result<Self, SettingsError> {
        Self::read(&Env::process(), function)
    }

    /// [`from_env`](Self::from_env) from `env`: what tests call, with the same wiring.
    pub fn read(env: &Env, function: &str) -> Result<Self, SettingsError> {
        let settings = Settings::read(env, function)?;
        let reconciliation = crate::reconcile::queue(&settings)?;
        Ok(Self {
            function: function.to_owned(),
            env: env.clone(),
            settings,
            identity: IdentitySource::CloudEvents,
            identity_chosen: false,
            tenant: TenantSource::Single,
            producers_trusted: false,
            fingerprint: None,
            store: NoStore,
            accounting: Accounting {
                namespace: crate::emf::NAMESPACE.into(),
                reconciliation: Reconciliation::To(reconciliation),
            },
            #[cfg(feature = "parking")]
            parking: None,
            whole_body: false,
            envelope: None,
        })
    }

    /// [`on`](Self::on) DynamoDB, through a client with the SDK timeouts of the settings, bound
    /// to the settings ([`Items::dynamodb`]). The store of a Lambda function.
    #[cfg(feature = "dynamodb")]
    pub async fn dynamodb(self) -> Dedup {
        let conf = crate::aws::sdk_config(&self.settings.sdk_timeouts).await;
        let items = Items::dynamodb(
            lambda_dedup_dynamodb::Client::from_conf(&conf),
            &self.settings,
        );
        self.on(items)
    }

    /// Marks in PostgreSQL: the table `DEDUP_MARK_TABLE` names (create it from
    /// [`PgStore::schema`](lambda_dedup_postgres::PgStore::schema)) on the server of
    /// `DATABASE_URL`, over TLS verified by the authorities of `PG_CA_BUNDLE` — or, for a server
    /// on loopback, plain TCP by the explicit `PG_TLS=disabled`; neither refuses the start (no
    /// silent plain text) ([`PgConfig`](lambda_dedup_config::PgConfig), from the builder's own
    /// `Env`). The settings' retention and lease, as on DynamoDB (the HTTP door's keys kept for
    /// `HTTP_KEY_RETENTION_SECONDS` instead). Connects lazily, on the first event.
    #[cfg(feature = "postgres")]
    pub fn postgres(
        self,
    ) -> Result<Dedup<crate::store::Store<lambda_dedup_postgres::SqlEffect>>, SettingsError> {
        let store = crate::store::postgres::from_settings(self.env(), self.settings())?;
        Ok(self.on(crate::store::Store::from_settings(
            store,
            lambda_dedup_postgres::PgStore::with_retention,
        )))
    }

    /// Marks in Valkey: hashes under `VALKEY_KEY_PREFIX` on the server of `VALKEY_URL`
    /// ([`ValkeyConfig`](lambda_dedup_config::ValkeyConfig), from the builder's own `Env`), kept
    /// for the settings' retention (the server's own expiry, judged at read too; the HTTP door's
    /// keys for `HTTP_KEY_RETENTION_SECONDS`) under the
    /// settings' lease. What the server must keep for the guarantee (AOF fsynced on every write,
    /// no eviction): see `lambda_dedup_valkey`. Connects lazily, on the first event.
    /// `VALKEY_HASH_TAG` puts Valkey Cluster's hash tag in the mark keys, `VALKEY_REPLICAS` makes
    /// each write wait for that many replicas, and `VALKEY_CA_BUNDLE` verifies a `rediss://`
    /// server against a private CA's roots; each bad value refuses the start, naming its
    /// variable.
    #[cfg(feature = "valkey")]
    pub fn valkey(
        self,
    ) -> Result<Dedup<crate::store::Store<lambda_dedup_valkey::ValkeyEffect>>, SettingsError> {
        let store = crate::store::valkey::from_settings(self.env(), self.settings())?;
        Ok(self.on(crate::store::Store::from_settings(
            store,
            lambda_dedup_valkey::ValkeyStore::with_retention,
        )))
    }

    /// Marks in `store`, bound to its settings when it was built: [`Items`] (DynamoDB,
    /// memory: every mode, the builder `Dedup`) or a [`Store<E>`](crate::store::Store) (PostgreSQL,
    /// Valkey, a `Recording` in tests, your own: the builder `Dedup<Store<E>>`). The builder
    /// then has the services the store can do.
    pub fn on<M: Marks>(self, store: M) -> Dedup<M> {
        Dedup {
            function: self.function,
            env: self.env,
            settings: self.settings,
            identity: self.identity,
            identity_chosen: self.identity_chosen,
            tenant: self.tenant,
            producers_trusted: self.producers_trusted,
            fingerprint: self.fingerprint,
            store,
            accounting: self.accounting,
            #[cfg(feature = "parking")]
            parking: self.parking,
            whole_body: self.whole_body,
            envelope: self.envelope,
        }
    }
}

impl<S> Dedup<S> {
    /// The identity of each event ([`Identity`]): a JSON pointer into the body
    /// (`.identity("/order_id")`; the fingerprint is then the whole body unless
    /// [`fingerprint`](Self::fingerprint) says otherwise), a message attribute
    /// ([`Identity::attribute`]) or the envelope's id ([`Identity::envelope_id`]), the payload
    /// then still the whole body; or a CloudEvent's own ([`Identity::cloudevents`], the
    /// default, its payload the `data`, or the whole event with
    /// [`Identity::cloudevents_whole_body`]).
    ///
    /// A choice: a door with a default identity of its own (Kafka's position, S3's event) keeps
    /// it only when none was chosen, and a door whose records have no envelope id (Kafka, S3,
    /// Amazon MQ, Kinesis, DynamoDB Streams) refuses the envelope id
    /// ([`BuildError::IdentityUnavailable`]) rather than replace it.
    pub fn identity(mut self, identity: impl Into<Identity>) -> Self {
        let identity = identity.into();
        self.identity = identity.source;
        self.whole_body = identity.whole_body;
        self.identity_chosen = true;
        self
    }

    /// Each SQS body is in `envelope` (SNS → SQS without raw delivery, an EventBridge rule's
    /// SQS target): the work's payload and every pointer are the inner message's (S1).
    pub fn envelope(mut self, envelope: Envelope) -> Self {
        self.envelope = Some(envelope);
        self
    }

    /// Where each event's tenant is read ([`Tenant`]): a JSON pointer into the body
    /// (`.tenant("/tenant")`) or a CloudEvents extension
    /// (`.tenant(Tenant::extension("tenantid"))`) (S1). Either is named by the message, which
    /// only the payload vouches for: the service is not built unless the function declares its
    /// producers trusted ([`trusted_producers`](Self::trusted_producers)). Without it, the
    /// function has one tenant (or the one its door names).
    pub fn tenant(mut self, tenant: impl Into<Tenant>) -> Self {
        self.tenant = tenant.into().0;
        self
    }

    /// Declares openly that the producers that reach this function's door without a verified
    /// sender are trusted to name the tenant in the payload: an internal queue whose policy
    /// names them ([`Provenance::Payload`](crate::Provenance::Payload)). A service whose tenant
    /// is read from the message is not built without it ([`BuildError::UnvouchedTenant`]). An
    /// event a verified sender vouched for ([`Provenance::Sender`](crate::Provenance::Sender):
    /// a webhook's, through the inbox forwarder) is bound to that sender whatever this says: its
    /// tenant must be the sender's, and its key lies in the sender's own key space.
    pub fn trusted_producers(mut self) -> Self {
        self.producers_trusted = true;
        self
    }

    /// Refuses a service whose tenant only the payload vouches for, unless the function
    /// declared its producers trusted.
    fn vouched(&self) -> Result<(), BuildError> {
        let from_message = matches!(
            self.tenant,
            TenantSource::CloudEventsExtension(_)
                | TenantSource::JsonPointer(_)
                | TenantSource::MessageAttribute(_)
        );
        if from_message && !self.producers_trusted {
            return Err(BuildError::UnvouchedTenant {
                function: self.function.clone(),
            });
        }
        Ok(())
    }

    /// The fingerprint is the values at `pointers`: the same identity with another value in any
    /// of them is a conflict (S11), while other fields may differ between retries.
    pub fn fingerprint(mut self, pointers: &[&str]) -> Self {
        self.fingerprint = Some(FingerprintSource::pointers(pointers));
        self
    }

    /// Stream records that can never apply are parked in `parking` rather than in the queue
    /// `DEDUP_PARKING_QUEUE_URL` names (S15): what a test parks in (`testing::parked_in`).
    #[cfg(feature = "parking")]
    pub(crate) fn parking(mut self, parking: crate::parking::Parking) -> Self {
        self.parking = Some(Arc::new(parking));
        self
    }

    /// Where stream records that can never apply are parked: [`parking`](Self::parking), or
    /// the queue `DEDUP_PARKING_QUEUE_URL` names (required then).
    #[cfg(feature = "parking")]
    fn parking_queue(&self) -> Result<Arc<crate::parking::Parking>, SettingsError> {
        match &self.parking {
            Some(p) => Ok(p.clone()),
            None => crate::parking::Parking::from_settings(&self.settings).map(Arc::new),
        }
    }

    /// The settings read.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The environment the settings were read from: every other section (a door's, a
    /// store's) is read from it too (`HttpConfig::read(dedup.env())`), and so are the
    /// function's own variables (`dedup.env().required("BALANCES_TABLE")`).
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The key spec: the identity, tenant and fingerprint chosen, with the settings' body limit
    /// and event-time source (`DEDUP_EVENT_TIME_FROM`) applied (what a test derives keys with:
    /// `testing::key_spec`).
    pub(crate) fn key_spec(&self) -> KeySpec {
        self.settings
            .key_spec(self.raw_spec(self.settings.scope.clone()))
    }

    /// The spec chosen, before the settings' body limit and event-time source.
    fn raw_spec(&self, scope: Scope) -> KeySpec {
        let mut spec = match self.identity {
            IdentitySource::CloudEvents => KeySpec::cloudevents(scope, "tenantid"),
            // The envelope id says nothing of the body, which the work still reads as JSON: the
            // whole body parsed (the pointer ""), its fingerprint as the whole body's.
            IdentitySource::EnvelopeId => KeySpec::new(scope, IdentitySource::EnvelopeId)
                .fingerprint(FingerprintSource::JsonPointer(String::new())),
            // The work reads a JSON payload, and an attribute identity would not parse the body:
            // it is fingerprinted as the whole JSON document, so it is parsed with the key.
            IdentitySource::MessageAttribute(ref name) => {
                KeySpec::new(scope, IdentitySource::MessageAttribute(name.clone()))
                    .fingerprint(FingerprintSource::JsonPointer(String::new()))
            }
            ref identity => {
                KeySpec::new(scope, identity.clone()).fingerprint(FingerprintSource::WholeBody)
            }
        }
        .tenant(self.tenant.clone());
        if let Some(f) = &self.fingerprint {
            spec = spec.fingerprint(f.clone());
        }
        spec
    }

    /// The envelope id chosen on `door`, whose records have no envelope: refused
    /// ([`BuildError::IdentityUnavailable`]).
    fn refuse_envelope_id(&self, door: &'static str) -> Result<(), BuildError> {
        match self.identity {
            IdentitySource::EnvelopeId => Err(BuildError::IdentityUnavailable {
                door,
                identity: "envelope id",
            }),
            _ => Ok(()),
        }
    }

    /// Whether the identity is the message attribute `name`: chosen so, or, when `by_default`,
    /// not chosen at all (a door whose default identity it is).
    #[cfg(feature = "kafka")]
    pub(crate) fn keyed_by_attribute(&self, name: &str, by_default: bool) -> bool {
        (by_default && !self.identity_chosen)
            || matches!(&self.identity, IdentitySource::MessageAttribute(n) if n == name)
    }

    fn payload_at(&self) -> PayloadAt {
        match self.identity {
            IdentitySource::CloudEvents if !self.whole_body => PayloadAt::Data,
            _ => PayloadAt::Body,
        }
    }
}

impl<S: Marks> Dedup<S> {
    /// The store's marks for a service in the function's mark table.
    fn mark_store(&self) -> Result<Arc<dyn MarkStore<S::Effect>>, BuildError> {
        Ok(self.store.mark_store()?)
    }

    fn deduplicator(&self, scope: Scope) -> Result<Deduplicator<S::Effect>, BuildError> {
        self.vouched()?;
        let store = self.mark_store()?;
        // The settings' guards (body limit, event time, cache size and age) are applied in one
        // place, `aws::FromSettings`.
        Ok(self.settings.deduplicator_on(self.raw_spec(scope), store))
    }

    fn leased(&self, scope: Scope) -> Result<LeasedDeduplicator<S::Effect>, BuildError> {
        Ok(self
            .deduplicator(scope)?
            .with_provider_key_retention(self.settings.provider_key_retention))
    }

    pub(crate) fn runner(&self) -> Runner {
        Runner {
            function: self.function.clone(),
            accounting: self.accounting.clone(),
            margin: self.settings.deadline_margin.get(),
            max_concurrency: self.settings.max_concurrency,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::flow::call::merged;
    use super::flow::{self, transact};
    use super::*;
    use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
    use lambda_dedup::Lease;
    use lambda_dedup_engine::Outcome;
    use lambda_runtime::LambdaEvent;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, SystemTime};

    #[derive(Debug, serde::Deserialize)]
    struct Payment {
        amount: i64,
    }

    fn env() -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("PROVIDER_TIMEOUT_MS", "200"),
            ("DEDUP_LEASE_SECONDS", "5"),
        ])
    }

    fn dedup() -> Dedup {
        let dedup = Dedup::read(&env(), "payer").expect("settings");
        crate::testing::on_memory(dedup).0.identity("/id")
    }

    fn event(bodies: &[&str]) -> SqsEvent {
        crate::testing::events::sqs_event(bodies)
    }

    fn failed(r: &SqsBatchResponse) -> Vec<&str> {
        r.batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }

    /// S6 through the builder: one call per event however often it is delivered, with the
    /// event's idempotency key; a payload that is not the user's type is rejected uncalled.
    #[tokio::test]
    async fn calls_makes_one_call_per_event_with_its_key() {
        let calls = Arc::new(AtomicUsize::new(0));
        let keys = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, k) = (calls.clone(), keys.clone());
        let service = dedup()
            .sqs(flow::calls(move |e: Event<Payment>, lease: Lease| {
                c.fetch_add(1, Ordering::SeqCst);
                k.lock().expect("lock").push(lease.key.idempotency_key());
                let amount = e.payload.amount;
                async move { Ok(Some(format!("paid {amount}"))) }
            }))
            .expect("service");
        let bodies = [
            r#"{"id": "p-1", "amount": 5}"#,
            r#"{"id": "p-1", "amount": 5}"#,
            r#"{"id": "p-2", "amount": "five"}"#,
        ];
        let answer = service.call_with(event(&bodies)).await.expect("answer");
        assert_eq!(failed(&answer), ["m2"]);
        let answer = service
            .call_with(event(&bodies[..1]))
            .await
            .expect("answer");
        assert!(failed(&answer).is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let keys = keys.lock().expect("lock");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0], keys[0].trim(), "a key");
    }

    /// `PROVIDER_TIMEOUT_MS` through the builder: a call that outlives it is given up and the
    /// message redelivered (a retry under the same key), never left to hang the invocation.
    #[tokio::test]
    async fn calls_give_up_a_call_at_the_provider_timeout() {
        let service = dedup()
            .sqs(flow::calls(|_: Event<Payment>, _: Lease| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(None)
            }))
            .expect("service");
        let started = std::time::Instant::now();
        let (answer, outcomes) = crate::testing::with_outcomes(
            service.call_with(event(&[r#"{"id": "p-3", "amount": 1}"#])),
        )
        .await;
        assert_eq!(failed(&answer.expect("answer")), ["m0"]);
        // The refusal is the timeout, typed, with the limit it was given.
        assert!(
            matches!(
                &outcomes[..],
                [(_, Outcome::Retry { transient: Some(Transient::CallTimeout { limit }), .. })]
                    if *limit == Duration::from_millis(200)
            ),
            "{outcomes:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    /// `DEDUP_CACHE_SECONDS` through the builder: a duplicate the warm cache knows costs no
    /// store call, until the cached mark is older than the setting; then the store is asked
    /// again (so a mark an operator forgot is seen gone).
    #[tokio::test]
    async fn the_builder_ages_the_warm_cache_by_the_setting() {
        let env = env().with("DEDUP_CACHE_SECONDS", "5");
        let dedup = Dedup::read(&env, "payer").expect("settings");
        let clock = Arc::new(lambda_dedup::ManualClock::new(SystemTime::now()));
        let store = crate::testing::memory_store(dedup.settings()).with_clock(clock.clone());
        let service = dedup
            .identity("/id")
            .on(Items::new(store.clone()))
            .sqs(|_: Event<Payment>| Vec::<lambda_dedup::Effect>::new())
            .expect("service");
        let body = [r#"{"id": "p-9", "amount": 1}"#];
        for _ in 0..2 {
            let answer = service.call_with(event(&body)).await.expect("answer");
            assert!(failed(&answer).is_empty());
        }
        let warm = store.calls();
        service.call_with(event(&body)).await.expect("answer");
        assert_eq!(store.calls(), warm, "a cached duplicate asks no store");
        clock.advance(Duration::from_secs(6));
        service.call_with(event(&body)).await.expect("answer");
        assert!(
            store.calls() > warm,
            "past DEDUP_CACHE_SECONDS the store is asked"
        );
    }

    /// `transact(..).then(..)` hands the follow-up exactly the events applied now, typed, in both modes: not
    /// a duplicate, not a refusal, and nothing at all for a batch with none applied.
    #[tokio::test]
    async fn then_follows_up_the_events_applied_now() {
        for one_transaction in [false, true] {
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let calls = Arc::new(AtomicUsize::new(0));
            let (s, c) = (seen.clone(), calls.clone());
            let work = |_: Event<Payment>| Vec::<lambda_dedup::Effect>::new();
            let follow = move |applied: Vec<Event<Payment>>| {
                c.fetch_add(1, Ordering::SeqCst);
                s.lock()
                    .expect("lock")
                    .extend(applied.iter().map(|e| e.payload.amount));
                async {}
            };
            let service = if one_transaction {
                dedup().sqs(transact(work).one_transaction_per_batch().then(follow))
            } else {
                dedup().sqs(transact(work).then(follow))
            }
            .expect("service");
            let bodies = [
                r#"{"id": "p-1", "amount": 5}"#,
                r#"{"id": "p-1", "amount": 5}"#,
                r#"{"id": "p-2", "amount": "five"}"#,
                r#"{"id": "p-3", "amount": 7}"#,
            ];
            let answer = service.call_with(event(&bodies)).await.expect("answer");
            assert_eq!(failed(&answer), ["m2"]);
            let mut amounts = seen.lock().expect("lock").clone();
            amounts.sort_unstable();
            assert_eq!(amounts, [5, 7], "one_transaction={one_transaction}");
            service
                .call_with(event(&bodies[..2]))
                .await
                .expect("answer");
            assert_eq!(
                calls.load(Ordering::SeqCst),
                1,
                "no follow-up for duplicates"
            );
        }
    }

    /// S3: a payload that does not fit names the field, never quotes the value; the refusal
    /// says typed which field and how.
    #[test]
    fn a_misfit_payload_is_refused_without_quoting_it() {
        let value = serde_json::json!({"amount": "4111 1111 1111 1111"});
        let Err(HandlerError::Invalid(misfit)) = parse::<Payment>(&value) else {
            panic!("accepted");
        };
        assert_eq!(
            misfit,
            Invalid::Misfit {
                path: "amount".into()
            }
        );
        let reason = misfit.to_string();
        assert!(
            !reason.contains("4111") && reason.contains("amount"),
            "{reason}"
        );
        let Err(HandlerError::Invalid(missing)) = parse::<Payment>(&serde_json::json!({})) else {
            panic!("accepted");
        };
        assert_eq!(
            missing,
            Invalid::MissingField {
                field: "amount".into()
            }
        );
        assert!(missing.to_string().contains("amount"), "{missing}");
    }

    /// A misfit deep in the payload is named by its path, through lists and nested structs; a
    /// map key that is data (an e-mail address, a card number) is never shown.
    #[test]
    fn a_misfit_names_the_fields_path_and_never_a_key_that_is_data() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Line {
            sku: String,
            qty: u32,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Order {
            lines: Vec<Line>,
            totals: std::collections::HashMap<String, i64>,
        }
        let refusal = |v: serde_json::Value| match parse::<Order>(&v) {
            Err(HandlerError::Invalid(invalid)) => invalid,
            other => panic!("{other:?}"),
        };
        let lines = serde_json::json!([{"sku": "a", "qty": 1}, {"sku": "b", "qty": "two"}]);
        assert_eq!(
            refusal(serde_json::json!({"lines": lines, "totals": {}})),
            Invalid::Misfit {
                path: "lines[1].qty".into()
            }
        );
        assert_eq!(
            refusal(serde_json::json!({"lines": [{"qty": 1}], "totals": {}})),
            Invalid::MissingField {
                field: "lines[0].sku".into()
            }
        );
        let by_customer = serde_json::json!({"alice@example.com": "x", "4111111111111111": 1});
        let keyed = refusal(serde_json::json!({"lines": [], "totals": by_customer}));
        let Invalid::Misfit { path } = &keyed else {
            panic!("{keyed:?}");
        };
        assert!(path.starts_with("totals."), "{path}");
        let reason = keyed.to_string();
        assert!(
            !reason.contains("alice") && !reason.contains("4111"),
            "{reason}"
        );
    }

    /// Issue 42 (webhook provenance), through the builder: a service whose tenant is read from
    /// the payload is not built unless the function declares its producers trusted (every
    /// door's flow, SQS and the rest); once declared, each event says who vouched for its
    /// tenant: the verified sender the inbox forwarder names, or only the payload.
    #[tokio::test]
    async fn a_payload_tenant_needs_trusted_producers_and_each_event_says_its_provenance() {
        let payload_tenant = || {
            let dedup = Dedup::read(&env(), "payer").expect("settings");
            crate::testing::on_memory(dedup)
                .0
                .tenant(Tenant::extension("tenantid"))
        };
        let work = |_: Event<serde_json::Value>| Vec::<lambda_dedup::Effect>::new();
        let Err(BuildError::UnvouchedTenant { function }) = payload_tenant().sqs(work) else {
            panic!("built with a tenant only the payload vouches for");
        };
        assert_eq!(function, "payer");
        assert!(matches!(
            payload_tenant().sqs(flow::create_once(work)),
            Err(BuildError::UnvouchedTenant { .. })
        ));
        // A fixed or single tenant is the function's own: no declaration needed.
        assert!(dedup().sqs(work).is_ok());

        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let service = payload_tenant()
            .trusted_producers()
            .sqs(move |e: Event<serde_json::Value>| {
                s.lock()
                    .expect("lock")
                    .push((e.tenant.clone(), e.provenance.clone()));
                Vec::<lambda_dedup::Effect>::new()
            })
            .expect("declared");
        let body = |id: &str| {
            format!(
                r#"{{"specversion": "1.0", "type": "t", "source": "/s", "id": "{id}", "tenantid": "acme", "data": {{}}}}"#
            )
        };
        let mut batch = event(&[&body("e-1"), &body("e-2")]);
        let mut sender = aws_lambda_events::event::sqs::SqsMessageAttribute::default();
        sender.string_value = Some("acme".into());
        sender.data_type = Some("String".into());
        batch.records[1]
            .message_attributes
            .insert(lambda_dedup::VERIFIED_SENDER_ATTRIBUTE.into(), sender);
        let answer = service.call_with(batch).await.expect("answer");
        assert!(failed(&answer).is_empty());
        let mut seen = seen.lock().expect("lock").clone();
        seen.sort_by_key(|(_, p)| matches!(p, crate::Provenance::Sender(_)));
        assert_eq!(
            seen,
            [
                ("acme".to_owned(), crate::Provenance::Payload),
                ("acme".to_owned(), crate::Provenance::Sender("acme".into()))
            ]
        );
    }

    /// Two steps, one outcome: the first step not acknowledged decides; applied if either
    /// step applied now; a duplicate carries the call's stored result.
    #[test]
    fn the_steps_merge_into_one_outcome_per_delivery() {
        let at = SystemTime::now();
        let dup = |r: &str| Outcome::Duplicate {
            first_seen_at: at,
            result: Some(r.into()),
        };
        let retry = Outcome::retry(lambda_dedup_engine::RetryCause::Transient, "x");
        assert_eq!(merged(Outcome::Conflict, None), Outcome::Conflict);
        assert_eq!(merged(Outcome::Applied, Some(retry.clone())), retry);
        assert_eq!(merged(dup("w"), Some(Outcome::Applied)), Outcome::Applied);
        assert_eq!(merged(Outcome::Applied, Some(dup("c"))), Outcome::Applied);
        assert_eq!(merged(dup("w"), Some(dup("c"))), dup("c"));
    }

    /// A context whose deadline is `secs` from now, in epoch milliseconds as Lambda sends it.
    pub(crate) fn context_due_in(secs: u64) -> lambda_runtime::Context {
        let mut context = lambda_runtime::Context::default();
        let due = SystemTime::now() + Duration::from_secs(secs);
        context.deadline = due
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis() as u64;
        context
    }

    /// `DEDUP_DEADLINE_MARGIN_MS` of the builder's own `Env` bounds a stream service: with a
    /// margin longer than the time to the deadline, nothing is started and the shard is retried
    /// from its first record; with the default margin the same records apply.
    #[tokio::test]
    async fn a_stream_service_keeps_the_margin_of_its_settings() {
        let records = || {
            let e = r#"{"specversion": "1.0", "type": "t", "source": "/s", "id": "e1", "data": {"id": "e1"}}"#;
            let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, e);
            let record = serde_json::json!({"eventSource": "aws:kinesis", "eventID": "shardId-0:1",
                "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "a",
                    "sequenceNumber": "1", "approximateArrivalTimestamp": 1_700_000_000.0,
                    "data": data}});
            serde_json::from_value::<aws_lambda_events::event::kinesis::KinesisEvent>(
                serde_json::json!({ "Records": [record] }),
            )
            .expect("event")
        };
        for (margin, retried) in [(None, 0), (Some("60000"), 1)] {
            let env = crate::testing::with_margin(env(), margin);
            let (dedup, _) =
                crate::testing::on_memory(Dedup::read(&env, "streamer").expect("settings"));
            let mut service = dedup
                .parking(crate::parking::Parking::unreachable())
                .door(crate::source::Kinesis, |_: Event<serde_json::Value>| {
                    Vec::<lambda_dedup::Effect>::new()
                })
                .expect("service");
            let answer = lambda_runtime::Service::call(
                &mut service,
                LambdaEvent::new(records(), context_due_in(30)),
            )
            .await
            .expect("answer");
            assert_eq!(
                answer.batch_item_failures.len(),
                retried,
                "margin {margin:?}: {answer:?}"
            );
        }
    }
}
