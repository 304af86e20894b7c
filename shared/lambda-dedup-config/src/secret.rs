//! Why a secret could not be read ([`SecretError`]) and how its text is written: the webhook
//! receiver's signing secrets are read at init (by the runtime, from AWS Secrets Manager) from the
//! secret its `WEBHOOK_SECRETS_ARN` names, not copied into the function's configuration (where
//! `lambda:GetFunctionConfiguration` shows them, and a rotation needs a deploy). No error here
//! quotes the secret's value.

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
pub fn secrets_in(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}
