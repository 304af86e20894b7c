//! A PostgreSQL server on loopback for the PostgreSQL store's tests: PostgreSQL 16 from the
//! `pgserver` wheel (which ships the server's binaries), installed into the project venv, a
//! fresh cluster in a temporary directory, on a free port, behind the watchdog of
//! [`Guarded`], so it stops however xtask ends. The tests find it in `DEDUP_POSTGRES_URL`;
//! a test that kills and restarts a server of its own (the chaos run) finds the binaries in
//! `DEDUP_POSTGRES_BIN` and, under root, the `uid:gid` to run them as in `DEDUP_POSTGRES_RUN_AS`.
//!
//! PostgreSQL refuses to run as root. When xtask runs as root (as CI does), `initdb` and
//! `postgres` run as the unprivileged user `nobody` through `setpriv`, in a data directory
//! owned by that user; the system's own PostgreSQL, if any, is not used. That user may not be
//! able to reach the wheel inside the checkout (a clone in root's home folder, or in a folder
//! `mktemp -d` made, is private to root), so under root the server's files are first copied to
//! a temporary folder every user can read ([`readable_copy`]).

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
    // After the server: the copy of its programs that `nobody` runs (under root).
    _install: Option<DataDir>,
    pg_bin: PathBuf,
    ids: Option<(u32, u32)>,
}

impl LocalPostgres {
    /// Installs the wheel if needed and starts a fresh server; `bin` is the venv's `bin`.
    pub(crate) fn start(root: &Path, bin: &Path) -> Result<Self> {
        let wheel_bin = install(bin)?;
        let as_user = unprivileged()?;
        let (pg_bin, install_copy) = match as_user.ids {
            None => (wheel_bin, None),
            Some(_) => {
                let copy = DataDir::fresh(
                    std::env::temp_dir()
                        .join(format!("lambda-dedup-pginstall-{}", std::process::id())),
                )?;
                (readable_copy(&wheel_bin, copy.path())?, Some(copy))
            }
        };
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
            _install: install_copy,
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

/// Copies the wheel's server — `pgserver/pginstall` and the libraries its programs load from
/// `pgserver.libs` through a relative `RPATH`, at the same places relative to each other — into
/// `into`, readable and traversable by every user, and returns the copy's `bin` folder.
/// Under root PostgreSQL runs as [`UNPRIVILEGED`], who cannot load a library from a checkout
/// inside a folder private to root (`initdb: error while loading shared libraries`).
fn readable_copy(wheel_bin: &Path, into: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let layout = || {
        format!(
            "{} is not a pgserver wheel's bin folder",
            wheel_bin.display()
        )
    };
    let pginstall = wheel_bin.parent().ok_or_else(layout)?;
    let package = pginstall.parent().ok_or_else(layout)?;
    let site = package.parent().ok_or_else(layout)?;
    let copy_package = into.join("pgserver");
    std::fs::create_dir_all(&copy_package)
        .map_err(|e| format!("{}: {e}", copy_package.display()))?;
    let copy = |from: &Path, to: &Path| -> Result<()> {
        crate::tools::stdout_of(
            Command::new("cp").arg("-R").arg(from).arg(to),
            "copying PostgreSQL's programs where every user can read them",
        )
        .map(drop)
    };
    copy(pginstall, &copy_package.join("pginstall"))?;
    let libs = site.join("pgserver.libs");
    if libs.is_dir() {
        copy(&libs, &into.join("pgserver.libs"))?;
    }
    // `cp -R` writes with root's umask; make every folder traversable and every file readable.
    crate::tools::stdout_of(
        Command::new("chmod").args(["-R", "a+rX"]).arg(into),
        "making PostgreSQL's programs readable",
    )?;
    for dir in [into, copy_package.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(copy_package.join("pginstall").join("bin"))
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    use super::readable_copy;
    use crate::Result;
    use crate::tools::DataDir;

    fn scratch(name: &str) -> Result<DataDir> {
        let pid = std::process::id();
        DataDir::fresh(std::env::temp_dir().join(format!("xtask-test-{name}-{pid}")))
    }

    fn mode(path: &Path) -> Result<u32> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(meta.permissions().mode())
    }

    fn write(path: &Path, mode: u32) -> Result<()> {
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        std::fs::create_dir_all(path.parent().ok_or("no parent")?).map_err(fail)?;
        std::fs::write(path, "").map_err(fail)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(fail)
    }

    /// A checkout in a folder only root may enter (root's home, `mktemp -d`): the copy that
    /// `nobody` runs lies outside it, every folder on its way traversable and every file
    /// readable by others, with the libraries where the programs' relative `RPATH` finds them.
    #[test]
    fn postgres_programs_are_copied_out_of_a_private_checkout_readable_by_everyone() -> Result<()> {
        let private = scratch("private-checkout")?;
        std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        let site = private.path().join("venv/lib/python3.11/site-packages");
        let bin = site.join("pgserver/pginstall/bin");
        write(&bin.join("initdb"), 0o700)?;
        write(
            &site.join("pgserver/pginstall/lib/postgresql/plpgsql.so"),
            0o600,
        )?;
        write(&site.join("pgserver.libs/libpq-084d956f.so.5.16"), 0o600)?;

        let into = scratch("readable-copy")?;
        let copied = readable_copy(&bin, into.path())?;

        assert!(!copied.starts_with(private.path()), "{}", copied.display());
        assert_eq!(copied, into.path().join("pgserver/pginstall/bin"));
        // The programs' RPATH is `$ORIGIN/../../../pgserver.libs`.
        let lib = copied.join("../../../pgserver.libs/libpq-084d956f.so.5.16");
        assert_eq!(
            mode(&lib)? & 0o004,
            0o004,
            "the library is readable by others"
        );
        let module = copied.join("../lib/postgresql/plpgsql.so");
        assert_eq!(
            mode(&module)? & 0o004,
            0o004,
            "the server's modules are readable"
        );
        assert_eq!(
            mode(&copied.join("initdb"))? & 0o005,
            0o005,
            "initdb runs as others"
        );
        let mut dir = copied.as_path();
        while dir != std::env::temp_dir() {
            assert_eq!(mode(dir)? & 0o001, 0o001, "{} traversable", dir.display());
            dir = dir.parent().ok_or("left the temporary folder")?;
        }
        Ok(())
    }
}
