//! The builder's typed events: the payload read into the user's type, and what the work returns
//! ([`IntoPlan`]).

use std::time::SystemTime;

use lambda_dedup::{DedupKey, Derived, KeySpec, Message, Provenance};
use lambda_dedup_engine::{Invalid, Plan};
use serde::de::DeserializeOwned;

use super::HandlerError;

/// What an event's transactional work returns: the writes to commit with its mark — an
/// effect of the store's type `E` ([`Effect`](lambda_dedup::Effect) on DynamoDB and memory),
/// several, a [`Plan`] (writes and a result stored for duplicates) — or, as a `Result`, a
/// [`HandlerError`].
pub trait IntoPlan<E = lambda_dedup::Effect> {
    /// The plan, or the refusal.
    fn into_plan(self) -> Result<Plan<E>, HandlerError>;
}

impl IntoPlan for lambda_dedup::Effect {
    fn into_plan(self) -> Result<Plan, HandlerError> {
        Ok(self.into())
    }
}

#[cfg(feature = "postgres")]
impl IntoPlan<lambda_dedup_postgres::SqlEffect> for lambda_dedup_postgres::SqlEffect {
    fn into_plan(self) -> Result<Plan<Self>, HandlerError> {
        Ok(vec![self].into())
    }
}

#[cfg(feature = "valkey")]
impl IntoPlan<lambda_dedup_valkey::ValkeyEffect> for lambda_dedup_valkey::ValkeyEffect {
    fn into_plan(self) -> Result<Plan<Self>, HandlerError> {
        Ok(vec![self].into())
    }
}

impl<E> IntoPlan<E> for Vec<E> {
    fn into_plan(self) -> Result<Plan<E>, HandlerError> {
        Ok(self.into())
    }
}

impl<E> IntoPlan<E> for Plan<E> {
    fn into_plan(self) -> Result<Plan<E>, HandlerError> {
        Ok(self)
    }
}

impl<E, P: IntoPlan<E>> IntoPlan<E> for Result<P, HandlerError> {
    fn into_plan(self) -> Result<Plan<E>, HandlerError> {
        self.and_then(IntoPlan::into_plan)
    }
}

/// One event, typed: the payload deserialised into the user's type `T`, with what its key was
/// derived from.
#[derive(Debug, Clone)]
pub struct Event<T> {
    /// The payload: the CloudEvents `data` for a CloudEvents function, else the whole body.
    pub payload: T,
    /// The tenant the key is scoped to (empty for a single-tenant function). Key the event's own
    /// items within it with [`Event::scoped`], so tenants stay apart in the data too (S1).
    pub tenant: String,
    /// The dedup key: pass [`DedupKey::idempotency_key`] to systems that take one.
    pub key: DedupKey,
    /// When the producer says the event happened, if it says.
    pub time: Option<SystemTime>,
    /// Who vouched for [`tenant`](Self::tenant): a verified sender (a webhook's, carried by the
    /// inbox forwarder; the tenant is then that sender's, and the key in its own key space), or
    /// only the payload (a producer the function declared trusted,
    /// [`Dedup::trusted_producers`](super::Dedup::trusted_producers)).
    pub provenance: Provenance,
}

impl<T> Event<T> {
    /// `id` within the event's tenant (`tenant/id`, [`lambda_dedup::tenant_scoped`]), for the
    /// keys of the items it writes; a single-tenant function's `id` itself (its tenant is
    /// empty, which a multi-tenant function's never is: an empty tenant is rejected).
    pub fn scoped(&self, id: &str) -> String {
        if self.tenant.is_empty() {
            id.to_owned()
        } else {
            lambda_dedup::tenant_scoped(&self.tenant, id)
        }
    }
}

/// Where the typed payload is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PayloadAt {
    /// The CloudEvents `data` member.
    Data,
    /// The whole JSON body.
    Body,
}

/// The typed event of message `m` under `spec`, if it has one (an applied message does).
pub(super) fn event_of<T: DeserializeOwned>(
    at: PayloadAt,
    spec: &KeySpec,
    m: &Message,
) -> Option<Event<T>> {
    spec.derive(m).ok().and_then(|d| typed(at, &d).ok())
}

/// The typed event of `d`, or the refusal of a payload that is not a `T`.
pub(super) fn typed<T: DeserializeOwned>(
    at: PayloadAt,
    d: &Derived,
) -> Result<Event<T>, HandlerError> {
    let body = d
        .body
        .as_ref()
        .ok_or(HandlerError::Invalid(Invalid::NotJson))?;
    let value = match at {
        PayloadAt::Body => body,
        PayloadAt::Data => body
            .get("data")
            .ok_or(HandlerError::Invalid(Invalid::NoData))?,
    };
    let payload = parse(value)?;
    Ok(Event {
        payload,
        tenant: d.tenant.clone(),
        key: d.key.clone(),
        time: d.event_time,
        provenance: d.provenance.clone(),
    })
}

/// `value` as the user's type `T`, or the refusal the service gives a payload that is not one:
/// [`Invalid::MissingField`] or [`Invalid::Misfit`], naming the field by its path, never quoting
/// a value (S3). What an event's payload goes through before the work.
pub fn parse<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, HandlerError> {
    // Read untracked first: tracking the path copies every key it passes, and only a refusal
    // needs the path, so only a refusal reads the payload again, tracked.
    T::deserialize(value).or_else(|_| {
        serde_path_to_error::deserialize(value).map_err(|e| HandlerError::Invalid(misfit(&e)))
    })
}

/// Why a payload is not a `T`, by the path where serde stopped: a field the type requires and
/// the payload lacks (its name is the type's own, in serde's message), or a field that does not
/// fit. serde's message is not kept otherwise: it may quote the value.
fn misfit(e: &serde_path_to_error::Error<serde_json::Error>) -> Invalid {
    let path = shown(e.path());
    let message = e.inner().to_string();
    match message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        Some(field) if path.is_empty() => Invalid::MissingField {
            field: field.to_owned(),
        },
        Some(field) => Invalid::MissingField {
            field: format!("{path}.{field}"),
        },
        None => Invalid::Misfit { path },
    }
}

/// A payload path as a refusal shows it: `customer.name`, `lines[2].sku`. A key that does not
/// look like a field name (a map keyed by data: an e-mail address, a card number) is `?`, so the
/// path names fields, never values (S3).
fn shown(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path {
        let name = match segment {
            Segment::Seq { index } => {
                out.push_str(&format!("[{index}]"));
                continue;
            }
            Segment::Map { key } | Segment::Enum { variant: key } if field_like(key) => key,
            _ => "?",
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(name);
    }
    out
}

/// Whether `key` reads as a field name: a letter or `_` first, then letters, digits, `_` or
/// `-`, at most 64 of them.
fn field_like(key: &str) -> bool {
    key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The plan of `d` from the user's typed `effect`.
pub(super) fn plan<T, F, P, E>(
    at: PayloadAt,
    d: &Derived,
    effect: &F,
) -> Result<Plan<E>, HandlerError>
where
    T: DeserializeOwned,
    F: Fn(Event<T>) -> P,
    P: IntoPlan<E>,
{
    effect(typed(at, d)?).into_plan()
}
