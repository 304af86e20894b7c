//! Who sent a request ([`CallerFrom`]): the scope of its key, so that one caller can never
//! receive another's stored answer. The value only enters the key as a hash (S3).

use lambda_http::http::HeaderMap;
use lambda_http::request::RequestContext;

use crate::config::CallerFrom;

/// Why a request has no caller where one is configured (401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CallerError {
    /// The request carries no caller identity of the configured kind.
    #[error("the request carries no caller identity")]
    Missing,
    /// The caller's header sent more than once, or not text.
    #[error("the caller header is sent more than once or is not text")]
    Ambiguous,
}

impl CallerError {
    /// The stable code in the answer's body.
    pub fn code(self) -> &'static str {
        match self {
            Self::Missing => "caller_missing",
            Self::Ambiguous => "caller_ambiguous",
        }
    }
}

/// The caller of a request, named by kind (`jwt:`, `iam:`, `principal:`, `api-key:`, `header:`)
/// so two kinds never collide; the empty string for [`CallerFrom::Nobody`].
pub(super) fn of(
    from: &CallerFrom,
    context: Option<&RequestContext>,
    headers: &HeaderMap,
) -> Result<String, CallerError> {
    let found = match from {
        CallerFrom::Nobody => return Ok(String::new()),
        CallerFrom::Header(name) => {
            let mut all = headers.get_all(name.as_str()).iter();
            return match (all.next(), all.next()) {
                (None, _) => Err(CallerError::Missing),
                (Some(v), None) => match v.to_str() {
                    Ok(v) if v.trim().is_empty() => Err(CallerError::Missing),
                    Ok(v) if v.contains(',') => Err(CallerError::Ambiguous),
                    Ok(v) => Ok(format!("header:{}", v.trim())),
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

fn authorizer(context: &RequestContext) -> Option<String> {
    match context {
        RequestContext::ApiGatewayV2(c) => {
            let a = c.authorizer.as_ref()?;
            if let Some(sub) = a.jwt.as_ref().and_then(|j| j.claims.get("sub")) {
                let iss = a.jwt.as_ref().and_then(|j| j.claims.get("iss"));
                return Some(format!("jwt:{}:{sub}", iss.map_or("", String::as_str)));
            }
            if let Some(arn) = a.iam.as_ref().and_then(|i| i.user_arn.as_ref()) {
                return Some(format!("iam:{arn}"));
            }
            a.fields
                .get("principalId")
                .and_then(|p| p.as_str())
                .map(|p| format!("principal:{p}"))
        }
        RequestContext::ApiGatewayV1(c) => c
            .identity
            .user_arn
            .as_ref()
            .map(|arn| format!("iam:{arn}"))
            .or_else(|| {
                c.identity
                    .cognito_identity_id
                    .as_ref()
                    .map(|id| format!("cognito:{id}"))
            }),
        _ => None,
    }
}

fn api_key(context: &RequestContext) -> Option<String> {
    match context {
        RequestContext::ApiGatewayV1(c) => {
            c.identity.api_key.as_ref().map(|k| format!("api-key:{k}"))
        }
        _ => None,
    }
}
