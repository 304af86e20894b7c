//! The builder on Valkey (feature `valkey`): `Dedup::from_env(..)?.valkey()?`, the
//! [`Dedup::on`](crate::Dedup::on) of the store [`from_settings`] builds.

use lambda_dedup_valkey::{HashTag, ValkeyStore};

use lambda_dedup_config::{
    Env, SettingRule, Settings, SettingsError, VALKEY_CA_BUNDLE_VAR, VALKEY_HASH_TAG_VAR,
    VALKEY_PREFIX_VAR, ValkeyConfig, ValkeyHashTag,
};

/// The server: `redis://[user:password@]host:port[/db]`, or `rediss://…` for TLS (the
/// server's certificate verified against the system's roots; `#insecure` is refused).
pub(crate) const URL_VAR: &str = lambda_dedup_config::VALKEY_URL_VAR;
/// How a PEM certificate starts: a CA bundle without one verifies nothing.
const PEM_CERTIFICATE: &[u8] = b"-----BEGIN CERTIFICATE-----";

/// The store [`Dedup::valkey`](crate::Dedup::valkey) chooses: the server of `env`'s [`ValkeyConfig`], bound to
/// `settings` (retention, lease and clock-skew allowance): what a test checks the key layout
/// of (`ValkeyStore::mark_key`).
pub fn from_settings(env: &Env, settings: &Settings) -> Result<ValkeyStore, SettingsError> {
    let config = ValkeyConfig::read(env)?;
    let malformed =
        |var: &'static str, why: String| SettingsError::refused(var, SettingRule::Malformed(why));
    let url_invalid = || SettingsError::Invalid {
        name: URL_VAR.into(),
        value: "(not shown: it may carry a password)".into(),
    };
    let store = match &config.ca_bundle {
        None => {
            ValkeyStore::from_url(&config.url, settings.retention).map_err(|_| url_invalid())?
        }
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                malformed(
                    VALKEY_CA_BUNDLE_VAR,
                    format!("{path} cannot be read ({})", e.kind()),
                )
            })?;
            // The client reads a file without a certificate as no roots at all.
            if !pem
                .windows(PEM_CERTIFICATE.len())
                .any(|w| w == PEM_CERTIFICATE)
            {
                return Err(malformed(
                    VALKEY_CA_BUNDLE_VAR,
                    format!("{path} holds no PEM certificate"),
                ));
            }
            // Its refusals name no URL: roots for a URL without TLS, roots that are not PEM.
            ValkeyStore::from_url_with_roots(&config.url, &pem, settings.retention)
                .map_err(|e| malformed(VALKEY_CA_BUNDLE_VAR, e.to_string()))?
        }
    };
    let mut store = store
        .with_lease(settings.lease)
        .with_clock_skew(settings.clock_skew);
    if let Some(prefix) = &config.prefix {
        store = store
            .with_prefix(prefix)
            .map_err(|e| malformed(VALKEY_PREFIX_VAR, e.to_string()))?;
    }
    let tag = match config.hash_tag {
        ValkeyHashTag::None => HashTag::None,
        ValkeyHashTag::Event => HashTag::Event,
        ValkeyHashTag::Fixed(t) => HashTag::Fixed(t),
    };
    store = store
        .with_hash_tag(tag)
        .map_err(|e| malformed(VALKEY_HASH_TAG_VAR, e.to_string()))?;
    if let Some((replicas, timeout)) = config.replicas {
        store = store.with_replicas(replicas, timeout);
    }
    Ok(store)
}
