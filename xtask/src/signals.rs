//! Stopping cleanly on SIGTERM (a CI timeout), SIGINT (Ctrl-C) and SIGHUP (a closed terminal).

/// Resolves when the process is asked to stop.
pub(crate) async fn terminated() {
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

/// On a stop signal, from a thread of its own (whatever the rest of xtask is blocked on): stop
/// every child xtask tracks, then exit with 130. Services behind watchdogs stop either way.
pub(crate) fn install() {
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
            eprintln!("xtask: stopping (signal received); stopping every service it started");
            crate::process::stop_tracked();
            std::process::exit(130);
        });
    if let Err(e) = spawned {
        eprintln!("xtask: no signal handler ({e}); services still stop when xtask exits");
    }
}
