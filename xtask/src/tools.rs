//! Python tools in a project venv (`.cache/venv`): the SQS emulator (`moto[server]`) and
//! `cargo-lambda` (which brings `ziglang` for cross builds), `cfn-lint`, and the webhook senders'
//! own signing libraries (`standardwebhooks`, `stripe`, `svix`, `slack-sdk`, `githubkit`), with which the end-to-end tests and the
//! demo sign their deliveries (`tests/senders/sign.py`). Pinned, installed once. And AWS
//! CloudFormation Guard (`cfn-guard`, Apache-2.0), which runs the template's rules
//! (`infra/rules/*.guard`): installed once with `cargo install --locked` into `.cache/cfn-guard`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::Result;
use lambda_dedup_testkit::Venv;
use local_lambda::process::{Guarded, free_port};

const PINS: &[&str] = &[
    "moto[server]==5.2.5",
    "cargo-lambda==1.9.2",
    "cfn-lint==1.58.0",
    "standardwebhooks==1.1.0",
    "stripe==16.1.0",
    "svix==2.9.1",
    "slack-sdk==3.47.0",
    "githubkit==0.16.1",
    // githubkit 0.16.1 allows hishel 2.0.0, which lacks the `CachePolicy` githubkit imports.
    "hishel==1.4.0",
];

/// The project venv as the test kit's [`Venv`] (its wheels installed by the kit on first use),
/// after [`ensure`].
pub(crate) fn venv(root: &Path) -> Result<Venv> {
    let bin = ensure(root)?;
    Ok(Venv::at(
        bin.parent().ok_or("the venv has no parent folder")?,
    ))
}

/// The venv's `bin` folder, installing the pinned tools first if needed.
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    let venv = root.join(".cache").join("venv");
    let bin = venv.join("bin");
    let stamp = venv.join(format!(
        ".installed-{}",
        PINS.join("_").replace(['[', ']', '='], "-")
    ));
    if stamp.is_file()
        && ["moto_server", "cargo-lambda", "cfn-lint"]
            .iter()
            .all(|b| bin.join(b).is_file())
    {
        return Ok(bin);
    }
    crate::step(format!(
        "installing {} into .cache/venv (first run only; about a minute)",
        PINS.join(", ")
    ));
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .ok_or("Python 3 is needed for the SQS emulator and cargo-lambda; install python3 and run this again")?;
    let status = Command::new(python)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .map_err(|e| format!("python3 -m venv: {e}"))?;
    if !status.success() {
        return Err(
            "`python3 -m venv` failed (Debian/Ubuntu: `apt-get install python3-venv`)".into(),
        );
    }
    pip_install(&bin, PINS)?;
    fs::write(&stamp, "").map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(bin)
}

/// The pinned version of `cfn-guard`.
pub(crate) const CFN_GUARD: &str = "3.2.1";

/// The pinned version of `cargo-deny`.
pub(crate) const CARGO_DENY: &str = "0.20.0";

/// The binary of the crate `name` at `version` (`mdbook`, `cfn-guard`, `cargo-deny`), installed
/// first if needed (`cargo install --locked`, from crates.io, into `.cache/{name}`; a few minutes
/// on two cores, the first time only). A debug build, in one target dir for all three
/// (`.cache/tools-target`), so the dependencies they share compile once: they check a few files,
/// where an optimised build would cost minutes more than it saves.
pub(crate) fn installed(root: &Path, name: &str, version: &str) -> Result<PathBuf> {
    let dir = root.join(".cache").join(name);
    let bin = dir.join("bin").join(name);
    let stamp = dir.join(format!(".installed-{version}"));
    if stamp.is_file() && bin.is_file() {
        return Ok(bin);
    }
    crate::step(format!(
        "installing {name} {version} into .cache/{name} (cargo install --locked; first run only, a few minutes)"
    ));
    let status = Command::new(crate::cargo())
        .args(["install", "--locked", "--quiet", "--debug"])
        .arg("--target-dir")
        .arg(root.join(".cache").join("tools-target"))
        .arg(format!("{name}@{version}"))
        // Over a binary left without its stamp (another version, an interrupted install).
        .arg("--force")
        .arg("--root")
        .arg(&dir)
        .status()
        .map_err(|e| format!("cargo install {name}: {e}"))?;
    if !status.success() || !bin.is_file() {
        return Err(format!("cargo install {name}@{version} failed"));
    }
    fs::write(&stamp, "").map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(bin)
}

/// `pip install` of `pins` into the venv whose `bin` folder is `bin`, quietly.
pub(crate) fn pip_install(bin: &Path, pins: &[&str]) -> Result<()> {
    let status = Command::new(bin.join("pip"))
        .args([
            "install",
            "--progress-bar",
            "off",
            "--disable-pip-version-check",
        ])
        .args(pins)
        .status()
        .map_err(|e| format!("pip: {e}"))?;
    if !status.success() {
        return Err(format!("pip install {} failed", pins.join(" ")));
    }
    Ok(())
}

/// A server on a free port under the watchdog of [`Guarded`]: `cmdline` (a shell command line
/// for the port it is given) started in `dir` with `env`, its output going to `log`; returned
/// with its port once it accepts connections, or stopped again (dropped) if it does not within
/// `limit`.
pub(crate) fn serve(
    name: &str,
    dir: &Path,
    cmdline: impl FnOnce(u16) -> String,
    env: &[(String, String)],
    log: PathBuf,
    limit: Duration,
) -> Result<(Guarded, u16)> {
    let port = free_port()?;
    let server = Guarded::spawn(name, dir, &cmdline(port), env, log)?;
    server.wait_listening(port, limit)?;
    Ok((server, port))
}
