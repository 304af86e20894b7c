//! Where the marks are when not in DynamoDB: the PostgreSQL server ([`PgConfig`], feature
//! `postgres`: `DATABASE_URL`, `PG_CA_BUNDLE`, `PG_TLS`) and the Valkey server
//! ([`ValkeyConfig`], feature `valkey`: `VALKEY_URL`, `VALKEY_KEY_PREFIX`, `VALKEY_HASH_TAG`,
//! `VALKEY_REPLICAS`, `VALKEY_REPLICAS_TIMEOUT_MS`, `VALKEY_CA_BUNDLE`). The stores are built
//! from them by `Dedup::postgres` and `Dedup::valkey`.

use std::time::Duration;

use crate::env::{Lookup, optional_in, required_in};
use crate::{SettingRule, SettingsError, ValueError};

/// The PostgreSQL server: `postgresql://user:password@host:5432/db` (RDS Proxy's endpoint works
/// as it is).
pub const PG_URL_VAR: &str = "DATABASE_URL";
/// A PEM file of the certificate authorities the server is verified with (for RDS, Amazon's
/// RDS bundle).
pub const PG_CA_BUNDLE_VAR: &str = "PG_CA_BUNDLE";
/// `disabled`: plain TCP, for a server on loopback only (any other host is refused).
pub const PG_TLS_VAR: &str = "PG_TLS";
/// The Valkey server: `rediss://[user:password@]host:port[/db]`; plain-text `redis://` (or a
/// unix socket) only to a server on loopback.
pub const VALKEY_URL_VAR: &str = "VALKEY_URL";
/// The prefix of the mark keys in Valkey.
pub const VALKEY_PREFIX_VAR: &str = "VALKEY_KEY_PREFIX";
/// Valkey Cluster's hash tag in the mark keys: `none`, `event` or `fixed:<tag>`.
pub const VALKEY_HASH_TAG_VAR: &str = "VALKEY_HASH_TAG";
/// How many replicas acknowledge each write (`WAIT n timeout`); 0, the default: none.
pub const VALKEY_REPLICAS_VAR: &str = "VALKEY_REPLICAS";
/// How long a write waits for those replicas, milliseconds.
pub const VALKEY_REPLICAS_TIMEOUT_VAR: &str = "VALKEY_REPLICAS_TIMEOUT_MS";
/// A PEM file of the certificate authorities a `rediss://` server is verified with, in place of
/// the system's roots (a private CA).
pub const VALKEY_CA_BUNDLE_VAR: &str = "VALKEY_CA_BUNDLE";
/// The default of [`VALKEY_REPLICAS_TIMEOUT_VAR`]: 500 ms.
pub const DEFAULT_VALKEY_REPLICAS_TIMEOUT_MS: u64 = 500;
/// The most [`VALKEY_REPLICAS_TIMEOUT_VAR`] may be: the store's `WAIT_LIMIT` (4 s, under the
/// client's limit on a reply, so the server's count arrives before the client gives up).
pub const MAX_VALKEY_REPLICAS_TIMEOUT_MS: u64 = 4_000;

/// Where the mark keys carry a hash tag, for Valkey Cluster (`VALKEY_HASH_TAG`), as the store's
/// `HashTag` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ValkeyHashTag {
    /// `none` (or unset): no tag, a single server or a primary with replicas.
    #[default]
    None,
    /// `event`: one slot per event (`{<dedup key>}`).
    Event,
    /// `fixed:<tag>`: one slot for every mark and effect (`{<tag>}`).
    Fixed(String),
}

impl std::str::FromStr for ValkeyHashTag {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.trim() {
            "" | "none" => Ok(Self::None),
            "event" => Ok(Self::Event),
            other => match other.strip_prefix("fixed:") {
                Some(tag) if !tag.is_empty() && !tag.contains(['{', '}']) => {
                    Ok(Self::Fixed(tag.to_owned()))
                }
                Some(_) => Err(ValueError::BadHashTag),
                None => Err(ValueError::NoneOf {
                    value: other.to_owned(),
                    expected: "`none`, `event` or `fixed:<tag>`",
                }),
            },
        }
    }
}

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
    /// other `PG_TLS`, and `PG_TLS=disabled` with a server that is not on loopback
    /// ([`SettingRule::PlainTextOffLoopback`], naming `DATABASE_URL`).
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let url = required_in(env, PG_URL_VAR)?;
        if let Some(path) = env.get(PG_CA_BUNDLE_VAR).filter(|p| !p.trim().is_empty()) {
            return Ok(Self {
                url,
                tls: PgTls::CaBundle(path),
            });
        }
        match env.get(PG_TLS_VAR).as_deref() {
            Some("disabled") if pg_on_loopback(&url) => Ok(Self {
                url,
                tls: PgTls::Disabled,
            }),
            Some("disabled") => Err(SettingsError::refused(
                PG_URL_VAR,
                SettingRule::PlainTextOffLoopback {
                    plain: "PG_TLS=disabled",
                    instead: "set PG_CA_BUNDLE to verify the server over TLS",
                },
            )),
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
    /// The hash tag of the mark keys (Valkey Cluster).
    pub hash_tag: ValkeyHashTag,
    /// How many replicas must acknowledge each write, and for how long it waits; `None`: no
    /// wait.
    pub replicas: Option<(usize, Duration)>,
    /// The PEM file of the roots a `rediss://` server is verified with, when not the system's.
    pub ca_bundle: Option<String>,
}

impl std::fmt::Debug for ValkeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValkeyConfig")
            .field("url", &"(not shown)")
            .field("prefix", &self.prefix)
            .field("hash_tag", &self.hash_tag)
            .field("replicas", &self.replicas)
            .field("ca_bundle", &self.ca_bundle)
            .finish()
    }
}

impl ValkeyConfig {
    /// The server `env` names: `VALKEY_URL` (required), `VALKEY_KEY_PREFIX` (an empty one is
    /// unset), `VALKEY_HASH_TAG` (`none`, `event`, `fixed:<tag>`), `VALKEY_REPLICAS` (0) with
    /// `VALKEY_REPLICAS_TIMEOUT_MS` (500; 1 to 4000, and only with replicas) and
    /// `VALKEY_CA_BUNDLE`. Refuses, naming the variable, a tag in no such form, a timeout of 0,
    /// over 4 s or without replicas, and a plain-text URL (`redis://`, a unix socket) to a
    /// server that is not on loopback ([`SettingRule::PlainTextOffLoopback`]).
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let url = required_in(env, VALKEY_URL_VAR)?;
        if !valkey_encrypted_or_on_loopback(&url) {
            return Err(SettingsError::refused(
                VALKEY_URL_VAR,
                SettingRule::PlainTextOffLoopback {
                    plain: "redis://",
                    instead: "use rediss:// (TLS; VALKEY_CA_BUNDLE for a private CA)",
                },
            ));
        }
        let hash_tag = env
            .get(VALKEY_HASH_TAG_VAR)
            .unwrap_or_default()
            .parse()
            .map_err(|e: ValueError| {
                SettingsError::refused(VALKEY_HASH_TAG_VAR, SettingRule::Malformed(e.to_string()))
            })?;
        let replicas: usize = optional_in(env, VALKEY_REPLICAS_VAR, 0)?;
        let timeout_set = env
            .get(VALKEY_REPLICAS_TIMEOUT_VAR)
            .is_some_and(|v| !v.trim().is_empty());
        let timeout_ms = optional_in(
            env,
            VALKEY_REPLICAS_TIMEOUT_VAR,
            DEFAULT_VALKEY_REPLICAS_TIMEOUT_MS,
        )?;
        let refused = |rule| Err(SettingsError::refused(VALKEY_REPLICAS_TIMEOUT_VAR, rule));
        if timeout_ms == 0 {
            return refused(SettingRule::Zero);
        }
        if timeout_ms > MAX_VALKEY_REPLICAS_TIMEOUT_MS {
            return refused(SettingRule::AboveMaximum {
                value: timeout_ms,
                max: MAX_VALKEY_REPLICAS_TIMEOUT_MS,
                why: "WAIT holds the connection that long, and the client gives up on a reply after 5 s",
            });
        }
        if timeout_set && replicas == 0 {
            return refused(SettingRule::Malformed(format!(
                "set without {VALKEY_REPLICAS_VAR}: a write would wait for no replica"
            )));
        }
        Ok(Self {
            url,
            prefix: env.get(VALKEY_PREFIX_VAR).filter(|p| !p.is_empty()),
            hash_tag,
            replicas: (replicas > 0).then(|| (replicas, Duration::from_millis(timeout_ms))),
            ca_bundle: env
                .get(VALKEY_CA_BUNDLE_VAR)
                .filter(|p| !p.trim().is_empty()),
        })
    }
}

/// Whether `host` (as a URL or a libpq `host=` writes it) is on loopback: `localhost`, an
/// address of 127.0.0.0/8 or `::1`, or a unix socket's directory (a path).
fn loopback_host(host: &str) -> bool {
    let host = percent_decoded(host.trim());
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.starts_with('/')
        || host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `s` with its `%XX` escapes decoded (a unix socket's directory in a URL's host), or as it is
/// where an escape is not one.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| s.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// The hosts of a URL's authority `authority` (`user:pw@h1:p1,h2:p2`), each without its port.
fn authority_hosts(authority: &str) -> Vec<String> {
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    hosts
        .split(',')
        .map(|h| {
            if let Some(v6) = h.strip_prefix('[') {
                v6.split_once(']').map_or(v6, |(a, _)| a).to_owned()
            } else {
                h.split_once(':').map_or(h, |(a, _)| a).to_owned()
            }
        })
        .collect()
}

/// Whether every host a PostgreSQL connection string names is on loopback: a URL's hosts and
/// its `host=` parameters, or a `key=value` string's `host` and `hostaddr`; none named is
/// libpq's default, the local socket.
fn pg_on_loopback(url: &str) -> bool {
    let url = url.trim();
    let mut hosts = Vec::new();
    if let Some(rest) = ["postgresql://", "postgres://"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme))
    {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        hosts.extend(
            authority_hosts(&rest[..end])
                .into_iter()
                .filter(|h| !h.is_empty()),
        );
        if let Some((_, query)) = rest.split_once('?') {
            for pair in query.split('&') {
                if let Some(("host" | "hostaddr", v)) = pair.split_once('=') {
                    hosts.extend(v.split(',').map(str::to_owned));
                }
            }
        }
    } else if url.contains("://") {
        // Another scheme: nothing known of it is on loopback.
        return false;
    } else {
        for pair in url.split_whitespace() {
            if let Some(("host" | "hostaddr", v)) = pair.split_once('=') {
                hosts.extend(v.trim_matches('\'').split(',').map(str::to_owned));
            }
        }
    }
    hosts.iter().all(|h| loopback_host(h))
}

/// Whether a Valkey URL is encrypted (`rediss://`) or reaches a server on loopback
/// (`redis://` to one, or a unix socket: `unix://`, `redis+unix://`).
fn valkey_encrypted_or_on_loopback(url: &str) -> bool {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    match scheme.to_ascii_lowercase().as_str() {
        "rediss" | "valkeys" => true,
        "unix" | "redis+unix" | "valkey+unix" => true,
        "redis" | "valkey" => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let hosts = authority_hosts(&rest[..end]);
            !hosts.is_empty() && hosts.iter().all(|h| !h.is_empty() && loopback_host(h))
        }
        _ => false,
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
        let url = "postgresql://u:secret@127.0.0.1/x";
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
            (VALKEY_URL_VAR, "redis://:secret@localhost:6379"),
            (VALKEY_PREFIX_VAR, ""),
        ])
        .expect("valkey");
        assert_eq!(v.prefix, None);
        assert!(!format!("{v:?}").contains("secret"));
        assert_eq!(
            (v.hash_tag, v.replicas, v.ca_bundle),
            (ValkeyHashTag::None, None, None)
        );
    }

    /// Issue 42: plain-text store connections only to loopback. `PG_TLS=disabled` and
    /// `redis://` to any other host are refused at start, naming the variable of the server;
    /// 127.0.0.0/8, `::1`, `localhost` and unix sockets are accepted, TLS everywhere.
    #[test]
    fn plain_text_store_connections_only_to_loopback() {
        let pg = |url: &str| {
            PgConfig::read(&Env::from_pairs([
                (PG_URL_VAR, url),
                (PG_TLS_VAR, "disabled"),
            ]))
        };
        for remote in [
            "postgresql://u:secret@db.example.com:5432/x",
            "postgres://u@10.0.0.5/x",
            "postgresql://u@127.0.0.1,db.example.com/x",
            "postgresql://u@[2001:db8::1]:5432/x",
            "postgresql:///x?host=db.example.com",
            "host=db.example.com dbname=x",
            "postgresql://u@127.0.0.1.example.com/x",
        ] {
            let refused = pg(remote).expect_err(remote);
            assert_eq!(
                refused,
                SettingsError::Refused {
                    var: PG_URL_VAR,
                    rule: SettingRule::PlainTextOffLoopback {
                        plain: "PG_TLS=disabled",
                        instead: "set PG_CA_BUNDLE to verify the server over TLS",
                    }
                },
                "{remote}"
            );
            assert!(!refused.to_string().contains("secret"), "{refused}");
        }
        for local in [
            "postgresql://u:secret@127.0.0.1:5432/x",
            "postgresql://u@127.8.9.10/x",
            "postgresql://u@localhost/x",
            "postgresql://u@[::1]:5432/x",
            "postgresql:///x?host=/var/run/postgresql",
            "postgresql://%2Fvar%2Frun%2Fpostgresql/x",
            "host=/tmp dbname=x",
            "dbname=x",
        ] {
            assert_eq!(pg(local).map(|c| c.tls), Ok(PgTls::Disabled), "{local}");
        }
        let tls = Env::from_pairs([
            (PG_URL_VAR, "postgresql://u@db.example.com/x"),
            (PG_CA_BUNDLE_VAR, "/ca.pem"),
        ]);
        assert!(PgConfig::read(&tls).is_ok());

        let vk = |url: &str| ValkeyConfig::read(&Env::from_pairs([(VALKEY_URL_VAR, url)]));
        for remote in [
            "redis://:secret@cache.example.com:6379",
            "redis://10.1.2.3:6379/0",
            "redis://[2001:db8::2]:6379",
            "redis://",
            "cache.example.com:6379",
        ] {
            assert!(
                matches!(
                    vk(remote),
                    Err(SettingsError::Refused {
                        var: VALKEY_URL_VAR,
                        rule: SettingRule::PlainTextOffLoopback { .. }
                    })
                ),
                "{remote}"
            );
        }
        for fine in [
            "redis://127.0.0.1:6379",
            "redis://:secret@localhost:6379/2",
            "redis://[::1]:6379",
            "unix:///tmp/valkey.sock",
            "redis+unix:///tmp/valkey.sock",
            "rediss://cache.example.com:6379",
        ] {
            assert!(vk(fine).is_ok(), "{fine}");
        }
    }

    /// The hash tag, the replicas' wait and the private roots as the variables write them; a
    /// tag in no such form, a wait of zero, over the store's limit, or without replicas are
    /// refused, naming the variable.
    #[test]
    fn valkey_cluster_replicas_and_tls_roots_are_read_and_bad_values_refused() {
        let url = (VALKEY_URL_VAR, "rediss://v:6379");
        let vk = |pairs: &[(&str, &str)]| {
            ValkeyConfig::read(&Env::from_pairs([url].iter().chain(pairs).copied()))
        };
        for (text, tag) in [
            ("none", ValkeyHashTag::None),
            ("event", ValkeyHashTag::Event),
            ("fixed:ledger", ValkeyHashTag::Fixed("ledger".into())),
        ] {
            assert_eq!(
                vk(&[(VALKEY_HASH_TAG_VAR, text)]).map(|c| c.hash_tag),
                Ok(tag)
            );
        }
        for bad in ["events", "fixed:", "fixed:{x}", "Fixed:x"] {
            assert!(
                matches!(
                    vk(&[(VALKEY_HASH_TAG_VAR, bad)]),
                    Err(SettingsError::Refused {
                        var: VALKEY_HASH_TAG_VAR,
                        rule: SettingRule::Malformed(_)
                    })
                ),
                "{bad}"
            );
        }
        let two = vk(&[
            (VALKEY_REPLICAS_VAR, "2"),
            (VALKEY_REPLICAS_TIMEOUT_VAR, "250"),
        ]);
        assert_eq!(
            two.map(|c| c.replicas),
            Ok(Some((2, Duration::from_millis(250))))
        );
        assert_eq!(
            vk(&[(VALKEY_REPLICAS_VAR, "1")]).map(|c| c.replicas),
            Ok(Some((
                1,
                Duration::from_millis(DEFAULT_VALKEY_REPLICAS_TIMEOUT_MS)
            )))
        );
        for (pairs, zero) in [
            (
                &[
                    (VALKEY_REPLICAS_VAR, "1"),
                    (VALKEY_REPLICAS_TIMEOUT_VAR, "0"),
                ][..],
                true,
            ),
            (
                &[
                    (VALKEY_REPLICAS_VAR, "1"),
                    (VALKEY_REPLICAS_TIMEOUT_VAR, "4001"),
                ][..],
                false,
            ),
            (&[(VALKEY_REPLICAS_TIMEOUT_VAR, "100")][..], false),
        ] {
            assert!(
                matches!(&vk(pairs), Err(SettingsError::Refused { var: VALKEY_REPLICAS_TIMEOUT_VAR, rule })
                    if matches!(rule, SettingRule::Zero) == zero),
                "{pairs:?}: {:?}",
                vk(pairs)
            );
        }
        assert!(matches!(
            vk(&[(VALKEY_REPLICAS_VAR, "two")]),
            Err(SettingsError::Invalid { name, .. }) if name == VALKEY_REPLICAS_VAR
        ));
        assert_eq!(
            vk(&[(VALKEY_CA_BUNDLE_VAR, "/etc/ca.pem")]).map(|c| c.ca_bundle),
            Ok(Some("/etc/ca.pem".into()))
        );
    }
}
