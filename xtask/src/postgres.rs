//! A PostgreSQL server on loopback for the PostgreSQL store's tests: the test kit's
//! ([`lambda_dedup_testkit::postgres`]: PostgreSQL 16 from the `pgserver` wheel in the project
//! venv, a fresh cluster on a free port, as `nobody` under root from a copy of its programs
//! that user can read, wherever the checkout is; stopped however xtask ends). The tests find
//! it in `DEDUP_POSTGRES_URL`; a test that kills and restarts a server of its own (the chaos
//! run) finds the binaries in `DEDUP_POSTGRES_BIN` and, under root, the `uid:gid` to run them
//! as in `DEDUP_POSTGRES_RUN_AS`; a test that starts its own through the kit finds the venv in
//! `LAMBDA_DEDUP_TESTKIT_VENV`.

use crate::{Result, step};
use lambda_dedup_testkit::postgres::Postgres;
use lambda_dedup_testkit::{VENV_VAR, Venv};

/// The variable the tests read.
pub(crate) const URL_VAR: &str = "DEDUP_POSTGRES_URL";

pub(crate) struct LocalPostgres {
    server: Postgres,
    venv: Venv,
}

impl LocalPostgres {
    /// Installs the wheel into `venv` if needed and starts a fresh server.
    pub(crate) fn start(venv: Venv) -> Result<Self> {
        step("starting PostgreSQL 16 (pgserver wheel) for the PostgreSQL store's tests");
        let server = Postgres::start_in(&venv).map_err(|e| e.to_string())?;
        Ok(Self { server, venv })
    }

    /// The tests' environment: the server's URL, the binaries, the user to run them as, the
    /// venv.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (URL_VAR.to_owned(), self.server.url().to_owned()),
            (
                "DEDUP_POSTGRES_BIN".to_owned(),
                self.server.bin().display().to_string(),
            ),
            (VENV_VAR.to_owned(), self.venv.path().display().to_string()),
        ];
        if let Some((uid, gid)) = self.server.run_as() {
            env.push(("DEDUP_POSTGRES_RUN_AS".to_owned(), format!("{uid}:{gid}")));
        }
        env
    }
}
