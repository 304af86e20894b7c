//! Python tools in a project venv (`.cache/venv`): the SQS emulator (`moto[server]`) and
//! `cargo-lambda` (which brings `ziglang` for cross builds), `cfn-lint`, and the webhook senders'
//! own signing libraries (`standardwebhooks`, `stripe`), with which the end-to-end tests and the
//! demo sign their deliveries (`tests/senders/sign.py`). Pinned, installed once.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

const PINS: &[&str] = &[
    "moto[server]==5.2.5",
    "cargo-lambda==1.9.2",
    "cfn-lint==1.58.0",
    "standardwebhooks==1.1.0",
    "stripe==16.1.0",
];

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
    let status = Command::new(bin.join("pip"))
        .args([
            "install",
            "--progress-bar",
            "off",
            "--disable-pip-version-check",
        ])
        .args(PINS)
        .status()
        .map_err(|e| format!("pip: {e}"))?;
    if !status.success() {
        return Err(format!("pip install {} failed", PINS.join(" ")));
    }
    fs::write(&stamp, "").map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(bin)
}
