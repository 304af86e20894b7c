//! The inbox forwarder's settings ([`ForwarderConfig`]): the queue it hands the inbox's items
//! to, and its relay's ([`FORWARDER`]: `INBOX_TABLE`, `FORWARDER_RECORD_BUDGET_MS`,
//! `FORWARDER_REDRIVE_AFTER_SECONDS`).

use crate::env::{Lookup, required_in};
use crate::{RelayConfig, RelayVars, SettingsError};

/// The variable naming the queue the forwarder sends to.
pub const FORWARD_QUEUE_VAR: &str = "FORWARD_QUEUE_URL";

/// Where the forwarder's relay settings are: its table `INBOX_TABLE`, its own variables
/// `FORWARDER_*`, and a budget of 3 s a record (one SQS send and the writes around it).
pub const FORWARDER: RelayVars = crate::relay_vars!("INBOX_TABLE", "FORWARDER", 3_000);

/// The inbox forwarder's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwarderConfig {
    /// The queue each inbox item is sent to (`FORWARD_QUEUE_URL`).
    pub queue_url: String,
    /// Its relay's: the inbox table, the record budget, the sweep's age.
    pub relay: RelayConfig,
}

impl ForwarderConfig {
    /// The settings in `env`: `FORWARD_QUEUE_URL` and the relay's ([`FORWARDER`]), all
    /// required or refused as [`RelayConfig::read`] says.
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        Ok(Self {
            queue_url: required_in(env, FORWARD_QUEUE_VAR)?.trim().to_owned(),
            relay: RelayConfig::read(env, &FORWARDER)?,
        })
    }
}
