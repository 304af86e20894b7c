//! `cargo xtask package`: the release artifacts: every function built with
//! `cargo lambda build --release --arm64` (zig cross-links; no Docker), zipped, sizes reported.
//! One build per function: built together, the runtime's features would unify and every zip
//! would carry what any function enables (the SQS client, every door); built alone, each
//! carries what its `Cargo.toml` names, and the crates whose features agree are compiled once.
//! `--together` (CI) is one build of them all, features unified: it proves that every function
//! builds and links for arm64 in release at a quarter of the time, and its zips are not the ones
//! to deploy. That no function compiles a client it never calls is pinned by the integration
//! test `lean_builds`.

use std::path::Path;
use std::process::Command;

use crate::Result;

/// The deployable functions, as `cargo lambda build` names their zips: every function.
pub(crate) const FUNCTIONS: [&str; 10] = crate::functions::ALL;

pub(crate) fn run(root: &Path, together: bool) -> Result<()> {
    let bin = crate::tools::ensure(root)?;
    let target = "aarch64-unknown-linux-gnu";
    // Quick and offline when the target is there already.
    let added = Command::new("rustup")
        .args(["target", "add", target])
        .status();
    if !added.is_ok_and(|s| s.success()) {
        return Err(format!(
            "could not add the Rust target {target}; install it with `rustup target add {target}`"
        ));
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let builds: Vec<Vec<&str>> = if together {
        vec![FUNCTIONS.to_vec()]
    } else {
        FUNCTIONS.iter().map(|f| vec![*f]).collect()
    };
    for functions in builds {
        let mut cmd = Command::new(crate::cargo());
        cmd.current_dir(root).env("PATH", &path).args([
            "lambda",
            "build",
            "--release",
            "--arm64",
            "--output-format",
            "zip",
        ]);
        for f in &functions {
            cmd.args(["--package", f]);
        }
        let named = functions.join(" --package ");
        println!("xtask: package: cargo lambda build --release --arm64 --package {named}");
        let status =
            local_lambda::process::run(&mut cmd).map_err(|e| format!("cargo lambda: {e}"))?;
        if !status.success() {
            return Err(format!("cargo lambda build failed for {named}"));
        }
    }
    if together {
        println!("\n  (built together, features unified: `cargo xtask package` builds each alone)");
    }
    println!("\n  {:<20} {:>12}", "function (arm64)", "zip size");
    for f in FUNCTIONS {
        let mb = zip_mb(root, f).ok_or_else(|| format!("{f}: no zip after the build"))?;
        println!("  {f:<20} {mb:>9.2} MB");
    }
    Ok(())
}

/// The size of `function`'s arm64 release zip in MB, if it has been built.
pub(crate) fn zip_mb(root: &Path, function: &str) -> Option<f64> {
    let zip = crate::target_dir(root)
        .join("lambda")
        .join(function)
        .join("bootstrap.zip");
    std::fs::metadata(zip)
        .ok()
        .map(|m| m.len() as f64 / 1_048_576.0)
}
