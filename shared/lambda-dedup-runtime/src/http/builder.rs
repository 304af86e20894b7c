//! The builder's HTTP `Idempotency-Key` service: API Gateway REST and HTTP APIs, ALB and
//! Function URLs, each request answered once per key and counted (see [`crate::http`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), lambda_http::Error> {
//! use lambda_dedup_runtime::http::{HttpConfig, Reply};
//! use lambda_dedup_runtime::{Dedup, Effect, HttpEvent, Item, HandlerError};
//! let dedup = Dedup::from_env("orders-api")?;
//! let config = HttpConfig::read(dedup.env())?;
//! let service = dedup.dynamodb().await.http(config, |e: HttpEvent<serde_json::Value>| {
//!     let id = e.key.idempotency_key();
//!     let order = Item::new().with("order_id", id.as_str());
//!     Ok::<_, HandlerError>(Reply::created(serde_json::json!({ "id": id })).effect(Effect::put("orders", order)))
//! })?;
//! // The raw event, so a REST API's repeated headers and authorizer are read (`http::event`).
//! lambda_dedup_runtime::lambda_runtime::run_concurrent(service).await
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use crate::service::request::RequestService;

use lambda_dedup::{DedupKey, MarkCache, MarkStore, Retention};
use lambda_http::http::Method;
use lambda_http::request::LambdaRequest;
use lambda_http::{Adapter, Body, LambdaEvent, Response};
use serde::de::DeserializeOwned;

use crate::http::once::{CreatesOne, MarksUntil, OneItem};
use crate::http::{Door, HttpConfig, Meta, Reply, Work};
use crate::service::{BuildError, Dedup, HandlerError, parse};
use crate::store::{Items, Marks};

/// One request, typed: its JSON body read into the work's type `T`, and what its key is.
#[derive(Debug, Clone)]
pub struct HttpEvent<T> {
    /// The body.
    pub payload: T,
    /// The dedup key (the caller's scope and its `Idempotency-Key`): derive the ids of what the
    /// work creates from [`DedupKey::idempotency_key`], so a retry names the same resource.
    pub key: DedupKey,
    /// The method.
    pub method: Method,
    /// The path.
    pub path: String,
    /// Whether the request carried an `Idempotency-Key` (`false` only where keys are optional).
    pub keyed: bool,
}

impl<S: Marks> Dedup<S> {
    /// The HTTP service of an API whose requests carry `Idempotency-Key` (IETF draft): `work`
    /// answers a new key — its [`Reply`]'s effects committed with the mark and its answer
    /// stored (S5) — and every retry gets that answer again with `idempotent-replayed: true`
    /// (S8); the key with another request 422 (S11), while held in flight 409 or a bounded wait.
    /// Nothing is claimed: the answer and the effects commit with the mark in one conditional
    /// write, and a request that loses the race replays the winner's answer, so `work` acts
    /// only through its [`Reply`] (it may run for a request then answered as a replay).
    /// Keys are kept `HTTP_KEY_RETENTION_SECONDS` (the marks' retention of this service), scoped
    /// by the caller. Runs on every store, with its own effects. Give it to
    /// `lambda_runtime::run_concurrent` (or `run`): it reads the raw event, so a REST API's
    /// repeated headers and its authorizer's `principalId` are seen (`lambda_http::run` would
    /// hand it a request without them; tests may call it with a `Request`).
    pub fn http<T, F>(
        self,
        config: HttpConfig,
        work: F,
    ) -> Result<HttpService<S::Effect>, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(HttpEvent<T>) -> Result<Reply<S::Effect>, HandlerError> + Send + Sync + 'static,
    {
        // No queue horizon to outlast here: a key lives as long as the door promises (S9).
        let retention = Retention::unchecked(config.key_retention)
            .map_err(lambda_dedup_config::SettingsError::from)?;
        let store = self.store.mark_store_kept_for(retention)?;
        Ok(self.http_door(config, store, None, work))
    }

    /// The door on `store` (`once`: in one-item mode).
    fn http_door<T, F>(
        self,
        config: HttpConfig,
        store: Arc<dyn MarkStore<S::Effect>>,
        once: Option<Arc<dyn CreatesOne<S::Effect>>>,
        work: F,
    ) -> HttpService<S::Effect>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(HttpEvent<T>) -> Result<Reply<S::Effect>, HandlerError> + Send + Sync + 'static,
    {
        let work = Arc::new(work);
        let work: Work<S::Effect> = Arc::new(move |value, meta: Meta| {
            let payload: T = parse(&value)?;
            let work = work.clone();
            Ok(Box::new(move || {
                work(HttpEvent {
                    payload,
                    key: meta.key,
                    method: meta.method,
                    path: meta.path,
                    keyed: meta.keyed,
                })
            }))
        });
        RequestService {
            door: Arc::new(Door {
                config,
                store,
                scope: self.settings.scope.clone(),
                work,
                runner: self.runner(),
                cache: (self.settings.cache_size > 0).then(|| {
                    MarkCache::new(self.settings.cache_size)
                        .with_max_age(self.settings.cache_max_age)
                }),
                once,
            }),
        }
    }
}

impl Dedup<Items> {
    /// [`http`](Dedup::http) in one-item mode, for work whose creating answer puts exactly one
    /// item into `table` (an order): that item is written as its own mark, holding the answer,
    /// in one conditional `PutItem` (create-once, docs/CONTRACT.md S5) — no mark item, no
    /// transaction, no mark table read. The item's `key` attribute must be the id derived from
    /// the request's whole dedup key, [`DedupKey::idempotency_key`] of [`HttpEvent::key`]
    /// (scope, caller and `Idempotency-Key`: never a client's id nor a random one), so a retry
    /// names the same item; any other answer with effects is refused (500 `not_one_item`,
    /// nothing written). A retry, or a request that lost the race, learns from the item the
    /// failed condition returns: the same request's answer replayed with
    /// `idempotent-replayed: true` (S8), another request's 422 (S11); an item with that key
    /// this key did not create is refused (500 `effect_refused`), never overwritten. The warm
    /// cache answers retries in the same container as [`http`](Dedup::http) does.
    ///
    /// What differs from [`http`](Dedup::http): an answer that creates nothing (the work's
    /// 4xx, a validation refusal, a 404 or 405 of its routes) is not stored, as Stripe does
    /// not store requests that fail validation: its retry runs again and answers the same.
    /// No request is ever in flight (the item is written complete), so there is no 409 and
    /// `HTTP_IN_FLIGHT_WAIT_MS` has nothing to wait for. A key lasts as long as its item,
    /// not `HTTP_KEY_RETENTION_SECONDS`. A deployment whose keys were answered through
    /// [`http`](Dedup::http) switches with `HTTP_MARKS_UNTIL` (an RFC 3339 time, at least
    /// `HTTP_KEY_RETENTION_SECONDS` after the deployment): until then the item is committed
    /// with the key's mark in the mark table (`DEDUP_MARK_TABLE`, required then), conditioned
    /// on no mark, in one `TransactWriteItems`, so a key answered before is replayed, never
    /// created twice; after it, the single `PutItem`.
    ///
    /// Only on a store with create-once ([`Items`]: DynamoDB, memory), not on a store of
    /// marks only (PostgreSQL, Valkey):
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, HandlerError, HttpEvent, http::{HttpConfig, Reply}, store::Store};
    /// fn f(dedup: Dedup<Store<Effect>>, config: HttpConfig) {
    ///     let _ = dedup.http_create_once(config, "orders", "order_id", |e: HttpEvent<serde_json::Value>| {
    ///         Ok::<_, HandlerError>(Reply::created(e.payload))
    ///     });
    /// }
    /// ```
    pub fn http_create_once<T, F>(
        self,
        config: HttpConfig,
        table: &str,
        key: &str,
        work: F,
    ) -> Result<HttpService, BuildError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(HttpEvent<T>) -> Result<Reply, HandlerError> + Send + Sync + 'static,
    {
        // The items are the marks: on DynamoDB, no mark table is read (but in an upgrade's
        // window, `HTTP_MARKS_UNTIL`: the transaction path's marks, kept as it kept them).
        let store = self.store.inbox(table);
        let marks = match config.marks_until {
            Some(until) => {
                let retention = Retention::unchecked(config.key_retention)
                    .map_err(lambda_dedup_config::SettingsError::from)?;
                let marks = self.store.mark_store_kept_for(retention)?;
                Some(MarksUntil { marks, until })
            }
            None => None,
        };
        let once = OneItem {
            store: store.clone(),
            table: table.to_owned(),
            key: key.to_owned(),
            marks,
        };
        let marks: Arc<dyn MarkStore> = store;
        Ok(self.http_door(config, marks, Some(Arc::new(once)), work))
    }
}

/// An HTTP door's service: requests in, answers out. Cheap to clone.
pub type HttpService<E = lambda_dedup::Effect> = RequestService<Door<E>>;

/// What `lambda_http` answers a front with (its `LambdaResponse`, which it does not name).
type FrontResponse<E> =
    <Adapter<'static, Response<Body>, HttpService<E>> as lambda_http::Service<
        LambdaEvent<LambdaRequest>,
    >>::Response;

/// The service as Lambda runs it: the raw event read first (`http::event`: a REST API's
/// `multiValueHeaders` and authorizer kept), then answered as `lambda_http` would.
impl<E: Send + Sync + 'static> lambda_http::Service<LambdaEvent<serde_json::Value>>
    for HttpService<E>
{
    type Response = FrontResponse<E>;
    type Error = lambda_http::Error;
    type Future = Pin<Box<dyn Future<Output = Result<FrontResponse<E>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, event: LambdaEvent<serde_json::Value>) -> Self::Future {
        let mut adapter: Adapter<'static, Response<Body>, HttpService<E>> =
            Adapter::from(self.clone());
        Box::pin(async move {
            let payload = crate::http::event::read(event.payload)?;
            lambda_http::Service::call(
                &mut adapter,
                LambdaEvent {
                    payload,
                    context: event.context,
                },
            )
            .await
        })
    }
}
