//! Stopping cleanly on SIGTERM (a CI timeout), SIGINT (Ctrl-C) and SIGHUP (a closed terminal).

/// Resolves when the process is asked to stop.
pub async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        // Without handlers the default actions apply, and the watchdogs still clean up.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = hup.recv() => {}
    }
}

/// On a stop signal, from a thread of its own (whatever the rest of the process is blocked on): stop
/// every child [`crate::process`] tracks, then exit with 130. Services behind watchdogs stop either way.
pub fn install() {
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(terminated());
            eprintln!(
                "local-lambda: stopping (signal received); stopping every service it started"
            );
            crate::process::stop_tracked();
            std::process::exit(130);
        });
    if let Err(e) = spawned {
        eprintln!(
            "local-lambda: no signal handler ({e}); services still stop when this process exits"
        );
    }
}
