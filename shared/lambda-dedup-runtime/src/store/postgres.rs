//! The builder on PostgreSQL (feature `postgres`): `Dedup::from_env(..)?.postgres()?`.

use lambda_dedup_postgres::{PgStore, Tls};

use crate::service::Dedup;
use crate::settings::{MARK_TABLE_VAR, SettingRule, SettingsError};
use crate::store::NoStore;

/// The server: `postgresql://user:password@host:5432/db` (RDS Proxy's endpoint works as it is).
pub const URL_VAR: &str = "DATABASE_URL";
/// A PEM file of the certificate authorities the server is verified with (for RDS, Amazon's
/// RDS bundle).
pub const CA_BUNDLE_VAR: &str = "PG_CA_BUNDLE";
/// `disabled`: plain TCP, for a server on loopback only.
pub const TLS_VAR: &str = "PG_TLS";

impl Dedup<NoStore> {
    /// Marks in PostgreSQL: the table `DEDUP_MARK_TABLE` names (create it from
    /// [`PgStore::schema`]) on the server of `DATABASE_URL`, over TLS verified by the
    /// authorities of `PG_CA_BUNDLE` — or, for a server on loopback, plain TCP by the explicit
    /// `PG_TLS=disabled`; neither refuses the start (no silent plain text). The settings'
    /// retention and lease, as on DynamoDB. Connects lazily, on the first event.
    pub fn postgres(self) -> Result<Dedup<PgStore>, SettingsError> {
        let refused = |e: lambda_dedup::StoreError| {
            SettingsError::refused(MARK_TABLE_VAR, SettingRule::Malformed(e.to_string()))
        };
        let url = self.setting(URL_VAR)?;
        let settings = self.settings();
        let store = PgStore::from_url(&url, self.pg_tls()?, settings.retention)
            .map_err(|_| SettingsError::Invalid {
                name: URL_VAR.into(),
                value: "(not shown: it may carry a password)".into(),
            })?
            .with_table(settings.required_mark_table()?)
            .map_err(refused)?
            .with_lease(settings.lease)
            .with_clock_skew(settings.clock_skew);
        Ok(self.on(store))
    }

    fn pg_tls(&self) -> Result<Tls, SettingsError> {
        let env = self.env();
        if let Some(path) = env.get(CA_BUNDLE_VAR).filter(|p| !p.trim().is_empty()) {
            let pem = std::fs::read(&path).map_err(|_| SettingsError::Invalid {
                name: CA_BUNDLE_VAR.into(),
                value: path.clone(),
            })?;
            return Tls::with_pem_roots(&pem).map_err(|e| {
                SettingsError::refused(CA_BUNDLE_VAR, SettingRule::Malformed(e.to_string()))
            });
        }
        match env.get(TLS_VAR).as_deref() {
            Some("disabled") => Ok(Tls::Disabled),
            Some(other) => Err(SettingsError::Invalid {
                name: TLS_VAR.into(),
                value: other.into(),
            }),
            None => Err(SettingsError::refused(
                CA_BUNDLE_VAR,
                SettingRule::NeitherSet {
                    or: "PG_TLS=disabled",
                    why: "certificate authorities to verify the server, or plain TCP to a server \
                          on loopback",
                },
            )),
        }
    }
}
