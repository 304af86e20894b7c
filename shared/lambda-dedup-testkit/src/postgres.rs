//! PostgreSQL 16 from the `pgserver` wheel (which ships the server's programs), installed into
//! the [`Venv`]: a fresh cluster in a temporary folder, on a free loopback port, user
//! `postgres` with trust authentication, `fsync` off.
//!
//! PostgreSQL refuses to run as root. Under root, `initdb` and `postgres` run as the
//! unprivileged user `nobody` through `setpriv` (util-linux), in a data folder that user owns.
//! That user may not be able to reach the venv (one inside a checkout in root's home folder, or
//! in a folder `mktemp -d` made, is private to root), so under root the server's programs are
//! first copied to a temporary folder every user can read.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lambda_dedup::{Retention, StoreError};
use lambda_dedup_postgres::{PgStore, Tls};
/// The client [`Postgres::connect`] gives, in the version the kit and the store are built with.
pub use tokio_postgres;

use crate::Error;
use crate::server::{Scratch, Server, shell_quote};
use crate::venv::{Venv, stdout_of};

/// The pinned wheel (PostgreSQL 16).
pub const PGSERVER: &str = "pgserver==0.1.4";

/// The unprivileged user PostgreSQL runs as under root.
const UNPRIVILEGED: &str = "nobody";

/// A PostgreSQL server of the test's own, stopped and its cluster removed when dropped.
///
/// ```no_run
/// # fn main() -> Result<(), lambda_dedup_testkit::Error> {
/// use lambda_dedup_testkit::postgres::Postgres;
///
/// // The wheel from LAMBDA_DEDUP_TESTKIT_VENV, else ~/.cache/lambda-dedup-testkit/venv.
/// let pg = Postgres::start()?;
/// // postgresql://postgres@127.0.0.1:<port>/postgres: the function's DATABASE_URL, with
/// // PG_TLS=disabled.
/// let url = pg.url();
/// # let _ = url; Ok(()) }
/// ```
///
/// The tables a function needs, and its effects read back:
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lambda_dedup_testkit::Error> {
/// use lambda_dedup_testkit::postgres::Postgres;
///
/// let pg = Postgres::start()?;
/// pg.create_mark_table("marks").await?; // DEDUP_MARK_TABLE=marks
/// let sql = pg.connect().await?;
/// sql.batch_execute("CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)")
///     .await?;
/// // … the function credits an account; then:
/// let rows = sql.query("SELECT balance FROM balances WHERE account = $1", &[&"a-1"]).await?;
/// let balance: Option<i64> = rows.first().map(|r| r.get(0));
/// # let _ = balance; Ok(()) }
/// ```
#[derive(Debug)]
pub struct Postgres {
    // Before `_scratch`: the server stops first, then its cluster and programs go.
    _server: Server,
    url: String,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    _scratch: Scratch,
}

impl Postgres {
    /// Starts a fresh server from the wheel in the venv of [`Venv::from_env`], installing it
    /// there first if needed.
    pub fn start() -> Result<Self, Error> {
        Self::start_in(&Venv::from_env()?)
    }

    /// Starts a fresh server from the wheel in `venv`, installing it there first if needed.
    pub fn start_in(venv: &Venv) -> Result<Self, Error> {
        let wheel_bin = install(venv)?;
        let as_user = unprivileged()?;
        let scratch = Scratch::fresh("postgres")?;
        let (bin, data) = match as_user.ids {
            None => (wheel_bin, scratch.path().join("data")),
            Some((uid, gid)) => {
                readable(scratch.path())?;
                let bin = readable_copy(&wheel_bin, &scratch.path().join("install"))?;
                let data = scratch.path().join("data");
                create_dir(&data)?;
                std::os::unix::fs::chown(&data, Some(uid), Some(gid))
                    .map_err(|e| Error::io(format!("chown {}", data.display()), e))?;
                (bin, data)
            }
        };
        let data_arg = shell_quote(&data.display().to_string());
        let initdb = format!(
            "{}{} -D {data_arg} -U postgres --auth=trust -E UTF8 --no-sync --no-instructions",
            as_user.prefix,
            shell_quote(&bin.join("initdb").display().to_string()),
        );
        let mut cmd = Command::new("sh");
        stdout_of(cmd.args(["-c", &initdb]).env("LC_ALL", "C"), "initdb")?;
        let postgres = shell_quote(&bin.join("postgres").display().to_string());
        let (server, port) = Server::start(
            "PostgreSQL",
            |port| {
                format!(
                    "exec {}{postgres} -D {data_arg} -h 127.0.0.1 -p {port} -k '' -c fsync=off \
                     -c max_connections=200",
                    as_user.prefix,
                )
            },
            &[("LC_ALL", "C")],
            &scratch,
        )?;
        Ok(Self {
            _server: server,
            url: format!("postgresql://postgres@127.0.0.1:{port}/postgres"),
            bin,
            run_as: as_user.ids,
            _scratch: scratch,
        })
    }

    /// `postgresql://postgres@127.0.0.1:<port>/postgres` (no TLS, no password).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Creates the mark table `table` (and its index) as the PostgreSQL store expects it, from
    /// the store's own schema (`PgStore::schema`): what `DEDUP_MARK_TABLE` names.
    pub async fn create_mark_table(&self, table: &str) -> Result<(), Error> {
        // The table's shape does not depend on how long marks are kept.
        let retention = Retention::unchecked(Duration::from_secs(86_400))
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let store = PgStore::from_url(&self.url, Tls::Disabled, retention)?.with_table(table)?;
        store.create_table().await?;
        Ok(())
    }

    /// A connection of the test's own (inside a tokio runtime, which drives it), for its own
    /// tables: create them (`batch_execute`), read back what the function wrote (`query`).
    pub async fn connect(&self) -> Result<tokio_postgres::Client, Error> {
        let (client, connection) =
            tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await?;
        // A connection that fails ends here; the client then answers each call with the error.
        tokio::spawn(connection);
        Ok(client)
    }

    /// The folder of the server's programs (`initdb`, `postgres`, `pg_ctl`), for a test that
    /// starts and kills a server of its own; under root, a copy [`Postgres::run_as`] can run.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Under root, the `(uid, gid)` the server runs as (and a test's own server must run as);
    /// `None` otherwise.
    pub fn run_as(&self) -> Option<(u32, u32)> {
        self.run_as
    }
}

/// The wheel's `bin` folder (initdb, postgres), installing the wheel into the venv first if
/// needed.
fn install(venv: &Venv) -> Result<PathBuf, Error> {
    let locate = "import pathlib, pgserver; print(pathlib.Path(pgserver.__file__).parent / 'pginstall' / 'bin')";
    let dir = venv.wheel(&[], PGSERVER, locate)?;
    if !dir.join("postgres").is_file() {
        return Err(Error::NotInWheel {
            wheel: PGSERVER,
            what: "postgres",
            at: dir,
        });
    }
    Ok(dir)
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))
}

/// Makes `dir` readable and traversable by every user.
fn readable(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(dir.display().to_string(), e))
}

/// Copies the wheel's server — `pgserver/pginstall` and the libraries its programs load from
/// `pgserver.libs` through a relative `RPATH`, at the same places relative to each other — into
/// `into`, readable and traversable by every user, and returns the copy's `bin` folder.
/// Under root PostgreSQL runs as `nobody`, who cannot load a library from a venv inside a
/// folder private to root (`initdb: error while loading shared libraries`).
fn readable_copy(wheel_bin: &Path, into: &Path) -> Result<PathBuf, Error> {
    let layout = || Error::NotInWheel {
        wheel: PGSERVER,
        what: "pginstall/bin",
        at: wheel_bin.to_owned(),
    };
    let pginstall = wheel_bin.parent().ok_or_else(layout)?;
    let package = pginstall.parent().ok_or_else(layout)?;
    let site = package.parent().ok_or_else(layout)?;
    let copy_package = into.join("pgserver");
    create_dir(&copy_package)?;
    let copy = |from: &Path, to: &Path| -> Result<(), Error> {
        stdout_of(
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
    stdout_of(
        Command::new("chmod").args(["-R", "a+rX"]).arg(into),
        "making PostgreSQL's programs readable",
    )?;
    for dir in [into, copy_package.as_path()] {
        readable(dir)?;
    }
    Ok(copy_package.join("pginstall").join("bin"))
}

/// How to run PostgreSQL's programs: as they are, or (under root) as `nobody`.
struct AsUser {
    /// A shell prefix for the command line.
    prefix: String,
    /// The user's uid and gid, to own the data folder.
    ids: Option<(u32, u32)>,
}

fn unprivileged() -> Result<AsUser, Error> {
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
        return Err(Error::NoUnprivilegedUser {
            why: "there is no user `nobody` to run it as",
        });
    };
    if !Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err(Error::NoUnprivilegedUser {
            why: "`setpriv` (util-linux) is not installed",
        });
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
    use crate::server::Scratch;

    fn mode(path: &Path) -> u32 {
        let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        meta.permissions().mode()
    }

    fn write(path: &Path, mode: u32) {
        let fail = |e: std::io::Error| panic!("{}: {e}", path.display());
        std::fs::create_dir_all(path.parent().expect("parent")).unwrap_or_else(fail);
        std::fs::write(path, "").unwrap_or_else(fail);
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap_or_else(fail);
    }

    /// A checkout in a folder only root may enter (root's home, `mktemp -d`): the copy that
    /// `nobody` runs lies outside it, every folder on its way traversable and every file
    /// readable by others, with the libraries where the programs' relative `RPATH` finds them.
    #[test]
    fn postgres_programs_are_copied_out_of_a_private_checkout_readable_by_everyone() {
        let private = Scratch::fresh("private-checkout").expect("scratch");
        std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700))
            .expect("private");
        let site = private.path().join("venv/lib/python3.11/site-packages");
        let bin = site.join("pgserver/pginstall/bin");
        write(&bin.join("initdb"), 0o700);
        write(
            &site.join("pgserver/pginstall/lib/postgresql/plpgsql.so"),
            0o600,
        );
        write(&site.join("pgserver.libs/libpq-084d956f.so.5.16"), 0o600);

        let scratch = Scratch::fresh("readable-copy").expect("scratch");
        super::readable(scratch.path()).expect("readable");
        let into = scratch.path().join("install");
        let copied = readable_copy(&bin, &into).expect("copied");

        assert!(!copied.starts_with(private.path()), "{}", copied.display());
        assert_eq!(copied, into.join("pgserver/pginstall/bin"));
        // The programs' RPATH is `$ORIGIN/../../../pgserver.libs`.
        let lib = copied.join("../../../pgserver.libs/libpq-084d956f.so.5.16");
        assert_eq!(
            mode(&lib) & 0o004,
            0o004,
            "the library is readable by others"
        );
        let module = copied.join("../lib/postgresql/plpgsql.so");
        assert_eq!(
            mode(&module) & 0o004,
            0o004,
            "the server's modules are readable"
        );
        assert_eq!(
            mode(&copied.join("initdb")) & 0o005,
            0o005,
            "initdb runs as others"
        );
        let mut dir = copied.as_path();
        while dir != std::env::temp_dir() {
            assert_eq!(mode(dir) & 0o001, 0o001, "{} traversable", dir.display());
            dir = dir.parent().expect("inside the temporary folder");
        }
    }
}
