//! A server in a child process of the test, stopped when its value is dropped, and in any case
//! when the test's process ends, however it ends.
//!
//! The server runs in a process group of its own behind a watchdog shell that waits on its
//! stdin, which only this process holds: when this process exits for any reason (even
//! SIGKILL, or a static never dropped), the pipe closes and the shell stops the group, then
//! removes the server's [`Scratch`] folder.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// How long a server may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A folder of the server's own (its data, its log, under root a copy of its programs),
/// removed when dropped.
#[derive(Debug)]
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// A fresh folder `lambda-dedup-testkit-<name>-<pid>-<n>` in the temporary folder.
    pub(crate) fn fresh(name: &str) -> Result<Self, Error> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "lambda-dedup-testkit-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        Ok(Self(dir))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Server {
    /// Starts the shell command line `cmdline(port)` on a free loopback port with `env`, its
    /// output going to `server.log` in `scratch`, and waits until it accepts connections. Once
    /// it has stopped, `scratch` is removed.
    pub(crate) fn start(
        name: &'static str,
        cmdline: impl FnOnce(u16) -> String,
        env: &[(&str, &str)],
        scratch: &Scratch,
    ) -> Result<(Self, u16), Error> {
        let port = free_port()?;
        let log = scratch.path().join("server.log");
        let log = log.as_path();
        let pidfile = log.with_extension("pid");
        let script = format!(
            "setsid sh -c {cmd} >{log} 2>&1 & pid=$!; trap '' TERM INT HUP; echo $pid >{pidfile}; \
             read _ignored; kill -TERM -$pid 2>/dev/null; \
             for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -$pid 2>/dev/null || break; sleep 0.2; done; \
             kill -KILL -$pid 2>/dev/null; rm -rf {scratch}; exit 0",
            cmd = shell_quote(&cmdline(port)),
            log = shell_quote(&log.display().to_string()),
            pidfile = shell_quote(&pidfile.display().to_string()),
            scratch = shell_quote(&scratch.path().display().to_string()),
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(format!("starting {name}"), e))?;
        let stdin = child.stdin.take();
        let server = Self { child, stdin };
        let start = Instant::now();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        while start.elapsed() < START_LIMIT {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok((server, port));
            }
            if exited(&pidfile) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(Error::NotListening {
            name,
            port,
            seconds: START_LIMIT.as_secs(),
            log: tail(log, 30),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The watchdog stops the server's group and exits.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server whose pid is in `pidfile` has exited (Linux: it is gone, or a zombie
/// the watchdog has not reaped).
fn exited(pidfile: &Path) -> bool {
    let Some(pid) = std::fs::read_to_string(pidfile)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
    else {
        return false;
    };
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => Path::new("/proc/self").exists(),
    }
}

/// The last `lines` lines of `log`.
fn tail(log: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let _ = file.read_to_string(&mut text);
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn free_port() -> Result<u16, Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::io("a free loopback port", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("a free loopback port", e))?;
    Ok(addr.port())
}

/// `s` quoted for `sh`.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that exits before it listens is reported with the end of its log, not a bare
    /// timeout; once stopped, its scratch folder is gone, also when the folder's value is never
    /// dropped (a server in a static: the watchdog removes it).
    #[test]
    fn a_server_that_never_listens_is_reported_with_its_log() {
        let scratch = Scratch::fresh("never").expect("scratch");
        let started = Server::start("never", |_| "echo refused to start".into(), &[], &scratch);
        match started {
            Err(Error::NotListening { name, log, .. }) => {
                assert_eq!(name, "never");
                assert_eq!(log, "refused to start");
            }
            other => panic!("{other:?}"),
        }
        let dir = scratch.path().to_owned();
        std::mem::forget(scratch);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
