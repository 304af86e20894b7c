//! The builder on Valkey (feature `valkey`): `Dedup::from_env(..)?.valkey()?`.

use lambda_dedup_valkey::ValkeyStore;

use crate::config::{SettingRule, SettingsError, VALKEY_PREFIX_VAR, ValkeyConfig};
use crate::service::Dedup;
use crate::store::NoStore;

/// The server: `redis://[user:password@]host:port[/db]`, or `rediss://…` for TLS (the
/// server's certificate verified against the system's roots; `#insecure` is refused).
pub const URL_VAR: &str = crate::config::VALKEY_URL_VAR;
/// The prefix of the mark keys (default `lambda_dedup_valkey::DEFAULT_PREFIX`).
pub const PREFIX_VAR: &str = crate::config::VALKEY_PREFIX_VAR;

impl Dedup<NoStore> {
    /// Marks in Valkey: hashes under `VALKEY_KEY_PREFIX` on the server of `VALKEY_URL`
    /// ([`ValkeyConfig`], from the builder's own `Env`), kept for the settings' retention (the
    /// server's own expiry, judged at read too) under the settings' lease. What the server must
    /// keep for the guarantee (AOF fsynced on every write, no eviction): see
    /// `lambda_dedup_valkey`. Connects lazily, on the first event.
    pub fn valkey(self) -> Result<Dedup<ValkeyStore>, SettingsError> {
        let config = ValkeyConfig::read(self.env())?;
        let settings = self.settings();
        let mut store = ValkeyStore::from_url(&config.url, settings.retention)
            .map_err(|_| SettingsError::Invalid {
                name: URL_VAR.into(),
                value: "(not shown: it may carry a password)".into(),
            })?
            .with_lease(settings.lease)
            .with_clock_skew(settings.clock_skew);
        if let Some(prefix) = &config.prefix {
            store = store.with_prefix(prefix).map_err(|e| {
                SettingsError::refused(VALKEY_PREFIX_VAR, SettingRule::Malformed(e.to_string()))
            })?;
        }
        Ok(self.on(store))
    }
}
