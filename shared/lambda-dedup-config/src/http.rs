//! The HTTP `Idempotency-Key` door's configuration ([`HttpConfig`], feature `http`): whether a
//! key is required, who the caller is, how long a retry waits for a request in flight, what the
//! fingerprint covers, the largest body, which headers are replayed and how long keys are kept
//! (`HTTP_*`; the table of the [`config`](super) module). What the door does with it is the
//! `http` module's.

use std::time::{Duration, SystemTime};

use crate::env::{Lookup, optional_in};
use crate::{SettingRule, SettingsError, ValueError};

/// How long keys are remembered when `HTTP_KEY_RETENTION_SECONDS` is unset: 24 hours, as Stripe.
pub const DEFAULT_KEY_RETENTION_SECS: u64 = 86_400;
/// The shortest key retention accepted: an hour, so a client's retries after a timeout find it.
pub const MIN_KEY_RETENTION: Duration = Duration::from_secs(3_600);
/// The largest body when `HTTP_MAX_BODY_BYTES` is unset: 256 KiB.
pub const DEFAULT_HTTP_MAX_BODY_BYTES: usize = 256 * 1024;
/// The most `HTTP_MAX_BODY_BYTES` may be: Lambda's synchronous payload, 6 MB.
pub const MAX_HTTP_BODY_BYTES: usize = 6 * 1024 * 1024;
/// The most `HTTP_IN_FLIGHT_WAIT_MS` may be: a retry is answered well inside a client's timeout.
pub const MAX_IN_FLIGHT_WAIT: Duration = Duration::from_secs(10);
/// The headers of a stored answer replayed when `HTTP_REPLAY_HEADERS` is unset.
pub const DEFAULT_REPLAY_HEADERS: [&str; 2] = ["content-type", "location"];
/// Headers never stored nor replayed, whatever `HTTP_REPLAY_HEADERS` says: a session's, a
/// credential's or a connection's, not the resource's. A name holding [`NEVER_REPLAYED_PARTS`]
/// is refused too.
const NEVER_REPLAYED: [&str; 12] = [
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "cookie",
    "set-cookie",
    "x-amz-security-token",
    "x-api-key",
    "connection",
    "transfer-encoding",
    "content-length",
    "idempotent-replayed",
];
/// Parts of a header's name that make it a credential's (`x-auth-token`, `x-client-secret`,
/// `x-session-id`, `x-csrf-token`, `x-goog-api-key`): never stored nor replayed, to another
/// caller or to the same one after the credential changed.
const NEVER_REPLAYED_PARTS: [&str; 9] = [
    "token",
    "secret",
    "session",
    "auth",
    "cookie",
    "password",
    "credential",
    "api-key",
    "apikey",
];

/// Whether a request must carry `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRequirement {
    /// Without one: 400 (the draft's answer for a resource that requires it).
    Required,
    /// Without one the work runs with no mark (nothing stored, no replay).
    Optional,
}

/// Who the caller is: every key is scoped by it, so one caller never receives another's
/// stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerFrom {
    /// The authorizer's principal: a JWT's `iss` + `sub`, the IAM caller's ARN (a Function URL
    /// or an HTTP API with `AWS_IAM`), or a Lambda authorizer's `principalId`.
    Authorizer,
    /// The API key of an API Gateway REST API (`requestContext.identity.apiKey`).
    ApiKey,
    /// A header a trusted front sets (lower case): only with [`HttpConfig::front`] naming the
    /// front that verifies it (`HTTP_CALLER_FRONT`).
    Header(String),
    /// One caller for all: keys are not scoped (an API with a single client only).
    Nobody,
}

impl std::str::FromStr for CallerFrom {
    type Err = ValueError;

    /// `authorizer`, `api-key`, `header:<name>` or `none`.
    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.trim() {
            "authorizer" => Ok(Self::Authorizer),
            "api-key" => Ok(Self::ApiKey),
            "none" => Ok(Self::Nobody),
            other => match other.split_once(':') {
                Some(("header", name)) if valid_header_name(name.trim()) => {
                    Ok(Self::Header(name.trim().to_ascii_lowercase()))
                }
                _ => Err(ValueError::NoneOf {
                    value: other.to_owned(),
                    expected: "authorizer, api-key, header:<name>, none",
                }),
            },
        }
    }
}

/// The front that verifies the caller's header of `HTTP_CALLER_FROM=header:<name>`
/// (`HTTP_CALLER_FRONT`): a request that shows no such front in its request context is 401
/// (`caller_front_missing`), so a client reaching the function another way cannot name a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerFront {
    /// An Application Load Balancer whose listener rule authenticates (`authenticate-oidc`,
    /// `authenticate-cognito`) and sets the header (`x-amzn-oidc-identity`), replacing a
    /// client's: the request must come through an ALB (`alb`).
    Alb,
    /// A front that signs its requests (SigV4) to a Function URL or route with `AWS_IAM`
    /// (CloudFront with origin access control, an internal proxy): the request must carry the
    /// IAM caller (`iam`).
    Iam,
    /// An API Gateway route with an authorizer (Lambda, JWT, Cognito) whose result the route
    /// maps into the header: the request must carry the authorizer's context (`authorizer`).
    Authorizer,
    /// Nothing verifies the header, declared openly (`unverified`): a local emulator or a test.
    /// Any client names any caller; `cargo xtask check-infra` refuses it in a template.
    Unverified,
}

impl std::str::FromStr for CallerFront {
    type Err = ValueError;

    /// `alb`, `iam`, `authorizer` or `unverified`.
    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.trim() {
            "alb" => Ok(Self::Alb),
            "iam" => Ok(Self::Iam),
            "authorizer" => Ok(Self::Authorizer),
            "unverified" => Ok(Self::Unverified),
            other => Err(ValueError::NoneOf {
                value: other.to_owned(),
                expected: "alb, iam, authorizer, unverified",
            }),
        }
    }
}

/// What the fingerprint of a request covers (S11): the same key with another fingerprint is 422.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpFingerprint {
    /// The method, the path and the raw body.
    Request,
    /// The raw body with the method and the path (the same as [`Request`](Self::Request); the
    /// method and path are always covered, so one key on two routes is never one request).
    Body,
    /// The values at these JSON pointers of the body, with the method and the path.
    Pointers(Vec<String>),
}

impl std::str::FromStr for HttpFingerprint {
    type Err = ValueError;

    /// `request`, `body` or `json:/a,/b`.
    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.trim() {
            "request" => Ok(Self::Request),
            "body" => Ok(Self::Body),
            other => match other.strip_prefix("json:") {
                Some(list) => {
                    let pointers: Vec<String> = list
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if pointers.is_empty() || pointers.iter().any(|p| !p.starts_with('/')) {
                        Err(ValueError::NotForm {
                            value: other.to_owned(),
                            form: "json:</pointer>[,</pointer>…]",
                        })
                    } else {
                        Ok(Self::Pointers(pointers))
                    }
                }
                None => Err(ValueError::NoneOf {
                    value: other.to_owned(),
                    expected: "request, body, json:</pointer>,…",
                }),
            },
        }
    }
}

/// The HTTP door's configuration.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Whether `Idempotency-Key` is required.
    pub key: KeyRequirement,
    /// Who the caller is (keys are scoped by it).
    pub caller: CallerFrom,
    /// The front that verifies the caller's header (`Some` exactly with [`CallerFrom::Header`]).
    pub front: Option<CallerFront>,
    /// How long a request whose key is in flight waits for the first to finish before 409
    /// (zero: 409 at once).
    pub in_flight_wait: Duration,
    /// What the fingerprint covers.
    pub fingerprint: HttpFingerprint,
    /// The largest body accepted (413 over it).
    pub max_body_bytes: usize,
    /// The headers of an answer stored and replayed (lower case).
    pub replay_headers: Vec<String>,
    /// How long a key is remembered: the marks' retention.
    pub key_retention: Duration,
    /// `HTTP_MARKS_UNTIL`: until this time, the one-item door (`http_create_once`) writes its
    /// item in one transaction with the key's mark in the mark table, conditioned on no mark
    /// (so a key answered before through the mark table is still replayed); after it, the
    /// single `PutItem`. `None`: the single `PutItem` from the start.
    pub marks_until: Option<SystemTime>,
}

impl HttpConfig {
    /// From `HTTP_IDEMPOTENCY_KEY` (`required` by default, or `optional`), `HTTP_CALLER_FROM`
    /// (required: `authorizer`, `api-key`, `header:<name>` or `none`), `HTTP_CALLER_FRONT`
    /// (required with `header:<name>` and only with it: `alb`, `iam`, `authorizer` or
    /// `unverified`), `HTTP_IN_FLIGHT_WAIT_MS`
    /// (default 0, at most 10000), `HTTP_FINGERPRINT` (default `request`),
    /// `HTTP_MAX_BODY_BYTES` (default 262144, at most 6 MB), `HTTP_REPLAY_HEADERS` (default
    /// `content-type,location`), `HTTP_KEY_RETENTION_SECONDS` (default 86400, at least 3600)
    /// and `HTTP_MARKS_UNTIL` (an RFC 3339 time; unset by default).
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let key = match env.get("HTTP_IDEMPOTENCY_KEY").as_deref().map(str::trim) {
            None | Some("") | Some("required") => KeyRequirement::Required,
            Some("optional") => KeyRequirement::Optional,
            Some(other) => {
                return Err(malformed("HTTP_IDEMPOTENCY_KEY")(format!(
                    "'{other}' is neither required nor optional"
                )));
            }
        };
        let caller: CallerFrom = crate::env::required_in(env, "HTTP_CALLER_FROM")?
            .parse()
            .map_err(malformed("HTTP_CALLER_FROM"))?;
        let front = env
            .get("HTTP_CALLER_FRONT")
            .filter(|v| !v.trim().is_empty())
            .map(|v| v.parse::<CallerFront>())
            .transpose()
            .map_err(malformed("HTTP_CALLER_FRONT"))?;
        match (&caller, front) {
            (CallerFrom::Header(_), None) => {
                return Err(malformed("HTTP_CALLER_FROM")(
                    "header:<name> trusts a header only behind a front that verifies it: set \
                     HTTP_CALLER_FRONT (alb, iam, authorizer, or unverified said openly)",
                ));
            }
            (CallerFrom::Header(_), Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                return Err(malformed("HTTP_CALLER_FRONT")(
                    "only HTTP_CALLER_FROM=header:<name> has a front",
                ));
            }
        }
        let wait_ms: u64 = optional_in(env, "HTTP_IN_FLIGHT_WAIT_MS", 0)?;
        if wait_ms > crate::env::millis(MAX_IN_FLIGHT_WAIT) {
            return Err(SettingsError::refused(
                "HTTP_IN_FLIGHT_WAIT_MS",
                SettingRule::AboveMaximum {
                    value: wait_ms,
                    max: crate::env::millis(MAX_IN_FLIGHT_WAIT),
                    why: "a client's retry must be answered inside its own timeout",
                },
            ));
        }
        let fingerprint = match env.get("HTTP_FINGERPRINT").filter(|v| !v.trim().is_empty()) {
            None => HttpFingerprint::Request,
            Some(v) => v.parse().map_err(malformed("HTTP_FINGERPRINT"))?,
        };
        let max_body_bytes =
            match optional_in(env, "HTTP_MAX_BODY_BYTES", DEFAULT_HTTP_MAX_BODY_BYTES)? {
                0 => {
                    return Err(SettingsError::refused(
                        "HTTP_MAX_BODY_BYTES",
                        SettingRule::Zero,
                    ));
                }
                n if n > MAX_HTTP_BODY_BYTES => {
                    return Err(SettingsError::refused(
                        "HTTP_MAX_BODY_BYTES",
                        SettingRule::AboveMaximum {
                            value: n as u64,
                            max: MAX_HTTP_BODY_BYTES as u64,
                            why: "Lambda's synchronous payload is 6 MB",
                        },
                    ));
                }
                n => n,
            };
        let replay_headers = match env.get("HTTP_REPLAY_HEADERS") {
            None => DEFAULT_REPLAY_HEADERS.map(str::to_owned).to_vec(),
            Some(list) => replay_headers(&list).map_err(malformed("HTTP_REPLAY_HEADERS"))?,
        };
        let retention = optional_in(
            env,
            "HTTP_KEY_RETENTION_SECONDS",
            DEFAULT_KEY_RETENTION_SECS,
        )?;
        if retention < MIN_KEY_RETENTION.as_secs() {
            return Err(SettingsError::refused(
                "HTTP_KEY_RETENTION_SECONDS",
                SettingRule::BelowMinimum {
                    value: retention,
                    min: MIN_KEY_RETENTION.as_secs(),
                    why: "a client retrying after a timeout must still find its key",
                },
            ));
        }
        let marks_until = env
            .get("HTTP_MARKS_UNTIL")
            .filter(|v| !v.trim().is_empty())
            .map(|v| rfc3339(v.trim()))
            .transpose()
            .map_err(malformed("HTTP_MARKS_UNTIL"))?;
        Ok(Self {
            key,
            caller,
            front,
            marks_until,
            in_flight_wait: Duration::from_millis(wait_ms),
            fingerprint,
            max_body_bytes,
            replay_headers,
            key_retention: Duration::from_secs(retention),
        })
    }
}

/// An RFC 3339 time (`2026-12-07T10:00:00Z`, offsets honoured), after 1970.
fn rfc3339(text: &str) -> Result<SystemTime, ValueError> {
    let not = || ValueError::NotForm {
        value: text.to_owned(),
        form: "an RFC 3339 time after 1970 (2026-12-07T10:00:00Z)",
    };
    lambda_dedup::clock::rfc3339(text).ok_or_else(not)
}

/// The refusal of `var`, whose value is not in a form it takes (`e`: why).
fn malformed<E: std::fmt::Display>(var: &'static str) -> impl Fn(E) -> SettingsError {
    move |e| SettingsError::refused(var, SettingRule::Malformed(e.to_string()))
}

fn replay_headers(list: &str) -> Result<Vec<String>, ValueError> {
    let mut names = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let name = name.to_ascii_lowercase();
        if !valid_header_name(&name) {
            return Err(ValueError::NotForm {
                value: name,
                form: "a header name",
            });
        }
        if NEVER_REPLAYED.contains(&name.as_str())
            || NEVER_REPLAYED_PARTS.iter().any(|part| name.contains(part))
        {
            return Err(ValueError::NeverReplayed { name });
        }
        names.push(name);
    }
    Ok(names)
}

/// An HTTP token (RFC 9110): the characters a header's name may hold.
fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    fn read(pairs: &[(&str, &str)]) -> Result<HttpConfig, SettingsError> {
        HttpConfig::read(&Env::from_pairs(pairs.iter().copied()))
    }

    /// The defaults: a key required, 409 at once, the whole request fingerprinted, 24 h.
    #[test]
    fn http_idempotency_key_config_defaults_are_the_drafts_and_stripes() {
        let c = read(&[("HTTP_CALLER_FROM", "authorizer")]).expect("config");
        assert_eq!(c.key, KeyRequirement::Required);
        assert_eq!(c.caller, CallerFrom::Authorizer);
        assert_eq!(c.in_flight_wait, Duration::ZERO);
        assert_eq!(c.fingerprint, HttpFingerprint::Request);
        assert_eq!(c.key_retention, Duration::from_secs(86_400));
        assert_eq!(c.replay_headers, ["content-type", "location"]);
    }

    /// Issue 45: `HTTP_MARKS_UNTIL` is read as an RFC 3339 time (offsets honoured); unset, the
    /// one-item door writes one `PutItem` from the start; a value that is not a time refuses
    /// the start, naming the variable.
    #[test]
    fn http_marks_until_is_an_rfc3339_time_or_the_start_is_refused() {
        let c = ("HTTP_CALLER_FROM", "none");
        assert_eq!(read(&[c]).expect("config").marks_until, None);
        let at = read(&[c, ("HTTP_MARKS_UNTIL", "2026-12-08T01:00:00+01:00")]).expect("config");
        let want = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_688_000);
        assert_eq!(at.marks_until, Some(want));
        for bad in ["tomorrow", "2026-12-08", "1969-12-31T23:59:59Z"] {
            match read(&[c, ("HTTP_MARKS_UNTIL", bad)]) {
                Err(SettingsError::Refused { var, .. }) => assert_eq!(var, "HTTP_MARKS_UNTIL"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    /// Every bad value is refused, typed, naming its variable.
    #[test]
    fn http_idempotency_key_config_refuses_what_cannot_work() {
        let refused = |pairs: &[(&str, &str)]| match read(pairs) {
            Err(SettingsError::Refused { var, rule }) => (var, rule),
            other => panic!("{pairs:?}: {other:?}"),
        };
        assert_eq!(
            read(&[]).expect_err("no caller"),
            SettingsError::Missing("HTTP_CALLER_FROM".into())
        );
        let c = ("HTTP_CALLER_FROM", "none");
        assert_eq!(refused(&[("HTTP_CALLER_FROM", "ip")]).0, "HTTP_CALLER_FROM");
        assert_eq!(
            refused(&[c, ("HTTP_IDEMPOTENCY_KEY", "maybe")]).0,
            "HTTP_IDEMPOTENCY_KEY"
        );
        assert!(matches!(
            refused(&[c, ("HTTP_IN_FLIGHT_WAIT_MS", "60000")]),
            ("HTTP_IN_FLIGHT_WAIT_MS", SettingRule::AboveMaximum { .. })
        ));
        assert!(matches!(
            refused(&[c, ("HTTP_KEY_RETENTION_SECONDS", "60")]),
            (
                "HTTP_KEY_RETENTION_SECONDS",
                SettingRule::BelowMinimum { .. }
            )
        ));
        assert!(matches!(
            refused(&[c, ("HTTP_MAX_BODY_BYTES", "0")]),
            ("HTTP_MAX_BODY_BYTES", SettingRule::Zero)
        ));
        assert_eq!(
            refused(&[c, ("HTTP_REPLAY_HEADERS", "set-cookie")]).0,
            "HTTP_REPLAY_HEADERS"
        );
        assert_eq!(
            refused(&[c, ("HTTP_FINGERPRINT", "json:amount")]).0,
            "HTTP_FINGERPRINT"
        );
        let ok = read(&[
            ("HTTP_CALLER_FROM", "header:X-Caller"),
            ("HTTP_CALLER_FRONT", "alb"),
            ("HTTP_FINGERPRINT", "json:/a,/b"),
        ])
        .expect("config");
        assert_eq!(ok.caller, CallerFrom::Header("x-caller".into()));
        assert_eq!(ok.front, Some(CallerFront::Alb));
        assert_eq!(
            ok.fingerprint,
            HttpFingerprint::Pointers(vec!["/a".into(), "/b".into()])
        );
    }

    /// Issue 42: `header:<name>` trusted a header nothing verified; it starts only with
    /// `HTTP_CALLER_FRONT` naming the front that verifies it (`unverified` said openly), and the
    /// front is refused with any other caller.
    #[test]
    fn caller_header_without_a_declared_front_is_refused_at_start() {
        let header = ("HTTP_CALLER_FROM", "header:x-caller");
        assert!(matches!(
            read(&[header]),
            Err(SettingsError::Refused {
                var: "HTTP_CALLER_FROM",
                rule: SettingRule::Malformed(_)
            })
        ));
        for (value, front) in [
            ("alb", CallerFront::Alb),
            ("iam", CallerFront::Iam),
            ("authorizer", CallerFront::Authorizer),
            ("unverified", CallerFront::Unverified),
        ] {
            let c = read(&[header, ("HTTP_CALLER_FRONT", value)]).expect(value);
            assert_eq!(c.front, Some(front));
        }
        assert!(matches!(
            read(&[header, ("HTTP_CALLER_FRONT", "cloudfront")]),
            Err(SettingsError::Refused {
                var: "HTTP_CALLER_FRONT",
                ..
            })
        ));
        assert!(matches!(
            read(&[
                ("HTTP_CALLER_FROM", "authorizer"),
                ("HTTP_CALLER_FRONT", "alb")
            ]),
            Err(SettingsError::Refused {
                var: "HTTP_CALLER_FRONT",
                ..
            })
        ));
    }

    /// Issue 42: the deny-list let `authorization` and token headers be stored and replayed
    /// (to the same caller after its credential changed, or in a shared scope to another): every
    /// auth, cookie, token, secret, session and API-key header is refused in
    /// `HTTP_REPLAY_HEADERS`.
    #[test]
    fn replay_headers_refuse_auth_and_token_headers() {
        let c = ("HTTP_CALLER_FROM", "none");
        for name in [
            "authorization",
            "Proxy-Authorization",
            "www-authenticate",
            "cookie",
            "set-cookie",
            "x-amz-security-token",
            "x-api-key",
            "x-auth-token",
            "x-csrf-token",
            "x-client-secret",
            "x-session-id",
            "x-goog-api-key",
        ] {
            let list = format!("content-type,{name}");
            assert!(
                matches!(
                    read(&[c, ("HTTP_REPLAY_HEADERS", &list)]),
                    Err(SettingsError::Refused {
                        var: "HTTP_REPLAY_HEADERS",
                        ..
                    })
                ),
                "{name} must never be replayed"
            );
        }
        let ok = read(&[
            c,
            (
                "HTTP_REPLAY_HEADERS",
                "content-type,location,etag,x-request-id",
            ),
        ])
        .expect("resource headers");
        assert_eq!(
            ok.replay_headers,
            ["content-type", "location", "etag", "x-request-id"]
        );
    }
}
