//! The builder's HTTP service for webhooks: signed requests through a Function URL (or an API
//! Gateway HTTP API) into the inbox, each answered once and counted (see [`crate::webhook`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), lambda_http::Error> {
//! use lambda_dedup_runtime::{Dedup, WebhookService, webhook::WebhookConfig};
//! let dedup = Dedup::from_env("webhook-receiver")?.dynamodb().await;
//! let config = WebhookConfig::read(dedup.env())?;
//! lambda_http::run(WebhookService::new(dedup, config)?).await
//! # }
//! ```

use std::sync::Arc;

use lambda_dedup_engine::CreateOnceDeduplicator;

use crate::service::request::RequestService;
use crate::service::{BuildError, Dedup};
use crate::store::Items;
use crate::webhook::{Receiver, WebhookConfig};

/// A webhook receiver's service: HTTP requests in, answers out. Cheap to clone.
pub type WebhookService = RequestService<Receiver>;

impl WebhookService {
    /// The HTTP service of a webhook receiver on the builder `dedup`: each request verified in
    /// `config`'s scheme, deduplicated by the identity the sender signs, and its inbox item
    /// created once — the item is the mark, one conditional `Put` (create-once mode, S5) —
    /// before it is answered 2xx; a retry gets the first answer again, another body under the
    /// same id 409 (S8, S11). One EMF line per request. Give it to `lambda_http::run`. On
    /// DynamoDB it reads no mark table (`DEDUP_MARK_TABLE` may be unset).
    ///
    /// Only on a store with the create-once capability ([`Items`]), not on a store of marks
    /// only:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::{Dedup, Effect, WebhookService, store::Store, webhook::WebhookConfig};
    /// fn f(dedup: Dedup<Store<Effect>>, config: WebhookConfig) {
    ///     let _ = WebhookService::new(dedup, config);
    /// }
    /// ```
    pub fn new(dedup: Dedup<Items>, config: WebhookConfig) -> Result<Self, BuildError> {
        // The inbox items are the marks: on DynamoDB, no mark table is read.
        let store = dedup.store.inbox(&config.inbox_table);
        let spec = config.key_spec(dedup.settings.scope.clone());
        // Keys by the settings' guards; the item is the mark. The warm cache
        // (`DEDUP_CACHE_SIZE`, `DEDUP_CACHE_SECONDS`) holds the items this container created or
        // found, by their whole key (the sender's scope and tenant in it): a sender's retry to
        // the same container costs no store call.
        let keys = CreateOnceDeduplicator::with_store(dedup.settings.key_spec(spec), store)
            .with_cache_for(dedup.settings.cache_size, dedup.settings.cache_max_age);
        Ok(RequestService {
            door: Arc::new(Receiver::new(
                &dedup.function,
                config,
                keys,
                dedup.settings.deadline_margin,
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::on_memory;
    use lambda_dedup::MarkStore;
    use lambda_dedup_config::Env;
    use lambda_http::tower::ServiceExt;
    use lambda_http::{Body, Request};

    const SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";

    fn env() -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("WEBHOOK_SECRETS", SECRET),
            ("WEBHOOK_TENANT", "acme"),
            ("INBOX_TABLE", "inbox"),
        ])
    }

    fn request(id: &str, body: &str) -> Request {
        crate::testing::events::signed_webhook(SECRET, id, body)
    }

    async fn post(service: &WebhookService, id: &str, body: &str) -> (u16, Option<String>, String) {
        let response = service
            .clone()
            .oneshot(request(id, body))
            .await
            .expect("answer");
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap_or_default().to_owned());
        let text = match response.body() {
            Body::Text(t) => t.clone(),
            other => format!("{other:?}"),
        };
        (response.status().as_u16(), replayed, text)
    }

    /// The service `main` builds (`WebhookService::new`): a signed event is recorded once, its
    /// inbox item the mark (create-once: the item carries the key, fingerprint and answer; no
    /// mark item is written), the sender's retry gets the first answer as a replay, another
    /// body under the same id 409, and a forgery 401.
    #[tokio::test]
    async fn the_builders_webhook_service_creates_the_inbox_item_once_as_its_mark() {
        let (dedup, store) = on_memory(Dedup::read(&env(), "webhook-receiver").expect("settings"));
        store.create_table("inbox", "event_key");
        let config = WebhookConfig::read(&env()).expect("config");
        let service = WebhookService::new(dedup, config).expect("service");
        let body = r#"{"id":"evt-1","amount":10}"#;
        let first = post(&service, "evt-1", body).await;
        assert_eq!((first.0, first.1.as_deref()), (200, None), "{first:?}");
        let again = post(&service, "evt-1", body).await;
        assert_eq!((again.0, again.1.as_deref()), (200, Some("true")));
        assert_eq!(again.2, first.2, "the first answer, stored in the item");
        assert_eq!(
            post(&service, "evt-1", r#"{"id":"evt-1","amount":99}"#)
                .await
                .0,
            409
        );

        let items = store.items("inbox");
        assert_eq!(items.len(), 1);
        let key = match items[0].0.get(lambda_dedup::create_once::CREATED_KEY) {
            Some(lambda_dedup::Value::S(k)) => k.clone(),
            other => panic!("the inbox item carries no key: {other:?}"),
        };
        assert!(first.2.contains(&key), "the answer names the inbox key");
        // No mark item: the mark table holds nothing for this event.
        let key = lambda_dedup::DedupKey::from_stored(key);
        assert!(
            store.get(&key).await.expect("get").is_none(),
            "no mark item"
        );
    }

    /// `DEDUP_DEADLINE_MARGIN_MS` of the builder's own `Env` bounds the webhook service: a
    /// margin longer than the time to the deadline answers 503 (retry later) without recording;
    /// the default margin records the same delivery.
    #[tokio::test]
    async fn the_webhook_service_keeps_the_margin_of_its_settings() {
        use lambda_http::RequestExt;
        for (margin, status) in [(None, 200), (Some("60000"), 503)] {
            let env = crate::testing::with_margin(env(), margin);
            let (dedup, store) =
                on_memory(Dedup::read(&env, "webhook-receiver").expect("settings"));
            store.create_table("inbox", "event_key");
            let config = WebhookConfig::read(&env).expect("config");
            let service = WebhookService::new(dedup, config).expect("service");
            let request = request("evt-m", r#"{"id":"evt-m"}"#)
                .with_lambda_context(crate::service::tests::context_due_in(30));
            let answer = service.clone().oneshot(request).await.expect("answer");
            assert_eq!(answer.status().as_u16(), status, "margin {margin:?}");
            assert_eq!(store.items("inbox").len(), usize::from(status == 200));
        }
    }
}
