//! The webhook senders' own signing libraries, as the demo and the end-to-end tests sign their
//! deliveries: `tests/senders/sign.py`, run with the project venv's python, which has
//! `standardwebhooks` and `stripe` (pinned by xtask). Never the project's own signing code: a
//! receiver that misread a scheme would refuse what the senders' libraries sign.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The signature headers the sender's library for `scheme` (`standard-webhooks` or `stripe`)
/// makes for `body`, delivery `id`, at `timestamp` (epoch seconds), with each of `secrets`:
/// `script` (`tests/senders/sign.py`) run by `python`.
pub fn sign(
    (python, script): (&Path, &Path),
    scheme: &str,
    id: &str,
    timestamp: u64,
    secrets: &[&str],
    body: &str,
) -> Result<Vec<(String, String)>, String> {
    let what = |e: std::io::Error| format!("{}: {e}", script.display());
    let mut child = Command::new(python)
        .arg(script)
        .args([scheme, id, &timestamp.to_string()])
        .args(secrets)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(what)?;
    // Written and closed (the temporary is dropped here), so the script reads to the end.
    let stdin = child.stdin.take().ok_or("sign.py: no stdin");
    stdin?.write_all(body.as_bytes()).map_err(what)?;
    let out = child.wait_with_output().map_err(what)?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!("sign.py {scheme} failed: {why}"));
    }
    let headers: BTreeMap<String, String> =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("sign.py: {e}"))?;
    Ok(headers.into_iter().collect())
}
