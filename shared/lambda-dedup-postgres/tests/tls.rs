//! TLS, when configured, is required: a server (or anyone between) answering "no TLS" to the
//! client's request for it gets no plain-text session. The server is the local PostgreSQL that
//! `cargo xtask test` starts (no TLS on it) and names in `DEDUP_POSTGRES_URL`; without it the
//! tests are skipped, saying so.

use std::time::Duration;

use lambda_dedup::{FaultKind, Retention, StoreError};
use lambda_dedup_postgres::{PgStore, Tls};

const URL: &str = "DEDUP_POSTGRES_URL";
const HOW: &str = "`cargo xtask test -p lambda-dedup-postgres` starts PostgreSQL and sets it";

/// A certificate authority of the tests' own, trusted by nothing (its key is not kept): TLS
/// configured with it cannot be satisfied by any server, so only a refusal or a plain-text
/// session can follow.
const UNTRUSTED_CA: &[u8] = include_bytes!("fixtures/untrusted-ca.pem");

fn retention() -> Retention {
    Retention::unchecked(Duration::from_secs(3600)).expect("retention")
}

/// `url` with `sslmode=<mode>` added to its query.
fn with_sslmode(url: &str, mode: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}sslmode={mode}")
}

#[tokio::test]
async fn with_tls_configured_a_server_offering_no_tls_is_refused_not_used_in_plain_text() {
    let Some(url) = lambda_dedup_conformance::server(URL, "postgres TLS", HOW) else {
        return;
    };
    // The server is there and answers in plain text when plain text is asked for: what the
    // TLS cases below refuse is the missing TLS, nothing else.
    let plain = PgStore::from_url(&url, Tls::Disabled, retention()).expect("url");
    plain.create_table().await.expect("plain text, asked for");

    // The URL's own `sslmode` cannot weaken a configured TLS either: `prefer` and `disable`
    // are read as `require`.
    for url in [
        url.clone(),
        with_sslmode(&url, "prefer"),
        with_sslmode(&url, "disable"),
    ] {
        let tls = Tls::with_pem_roots(UNTRUSTED_CA).expect("a CA bundle");
        let store = PgStore::from_url(&url, tls, retention()).expect("url");
        let refused = store.create_table().await;
        match refused {
            Err(StoreError::Store { kind, message }) => {
                assert_eq!(kind, FaultKind::Network, "{message}");
                assert!(
                    message.contains("TLS is required") && message.contains("no TLS"),
                    "the error names the cause: {message}"
                );
            }
            other => panic!("{url}: TLS configured, the store answered {other:?}"),
        }
    }
}

/// A certificate authority of the tests' own (its key not kept) and the certificate it signed
/// for the IP address 127.0.0.1 only, with that certificate's key: what [`tls_server`] presents.
const TEST_CA: &[u8] = include_bytes!("fixtures/test-ca.pem");
const SERVER_CERT: &[u8] = include_bytes!("fixtures/server-127.0.0.1.pem");
const SERVER_KEY: &[u8] = include_bytes!("fixtures/server-127.0.0.1.key");

/// A server on loopback that says yes to one connection's request for TLS (as PostgreSQL
/// with TLS does) and performs the handshake with [`SERVER_CERT`], then hangs up: its port,
/// and whether the client completed the handshake.
fn tls_server() -> (u16, std::thread::JoinHandle<bool>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{Read, Write};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(SERVER_CERT)
        .collect::<Result<_, _>>()
        .expect("the server's certificate");
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).expect("the server's key");
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let handle = std::thread::spawn(move || {
        let Ok((mut tcp, _)) = listener.accept() else {
            return false;
        };
        // PostgreSQL's SSLRequest: length 8, code 80877103; the answer `S` means "TLS follows".
        let mut request = [0u8; 8];
        if tcp.read_exact(&mut request).is_err() || request != [0, 0, 0, 8, 4, 210, 22, 47] {
            return false;
        }
        if tcp.write_all(b"S").is_err() {
            return false;
        }
        let Ok(mut tls) = rustls::ServerConnection::new(std::sync::Arc::new(config)) else {
            return false;
        };
        while tls.is_handshaking() {
            if tls.complete_io(&mut tcp).is_err() {
                return false;
            }
        }
        true
    });
    (port, handle)
}

/// The first call's error, through a store on `host:port` with `roots` as the only trusted
/// authorities, and whether the server saw the handshake completed.
async fn first_call_through_tls(host: &str, roots: &[u8]) -> (String, bool) {
    let (port, server) = tls_server();
    let url = format!("postgresql://postgres@{host}:{port}/postgres");
    let tls = Tls::with_pem_roots(roots).expect("a CA bundle");
    let store = PgStore::from_url(&url, tls, retention()).expect("url");
    let message = match store.create_table().await {
        Err(StoreError::Store { message, .. }) => message,
        other => panic!("the fake server cannot answer SQL: {other:?}"),
    };
    (message, server.join().expect("the server's thread"))
}

/// TLS configured is TLS verified: a server whose certificate the configured roots did not
/// sign, or whose certificate is for another name, is refused in the handshake, and the error
/// says so; the same server under the right roots and name gets through the handshake.
#[tokio::test]
async fn with_tls_configured_the_servers_certificate_is_verified_against_the_roots_and_host() {
    let (message, completed) = first_call_through_tls("127.0.0.1", UNTRUSTED_CA).await;
    assert!(!completed, "a certificate the roots did not sign");
    assert!(
        message.contains("TLS handshake failed") && message.contains("invalid peer certificate"),
        "{message}"
    );

    let (message, completed) = first_call_through_tls("localhost", TEST_CA).await;
    assert!(
        !completed,
        "a certificate for 127.0.0.1 presented for localhost"
    );
    assert!(
        message.contains("TLS handshake failed") && message.contains("not valid for name"),
        "{message}"
    );

    // Trusted and for this address: the handshake completes (then the fake server hangs up,
    // which is a plain connection failure, no longer a TLS one).
    let (message, completed) = first_call_through_tls("127.0.0.1", TEST_CA).await;
    assert!(completed, "{message}");
    assert!(!message.contains("TLS"), "{message}");
}
