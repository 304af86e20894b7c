//! Nothing xtask starts outlives it, however it ends (issue: a SIGTERM used to leave the local
//! DynamoDB running, orphaned). Runs the real `xtask dynamodb` command, which starts the
//! emulator as a child process behind a watchdog, and signals it the ways a run ends: a SIGTERM
//! to xtask alone, a SIGTERM to its whole process group (a CI timeout), a SIGINT to the group
//! (Ctrl-C in a terminal), and a SIGKILL. Then looks through every process on the machine for
//! anything of that run left.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `xtask dynamodb` as the leader of a process group of its own; returns it and the port
/// its emulator listens on (read from what it prints).
fn start() -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("dynamodb")
        .stdin(Stdio::piped()) // held open: xtask waits for Enter
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start xtask");
    let out = child.stdout.take().expect("stdout");
    let mut port = None;
    for line in BufReader::new(out).lines() {
        let line = line.expect("read");
        if let Some(rest) = line
            .split("AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:")
            .nth(1)
        {
            port = rest.trim().parse().ok();
        }
        if line.starts_with("Press Enter") {
            break;
        }
    }
    let port = port.expect("xtask dynamodb printed its endpoint");
    assert!(
        survivors(port).iter().any(|c| c.contains("serve-dynamodb")),
        "the emulator runs as a process of its own"
    );
    (child, port)
}

/// Command lines of the processes on this machine that belong to the run on `port`: the
/// emulator (`serve-dynamodb --port P`) and its watchdog shell (whose script names it).
fn survivors(port: u16) -> Vec<String> {
    let needle = format!("--port {port}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push(cmdline);
        }
    }
    found
}

fn kill(signal: &str, target: String) {
    let ok = Command::new("kill")
        .args([format!("-{signal}"), "--".into(), target])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{signal}");
}

/// Waits (up to 10 s) for xtask to exit and for nothing of its run to be left.
fn assert_nothing_left(mut xtask: Child, port: u16, how: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let exited = matches!(xtask.try_wait(), Ok(Some(_)));
        let left = survivors(port);
        if exited && left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {how}: xtask exited: {exited}; still running: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "after {how}: something still listens on the emulator's port {port}"
    );
}

/// The link to xtask's binary the emulator of `port` runs (see `xtask/src/dynamodb.rs`).
fn server_link(port: u16) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.cache/bin")
        .join(format!("xtask-serve-dynamodb-{port}"))
}

/// Starts `xtask dynamodb`, sends it (or, with `to_group`, its whole process group) `signal`,
/// and asserts that nothing it started is left (`how` names the case); the server's port.
fn signalled(signal: &str, to_group: bool, how: &str) -> u16 {
    let (xtask, port) = start();
    let target = if to_group {
        format!("-{}", xtask.id())
    } else {
        xtask.id().to_string()
    };
    kill(signal, target);
    assert_nothing_left(xtask, port, how);
    port
}

/// xtask removed the link the server of `port` had to it (it could: it was not killed).
fn assert_link_removed(port: u16) {
    assert!(
        !server_link(port).exists(),
        "the server's link to xtask is removed"
    );
}

#[test]
fn sigterm_to_xtask_alone_leaves_nothing_running() {
    let port = signalled("TERM", false, "SIGTERM to xtask");
    assert_link_removed(port);
}

#[test]
fn sigterm_to_the_whole_process_group_leaves_nothing_running() {
    let port = signalled("TERM", true, "SIGTERM to xtask's process group");
    assert_link_removed(port);
}

#[test]
fn ctrl_c_leaves_nothing_running() {
    let port = signalled("INT", true, "SIGINT to xtask's process group");
    assert_link_removed(port);
}

#[test]
fn sigkill_to_xtask_leaves_nothing_running() {
    signalled("KILL", false, "SIGKILL to xtask");
}
