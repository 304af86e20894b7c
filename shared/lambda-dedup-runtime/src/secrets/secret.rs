//! A secret read from AWS Secrets Manager ([`SecretsManagerSecret`], feature `secrets-manager`):
//! the webhook receiver's signing secrets, read at init from the secret its `WEBHOOK_SECRETS_ARN`
//! names, and again on a signature that matches none of them ([`SecretRotation`](super::SecretRotation)).
//! No error here quotes the secret's value.

use aws_sdk_secretsmanager::error::ProvideErrorMetadata;
use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;
use lambda_dedup_config::SecretError;

/// One secret of Secrets Manager, by ARN (or name), read whole each time it is asked for.
#[derive(Debug, Clone)]
pub struct SecretsManagerSecret {
    client: aws_sdk_secretsmanager::Client,
    id: String,
}

impl SecretsManagerSecret {
    /// The secret `id` (its ARN, or its name) through `client`.
    pub fn new(client: aws_sdk_secretsmanager::Client, id: &str) -> Self {
        Self {
            client,
            id: id.trim().to_owned(),
        }
    }

    /// Its ARN (or name), as configured.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its current text (`GetSecretValue`, version `AWSCURRENT`).
    pub async fn fetch(&self) -> Result<String, SecretError> {
        let id = || self.id.clone();
        let out = self
            .client
            .get_secret_value()
            .secret_id(&self.id)
            .send()
            .await
            .map_err(|e| match e.into_service_error() {
                GetSecretValueError::ResourceNotFoundException(_) => {
                    SecretError::NotFound { id: id() }
                }
                other if other.code() == Some("AccessDeniedException") => {
                    SecretError::AccessDenied { id: id() }
                }
                other => SecretError::Unavailable {
                    id: id(),
                    code: other.code().unwrap_or("no answer").to_owned(),
                },
            })?;
        out.secret_string()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
            .ok_or(SecretError::NotText { id: id() })
    }
}
