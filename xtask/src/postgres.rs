//! A PostgreSQL server on loopback for the PostgreSQL store's tests: PostgreSQL 16 from the
//! `pgserver` wheel (which ships the server's binaries), installed into the project venv, a
//! fresh cluster in a temporary directory, on a free port, behind the watchdog of
//! [`Guarded`], so it stops however xtask ends. The tests find it in `DEDUP_POSTGRES_URL`;
//! a test that kills and restarts a server of its own (the chaos run) finds the binaries in
//! `DEDUP_POSTGRES_BIN` and, under root, the `uid:gid` to run them as in `DEDUP_POSTGRES_RUN_AS`.
//!
//! PostgreSQL refuses to run as root. When xtask runs as root (as CI does), `initdb` and
//! `postgres` run as the unprivileged user `nobody` through `setpriv`, in a data directory
//! owned by that user; the system's own PostgreSQL, if any, is not used.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::DataDir;
use crate::{Result, step};
use local_lambda::process::{Guarded, shell_quote};

/// The pinned wheel.
const PGSERVER: &str = "pgserver==0.1.4";

/// The variable the tests read.
pub(crate) const URL_VAR: &str = "DEDUP_POSTGRES_URL";

/// The unprivileged user PostgreSQL runs as under root.
const UNPRIVILEGED: &str = "nobody";

pub(crate) struct LocalPostgres {
    // Before `_data`: the server stops first, then its cluster goes.
    _server: Guarded,
    url: String,
    _data: DataDir,
    pg_bin: PathBuf,
    ids: Option<(u32, u32)>,
}

impl LocalPostgres {
    /// Installs the wheel if needed and starts a fresh server; `bin` is the venv's `bin`.
    pub(crate) fn start(root: &Path, bin: &Path) -> Result<Self> {
        let pg_bin = install(bin)?;
        let as_user = unprivileged()?;
        let data = DataDir::fresh(
            std::env::temp_dir().join(format!("lambda-dedup-pg-{}", std::process::id())),
        )?;
        if let Some((uid, gid)) = as_user.ids {
            std::os::unix::fs::chown(data.path(), Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", data.path().display()))?;
        }
        step("starting PostgreSQL 16 (pgserver wheel) for the PostgreSQL store's tests");
        let initdb = format!(
            "{}{} -D {} -U postgres --auth=trust -E UTF8 --no-sync --no-instructions",
            as_user.prefix,
            shell_quote(&pg_bin.join("initdb").display().to_string()),
            shell_quote(&data.path().display().to_string()),
        );
        crate::tools::stdout_of(
            Command::new("sh").args(["-c", &initdb]).env("LC_ALL", "C"),
            "initdb",
        )?;
        let (server, port) = crate::tools::serve_store(
            "postgres",
            root,
            |port| {
                format!(
                    "exec {}{} -D {} -h 127.0.0.1 -p {port} -k '' -c fsync=off -c max_connections=200",
                    as_user.prefix,
                    shell_quote(&pg_bin.join("postgres").display().to_string()),
                    shell_quote(&data.path().display().to_string()),
                )
            },
            &[("LC_ALL".to_owned(), "C".to_owned())],
        )?;
        Ok(Self {
            _server: server,
            url: format!("postgresql://postgres@127.0.0.1:{port}/postgres"),
            _data: data,
            pg_bin,
            ids: as_user.ids,
        })
    }

    /// The tests' environment: the server's URL, the binaries, the user to run them as.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (URL_VAR.to_owned(), self.url.clone()),
            (
                "DEDUP_POSTGRES_BIN".to_owned(),
                self.pg_bin.display().to_string(),
            ),
        ];
        if let Some((uid, gid)) = self.ids {
            env.push(("DEDUP_POSTGRES_RUN_AS".to_owned(), format!("{uid}:{gid}")));
        }
        env
    }
}

/// The wheel's `bin` folder (initdb, postgres), installing the wheel into the venv first if
/// needed.
fn install(bin: &Path) -> Result<PathBuf> {
    let locate = "import pathlib, pgserver; print(pathlib.Path(pgserver.__file__).parent / 'pginstall' / 'bin')";
    let dir = crate::tools::wheel(bin, &[], PGSERVER, locate)?;
    if !dir.join("postgres").is_file() {
        return Err(format!(
            "{PGSERVER} has no PostgreSQL binaries in {}",
            dir.display()
        ));
    }
    Ok(dir)
}

/// How to run PostgreSQL's programs: as they are, or (under root) as [`UNPRIVILEGED`].
struct AsUser {
    /// A shell prefix for the command line.
    prefix: String,
    /// The user's uid and gid, to own the data directory.
    ids: Option<(u32, u32)>,
}

fn unprivileged() -> Result<AsUser> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id(&["-u"]) != Some(0) {
        return Ok(AsUser {
            prefix: String::new(),
            ids: None,
        });
    }
    let (Some(uid), Some(gid)) = (id(&["-u", UNPRIVILEGED]), id(&["-g", UNPRIVILEGED])) else {
        return Err(format!(
            "PostgreSQL refuses to run as root, and there is no user {UNPRIVILEGED} to run it as"
        ));
    };
    if !Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err("PostgreSQL refuses to run as root; `setpriv` (util-linux) is needed to run it as an unprivileged user".into());
    }
    Ok(AsUser {
        prefix: format!("setpriv --reuid={uid} --regid={gid} --clear-groups -- "),
        ids: Some((uid, gid)),
    })
}
