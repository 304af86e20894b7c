//! A secret read from AWS Secrets Manager ([`SecretsManagerSecret`], feature `secrets-manager`)
//! and why it could not be ([`SecretError`]): the webhook receiver's signing secrets are read at
//! init from the secret its `WEBHOOK_SECRETS_ARN` names, not copied into the function's
//! configuration (where `lambda:GetFunctionConfiguration` shows them, and a rotation needs a
//! deploy). No error here quotes the secret's value.

/// Why a secret could not be read: typed, so the start's refusal says which case it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Secrets Manager has no such secret (or no current version of it).
    #[error("Secrets Manager has no secret {id}")]
    NotFound {
        /// The secret's ARN (or name).
        id: String,
    },
    /// The role may not read it (`secretsmanager:GetSecretValue` on that ARN, or the KMS key's
    /// `kms:Decrypt`).
    #[error(
        "the function's role may not read the secret {id} (secretsmanager:GetSecretValue, or kms:Decrypt on its key)"
    )]
    AccessDenied {
        /// The secret's ARN (or name).
        id: String,
    },
    /// The secret holds binary, or an empty string: the secrets are text, as the variable takes
    /// them.
    #[error("the secret {id} holds no text (a SecretString, as WEBHOOK_SECRETS is written)")]
    NotText {
        /// The secret's ARN (or name).
        id: String,
    },
    /// Secrets Manager did not answer, or answered another error: its code.
    #[error("Secrets Manager did not give the secret {id}: {code}")]
    Unavailable {
        /// The secret's ARN (or name).
        id: String,
        /// The service's error code, or what failed on the way.
        code: String,
    },
}

/// The secrets in a secret's text: comma-separated, as `WEBHOOK_SECRETS` is written.
pub(crate) fn secrets_in(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(feature = "secrets-manager")]
pub use client::SecretsManagerSecret;

#[cfg(feature = "secrets-manager")]
mod client {
    use super::SecretError;
    use aws_sdk_secretsmanager::error::ProvideErrorMetadata;
    use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;

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
}
