//! The webhook receiver's configuration ([`WebhookConfig`], feature `webhook`): how the sender
//! signs, its secrets and window, where the signed identity is, the sender, the largest body and
//! the inbox (`WEBHOOK_*`, `INBOX_TABLE`; the table of the [`config`](super) module). What the
//! receiver does with it is the `webhook` module's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{FingerprintSource, IdentitySource, KeySpec, Scope, TenantSource};
use lambda_dedup_signature::{
    GITHUB_DELIVERY_HEADER, SHOPIFY_WEBHOOK_ID_HEADER, SVIX_ID_HEADER, Scheme, SignatureError,
    Verifier, VerifierError, WEBHOOK_ID_HEADER,
};

use crate::env::{Lookup, optional_in, required_in};
use crate::secrets_in;
use crate::{SettingRule, SettingsError, ValueError};

/// The secret `WEBHOOK_SECRETS_ARN` names, if set.
fn secret_id(env: Lookup<'_>) -> Option<String> {
    env.get(SECRETS_ARN_VAR).filter(|v| !v.trim().is_empty())
}

/// `rule`, or [`SettingRule::BothSet`] when `WEBHOOK_SECRETS` is set beside
/// `WEBHOOK_SECRETS_ARN`: which of the two holds the secrets would be ambiguous.
fn both_or(env: Lookup<'_>, rule: SettingRule) -> SettingRule {
    match env.get(SECRETS_VAR) {
        Some(v) if !v.trim().is_empty() => SettingRule::BothSet {
            other: SECRETS_VAR,
            why: "the secrets come from Secrets Manager or from the variable, never both",
        },
        _ => rule,
    }
}

/// The variable holding the secrets themselves, comma-separated (local use; refused beside
/// [`SECRETS_ARN_VAR`]).
pub const SECRETS_VAR: &str = "WEBHOOK_SECRETS";
/// The variable naming the Secrets Manager secret whose text is the secrets (as
/// [`SECRETS_VAR`] is written), read at init by the runtime (its feature `secrets-manager`; [`SecretsArn`]).
pub const SECRETS_ARN_VAR: &str = "WEBHOOK_SECRETS_ARN";
/// The least time between two reads of that secret after init, seconds: a signature that
/// matches no secret held reads it again (a rotation) at most this often.
pub const SECRETS_REFRESH_VAR: &str = "WEBHOOK_SECRETS_REFRESH_SECONDS";
/// The default of [`SECRETS_REFRESH_VAR`]: 30 s.
pub const DEFAULT_SECRETS_REFRESH_SECS: u64 = 30;
/// The most [`SECRETS_REFRESH_VAR`] may be: an hour (a rotated secret refused longer than a
/// sender retries within would lose deliveries to its retry horizon).
pub const MAX_SECRETS_REFRESH_SECS: u64 = 3600;

/// The default largest body: 256 KiB, well inside a DynamoDB item and an SQS message.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;
/// The default tolerance window of signature timestamps (5 minutes).
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// Where the event's identity comes from: what the sender declares and signs, never a hash of
/// the body, never an unsigned header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityFrom {
    /// Standard Webhooks' `webhook-id` header (or Svix's `svix-id`, the same part under its
    /// other name), which its signature covers.
    WebhookId,
    /// A JSON pointer into the body (signed whole in every scheme).
    JsonPointer(String),
}

impl std::str::FromStr for IdentityFrom {
    type Err = ValueError;

    /// `header:webhook-id` (or `header:svix-id`) or `json:<pointer>`.
    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.split_once(':') {
            Some(("header", name))
                if [WEBHOOK_ID_HEADER, SVIX_ID_HEADER]
                    .iter()
                    .any(|h| name.trim().eq_ignore_ascii_case(h)) =>
            {
                Ok(Self::WebhookId)
            }
            Some(("header", name))
                if [GITHUB_DELIVERY_HEADER, SHOPIFY_WEBHOOK_ID_HEADER]
                    .iter()
                    .any(|h| name.trim().eq_ignore_ascii_case(h)) =>
            {
                Err(ValueError::UnsignedDeliveryHeader {
                    name: name.trim().to_owned(),
                })
            }
            Some(("header", name)) => Err(ValueError::UnsignedHeader {
                name: name.trim().to_owned(),
            }),
            Some(("json", pointer)) if pointer.starts_with('/') => {
                Ok(Self::JsonPointer(pointer.to_owned()))
            }
            _ => Err(ValueError::NotAnIdentity {
                value: s.to_owned(),
            }),
        }
    }
}

impl IdentityFrom {
    /// The identity a scheme signs when none is configured: Standard Webhooks' `webhook-id`,
    /// Stripe's event id (the body's top-level `id`), Slack's Events API `event_id`. GitHub and
    /// Shopify have none: they sign the body only, their delivery id headers are unsigned, and
    /// their payloads carry no id common to every event, so `WEBHOOK_ID_FROM` must name one.
    pub fn default_for(scheme: Scheme) -> Option<Self> {
        match scheme {
            Scheme::StandardWebhooks => Some(Self::WebhookId),
            Scheme::Stripe => Some(Self::JsonPointer("/id".into())),
            Scheme::Slack => Some(Self::JsonPointer("/event_id".into())),
            Scheme::GitHub | Scheme::Shopify => None,
        }
    }

    /// Whether `scheme`'s signature covers this identity (only Standard Webhooks signs an id
    /// header; every scheme signs the body).
    pub fn signed_by(&self, scheme: Scheme) -> bool {
        match self {
            Self::WebhookId => scheme.signed_id_header().is_some(),
            Self::JsonPointer(_) => true,
        }
    }
}

/// The receiver's configuration.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The scheme, the secrets held (all accepted, for rotation) and the tolerance window.
    pub verifier: Verifier,
    /// Where the identity comes from (covered by the signature).
    pub identity: IdentityFrom,
    /// The sender (the keys' tenant, S1).
    pub tenant: String,
    /// The largest body accepted.
    pub max_body_bytes: usize,
    /// The inbox table (key `event_key`).
    pub inbox_table: String,
    /// How long an inbox item is kept (its `expires_at`, for the table's TTL).
    pub inbox_retention: Duration,
    /// What reads the secrets again on a mismatch (bounded), when they came from Secrets
    /// Manager: attached by the runtime after it read the secret `WEBHOOK_SECRETS_ARN` names
    /// ([`with_rotation`](Self::with_rotation)); none when they came from `WEBHOOK_SECRETS`.
    rotation: Option<Arc<dyn SecretsRotation>>,
}

/// A request's headers, as the verifier asks for them (an error: one that cannot be read).
pub type Headers<'h> = dyn Fn(&str) -> Result<Option<&'h str>, SignatureError> + Sync + 'h;

/// Verifies with the secrets held now and reads them again, at most once per
/// `WEBHOOK_SECRETS_REFRESH_SECONDS`, when a signature matches none (a rotation, no deploy): the
/// runtime's Secrets Manager rotation. Reading a secret is I/O, which this crate does not do,
/// so the runtime attaches it after the read ([`WebhookConfig::with_rotation`]).
pub trait SecretsRotation: std::fmt::Debug + Send + Sync {
    /// The verifier's answer on a request, with the secrets read again on a mismatch.
    fn verify<'a, 'h: 'a>(
        &'a self,
        headers: &'a Headers<'h>,
        body: &'a [u8],
        now: SystemTime,
    ) -> Pin<Box<dyn Future<Output = Result<(), SignatureError>> + Send + 'a>>;
}

/// The Secrets Manager secret of a webhook receiver's secrets (`WEBHOOK_SECRETS_ARN`), and how
/// often it may be read again: what the runtime reads at init, after the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretsArn {
    /// The secret's ARN (or name).
    pub id: String,
    /// The least time between two reads after init (`WEBHOOK_SECRETS_REFRESH_SECONDS`).
    pub refresh_every: Duration,
}

impl SecretsArn {
    /// `WEBHOOK_SECRETS_ARN` in `env`, if set, with `WEBHOOK_SECRETS_REFRESH_SECONDS`; refused
    /// beside `WEBHOOK_SECRETS`, and with a refresh interval of zero or over an hour.
    pub fn read(env: Lookup<'_>) -> Result<Option<Self>, SettingsError> {
        let Some(id) = secret_id(env) else {
            return Ok(None);
        };
        if let rule @ SettingRule::BothSet { .. } = both_or(env, SettingRule::Zero) {
            return Err(SettingsError::refused(SECRETS_ARN_VAR, rule));
        }
        let every = optional_in(env, SECRETS_REFRESH_VAR, DEFAULT_SECRETS_REFRESH_SECS)?;
        if every == 0 {
            return Err(SettingsError::refused(
                SECRETS_REFRESH_VAR,
                SettingRule::Zero,
            ));
        }
        if every > MAX_SECRETS_REFRESH_SECS {
            return Err(SettingsError::refused(
                SECRETS_REFRESH_VAR,
                SettingRule::AboveMaximum {
                    value: every,
                    max: MAX_SECRETS_REFRESH_SECS,
                    why: "a rotated secret would be refused for that long",
                },
            ));
        }
        Ok(Some(Self {
            id,
            refresh_every: Duration::from_secs(every),
        }))
    }
}

/// The shortest inbox retention accepted: the longest retry horizon of the senders offered
/// (Stripe retries a delivery for up to three days; Standard Webhooks senders for about a day
/// and a half). A retry after its event's inbox item expired would be taken for a new event.
pub const MIN_INBOX_RETENTION: Duration = Duration::from_secs(3 * 86_400);

/// The inbox retention when `WEBHOOK_INBOX_RETENTION_SECONDS` is unset: 30 days.
pub const DEFAULT_INBOX_RETENTION_SECS: u64 = 30 * 86_400;

impl WebhookConfig {
    /// The configuration in `env`: `WEBHOOK_SCHEME` (default `standard-webhooks`), `WEBHOOK_SECRETS`
    /// (comma-separated, as the scheme writes them), `WEBHOOK_TOLERANCE_SECONDS` (default 300,
    /// at most 3600), `WEBHOOK_ID_FROM` (default the scheme's signed id), `WEBHOOK_TENANT` (the
    /// sender), `WEBHOOK_MAX_BODY_BYTES` (default 262144) and `INBOX_TABLE`; see the crate's
    /// table. Refuses an unknown scheme, a secret the scheme cannot read, a tolerance of zero or
    /// over an hour, and an identity its signature does not cover. Refuses
    /// `WEBHOOK_SECRETS_ARN` too, whose secret the runtime reads at init
    /// ([`SecretsArn`], then [`with_secrets`](Self::with_secrets)).
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        if secret_id(env).is_some() {
            return Err(SettingsError::refused(
                SECRETS_ARN_VAR,
                both_or(
                    env,
                    SettingRule::ReadAtInit {
                        feature: "secrets-manager",
                    },
                ),
            ));
        }
        Self::read_with(env, &required_in(env, SECRETS_VAR)?, SECRETS_VAR)
    }

    /// The configuration in `env` with the secrets in `text`, the text of the secret
    /// `WEBHOOK_SECRETS_ARN` names (comma-separated, as `WEBHOOK_SECRETS` is written): refused,
    /// naming that variable, when the scheme cannot read them.
    pub fn with_secrets(env: Lookup<'_>, text: &str) -> Result<Self, SettingsError> {
        Self::read_with(env, text, SECRETS_ARN_VAR)
    }

    /// This configuration, its secrets read again on a mismatch by `rotation`.
    #[must_use]
    pub fn with_rotation(mut self, rotation: Arc<dyn SecretsRotation>) -> Self {
        self.rotation = Some(rotation);
        self
    }

    /// The configuration in `env` with the secrets in `text` (comma-separated), read from `from`.
    fn read_with(env: Lookup<'_>, text: &str, from: &'static str) -> Result<Self, SettingsError> {
        let scheme = match env.get("WEBHOOK_SCHEME").filter(|v| !v.trim().is_empty()) {
            None => Scheme::default(),
            Some(v) => v
                .parse()
                .map_err(|e: lambda_dedup_signature::UnknownScheme| {
                    SettingsError::refused("WEBHOOK_SCHEME", SettingRule::Malformed(e.to_string()))
                })?,
        };
        let secrets = secrets_in(text);
        let tolerance = Duration::from_secs(optional_in(
            env,
            "WEBHOOK_TOLERANCE_SECONDS",
            DEFAULT_TOLERANCE_SECS,
        )?);
        let verifier = Verifier::new(scheme, &secrets, tolerance).map_err(|e| {
            // Each refusal names the variable it is about, and the rule.
            const TOLERANCE: &str = "WEBHOOK_TOLERANCE_SECONDS";
            match e {
                VerifierError::NoTolerance => SettingsError::refused(TOLERANCE, SettingRule::Zero),
                VerifierError::ToleranceTooLong { secs } => SettingsError::refused(
                    TOLERANCE,
                    SettingRule::AboveMaximum {
                        value: secs,
                        max: lambda_dedup_signature::MAX_TOLERANCE.as_secs(),
                        why: "a captured delivery could be replayed for that long",
                    },
                ),
                VerifierError::NoSecret | VerifierError::BadSecret { .. } => {
                    SettingsError::refused(from, SettingRule::Malformed(e.to_string()))
                }
            }
        })?;
        let identity = match env.get("WEBHOOK_ID_FROM").filter(|v| !v.trim().is_empty()) {
            None => IdentityFrom::default_for(scheme).ok_or_else(|| {
                SettingsError::refused(
                    "WEBHOOK_ID_FROM",
                    SettingRule::IdentityNeeded {
                        scheme: scheme.name(),
                    },
                )
            })?,
            Some(v) => v.trim().parse().map_err(|e: ValueError| {
                SettingsError::refused("WEBHOOK_ID_FROM", SettingRule::Malformed(e.to_string()))
            })?,
        };
        if !identity.signed_by(scheme) {
            return Err(SettingsError::refused(
                "WEBHOOK_ID_FROM",
                SettingRule::NotSigned {
                    scheme: scheme.name(),
                },
            ));
        }
        let max_body_bytes = optional_in(env, "WEBHOOK_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
        if max_body_bytes == 0 {
            return Err(SettingsError::refused(
                "WEBHOOK_MAX_BODY_BYTES",
                SettingRule::Zero,
            ));
        }
        let inbox_retention = Duration::from_secs(optional_in(
            env,
            "WEBHOOK_INBOX_RETENTION_SECONDS",
            DEFAULT_INBOX_RETENTION_SECS,
        )?);
        if inbox_retention < MIN_INBOX_RETENTION {
            return Err(SettingsError::refused(
                "WEBHOOK_INBOX_RETENTION_SECONDS",
                SettingRule::BelowMinimum {
                    value: inbox_retention.as_secs(),
                    min: MIN_INBOX_RETENTION.as_secs(),
                    why: "shorter than the senders' retry horizon: a retry after its inbox item \
                          expired would be a new event",
                },
            ));
        }
        Ok(Self {
            verifier,
            identity,
            tenant: required_in(env, "WEBHOOK_TENANT")?,
            max_body_bytes,
            inbox_table: required_in(env, "INBOX_TABLE")?,
            inbox_retention,
            rotation: None,
        })
    }

    /// The verifier's answer on a request: with the secrets held, and, when they came from
    /// Secrets Manager and none matches, with the secret read again (bounded).
    pub async fn verify<'h>(
        &self,
        headers: &Headers<'h>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<(), SignatureError> {
        if let Some(rotation) = &self.rotation {
            return rotation.verify(headers, body, now).await;
        }
        self.verifier.verify(headers, body, now)
    }

    /// The key spec: the declared identity within the sender (tenant) and the function's scope,
    /// with the whole body as the fingerprint (the same identity with another body is a
    /// conflict, S11).
    pub fn key_spec(&self, scope: Scope) -> KeySpec {
        let identity = match &self.identity {
            IdentityFrom::WebhookId => IdentitySource::MessageAttribute(WEBHOOK_ID_HEADER.into()),
            IdentityFrom::JsonPointer(p) => IdentitySource::JsonPointer(p.clone()),
        };
        KeySpec::new(scope, identity)
            .tenant(TenantSource::Fixed(self.tenant.clone()))
            .fingerprint(FingerprintSource::WholeBody)
            .max_body_bytes(self.max_body_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    /// Standard Webhooks' published test secret, and Stripe's (`lambda_dedup`'s vectors).
    const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ST_SECRET: &str = "whsec_test_secret";
    /// The secret being rotated out (the base64 of `old-secret-0123456789`).
    const OLD: &str = "whsec_b2xkLXNlY3JldC0wMTIzNDU2Nzg5";

    /// The configuration `main` reads, from these variables (and nothing else).
    fn config(vars: &[(&str, &str)]) -> Result<WebhookConfig, SettingsError> {
        let least = [("WEBHOOK_TENANT", "acme"), ("INBOX_TABLE", "inbox")];
        WebhookConfig::read(&Env::from_pairs(least.iter().chain(vars).copied()))
    }

    fn refusal(vars: &[(&str, &str)]) -> String {
        match config(vars) {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// `WEBHOOK_SCHEME`: the default, both names, and an unknown one refused at start.
    #[test]
    fn webhook_scheme_is_read_and_an_unknown_one_refused() {
        let sw = |vars: &[(&str, &str)]| config(vars).map(|c| c.verifier.scheme());
        assert_eq!(
            sw(&[("WEBHOOK_SECRETS", SW_SECRET)]),
            Ok(Scheme::StandardWebhooks)
        );
        assert_eq!(
            sw(&[
                ("WEBHOOK_SCHEME", "standard-webhooks"),
                ("WEBHOOK_SECRETS", SW_SECRET)
            ]),
            Ok(Scheme::StandardWebhooks)
        );
        assert_eq!(
            sw(&[("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)]),
            Ok(Scheme::Stripe)
        );
        for (name, scheme, secret) in [
            ("github", Scheme::GitHub, "github-webhook-secret-0001"),
            ("shopify", Scheme::Shopify, "shopify-client-secret-0001"),
            ("slack", Scheme::Slack, "8f742231b10e8888abcd99yyyzzz85a5"),
        ] {
            let read = config(&[
                ("WEBHOOK_SCHEME", name),
                ("WEBHOOK_SECRETS", secret),
                ("WEBHOOK_ID_FROM", "json:/id"),
            ]);
            assert_eq!(read.map(|c| c.verifier.scheme()), Ok(scheme), "{name}");
        }
        for unknown in ["v1", "hmac", "GitHub", "svix"] {
            let e = refusal(&[("WEBHOOK_SCHEME", unknown), ("WEBHOOK_SECRETS", SW_SECRET)]);
            assert!(
                e.contains("WEBHOOK_SCHEME") && e.contains(unknown) && e.contains("stripe"),
                "{e}"
            );
        }
    }

    /// `WEBHOOK_SECRETS` as each scheme writes them; the former raw secrets, secrets that do not
    /// decode and short keys are refused at start, without quoting the secret.
    #[test]
    fn webhook_secrets_are_read_as_the_scheme_writes_them() {
        let keys = config(&[("WEBHOOK_SECRETS", &format!(" {SW_SECRET} , {OLD} "))])
            .map(|c| format!("{:?}", c.verifier));
        assert!(
            keys.as_ref().is_ok_and(|d| d.contains("secrets: 2")),
            "{keys:?}"
        );
        assert!(keys.is_ok_and(|d| !d.contains("MfKQ")), "never in Debug");
        let e = refusal(&[("WEBHOOK_SECRETS", "local-webhook-secret-2026-11")]);
        assert!(e.contains("WEBHOOK_SECRETS") && e.contains("whsec_"), "{e}");
        assert!(!e.contains("local-webhook-secret"), "{e}");
        let e = refusal(&[("WEBHOOK_SECRETS", "whsec_***not-base64***")]);
        assert!(e.contains("base64"), "{e}");
        let e = refusal(&[("WEBHOOK_SECRETS", "whsec_c2hvcnQ=")]);
        assert!(e.contains("5 bytes"), "{e}");
        let e = refusal(&[("WEBHOOK_SECRETS", " , ")]);
        assert!(e.contains("no secret"), "{e}");
        // Stripe's are not base64: `whsec_test_secret` is its own key.
        assert!(config(&[("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)]).is_ok());
        let e = refusal(&[
            ("WEBHOOK_SCHEME", "stripe"),
            ("WEBHOOK_SECRETS", "sk_test_123"),
        ]);
        assert!(e.contains("whsec_") && !e.contains("sk_test"), "{e}");
    }

    /// `WEBHOOK_TOLERANCE_SECONDS` is bounded: a window longer than an hour would let a captured
    /// delivery be replayed for that long, so it is refused at start, naming the variable and
    /// the bound; so is a zero window (it would refuse everything). An hour is accepted.
    #[test]
    fn webhook_tolerance_seconds_over_an_hour_is_refused_at_start() {
        let sw = ("WEBHOOK_SECRETS", SW_SECRET);
        let tolerance = |v: &str| {
            config(&[sw, ("WEBHOOK_TOLERANCE_SECONDS", v)]).map(|c| c.verifier.tolerance())
        };
        assert_eq!(tolerance("3600"), Ok(Duration::from_secs(3600)));
        assert_eq!(
            config(&[sw]).map(|c| c.verifier.tolerance()),
            Ok(Duration::from_secs(DEFAULT_TOLERANCE_SECS))
        );
        for too_long in ["3601", "86400", "18446744073709551615"] {
            let e = refusal(&[sw, ("WEBHOOK_TOLERANCE_SECONDS", too_long)]);
            assert!(
                e.contains("WEBHOOK_TOLERANCE_SECONDS") && e.contains("3600"),
                "{too_long}: {e}"
            );
        }
        let e = refusal(&[sw, ("WEBHOOK_TOLERANCE_SECONDS", "0")]);
        assert!(e.contains("WEBHOOK_TOLERANCE_SECONDS"), "{e}");
        // Typed: the variable and the rule, the bound with it.
        assert_eq!(
            tolerance("0"),
            Err(SettingsError::refused(
                "WEBHOOK_TOLERANCE_SECONDS",
                SettingRule::Zero
            ))
        );
        assert!(matches!(
            tolerance("7200"),
            Err(SettingsError::Refused {
                var: "WEBHOOK_TOLERANCE_SECONDS",
                rule: SettingRule::AboveMaximum {
                    value: 7200,
                    max: 3600,
                    ..
                },
            })
        ));
    }

    /// `WEBHOOK_ID_FROM`: only an identity the signature covers.
    #[test]
    fn webhook_id_from_takes_only_a_signed_identity() {
        let id = |vars: &[(&str, &str)]| config(vars).map(|c| c.identity);
        let sw = ("WEBHOOK_SECRETS", SW_SECRET);
        assert_eq!(id(&[sw]), Ok(IdentityFrom::WebhookId));
        assert_eq!(
            id(&[sw, ("WEBHOOK_ID_FROM", "header:Webhook-Id")]),
            Ok(IdentityFrom::WebhookId)
        );
        assert_eq!(
            id(&[sw, ("WEBHOOK_ID_FROM", "json:/data/id")]),
            Ok(IdentityFrom::JsonPointer("/data/id".into()))
        );
        let e = refusal(&[sw, ("WEBHOOK_ID_FROM", "header:x-event-id")]);
        assert!(e.contains("not signed"), "{e}");
        assert!(refusal(&[sw, ("WEBHOOK_ID_FROM", "sha256")]).contains("WEBHOOK_ID_FROM"));
        assert!(refusal(&[sw, ("WEBHOOK_ID_FROM", "json:data")]).contains("WEBHOOK_ID_FROM"));
        let st = [("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)];
        assert_eq!(id(&st), Ok(IdentityFrom::JsonPointer("/id".into())));
        assert_eq!(
            id(&[st[0], st[1], ("WEBHOOK_ID_FROM", "header:webhook-id")]),
            Err(SettingsError::refused(
                "WEBHOOK_ID_FROM",
                SettingRule::NotSigned { scheme: "stripe" }
            ))
        );
        let e = refusal(&[st[0], st[1], ("WEBHOOK_ID_FROM", "header:webhook-id")]);
        assert!(
            e.contains("WEBHOOK_ID_FROM") && e.contains("must be signed"),
            "{e}"
        );
    }

    /// GitHub and Shopify sign the body only: their delivery id headers are unsigned, so the
    /// identity must come from the signed body. Unset, `WEBHOOK_ID_FROM` refuses the start (no
    /// signed default); naming the delivery header refuses it too; a JSON pointer is accepted.
    #[test]
    fn webhook_id_from_for_github_and_shopify_must_come_from_the_signed_body() {
        for (scheme, secret, header) in [
            ("github", "github-webhook-secret-0001", "X-GitHub-Delivery"),
            (
                "shopify",
                "shopify-client-secret-0001",
                "X-Shopify-Webhook-Id",
            ),
        ] {
            let base = [("WEBHOOK_SCHEME", scheme), ("WEBHOOK_SECRETS", secret)];
            let unset = config(&base).map(|c| c.identity);
            assert_eq!(
                unset,
                Err(SettingsError::refused(
                    "WEBHOOK_ID_FROM",
                    SettingRule::IdentityNeeded { scheme }
                )),
                "{scheme}"
            );
            let e = refusal(&base);
            assert!(e.contains("WEBHOOK_ID_FROM") && e.contains("json:"), "{e}");
            let delivery = format!("header:{header}");
            let e = refusal(&[base[0], base[1], ("WEBHOOK_ID_FROM", &delivery)]);
            assert!(e.contains("not signed by its sender"), "{e}");
            for stripe_like in ["header:webhook-id", "header:svix-id"] {
                assert!(matches!(
                    config(&[base[0], base[1], ("WEBHOOK_ID_FROM", stripe_like)]),
                    Err(SettingsError::Refused {
                        var: "WEBHOOK_ID_FROM",
                        rule: SettingRule::NotSigned { .. }
                    })
                ));
            }
            let id = config(&[base[0], base[1], ("WEBHOOK_ID_FROM", "json:/delivery/id")])
                .map(|c| c.identity);
            assert_eq!(id, Ok(IdentityFrom::JsonPointer("/delivery/id".into())));
        }
    }

    /// Slack signs its timestamp and body, sends no id header: the identity defaults to the
    /// Events API's `event_id` in the signed body. Svix's `svix-id` is Standard Webhooks' id.
    #[test]
    fn slack_identity_defaults_to_the_event_id_and_svix_id_is_the_webhook_id() {
        let slack = [
            ("WEBHOOK_SCHEME", "slack"),
            ("WEBHOOK_SECRETS", "8f742231b10e8888abcd99yyyzzz85a5"),
        ];
        assert_eq!(
            config(&slack).map(|c| c.identity),
            Ok(IdentityFrom::JsonPointer("/event_id".into()))
        );
        let e = refusal(&[slack[0], slack[1], ("WEBHOOK_ID_FROM", "header:webhook-id")]);
        assert!(e.contains("must be signed"), "{e}");
        let e = refusal(&[
            ("WEBHOOK_SCHEME", "slack"),
            ("WEBHOOK_SECRETS", "short-secret"),
        ]);
        assert!(
            e.contains("WEBHOOK_SECRETS") && e.contains("12 bytes"),
            "{e}"
        );
        assert!(!e.contains("short-secret"), "{e}");
        assert_eq!(
            config(&[
                ("WEBHOOK_SECRETS", SW_SECRET),
                ("WEBHOOK_ID_FROM", "header:Svix-Id")
            ])
            .map(|c| c.identity),
            Ok(IdentityFrom::WebhookId)
        );
    }
}
