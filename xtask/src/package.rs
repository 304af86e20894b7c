//! `cargo xtask package`: the release artifacts: every function built once with
//! `cargo lambda build --release --arm64` (zig cross-links; no Docker), zipped, sizes reported.

use std::path::Path;
use std::process::Command;

use crate::Result;

/// The deployable functions, as `cargo lambda build` names their zips: every function.
pub(crate) const FUNCTIONS: [&str; 8] = crate::functions::ALL;

pub(crate) fn run(root: &Path) -> Result<()> {
    let bin = crate::tools::ensure(root)?;
    let target = "aarch64-unknown-linux-gnu";
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(target))
        .unwrap_or(false);
    if !installed {
        println!("xtask: package: adding the Rust target {target}");
        let ok = Command::new("rustup")
            .args(["target", "add", target])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!(
                "could not add the Rust target {target}; install it with `rustup target add {target}`"
            ));
        }
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(crate::cargo());
    cmd.current_dir(root).env("PATH", path).args([
        "lambda",
        "build",
        "--release",
        "--arm64",
        "--output-format",
        "zip",
    ]);
    for f in FUNCTIONS {
        cmd.args(["--package", f]);
    }
    println!("xtask: package: cargo lambda build --release --arm64 (all functions, one build)");
    let status = crate::process::run(&mut cmd).map_err(|e| format!("cargo lambda: {e}"))?;
    if !status.success() {
        return Err("cargo lambda build failed".into());
    }
    println!("\n  {:<20} {:>12}", "function (arm64)", "zip size");
    for f in FUNCTIONS {
        let zip = root
            .join("target")
            .join("lambda")
            .join(f)
            .join("bootstrap.zip");
        let size = std::fs::metadata(&zip)
            .map_err(|e| format!("{}: {e}", zip.display()))?
            .len();
        println!("  {f:<20} {:>9.2} MB", size as f64 / 1_048_576.0);
    }
    Ok(())
}
