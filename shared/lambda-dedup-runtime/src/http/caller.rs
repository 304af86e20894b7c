//! Who sent a request ([`CallerFrom`]): the scope of its key, so that one caller can never
//! receive another's stored answer. The value only enters the key as a hash (S3).
//!
//! The caller is written as its kind and its parts, each part prefixed by its length in bytes
//! (`jwt:11:https://idp:5:alice`), so no two callers of different parts write the same string
//! (`jwt:{iss}:{sub}` could: `iss = "a:b", sub = "c"` and `iss = "a", sub = "b:c"`).

use aws_lambda_events::apigw::{ApiGatewayRequestAuthorizer, ApiGatewayRequestIdentity};
use lambda_http::http::HeaderMap;
use lambda_http::request::RequestContext;

use lambda_dedup_config::{CallerFrom, CallerFront};

/// Why a request has no caller where one is configured (401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CallerError {
    /// The request carries no caller identity of the configured kind.
    #[error("the request carries no caller identity")]
    Missing,
    /// The caller's header sent more than once, or not text.
    #[error("the caller header is sent more than once or is not text")]
    Ambiguous,
    /// `HTTP_CALLER_FROM=header:<name>`, and the request's context shows no front of the kind
    /// `HTTP_CALLER_FRONT` names, the one that verifies the header: it reached the function
    /// another way, and its header is the client's own word.
    #[error("the request did not come through the front that verifies the caller header")]
    FrontMissing,
}

impl CallerError {
    /// The stable code in the answer's body.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Self::Missing => "caller_missing",
            Self::Ambiguous => "caller_ambiguous",
            Self::FrontMissing => "caller_front_missing",
        }
    }
}

/// The caller of a request, named by kind (`jwt:`, `iam:`, `principal:`, `cognito:`,
/// `api-key:`, `header:`) and length-prefixed parts, so two callers never collide; the empty
/// string for [`CallerFrom::Nobody`].
pub(super) fn of(
    from: &CallerFrom,
    front: Option<CallerFront>,
    context: Option<&RequestContext>,
    headers: &HeaderMap,
) -> Result<String, CallerError> {
    let found = match from {
        CallerFrom::Nobody => return Ok(String::new()),
        CallerFrom::Header(name) => {
            // Without a declared front the configuration is refused at start; read as none.
            if !came_through(front.ok_or(CallerError::FrontMissing)?, context) {
                return Err(CallerError::FrontMissing);
            }
            let mut all = headers.get_all(name.as_str()).iter();
            return match (all.next(), all.next()) {
                (None, _) => Err(CallerError::Missing),
                (Some(v), None) => match v.to_str() {
                    Ok(v) if v.trim().is_empty() => Err(CallerError::Missing),
                    Ok(v) if v.contains(',') => Err(CallerError::Ambiguous),
                    Ok(v) => Ok(named("header", &[v.trim()])),
                    Err(_) => Err(CallerError::Ambiguous),
                },
                (Some(_), Some(_)) => Err(CallerError::Ambiguous),
            };
        }
        CallerFrom::Authorizer => context.and_then(authorizer),
        CallerFrom::ApiKey => context.and_then(api_key),
    };
    found.filter(|c| !c.is_empty()).ok_or(CallerError::Missing)
}

/// `kind` and each part prefixed by its length: `kind:3:abc:0:`.
fn named(kind: &str, parts: &[&str]) -> String {
    let mut s = String::from(kind);
    for part in parts {
        s.push_str(&format!(":{}:{part}", part.len()));
    }
    s
}

/// Whether the request's context shows the front that verifies the caller header.
fn came_through(front: CallerFront, context: Option<&RequestContext>) -> bool {
    match (front, context) {
        (CallerFront::Unverified, _) => true,
        (CallerFront::Alb, Some(RequestContext::Alb(_))) => true,
        (CallerFront::Iam, Some(RequestContext::ApiGatewayV2(c))) => {
            c.authorizer.as_ref().is_some_and(|a| a.iam.is_some())
        }
        (CallerFront::Iam, Some(RequestContext::ApiGatewayV1(c))) => {
            c.identity.user_arn.is_some() || c.identity.access_key.is_some()
        }
        (CallerFront::Authorizer, Some(RequestContext::ApiGatewayV2(c))) => {
            c.authorizer.as_ref().is_some_and(has_authorizer)
        }
        (CallerFront::Authorizer, Some(RequestContext::ApiGatewayV1(c))) => {
            has_authorizer(&c.authorizer)
        }
        _ => false,
    }
}

/// A JWT or a Lambda authorizer's context (REST's read into `lambda` by the raw event's reader).
fn has_authorizer(a: &ApiGatewayRequestAuthorizer) -> bool {
    a.jwt.is_some() || !a.fields.is_empty()
}

fn authorizer(context: &RequestContext) -> Option<String> {
    match context {
        RequestContext::ApiGatewayV2(c) => {
            let a = c.authorizer.as_ref()?;
            of_authorizer(a).or_else(|| a.iam.as_ref().and_then(iam_v2))
        }
        // A REST API: its authorizer (a Lambda authorizer's principalId, a Cognito user pool's
        // claims; read from the raw event, `event`), else the IAM caller of `AWS_IAM`, else a
        // Cognito identity.
        RequestContext::ApiGatewayV1(c) => of_authorizer(&c.authorizer)
            .or_else(|| iam_v1(&c.identity))
            .or_else(|| {
                let id = c.identity.cognito_identity_id.as_deref()?;
                Some(named("cognito", &[id]))
            }),
        _ => None,
    }
}

/// A JWT's `iss` + `sub`, or a Lambda authorizer's `principalId`.
fn of_authorizer(a: &ApiGatewayRequestAuthorizer) -> Option<String> {
    if let Some(claims) = a.jwt.as_ref().map(|j| &j.claims)
        && let Some(sub) = claims.get("sub").filter(|s| !s.is_empty())
    {
        let iss = claims.get("iss").map_or("", String::as_str);
        return Some(named("jwt", &[iss, sub]));
    }
    let principal = a.fields.get("principalId")?;
    let principal = match principal {
        serde_json::Value::String(p) => p.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!principal.is_empty()).then(|| named("principal", &[&principal]))
}

/// The IAM caller of an HTTP API or a Function URL with `AWS_IAM`: its account and its
/// principal's unique id (`AIDA…` a user, `AROA…` a role), never the session name an
/// assumed role's caller chooses (`userId` is `AROA…:<session>`); a Cognito identity pool's
/// callers share a role, and are told apart by their identity id, which Cognito verified.
fn iam_v2(
    iam: &aws_lambda_events::apigw::ApiGatewayRequestAuthorizerIamDescription,
) -> Option<String> {
    let cognito = iam
        .cognito_identity
        .as_ref()
        .and_then(|c| c.identity_id.as_deref());
    iam_principal(
        iam.account_id.as_deref(),
        iam.user_id.as_deref().or(iam.caller_id.as_deref()),
        iam.user_arn.as_deref(),
        cognito,
    )
}

/// The IAM caller of a REST API with `AWS_IAM` (`requestContext.identity`): as [`iam_v2`],
/// from `user` (`AIDA…`, or `AROA…:<session>`) and `userArn`.
fn iam_v1(identity: &ApiGatewayRequestIdentity) -> Option<String> {
    identity.user_arn.as_ref()?;
    iam_principal(
        identity.account_id.as_deref(),
        identity.user.as_deref().or(identity.caller.as_deref()),
        identity.user_arn.as_deref(),
        identity.cognito_identity_id.as_deref(),
    )
}

fn iam_principal(
    account: Option<&str>,
    user_id: Option<&str>,
    arn: Option<&str>,
    cognito: Option<&str>,
) -> Option<String> {
    let account = account.unwrap_or_default();
    let principal = match user_id.and_then(|id| id.split(':').next()) {
        Some(id) if !id.is_empty() => id.to_owned(),
        // No unique id: the ARN, an assumed role's without its session.
        _ => without_session(arn.filter(|a| !a.is_empty())?),
    };
    Some(match cognito.filter(|c| !c.is_empty()) {
        Some(identity) => named("iam", &[account, &principal, identity]),
        None => named("iam", &[account, &principal]),
    })
}

/// `arn:aws:sts::1:assumed-role/Role/session` as `arn:aws:sts::1:assumed-role/Role`; any other
/// ARN as it is.
fn without_session(arn: &str) -> String {
    match arn.split_once(":assumed-role/") {
        Some((head, rest)) => {
            let role = rest.split('/').next().unwrap_or_default();
            format!("{head}:assumed-role/{role}")
        }
        None => arn.to_owned(),
    }
}

fn api_key(context: &RequestContext) -> Option<String> {
    match context {
        RequestContext::ApiGatewayV1(c) => {
            let key = c.identity.api_key.as_deref().filter(|k| !k.is_empty())?;
            Some(named("api-key", &[key]))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42: `jwt:{iss}:{sub}` wrote one string for two callers (`iss = "a:b", sub = "c"`
    /// and `iss = "a", sub = "b:c"`); length-prefixed parts never do.
    #[test]
    fn caller_string_is_unambiguous_length_prefixed() {
        assert_ne!(named("jwt", &["a:b", "c"]), named("jwt", &["a", "b:c"]));
        assert_eq!(named("jwt", &["a:b", "c"]), "jwt:3:a:b:1:c");
        assert_ne!(named("iam", &["1", "AROA"]), named("iam", &["1:4:AROA"]));
    }

    /// Issue 42: an assumed role's session name, which its caller chooses, never tells callers
    /// apart: two sessions of one role are one caller; two roles are two.
    #[test]
    fn caller_iam_is_the_principal_id_not_the_session_name() {
        let a = iam_principal(
            Some("1"),
            Some("AROAEXAMPLE:alice"),
            Some("arn:aws:sts::1:assumed-role/R/alice"),
            None,
        );
        let b = iam_principal(
            Some("1"),
            Some("AROAEXAMPLE:bob"),
            Some("arn:aws:sts::1:assumed-role/R/bob"),
            None,
        );
        assert_eq!(a, b);
        let arn_only = iam_principal(
            Some("1"),
            None,
            Some("arn:aws:sts::1:assumed-role/R/x"),
            None,
        );
        assert_eq!(
            arn_only,
            iam_principal(
                Some("1"),
                None,
                Some("arn:aws:sts::1:assumed-role/R/y"),
                None
            )
        );
        assert_ne!(
            a,
            iam_principal(Some("1"), Some("AROAOTHER:alice"), None, None)
        );
    }
}
