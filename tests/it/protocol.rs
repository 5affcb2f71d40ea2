//! Request heads that RFC 9112 refuses: no `Host` in HTTP/1.1, two `Host` lines, an invalid `Host`, and two
//! `Authorization` lines; and a line ending in a bare LF, which RFC 9112 allows but sitemapd refuses. Over a real socket through `serve()` (what hyper lets through to the router) and through
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
    let app = TestApp::spawn(b, &[]).await;
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
    let app = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await;
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
    let app = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await;
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
    let app = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await;
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

/// Writes `bytes` on a fresh connection and reads until the server closes it (or 10 s pass): the statuses of the
/// responses it sent, in order.
async fn statuses(port: u16, bytes: &[u8]) -> Vec<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&response);
    text.match_indices("HTTP/1.1 ").filter_map(|(at, _)| text[at + 9..at + 12].parse().ok()).collect()
}

/// A request line or header line that ends in a bare LF is refused (400) and the connection closed, on the first
/// request of a connection or a later one, after a body of known length or a chunked one; a proxy in front that
/// does not take a bare LF as a line end would read other requests in those bytes. Body bytes are not heads: an
/// NDJSON body's LFs pass.
async fn a_head_line_ending_in_a_bare_lf_is_refused(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let (port, _stop) = serve(&app).await;
    let ok = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    let close = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_eq!(statuses(port, format!("{ok}{close}").as_bytes()).await, [200, 200]);
    for bare in [
        "GET /healthz HTTP/1.1\nHost: x\r\nConnection: close\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\nConnection: close\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\n",
        "GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n",
        // What a proxy that splits on CRLF only may take for one header, "X: a\nGET /metrics ...".
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX: a\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ] {
        assert_eq!(statuses(port, bare.as_bytes()).await, [400], "{bare:?}");
        assert_eq!(statuses(port, format!("{ok}{bare}{ok}").as_bytes()).await, [200, 400], "second: {bare:?}");
    }
    let ndjson = format!("{{\"loc\": \"{PUBLIC_URL}/lf1\"}}\n\n{{\"loc\": \"{PUBLIC_URL}/lf2\"}}\n");
    let put = |framing: &str| {
        format!("PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n{framing}\r\n")
    };
    let sized = format!("{}{ndjson}", put(&format!("Content-Length: {}\r\n", ndjson.len())));
    let chunked = format!("{}{:x}\r\n{ndjson}\r\n0\r\n\r\n", put("Transfer-Encoding: chunked\r\n"), ndjson.len());
    for body in [&sized, &chunked] {
        assert_eq!(statuses(port, format!("{body}{close}").as_bytes()).await, [200, 200], "{body:?}");
        let bare = "GET /healthz HTTP/1.1\nHost: x\r\n\r\n";
        assert_eq!(statuses(port, format!("{body}{bare}").as_bytes()).await, [200, 400], "{body:?}");
    }
    assert_eq!(app.find(&format!("{PUBLIC_URL}/lf2")).await.status, StatusCode::OK);
}

crate::both_backends!(
    a_head_line_ending_in_a_bare_lf_is_refused,
    host_is_required_once_over_a_socket,
    two_authorization_lines_are_refused_over_a_socket,
    two_content_type_lines_are_refused_over_a_socket,
    host_and_authorization_through_the_router,
);
