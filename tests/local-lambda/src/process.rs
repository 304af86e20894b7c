//! Child processes that cannot outlive the process that started them, however it ends.
//!
//! Services run behind a watchdog shell ([`Guarded`]); every other child it waits on
//! ([`run`]) gets a process group of its own and is tracked, and so are the functions'
//! instances, so that a SIGTERM, SIGINT or SIGHUP to it (see [`crate::signals`]) stops them all
//! before it exits.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Result;

/// A service started in its own process group behind a watchdog shell. The shell waits on its
/// stdin, which only the starting process holds: when that exits for any reason (even SIGKILL), the pipe closes,
/// and the shell stops the whole group. The shell ignores SIGTERM, SIGINT and SIGHUP once the
/// service has started, so a signal sent to the whole process group (as a CI timeout or a
/// Ctrl-C does) cannot kill it before it has done that. No emulator outlives the run that
/// started it.
#[derive(Debug)]
pub struct Guarded {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    pid: u32,
}

impl Guarded {
    /// Starts `cmdline` (a shell command line) in `dir` with `env`, its output going to `log`.
    pub fn spawn(
        name: &str,
        dir: &Path,
        cmdline: &str,
        env: &[(String, String)],
        log: PathBuf,
    ) -> Result<Self> {
        if let Some(parent) = log.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let pidfile = log.with_extension("pid");
        let _ = fs::remove_file(&pidfile);
        let script = format!(
            "setsid sh -c {cmd} >{log} 2>&1 & pid=$!; trap '' TERM INT HUP; echo $pid >{pidfile}; \
             read _ignored; kill -TERM -$pid 2>/dev/null; \
             for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -$pid 2>/dev/null || exit 0; sleep 0.2; done; \
             kill -KILL -$pid 2>/dev/null; exit 0",
            cmd = shell_quote(cmdline),
            log = shell_quote(&log.display().to_string()),
            pidfile = shell_quote(&pidfile.display().to_string()),
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start {name}: {e}"))?;
        let stdin = child.stdin.take();
        // The service's pid (it leads its own process group), for signals.
        let deadline = Instant::now() + Duration::from_secs(5);
        let pid = loop {
            let read = fs::read_to_string(&pidfile).ok();
            if let Some(pid) = read.and_then(|t| t.trim().parse().ok()) {
                break pid;
            }
            if Instant::now() > deadline {
                return Err(format!("{name} did not start (no pid)"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        track(pid, true);
        Ok(Self {
            name: name.to_owned(),
            child,
            stdin,
            log,
            pid,
        })
    }

    /// Sends `signal` (a name `kill` accepts: `STOP`, `CONT`, `TERM`, `KILL`) to the service.
    pub fn signal(&self, signal: &str) -> Result<()> {
        signal_pid(self.pid, signal)
    }

    /// The service's process id (it leads its own process group).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the service has exited already.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub fn print_log_tail(&self, lines: usize) {
        print_tail(&self.name, &self.log, lines);
    }

    /// Waits until the service accepts connections on `port`; after `limit`, the last lines of
    /// its log and an error.
    pub fn wait_listening(&self, port: u16, limit: Duration) -> Result<()> {
        if wait_tcp(port, limit) {
            return Ok(());
        }
        self.print_log_tail(30);
        Err(format!(
            "{} did not start listening on port {port} within {} s",
            self.name,
            limit.as_secs()
        ))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        untrack(self.pid);
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

/// Prints the last `lines` lines of `log` (written by `name`) to stderr.
pub fn print_tail(name: &str, log: &Path, lines: usize) {
    if let Ok(text) = fs::read_to_string(log) {
        let all: Vec<&str> = text.lines().collect();
        eprintln!("--- last lines of {} ({name}) ---", log.display());
        for l in &all[all.len().saturating_sub(lines)..] {
            eprintln!("{l}");
        }
    }
}

/// Sends `signal` to process `pid` with `kill(1)`.
pub fn signal_pid(pid: u32, signal: &str) -> Result<()> {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid} failed"))
    }
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Waits until something accepts connections on `port`.
fn wait_tcp(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    while start.elapsed() < limit {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Children to stop if the process is told to stop: (pid, whether it leads a process group).
static TRACKED: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());

fn tracked() -> std::sync::MutexGuard<'static, Vec<(u32, bool)>> {
    TRACKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records a child to stop on a signal; `group` when it leads a process group of its own.
pub fn track(pid: u32, group: bool) {
    tracked().push((pid, group));
}

pub fn untrack(pid: u32) {
    tracked().retain(|(p, _)| *p != pid);
}

/// Files to remove if the process is told to stop before it removes them itself.
static SCRATCH: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn scratch() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    SCRATCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records a scratch file that [`stop_tracked`] removes.
pub fn track_file(path: &Path) {
    scratch().push(path.to_path_buf());
}

pub fn untrack_file(path: &Path) {
    scratch().retain(|p| p != path);
}

/// Stops every tracked child (and group): SIGTERM, up to two seconds' grace, then SIGKILL; then
/// removes the tracked scratch files.
pub fn stop_tracked() {
    let all: Vec<(u32, bool)> = tracked().drain(..).collect();
    let target = |(pid, group): &(u32, bool)| {
        if *group {
            format!("-{pid}")
        } else {
            pid.to_string()
        }
    };
    let send = |sig: &str, t: &str| {
        Command::new("kill")
            .args([format!("-{sig}"), "--".into(), t.to_owned()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    for t in all.iter().map(target) {
        send("TERM", &t);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && all.iter().map(target).any(|t| send("0", &t)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for t in all.iter().map(target) {
        send("KILL", &t);
    }
    for file in scratch().drain(..) {
        let _ = fs::remove_file(file);
    }
}

/// Whether `cmd`, run as [`run`] runs it, ran and succeeded.
pub fn succeeds(cmd: &mut Command) -> bool {
    run(cmd).is_ok_and(|s| s.success())
}

/// Runs `cmd` to completion in a process group of its own, tracked, so that a signal to the process
/// stops it and everything it started (a `cargo test` and its test binaries, say).
pub fn run(cmd: &mut Command) -> std::io::Result<ExitStatus> {
    let mut child = cmd.process_group(0).spawn()?;
    let pid = child.id();
    track(pid, true);
    let status = child.wait();
    untrack(pid);
    status
}
