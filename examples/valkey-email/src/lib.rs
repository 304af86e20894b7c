//! An e-mail sent once with Valkey: `UserSignedUp` CloudEvents, each answered with one welcome
//! e-mail. The e-mail is an external effect, so it goes through the **leased flow**: the event
//! is claimed in Valkey under a lease, the mail API is called with the event's idempotency key,
//! and the mark is completed with the API's answer. A duplicate delivery finds the completed
//! mark and sends nothing; a failed call releases the claim and the redelivery calls again
//! under the same key; a process that died after the call and before completing is taken over
//! when its lease runs out, and calls again under the same key, which a mail API that honours
//! `Idempotency-Key` answers without sending twice.
//!
//! ```ignore
//! let settings = Settings::from_env("welcome-email")?;
//! let store = ValkeyStore::from_url(&std::env::var("VALKEY_URL")?, settings.retention)?
//!     .with_lease(settings.lease);
//! let dedup = welcome_deduplicator(&settings, store);
//! let outcome = send_welcome(&dedup, &message, deadline, &mail_api).await;
//! ```
//!
//! What Valkey must keep for the e-mail to go out once (AOF fsynced on every write, no
//! eviction, no failover to a lagging replica): see `lambda_dedup_valkey`. A mark Valkey loses
//! is a second e-mail later, unless the mail API still remembers the idempotency key.

use std::future::Future;
use std::time::SystemTime;

use lambda_dedup::{KeySpec, MarkStore, Message};
use lambda_dedup_batch::{HandlerError, LeasedDeduplicator, Outcome};
use lambda_dedup_runtime::Settings;

/// The mail API: sends `message` to `to` under `idempotency_key`, answering with its message
/// id. The same key must never send twice (`Idempotency-Key` semantics).
pub trait MailApi: Send + Sync {
    /// Sends one e-mail.
    fn send(
        &self,
        to: &str,
        message: &str,
        idempotency_key: &str,
    ) -> impl Future<Output = Result<String, HandlerError>> + Send;
}

/// The deduplicator of welcome e-mails on `store` (the Valkey store in production, built with
/// the settings' retention and lease; any store in tests: the leased flow commits no effect),
/// with every guard of `settings` (`lambda_dedup_runtime::Settings::read`: the retention checked
/// against the redelivery horizon, S9; the cache; the body limit; and the mail API's key
/// retention, `PROVIDER_KEY_RETENTION_SECONDS`, S16).
pub fn welcome_deduplicator<E: 'static>(
    settings: &Settings,
    store: impl MarkStore<E> + 'static,
) -> LeasedDeduplicator<E> {
    let spec = KeySpec::cloudevents(settings.scope.clone(), "tenantid");
    settings
        .deduplicator_on(spec, std::sync::Arc::new(store))
        .with_provider_key_retention(settings.provider_key_retention)
}

/// Sends the welcome e-mail of one `UserSignedUp` delivery, once (its `data.email`).
pub async fn send_welcome<E: 'static>(
    dedup: &LeasedDeduplicator<E>,
    msg: &Message,
    deadline: Option<SystemTime>,
    mail: &impl MailApi,
) -> Outcome {
    dedup
        .leased(msg, deadline, |event, lease| async move {
            let data = HandlerError::data(&event)?;
            let to = data["email"]
                .as_str()
                .ok_or_else(|| HandlerError::Invalid("data.email must be a string".into()))?;
            let id = mail
                .send(to, "Welcome aboard!", &lease.idempotency_key())
                .await?;
            Ok(Some(id))
        })
        .await
}

#[cfg(test)]
mod tests;
