//! Where the marks are when not in DynamoDB: the PostgreSQL server ([`PgConfig`], feature
//! `postgres`: `DATABASE_URL`, `PG_CA_BUNDLE`, `PG_TLS`) and the Valkey server
//! ([`ValkeyConfig`], feature `valkey`: `VALKEY_URL`, `VALKEY_KEY_PREFIX`). The stores are built
//! from them by `Dedup::postgres` and `Dedup::valkey`.

use super::env::{Lookup, required_in};
use super::{SettingRule, SettingsError};

/// The PostgreSQL server: `postgresql://user:password@host:5432/db` (RDS Proxy's endpoint works
/// as it is).
pub const PG_URL_VAR: &str = "DATABASE_URL";
/// A PEM file of the certificate authorities the server is verified with (for RDS, Amazon's
/// RDS bundle).
pub const PG_CA_BUNDLE_VAR: &str = "PG_CA_BUNDLE";
/// `disabled`: plain TCP, for a server on loopback only.
pub const PG_TLS_VAR: &str = "PG_TLS";
/// The Valkey server: `redis://[user:password@]host:port[/db]`.
pub const VALKEY_URL_VAR: &str = "VALKEY_URL";
/// The prefix of the mark keys in Valkey.
pub const VALKEY_PREFIX_VAR: &str = "VALKEY_KEY_PREFIX";

/// How the PostgreSQL server is reached over the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgTls {
    /// TLS, the server verified by the authorities in this PEM file (`PG_CA_BUNDLE`).
    CaBundle(String),
    /// Plain TCP, for a server on loopback (`PG_TLS=disabled`, said explicitly).
    Disabled,
}

/// The PostgreSQL server of the marks.
#[derive(Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// The server's URL (it may carry a password: never in `Debug` or an error).
    pub url: String,
    /// How it is reached.
    pub tls: PgTls,
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &"(not shown)")
            .field("tls", &self.tls)
            .finish()
    }
}

impl PgConfig {
    /// The server `env` names: `DATABASE_URL` (required), and `PG_CA_BUNDLE` or the explicit
    /// `PG_TLS=disabled`; neither refuses the start (no silent plain text), and so does any
    /// other `PG_TLS`.
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let url = required_in(env, PG_URL_VAR)?;
        if let Some(path) = env.get(PG_CA_BUNDLE_VAR).filter(|p| !p.trim().is_empty()) {
            return Ok(Self {
                url,
                tls: PgTls::CaBundle(path),
            });
        }
        match env.get(PG_TLS_VAR).as_deref() {
            Some("disabled") => Ok(Self {
                url,
                tls: PgTls::Disabled,
            }),
            Some(other) => Err(SettingsError::Invalid {
                name: PG_TLS_VAR.into(),
                value: other.into(),
            }),
            None => Err(SettingsError::refused(
                PG_CA_BUNDLE_VAR,
                SettingRule::NeitherSet {
                    or: "PG_TLS=disabled",
                    why: "certificate authorities to verify the server, or plain TCP to a server \
                          on loopback",
                },
            )),
        }
    }
}

/// The Valkey server of the marks.
#[derive(Clone, PartialEq, Eq)]
pub struct ValkeyConfig {
    /// The server's URL (it may carry a password: never in `Debug` or an error).
    pub url: String,
    /// The prefix of the mark keys, when not the store's default.
    pub prefix: Option<String>,
}

impl std::fmt::Debug for ValkeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValkeyConfig")
            .field("url", &"(not shown)")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ValkeyConfig {
    /// The server `env` names: `VALKEY_URL` (required) and `VALKEY_KEY_PREFIX` (an empty one is
    /// unset).
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        Ok(Self {
            url: required_in(env, VALKEY_URL_VAR)?,
            prefix: env.get(VALKEY_PREFIX_VAR).filter(|p| !p.is_empty()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    /// The PostgreSQL server needs its URL and an explicit TLS choice, and never shows its URL;
    /// Valkey's needs its URL, its prefix optional.
    #[test]
    fn the_stores_servers_are_read_with_an_explicit_tls_choice() {
        let url = "postgresql://u:secret@db/x";
        let pg = |pairs: &[(&str, &str)]| PgConfig::read(&Env::from_pairs(pairs.to_vec()));
        assert_eq!(
            pg(&[]),
            Err(SettingsError::Missing(PG_URL_VAR.into())),
            "no server"
        );
        assert!(matches!(
            pg(&[(PG_URL_VAR, url)]),
            Err(SettingsError::Refused {
                var: PG_CA_BUNDLE_VAR,
                rule: SettingRule::NeitherSet { .. }
            })
        ));
        assert!(matches!(
            pg(&[(PG_URL_VAR, url), (PG_TLS_VAR, "off")]),
            Err(SettingsError::Invalid { name, .. }) if name == PG_TLS_VAR
        ));
        let plain = pg(&[(PG_URL_VAR, url), (PG_TLS_VAR, "disabled")]).expect("plain");
        assert_eq!(plain.tls, PgTls::Disabled);
        assert!(!format!("{plain:?}").contains("secret"));
        let verified = pg(&[(PG_URL_VAR, url), (PG_CA_BUNDLE_VAR, "/ca.pem")]).expect("tls");
        assert_eq!(verified.tls, PgTls::CaBundle("/ca.pem".into()));
        let vk = |pairs: &[(&str, &str)]| ValkeyConfig::read(&Env::from_pairs(pairs.to_vec()));
        assert_eq!(vk(&[]), Err(SettingsError::Missing(VALKEY_URL_VAR.into())));
        let v = vk(&[
            (VALKEY_URL_VAR, "redis://:secret@v:6379"),
            (VALKEY_PREFIX_VAR, ""),
        ])
        .expect("valkey");
        assert_eq!(v.prefix, None);
        assert!(!format!("{v:?}").contains("secret"));
    }
}
