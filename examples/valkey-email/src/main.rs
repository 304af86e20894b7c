//! Run with `cargo xtask test -p example-valkey-email` (the tests on the memory store and on
//! the Valkey server xtask starts; plain `cargo test -p example-valkey-email` skips the
//! server's); in Lambda, `cargo lambda build --release -p example-valkey-email` and deploy it
//! with the environment below.
//!
//! An e-mail sent once with Valkey: `UserSignedUp` CloudEvents from SQS, each answered with one
//! welcome e-mail. The e-mail is an external effect, so it goes through the **leased flow**: the
//! event is claimed in Valkey under a lease, the mail API is called with the event's idempotency
//! key, and the mark is completed with the API's answer. A duplicate delivery finds the completed
//! mark and sends nothing; a failed call releases the claim and the redelivery calls again under
//! the same key; a process that died after the call and before completing is taken over when its
//! lease runs out, and calls again under the same key, which a mail API that honours
//! `Idempotency-Key` answers without sending twice.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`, the queue's
//! redelivery horizon, `PROVIDER_TIMEOUT_MS`, `PROVIDER_KEY_RETENTION_SECONDS`), those of
//! `Dedup::valkey` (`VALKEY_URL`, optionally `VALKEY_KEY_PREFIX`), and `MAIL_API_URL`.
//!
//! What Valkey must keep for the e-mail to go out once (AOF fsynced on every write, no
//! eviction, no failover to a lagging replica): see `lambda_dedup_valkey`. A mark Valkey loses
//! is a second e-mail later, unless the mail API still remembers the idempotency key. The tests
//! run the same service on the memory store, and on Valkey when `DEDUP_VALKEY_URL` names one.

use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::flow::calls;
use lambda_dedup_runtime::{Dedup, Event, SqsService, Tenant, store::Store};
use lambda_dedup_valkey::ValkeyEffect;
use lambda_runtime::Error;

/// The `data` of a `UserSignedUp` event.
#[derive(serde::Deserialize)]
struct SignedUp {
    email: String,
}

/// The leased call runs on any store: `main` gives it Valkey, the tests memory too.
fn service(dedup: Dedup<Store<ValkeyEffect>>) -> Result<SqsService, Error> {
    let timeout = dedup.settings().provider_timeout;
    let mail = IdempotentClient::new(&dedup.env().required("MAIL_API_URL")?, timeout)?;
    Ok(dedup
        .tenant(Tenant::extension("tenantid"))
        // The tenant is the payload's: the queue's producers are trusted (its policy names them).
        .trusted_producers()
        .sqs(calls(move |e: Event<SignedUp>, lease| {
            let message = serde_json::json!({"to": e.payload.email, "template": "welcome"});
            let (mail, key) = (mail.clone(), lease.key.idempotency_key());
            async move { Ok(Some(mail.call("/messages", &key, &message).await?.body)) }
        }))?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(
        lambda_runtime::run_concurrent(service(Dedup::from_env("valkey-email")?.valkey()?)?)
            .await?,
    )
}

#[cfg(test)]
mod tests;
