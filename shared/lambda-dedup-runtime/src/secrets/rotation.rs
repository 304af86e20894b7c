//! The webhook secrets as Secrets Manager holds them now ([`SecretRotation`], feature
//! `secrets-manager`): the verifier built from the secret read at init, rebuilt from the secret
//! read again when a signature matches none of the secrets held — at most once per
//! `WEBHOOK_SECRETS_REFRESH_SECONDS` ([`RefreshGate`]) — so a rotation needs no deploy and a
//! flood of forged signatures costs Secrets Manager one read per interval.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use lambda_dedup_signature::{Scheme, SignatureError, Verifier};

use super::refresh_gate::RefreshGate;
use super::secret::SecretsManagerSecret;
use lambda_dedup_config::{Headers, SecretsRotation, secrets_in};

/// The secret, the verifier built from its latest text, and the gate on reading it again.
#[derive(Debug)]
pub(crate) struct SecretRotation {
    secret: SecretsManagerSecret,
    scheme: Scheme,
    tolerance: Duration,
    gate: RefreshGate,
    current: RwLock<Arc<Verifier>>,
}

impl SecretRotation {
    /// Holds `verifier` (built from `secret`'s text just read) and reads `secret` again at most
    /// once per `every`.
    pub(crate) fn new(secret: SecretsManagerSecret, verifier: Verifier, every: Duration) -> Self {
        Self {
            scheme: verifier.scheme(),
            tolerance: verifier.tolerance(),
            secret,
            gate: RefreshGate::new(every, Instant::now()),
            current: RwLock::new(Arc::new(verifier)),
        }
    }

    /// The verifier of the secrets last read.
    pub(crate) fn current(&self) -> Arc<Verifier> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Verifies with the secrets held; a signature that matches none of them
    /// ([`SignatureError::Mismatch`]) is verified again with the secret read anew, when the gate
    /// lets a read through. Any other refusal (stale, malformed, missing) is not the secret's
    /// doing and reads nothing.
    pub(crate) async fn verify<'h>(
        &self,
        headers: &(
             dyn Fn(&str) -> Result<Option<&'h str>, lambda_dedup_signature::SignatureError> + Sync
         ),
        body: &[u8],
        now: std::time::SystemTime,
    ) -> Result<(), lambda_dedup_signature::SignatureError> {
        match self.current().verify(headers, body, now) {
            Err(SignatureError::Mismatch) => match self.refresh().await {
                Some(fresh) => fresh.verify(headers, body, now),
                None => Err(SignatureError::Mismatch),
            },
            other => other,
        }
    }

    /// Reads the secret again, if the gate lets it: the new verifier, or `None` (not the time,
    /// or the read failed, or its text is refused — the secrets held are kept, and it is logged).
    async fn refresh(&self) -> Option<Arc<Verifier>> {
        if !self.gate.pass(Instant::now()) {
            return None;
        }
        let text = match self.secret.fetch().await {
            Ok(text) => text,
            Err(e) => {
                log_kept(&e.to_string());
                return None;
            }
        };
        match Verifier::new(self.scheme, &secrets_in(&text), self.tolerance) {
            Ok(v) => {
                let v = Arc::new(v);
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = v.clone();
                tracing::info!(secret = self.secret.id(), "webhook secrets read again");
                Some(v)
            }
            Err(e) => {
                log_kept(&e.to_string());
                None
            }
        }
    }
}

/// A refresh that failed keeps the secrets held; the reason never quotes a secret.
fn log_kept(reason: &str) {
    tracing::warn!(
        reason,
        "webhook secrets not read again; the ones held are kept"
    );
}

impl SecretsRotation for SecretRotation {
    fn verify<'a, 'h: 'a>(
        &'a self,
        headers: &'a Headers<'h>,
        body: &'a [u8],
        now: std::time::SystemTime,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), SignatureError>> + Send + 'a>> {
        Box::pin(SecretRotation::verify(self, headers, body, now))
    }
}
