//! `cargo xtask deny`: the supply chain, by `cargo deny check licenses bans sources` with the
//! workspace's `deny.toml` — permissive licenses only, no OpenSSL or native-tls (TLS is rustls
//! only), crates from crates.io only. Then the same check once more with one crate of the real
//! tree (`rustls`) banned, which must fail: the check walks the tree it guards, so a green run
//! means something. Advisories are not checked: their database is a clone from GitHub, which CI
//! cannot reach (`cargo deny check advisories` where it can).

use std::path::Path;
use std::process::Command;

use crate::Result;

/// The crate every TLS path here goes through: banned in the probe.
const PROBE_BAN: &str = "rustls";

/// The check, then the probe that it can fail.
pub(crate) fn run(root: &Path) -> Result<()> {
    let deny = crate::tools::installed(root, "cargo-deny", crate::tools::CARGO_DENY)?;
    let config = root.join("deny.toml");
    if !check(&deny, root, &config)?.0 {
        return Err("cargo deny found problems (licenses, bans or sources): see above".into());
    }
    let text =
        std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    let probe = root.join(".cache").join("deny-probe.toml");
    std::fs::write(&probe, probed(&text)).map_err(|e| format!("{}: {e}", probe.display()))?;
    let (passed, said) = check(&deny, root, &probe)?;
    if passed || !said.contains(PROBE_BAN) {
        return Err(format!(
            "cargo deny passed with {PROBE_BAN} banned: it did not walk the dependency tree"
        ));
    }
    println!(
        "xtask: deny: licenses, bans and sources clean (cargo-deny {}); a ban on {PROBE_BAN} is caught",
        crate::tools::CARGO_DENY
    );
    Ok(())
}

/// `text` (a `deny.toml`) with [`PROBE_BAN`] added to its bans.
fn probed(text: &str) -> String {
    text.replacen(
        "deny = [",
        &format!("deny = [\n  {{ crate = \"{PROBE_BAN}\", reason = \"probe\" }},"),
        1,
    )
}

/// Whether `cargo deny check` with `config` passes on the workspace at `root`, and what it
/// said (quietly on a pass, in full on a failure of the real config).
fn check(deny: &Path, root: &Path, config: &Path) -> Result<(bool, String)> {
    let out = Command::new(deny)
        .args(["deny", "--locked", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--config")
        .arg(config)
        .args(["check", "licenses", "bans", "sources"])
        .output()
        .map_err(|e| format!("cargo deny: {e}"))?;
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() && config.ends_with("deny.toml") {
        eprintln!("{said}");
    }
    Ok((out.status.success(), said))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe adds its ban to the workspace's own list, keeping every ban there.
    #[test]
    fn the_probe_bans_one_more_crate() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join("deny.toml")).expect("deny.toml");
        let probe = probed(&text);
        assert!(
            probe.contains(&format!("crate = \"{PROBE_BAN}\"")),
            "{probe}"
        );
        for banned in ["openssl", "openssl-sys", "native-tls"] {
            assert!(probe.contains(&format!("crate = \"{banned}\"")), "{banned}");
        }
    }
}
