//! Why a variable's text is not one of the forms it takes ([`ValueError`]): the error of the
//! settings' `FromStr` impls, which a refusal shows as its reason
//! ([`SettingRule::Malformed`](crate::SettingRule::Malformed)).

/// A value not in a form its variable takes, typed; the text names the value (configuration,
/// never message data) and the forms it may take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// None of the words (or forms) the variable takes.
    #[error("'{value}' is none of {expected}")]
    NoneOf {
        /// The value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// Not in the one form the variable takes.
    #[error("'{value}' is not {form}")]
    NotForm {
        /// The value.
        value: String,
        /// The form it must have.
        form: &'static str,
    },
    /// A header an answer never replays (a credential's, a session's, a hop-by-hop one).
    #[error("'{name}' is never replayed")]
    NeverReplayed {
        /// The header's name.
        name: String,
    },
    /// A fixed Valkey hash tag that is empty or holds `{` or `}`.
    #[error("a fixed hash tag is not empty and has no `{{` or `}}`")]
    BadHashTag,
    /// A webhook delivery id header its sender does not sign (GitHub's, Shopify's).
    #[error(
        "the header '{name}' is not signed by its sender (the signature covers the body only): \
         a captured delivery sent again under a new id would be a new event; use json:</pointer> \
         to the event's own id in the signed body"
    )]
    UnsignedDeliveryHeader {
        /// The header's name.
        name: String,
    },
    /// Any other header as a webhook's identity: only Standard Webhooks' id header is signed.
    #[error(
        "the header '{name}' is not signed: only webhook-id (Standard Webhooks) is, or use \
         json:</pointer> into the signed body"
    )]
    UnsignedHeader {
        /// The header's name.
        name: String,
    },
    /// Neither a signed id header nor a JSON pointer, as a webhook's identity.
    #[error(
        "'{value}' is neither header:webhook-id nor json:</pointer> (a body hash is never the \
         default identity)"
    )]
    NotAnIdentity {
        /// The value.
        value: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallerFrom, CallerFront, HttpFingerprint, IdentityFrom, ValkeyHashTag};

    /// The settings' `FromStr` impls refuse typed, so a caller tells the cases apart without
    /// reading text, and the text the operator reads names the value and the forms it takes.
    #[test]
    fn a_value_in_no_form_its_variable_takes_is_refused_typed() {
        let none_of = "cdn".parse::<CallerFront>().expect_err("refused");
        assert_eq!(
            none_of,
            ValueError::NoneOf {
                value: "cdn".into(),
                expected: "alb, iam, authorizer, unverified"
            }
        );
        assert_eq!(
            none_of.to_string(),
            "'cdn' is none of alb, iam, authorizer, unverified"
        );
        assert!(matches!(
            "me".parse::<CallerFrom>(),
            Err(ValueError::NoneOf { .. })
        ));
        assert!(matches!(
            "json:a".parse::<HttpFingerprint>(),
            Err(ValueError::NotForm { .. })
        ));
        assert_eq!(
            "fixed:{x}".parse::<ValkeyHashTag>(),
            Err(ValueError::BadHashTag)
        );
        assert_eq!(
            "header:X-GitHub-Delivery".parse::<IdentityFrom>(),
            Err(ValueError::UnsignedDeliveryHeader {
                name: "X-GitHub-Delivery".into()
            })
        );
        assert!(matches!(
            "header:x-request-id".parse::<IdentityFrom>(),
            Err(ValueError::UnsignedHeader { .. })
        ));
        assert!(matches!(
            "body".parse::<IdentityFrom>(),
            Err(ValueError::NotAnIdentity { .. })
        ));
    }
}
