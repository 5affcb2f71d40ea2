//! Request heads that RFC 9112 refuses: no `Host` in HTTP/1.1, two `Host` lines, an invalid `Host`, and two
//! `Authorization` lines. Over a real socket through `serve()` (what hyper lets through to the router) and through
//! the router itself.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{Backend, PUBLIC_URL, TestApp};

const TOKEN: &str = "proto-token";

/// `app` served by `serve()` on a free port, until the returned sender is dropped.
async fn serve(app: &TestApp) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = sitemapd::AppState::new(app.store.clone(), &app.config);
    tokio::spawn(sitemapd::serve(
        state,
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::from_secs(1),
    ));
    (port, stop)
}

/// Sends `head` (and `body`) on a fresh connection that the server closes after answering; returns the status.
async fn exchange(port: u16, head: &str, body: &str) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(format!("{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes())
        .await
        .unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await.unwrap().unwrap();
    let response = String::from_utf8_lossy(&response);
    response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {response:?}"))
}

async fn host_is_required_once_over_a_socket(b: Backend) {
    let Some(app) = TestApp::spawn(b, &[]).await else { return };
    app.put_paths(&["a"]).await;
    let (port, _stop) = serve(&app).await;
    for (head, expected) in [
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: www.example.com\r\n", 200),
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: www.example.com:8080\r\n", 200),
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: [::1]:8080\r\n", 200),
        ("GET /sitemap-1.xml HTTP/1.1\r\n", 400),
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: www.example.com\r\nHost: evil.example\r\n", 400),
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: www.example.com\r\nhost: www.example.com\r\n", 400),
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: u@evil.example\r\n", 400),
        ("GET /sitemap-1.xml HTTP/1.1\r\nHost: www.example.com/x\r\n", 400),
        ("GET /healthz HTTP/1.1\r\n", 400),
        // HTTP/1.0 did not require Host: served.
        ("GET /sitemap-1.xml HTTP/1.0\r\n", 200),
        ("GET /sitemap-1.xml HTTP/1.0\r\nHost: a\r\nHost: b\r\n", 400),
    ] {
        assert_eq!(exchange(port, head, "").await, expected, "{b:?}: {head:?}");
    }
}

async fn two_authorization_lines_are_refused_over_a_socket(b: Backend) {
    let Some(app) = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await else { return };
    let (port, _stop) = serve(&app).await;
    let body = format!("[{{\"loc\": \"{PUBLIC_URL}/auth\"}}]");
    let put = |auth: &str| format!("PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}");
    let good = format!("Authorization: Bearer {TOKEN}\r\n");
    let bad = "Authorization: Bearer wrong\r\n";
    assert_eq!(exchange(port, &put(&format!("{good}{bad}")), &body).await, 400, "{b:?}: valid, then wrong");
    assert_eq!(exchange(port, &put(&format!("{bad}{good}")), &body).await, 400, "{b:?}: wrong, then valid");
    assert_eq!(exchange(port, &put(&format!("{good}{good}")), &body).await, 400, "{b:?}: the same twice");
    let find = format!("/api/v1/urls?loc={}", crate::support::urlencode(&format!("{PUBLIC_URL}/auth")));
    let auth = format!("Bearer {TOKEN}");
    let found = app.get(&find, &[("authorization", &auth)]).await;
    assert_eq!(found.status, StatusCode::NOT_FOUND, "{b:?}: nothing stored");
    assert_eq!(exchange(port, &put(&good), &body).await, 200, "{b:?}");
}

async fn two_content_type_lines_are_refused_over_a_socket(b: Backend) {
    let Some(app) = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await else { return };
    let (port, _stop) = serve(&app).await;
    let loc = format!("{PUBLIC_URL}/typed");
    let body = format!("[{{\"loc\": \"{loc}\"}}]");
    let put = |types: &str| format!("PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n{types}");
    let json = "Content-Type: application/json\r\n";
    let ndjson = "Content-Type: application/x-ndjson\r\n";
    for types in [format!("{json}{json}"), format!("{json}{ndjson}"), format!("{ndjson}{json}")] {
        assert_eq!(exchange(port, &put(&types), &body).await, 400, "{b:?}: {types:?}");
    }
    let auth = format!("Bearer {TOKEN}");
    let find = format!("/api/v1/urls?loc={}", crate::support::urlencode(&loc));
    let found = app.get(&find, &[("authorization", &auth)]).await;
    assert_eq!(found.status, StatusCode::NOT_FOUND, "{b:?}: nothing stored");
    assert_eq!(exchange(port, &put(json), &body).await, 200, "{b:?}");
}

/// The same rules through the router alone: what hyper hands over is what the router checks.
async fn host_and_authorization_through_the_router(b: Backend) {
    let Some(app) = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await else { return };
    let request = |version: Version, hosts: &[&str]| {
        let mut builder = Request::builder().uri("/healthz").version(version);
        for host in hosts {
            builder = builder.header("host", *host);
        }
        builder.body(Body::empty()).unwrap()
    };
    assert_eq!(app.send_exact(request(Version::HTTP_11, &[])).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.send_exact(request(Version::HTTP_11, &["a", "b"])).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.send_exact(request(Version::HTTP_11, &["a"])).await.status, StatusCode::OK);
    assert_eq!(app.send_exact(request(Version::HTTP_10, &[])).await.status, StatusCode::OK);
    let r = app.send_exact(request(Version::HTTP_11, &[])).await;
    assert_eq!(r.json()["error"], "bad_request", "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("Host"), "{}", r.text());

    let auth = format!("Bearer {TOKEN}");
    let list = async |values: &[&str]| {
        let headers: Vec<(&str, &str)> = values.iter().map(|v| ("authorization", *v)).collect();
        app.request(Method::GET, "/api/v1/urls", &headers, Body::empty()).await
    };
    assert_eq!(list(&[&auth]).await.status, StatusCode::OK);
    let r = list(&[&auth, "Bearer wrong"]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert!(r.text().contains("more than one Authorization header"), "{}", r.text());
    assert_eq!(list(&["Bearer wrong", &auth]).await.status, StatusCode::BAD_REQUEST);
}

crate::both_backends!(
    host_is_required_once_over_a_socket,
    two_authorization_lines_are_refused_over_a_socket,
    two_content_type_lines_are_refused_over_a_socket,
    host_and_authorization_through_the_router,
);
