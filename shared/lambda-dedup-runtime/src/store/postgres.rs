//! The builder on PostgreSQL (feature `postgres`): `Dedup::from_env(..)?.postgres()?`, the
//! [`Dedup::on`](crate::Dedup::on) of the store [`from_settings`] builds.

use lambda_dedup_postgres::{PgStore, Tls};

use lambda_dedup_config::{
    Env, MARK_TABLE_VAR, PG_CA_BUNDLE_VAR, PG_URL_VAR, PgConfig, PgTls, SettingRule, Settings,
    SettingsError,
};

/// The server: `postgresql://user:password@host:5432/db` (RDS Proxy's endpoint works as it is).
pub(crate) const URL_VAR: &str = PG_URL_VAR;
/// A PEM file of the certificate authorities the server is verified with (for RDS, Amazon's
/// RDS bundle).
pub(crate) const CA_BUNDLE_VAR: &str = PG_CA_BUNDLE_VAR;

/// The store [`Dedup::postgres`](crate::Dedup::postgres) chooses: the server of `env`'s [`PgConfig`], bound to
/// `settings` (the mark table, retention, lease and clock-skew allowance).
pub(crate) fn from_settings(env: &Env, settings: &Settings) -> Result<PgStore, SettingsError> {
    let refused = |e: lambda_dedup::StoreError| {
        SettingsError::refused(MARK_TABLE_VAR, SettingRule::Malformed(e.to_string()))
    };
    let config = PgConfig::read(env)?;
    Ok(
        PgStore::from_url(&config.url, tls(&config.tls)?, settings.retention)
            .map_err(|_| SettingsError::Invalid {
                name: URL_VAR.into(),
                value: "(not shown: it may carry a password)".into(),
            })?
            .with_table(settings.required_mark_table()?)
            .map_err(refused)?
            .with_lease(settings.lease)
            .with_clock_skew(settings.clock_skew),
    )
}

/// The client's TLS as `tls` says: the CA bundle's authorities read from its file, or none.
fn tls(tls: &PgTls) -> Result<Tls, SettingsError> {
    match tls {
        PgTls::CaBundle(path) => {
            let pem = std::fs::read(path).map_err(|_| SettingsError::Invalid {
                name: CA_BUNDLE_VAR.into(),
                value: path.clone(),
            })?;
            Tls::with_pem_roots(&pem).map_err(|e| {
                SettingsError::refused(CA_BUNDLE_VAR, SettingRule::Malformed(e.to_string()))
            })
        }
        PgTls::Disabled => Ok(Tls::Disabled),
    }
}
