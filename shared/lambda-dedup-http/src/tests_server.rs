//! The client against a real HTTP server on loopback: what it follows, what it reads, how
//! each answer is classified.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use lambda_dedup_engine::HandlerError;

use super::*;

/// What the server saw: requests that reached the redirect's target.
#[derive(Default)]
struct Seen {
    redirected_to: AtomicUsize,
}

/// Answers `POST /v1/status/{code}` with that status, `/v1/big/{bytes}` with a 200 of that many
/// bytes (its length declared), `/v1/stream/{bytes}` the same in chunks without a length,
/// `/v1/old` with a 307 to `/v1/new`, which counts what reaches it and answers 200.
async fn server() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route(
            "/v1/status/{code}",
            post(|Path(code): Path<u16>| async move {
                StatusCode::from_u16(code).unwrap_or(StatusCode::IM_A_TEAPOT)
            }),
        )
        .route(
            "/v1/big/{bytes}",
            post(|Path(bytes): Path<usize>| async move { "x".repeat(bytes) }),
        )
        .route(
            "/v1/stream/{bytes}",
            post(|Path(bytes): Path<usize>| async move {
                let chunks = (0..bytes.div_ceil(64 * 1024)).map(move |i| {
                    let len = (bytes - i * 64 * 1024).min(64 * 1024);
                    Ok::<_, std::io::Error>(vec![b'x'; len])
                });
                Body::from_stream(futures::stream::iter(chunks))
            }),
        )
        .route(
            "/v1/old",
            post(|| async {
                Response::builder()
                    .status(StatusCode::TEMPORARY_REDIRECT)
                    .header(header::LOCATION, "/v1/new")
                    .body(Body::empty())
                    .unwrap_or_default()
            }),
        )
        .route(
            "/v1/new",
            post(
                |State(seen): State<Arc<Seen>>, headers: HeaderMap| async move {
                    if headers.contains_key("idempotency-key") {
                        seen.redirected_to.fetch_add(1, Ordering::SeqCst);
                    }
                    (StatusCode::OK, "{}").into_response()
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, seen)
}

fn client(base: &str) -> IdempotentClient {
    IdempotentClient::new(base, Duration::from_secs(5)).expect("client")
}

async fn call(api: &IdempotentClient, path: &str) -> Result<Receipt, CallError> {
    api.call(path, "evt-1", &serde_json::json!({"amount": 1}))
        .await
}

/// A provider base URL missing its path prefix answers 404 to every call: that says the
/// configuration is wrong, not the message, so the message is retried (redelivered), never
/// rejected as invalid; the same goes for 401, 403 and 405. A 422 (this key with another
/// payload) is still the message's own, permanent.
#[tokio::test]
async fn a_provider_answering_404_to_every_call_is_retried_not_rejected_as_invalid() {
    let (addr, _) = server().await;
    let api = client(&format!("http://{addr}"));
    for code in [404, 401, 403, 405] {
        let e = call(&api, &format!("/v1/status/{code}"))
            .await
            .expect_err("not 2xx");
        assert_eq!(e, CallError::Status(code));
        assert_eq!(e.permanence(), Permanence::Misconfigured, "{code}");
        assert_eq!(e.code(), format!("provider_misconfigured_{code}"));
        assert!(
            matches!(HandlerError::from(e), HandlerError::Transient(_)),
            "{code}: retried"
        );
    }
    let e = call(&api, "/v1/status/422").await.expect_err("422");
    assert_eq!(e.permanence(), Permanence::Permanent);
    assert_eq!(e.code(), "provider_rejected_422");
    assert!(matches!(HandlerError::from(e), HandlerError::Invalid(_)));
}

/// A redirect is not followed: the `Idempotency-Key` is not carried to wherever it points,
/// and the 3xx is the answer.
#[tokio::test]
async fn a_redirect_is_not_followed_and_the_idempotency_key_goes_nowhere_else() {
    let (addr, seen) = server().await;
    let api = client(&format!("http://{addr}"));
    let answer = call(&api, "/v1/old").await;
    assert_eq!(answer, Err(CallError::Status(307)));
    assert_eq!(seen.redirected_to.load(Ordering::SeqCst), 0);
    assert_eq!(
        CallError::Status(307).permanence(),
        Permanence::Misconfigured
    );
    assert!(matches!(
        HandlerError::from(CallError::Status(307)),
        HandlerError::Transient(_)
    ));
}

/// An answer over the limit is not read whole: declared (`content-length`) or streamed, a 2xx
/// body over [`MAX_ANSWER_BYTES`] fails the call; one at the limit is read.
#[tokio::test]
async fn an_answer_over_the_limit_is_refused_not_read_whole() {
    let (addr, _) = server().await;
    let api = client(&format!("http://{addr}"));
    let limit = MAX_ANSWER_BYTES;
    assert_eq!(limit, 1024 * 1024, "the documented limit");
    for path in ["big", "stream"] {
        let over = call(&api, &format!("/v1/{path}/{}", limit + 1)).await;
        assert_eq!(over, Err(CallError::AnswerTooLarge), "{path}");
        let at = call(&api, &format!("/v1/{path}/{limit}"))
            .await
            .expect("at the limit");
        assert_eq!(at.body.len(), limit);
    }
}

/// `http://` is refused when the client is built, unless the host is loopback; `https://` is
/// taken. The loopback forms do reach a real server.
#[tokio::test]
async fn http_is_refused_at_construction_unless_the_host_is_loopback() {
    let t = Duration::from_secs(5);
    for insecure in [
        "http://api.example.com",
        "http://10.0.0.1:8080/v1",
        "http://127.0.0.1.nip.io",
        "http://localhost.example.com",
        "http://[::ffff:10.0.0.1]",
        "ftp://api.example.com",
    ] {
        match IdempotentClient::new(insecure, t) {
            Err(BuildError::Insecure { .. }) => {}
            other => panic!("{insecure}: {other:?}"),
        }
    }
    for bad in ["", "api.example.com/v1", "https://", "not a url"] {
        assert!(
            matches!(IdempotentClient::new(bad, t), Err(BuildError::BadUrl)),
            "{bad}"
        );
    }
    let e = IdempotentClient::new("http://api.example.com/v1", t)
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert!(
        e.as_ref()
            .is_err_and(|e| e.contains("https://") && e.contains("api.example.com")),
        "{e:?}"
    );
    for secure in [
        "https://api.example.com",
        "http://[::1]:8080",
        "http://127.0.0.2",
    ] {
        assert!(IdempotentClient::new(secure, t).is_ok(), "{secure}");
    }
    let (addr, _) = server().await;
    for base in [
        format!("http://127.0.0.1:{}", addr.port()),
        format!("http://localhost:{}/", addr.port()),
        format!("http://LOCALHOST:{}", addr.port()),
    ] {
        let answer = call(&client(&base), "/v1/big/2").await;
        assert_eq!(answer.map(|r| r.body), Ok("xx".to_owned()), "{base}");
    }
}

/// `https://` to a server that speaks no TLS: the handshake fails, and that is a configuration
/// (retried, named), not a network blip.
#[tokio::test]
async fn a_tls_failure_is_a_misconfigured_provider_retried_not_rejected() {
    let (addr, _) = server().await;
    let api = client(&format!("https://127.0.0.1:{}", addr.port()));
    let e = call(&api, "/v1/big/2").await.expect_err("no TLS there");
    assert_eq!(e, CallError::Tls);
    assert_eq!(e.code(), "provider_misconfigured_tls");
    assert!(matches!(HandlerError::from(e), HandlerError::Transient(_)));
}

/// A resolver that knows no name, as a DNS answering NXDOMAIN: the tests reach no network.
struct NoSuchName;

#[derive(Debug, thiserror::Error)]
#[error("no such name")]
struct NxDomain;

impl reqwest::dns::Resolve for NoSuchName {
    fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async { Err(Box::new(NxDomain) as Box<dyn std::error::Error + Send + Sync>) })
    }
}

/// A host name that does not resolve is a configuration to fix: retried and named.
#[tokio::test]
async fn a_host_name_that_does_not_resolve_is_a_misconfigured_provider() {
    let api = IdempotentClient::build("https://payments.invalid", Duration::from_secs(5), |b| {
        b.dns_resolver(Arc::new(NoSuchName))
    })
    .expect("client");
    let e = call(&api, "/v1/payments").await.expect_err("no such name");
    assert_eq!(e, CallError::Dns);
    assert_eq!(e.code(), "provider_misconfigured_dns");
    assert!(matches!(HandlerError::from(e), HandlerError::Transient(_)));
}
