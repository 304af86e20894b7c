//! `cargo xtask simulate --explore [FILTER]`: the concurrency tests under the exploring scheduler
//! (`shared/lambda-dedup-shuttle`, shuttle). Built with `RUSTFLAGS="--cfg shuttle"` in a target
//! directory of its own (`<target>/shuttle`), so the normal build's cache stays valid; with the
//! planted bugs compiled in (each off unless a test switches it on), so one build runs both the
//! explorations, which must pass in every schedule, and the checks that each planted bug is
//! caught. `FILTER` picks tests by name; `DEDUP_SHUTTLE_REPLAY=<schedule>` replays the schedule a
//! failure printed.

use std::path::{Path, PathBuf};

use crate::Result;

/// The cfg that swaps the library's locks for shuttle's (`sync` in `lambda-dedup` and
/// `lambda-dedup-memory`).
const CFG: &str = "--cfg shuttle";

/// The `cargo` arguments that build and run the shuttle tests, those named by `filter` only
/// (all when it is empty).
pub(crate) fn cargo_args(filter: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "test",
        "--locked",
        "-p",
        "lambda-dedup-shuttle",
        "--features",
        "simulation-planted",
    ]
    .map(String::from)
    .to_vec();
    if !filter.is_empty() {
        args.extend(["--".to_owned(), filter.to_owned()]);
    }
    args
}

/// `RUSTFLAGS` with the shuttle cfg added to what the caller set.
pub(crate) fn rustflags(existing: Option<&str>) -> String {
    match existing.map(str::trim).filter(|f| !f.is_empty()) {
        Some(flags) => format!("{flags} {CFG}"),
        None => CFG.to_owned(),
    }
}

/// The target directory of the shuttle build: `shuttle` inside the normal one.
pub(crate) fn target_dir(target: &Path) -> PathBuf {
    target.join("shuttle")
}

/// Runs the shuttle tests in `root` and says how long the step took.
pub(crate) fn run(root: &Path, filter: &str) -> Result<()> {
    let args = cargo_args(filter);
    let flags = rustflags(std::env::var("RUSTFLAGS").ok().as_deref());
    let target = target_dir(&crate::target_dir(root));
    crate::step(format!(
        "running RUSTFLAGS=\"{flags}\" cargo {} (target {})",
        args.join(" "),
        target.display()
    ));
    let started = std::time::Instant::now();
    let mut cmd = std::process::Command::new(crate::cargo());
    cmd.current_dir(root)
        .args(&args)
        .env("RUSTFLAGS", &flags)
        .env("CARGO_TARGET_DIR", &target);
    let status =
        local_lambda::process::run(&mut cmd).map_err(|e| format!("could not run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("shuttle tests failed ({status})"));
    }
    crate::step(format!(
        "explored: the shuttle tests passed in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shuttle_build_adds_its_cfg_and_keeps_its_own_target() {
        assert_eq!(rustflags(None), "--cfg shuttle");
        assert_eq!(rustflags(Some(" ")), "--cfg shuttle");
        assert_eq!(
            rustflags(Some("-C debuginfo=0")),
            "-C debuginfo=0 --cfg shuttle"
        );
        assert_eq!(
            target_dir(Path::new("/t")),
            PathBuf::from("/t/shuttle"),
            "never the normal build's directory"
        );
        let all = cargo_args("");
        assert!(all.ends_with(&["--features".to_owned(), "simulation-planted".to_owned()]));
        assert!(cargo_args("fifo").ends_with(&["--".to_owned(), "fifo".to_owned()]));
    }
}
