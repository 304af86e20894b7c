//! The webhook receiver's signing secrets read from AWS Secrets Manager (feature
//! `secrets-manager`): after the settings are read ([`WebhookConfig::read`]'s, with
//! [`SecretsArn`]), the secret `WEBHOOK_SECRETS_ARN` names is read at init
//! ([`webhook_config`]) and again, at most once per `WEBHOOK_SECRETS_REFRESH_SECONDS`, on a
//! signature that matches none of the secrets held (`SecretRotation`, through a
//! `RefreshGate`). A secret missing, unreadable or not text refuses the start
//! (`SettingsError::Secret`).

mod refresh_gate;
mod rotation;
mod secret;

use std::sync::Arc;

use lambda_dedup_config::{Env, SECRETS_ARN_VAR, SecretsArn, SettingsError, WebhookConfig};
use rotation::SecretRotation;
pub use secret::SecretsManagerSecret;

/// The webhook receiver's configuration `main` reads from `env` (the builder's,
/// `Dedup::env`): [`WebhookConfig::read`]'s, its secrets read from Secrets Manager when
/// `WEBHOOK_SECRETS_ARN` names a secret (through a client with the function's SDK timeouts),
/// and read again on a signature that matches none of them, bounded.
pub async fn webhook_config(env: &Env) -> Result<WebhookConfig, SettingsError> {
    if SecretsArn::read(env)?.is_none() {
        return WebhookConfig::read(env);
    }
    let sdk = crate::aws::sdk_config(&lambda_dedup_config::SdkTimeouts::read(env)?).await;
    webhook_config_in(env, aws_sdk_secretsmanager::Client::new(&sdk)).await
}

/// [`webhook_config`] from `env`, reading the secret through `client`.
pub async fn webhook_config_in(
    env: &Env,
    client: aws_sdk_secretsmanager::Client,
) -> Result<WebhookConfig, SettingsError> {
    let Some(arn) = SecretsArn::read(env)? else {
        return WebhookConfig::read(env);
    };
    let secret = SecretsManagerSecret::new(client, &arn.id);
    let text = secret
        .fetch()
        .await
        .map_err(|error| SettingsError::Secret {
            var: SECRETS_ARN_VAR,
            error,
        })?;
    let config = WebhookConfig::with_secrets(env, &text)?;
    let rotation = SecretRotation::new(secret, config.verifier.clone(), arn.refresh_every);
    Ok(config.with_rotation(Arc::new(rotation)))
}
