//! What the work answers ([`Reply`]: a status, headers, a JSON body and the effects committed
//! with the mark) and its stored form, replayed to every retry of the same key.

use serde::{Deserialize, Serialize};

/// The work's answer to a new request: its status, headers, JSON body, and the effects of the
/// store's type `E` committed with the mark (S5).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply<E = lambda_dedup::Effect> {
    /// The status code.
    pub status: u16,
    /// Headers (lower case); those in `HTTP_REPLAY_HEADERS` are stored and replayed.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: serde_json::Value,
    /// The effects committed atomically with the mark.
    pub effects: Vec<E>,
}

impl<E> Reply<E> {
    /// `status` with `body`, no effects.
    pub fn new(status: u16, body: serde_json::Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body,
            effects: Vec::new(),
        }
    }

    /// 201 Created with `body`.
    pub fn created(body: serde_json::Value) -> Self {
        Self::new(201, body)
    }

    /// With the header `name: value`.
    #[must_use]
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// With `effect` committed with the mark.
    #[must_use]
    pub fn effect(mut self, effect: E) -> Self {
        self.effects.push(effect);
        self
    }
}

/// An answer as the mark stores it (its result): status, the allow-listed headers, the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stored {
    /// The status code.
    pub status: u16,
    /// The headers kept (`HTTP_REPLAY_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// The body as sent.
    pub body: String,
}

impl Stored {
    /// The stored form of `reply`, keeping the headers named in `allowed`.
    pub(crate) fn of<E>(reply: &Reply<E>, allowed: &[String]) -> Self {
        Self {
            status: reply.status,
            headers: reply
                .headers
                .iter()
                .filter(|(name, _)| allowed.contains(name))
                .cloned()
                .collect(),
            body: reply.body.to_string(),
        }
    }

    /// As the mark's result.
    pub(crate) fn to_result(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// From a mark's result; `None` when it is not one (a mark of another version).
    pub(crate) fn from_result(result: &str) -> Option<Self> {
        serde_json::from_str(result).ok()
    }
}
