//! What the settings say about keys beyond the function's own spec: where the event's own
//! time is read (S10, `DEDUP_EVENT_TIME_FROM` and `DEDUP_EVENT_TIME_FORMAT`), and the operators'
//! `--key-spec` text of a CloudEvents function ([`cloudevents_key_spec`]).

use lambda_dedup::{EventTimeSource, Scope, TimeFormat};

use crate::SettingsError;
use crate::env::Lookup;

/// Why an operator's `--key-spec` text is not a key spec ([`cloudevents_key_spec`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeySpecTextError {
    /// Not `cloudevents:<tenant extension>[:<fingerprint pointer>,…]`.
    #[error("--key-spec {0:?}: expected cloudevents:<tenant extension>[:<fingerprint pointer>,…]")]
    Form(String),
    /// A fingerprint pointer that is not a JSON pointer.
    #[error("--key-spec {0:?}: fingerprint pointers start with /")]
    Pointer(String),
}

/// The key spec a CloudEvents function declares, from the text the operators' tool takes for
/// it (`lambda-dedup --key-spec cloudevents:<tenant extension>[:<fingerprint pointer>,…]`), in
/// `scope`. Without pointers the fingerprint covers the event's `data`. This is the spec
/// before the settings' body limit and event-time source ([`Settings::key_spec`](crate::Settings::key_spec)).
pub fn cloudevents_key_spec(
    text: &str,
    scope: Scope,
) -> Result<lambda_dedup::KeySpec, KeySpecTextError> {
    let mut parts = text.splitn(3, ':');
    let (Some("cloudevents"), Some(tenant), pointers) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(KeySpecTextError::Form(text.to_owned()));
    };
    if tenant.is_empty() {
        return Err(KeySpecTextError::Form(text.to_owned()));
    }
    let spec = lambda_dedup::KeySpec::cloudevents(scope, tenant);
    let Some(pointers) = pointers else {
        return Ok(spec);
    };
    let list: Vec<&str> = pointers.split(',').filter(|p| !p.is_empty()).collect();
    if list.iter().any(|p| !p.starts_with('/')) {
        return Err(KeySpecTextError::Pointer(text.to_owned()));
    }
    Ok(spec.fingerprint(lambda_dedup::FingerprintSource::pointers(&list)))
}

/// `DEDUP_EVENT_TIME_FROM` and `DEDUP_EVENT_TIME_FORMAT`: `None` when unset (the key spec's
/// own source stands).
pub(super) fn event_time_in(env: Lookup<'_>) -> Result<Option<EventTimeSource>, SettingsError> {
    let invalid = |name: &str, value: String| SettingsError::Invalid {
        name: name.to_owned(),
        value,
    };
    let format = match env.get("DEDUP_EVENT_TIME_FORMAT") {
        Some(v) if !v.trim().is_empty() => {
            TimeFormat::parse(&v).ok_or_else(|| invalid("DEDUP_EVENT_TIME_FORMAT", v))?
        }
        _ => TimeFormat::Rfc3339,
    };
    let Some(from) = env
        .get("DEDUP_EVENT_TIME_FROM")
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(None);
    };
    let source = match from.trim() {
        "cloudevents" => EventTimeSource::CloudEvents,
        "none" => EventTimeSource::None,
        other => match other.split_once(':') {
            Some(("json", pointer)) if pointer.starts_with('/') => EventTimeSource::JsonPointer {
                pointer: pointer.to_owned(),
                format,
            },
            Some(("attribute", name)) if !name.trim().is_empty() => {
                EventTimeSource::MessageAttribute {
                    name: name.trim().to_owned(),
                    format,
                }
            }
            _ => return Err(invalid("DEDUP_EVENT_TIME_FROM", from)),
        },
    };
    Ok(Some(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operators' `--key-spec` text: the tenant extension and the fingerprint pointers it
    /// names are the spec's; anything else is refused with what is wrong.
    #[test]
    fn a_key_spec_text_is_read_as_the_operators_tool_reads_it() {
        let scope = Scope::new("t", "c").expect("scope");
        let spec = |text: &str| cloudevents_key_spec(text, scope.clone());
        assert_eq!(
            spec("cloudevents:tenantid:/data/a,/data/b"),
            Ok(
                lambda_dedup::KeySpec::cloudevents(scope.clone(), "tenantid").fingerprint(
                    lambda_dedup::FingerprintSource::pointers(&["/data/a", "/data/b"])
                )
            )
        );
        assert_eq!(
            spec("cloudevents:org"),
            Ok(lambda_dedup::KeySpec::cloudevents(scope.clone(), "org"))
        );
        assert_ne!(spec("cloudevents:org"), spec("cloudevents:tenantid"));
        for form in ["cloudevents", "cloudevents::/a", "attribute:x", ""] {
            assert_eq!(
                spec(form),
                Err(KeySpecTextError::Form(form.into())),
                "{form}"
            );
        }
        let pointer = "cloudevents:tenantid:/a,data";
        assert_eq!(
            spec(pointer),
            Err(KeySpecTextError::Pointer(pointer.into()))
        );
    }
}
