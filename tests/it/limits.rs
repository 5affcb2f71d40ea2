//! Request limits: the time limit of an API request, the time to send a request head, entries per JSON array,
//! body size without a declared length, and the memory budget of bodies in flight.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, StatusCode};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sitemapd::AppState;

use crate::support::{Backend, PUBLIC_URL, TestApp, eventually_blocking};

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// A body that sends `first` and then nothing, never ending: a stalled client.
fn stalled_body(first: String) -> Body {
    let chunks = futures_util::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(first)) })
        .chain(futures_util::stream::pending());
    Body::from_stream(chunks)
}

#[tokio::test]
async fn an_api_request_past_its_time_limit_answers_503_and_stores_nothing_uncommitted() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_API_TIMEOUT", "1s")]).await;
    let line = format!("{}\n", json!({"loc": loc("stalled")}));
    let started = Instant::now();
    let headers = [("content-type", "application/x-ndjson")];
    let request = app.request(Method::PUT, "/api/v1/urls", &headers, stalled_body(line));
    let r = tokio::time::timeout(Duration::from_secs(15), request).await.expect("answered, not hung");
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    assert_eq!(r.json()["error"], "timeout");
    assert!(r.json()["message"].as_str().unwrap().contains("api.timeout"), "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("5"));
    assert!(started.elapsed() >= Duration::from_secs(1), "not before the limit");
    assert_eq!(app.find(&loc("stalled")).await.status, StatusCode::NOT_FOUND, "an uncommitted batch is not stored");
    // The limit is per request: a prompt one still goes through.
    app.put_paths(&["prompt"]).await;
}

#[tokio::test]
async fn a_json_array_over_max_json_entries_is_413_and_stores_nothing() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_MAX_JSON_ENTRIES", "3")]).await;
    let four: Vec<Value> = (0..4).map(|i| json!({"loc": loc(&format!("e{i}"))})).collect();
    let r = app.put_json(&Value::Array(four.clone())).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert_eq!(r.json()["error"], "payload_too_large");
    assert!(r.json()["message"].as_str().unwrap().contains("max_json_entries (3)"), "{}", r.text());
    assert_eq!(app.find(&loc("e0")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.put_json(&Value::Array(four[..3].to_vec())).await.status, StatusCode::OK);
    let locs: Vec<String> = (0..4).map(|i| loc(&format!("e{i}"))).collect();
    let ct = [("content-type", "application/json")];
    let r = app.request(Method::POST, "/api/v1/urls/delete", &ct, Body::from(json!(locs).to_string())).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert_eq!(app.find(&loc("e0")).await.status, StatusCode::OK, "nothing was deleted");
    // NDJSON has no such limit: it is committed in batches.
    let ndjson: String = (0..10).map(|i| format!("{}\n", json!({"loc": loc(&format!("n{i}"))}))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_json_body_over_max_json_bytes_without_a_length_is_413() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_MAX_JSON_BYTES", "1024")]).await;
    let big: Vec<Value> = (0..40).map(|i| json!({"loc": loc(&format!("p{i}"))})).collect();
    let text = Value::Array(big).to_string();
    assert!(text.len() > 1024);
    // Streamed in small chunks with no Content-Length: the limit is counted as the body arrives.
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        text.as_bytes().chunks(100).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    let body = Body::from_stream(futures_util::stream::iter(chunks));
    let r = app.request(Method::PUT, "/api/v1/urls", &[("content-type", "application/json")], body).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("1024 bytes"), "{}", r.text());
    assert_eq!(app.find(&loc("p0")).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_request_head_is_disconnected() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_HEADER_READ_TIMEOUT", "1s")]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = AppState::new(app.store.clone(), &app.config);
    let server =
        tokio::spawn(sitemapd::serve(state, listener, std::future::pending(), std::time::Duration::from_secs(5)));
    let (ok, cut) = tokio::task::spawn_blocking(move || {
        let ask = |head: &[u8]| {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            // A liveness bound: without a header read timeout, this read would wait for it and fail.
            stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            stream.write_all(head).unwrap();
            let mut response = Vec::new();
            stream.read_to_end(&mut response).map(|_| String::from_utf8_lossy(&response).into_owned())
        };
        let ok = ask(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        // The head never ends (no blank line): the server must close the connection by itself.
        let cut = ask(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
        (ok, cut)
    })
    .await
    .unwrap();
    assert!(ok.unwrap().starts_with("HTTP/1.1 200"), "a complete request is answered");
    let cut = cut.expect("the server closed the connection instead of waiting for the rest of the head");
    assert!(!cut.contains("200 OK"), "{cut}");
    server.abort();
}

/// A JSON body without Content-Length is cut at `max_json_bytes` as it arrives (413), and a body whose stream
/// fails is 400; neither stores anything.
#[tokio::test]
async fn a_streamed_json_body_is_limited_as_it_arrives() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_MAX_JSON_BYTES", "1024")]).await;
    let headers = [("content-type", "application/json")];
    let element = json!({"loc": loc("streamed")}).to_string();
    let mut chunks = vec![Ok::<_, std::io::Error>(Bytes::from(format!("[{element}")))];
    chunks.extend((0..40).map(|_| Ok(Bytes::from(format!(",{element}")))));
    chunks.push(Ok(Bytes::from_static(b"]")));
    let body = Body::from_stream(futures_util::stream::iter(chunks));
    let r = app.request(Method::PUT, "/api/v1/urls", &headers, body).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("exceeds 1024 bytes"), "{}", r.text());

    let failing = vec![Ok(Bytes::from(format!("[{element}"))), Err(std::io::Error::other("the client went away"))];
    let body = Body::from_stream(futures_util::stream::iter(failing));
    let r = app.request(Method::PUT, "/api/v1/urls", &headers, body).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.json()["message"], "could not read the request body");
    assert_eq!(app.find(&loc("streamed")).await.status, StatusCode::NOT_FOUND);
}

/// A JSON array of `n` entries under `prefix`, as text.
fn array_of(prefix: &str, n: usize) -> String {
    let entries: Vec<Value> =
        (0..n).map(|i| json!({"loc": loc(&format!("{prefix}/{i:05}")), "lastmod": "2024-05-01"})).collect();
    Value::Array(entries).to_string()
}

/// The bodies in flight share one memory budget (`body_memory_bytes`), charged as their bytes arrive: while one
/// body holds all one token may, the same token's other large bodies wait briefly, then get 503 `busy` with
/// `Retry-After`, with nothing stored; a small write still goes through (the reserve for small bodies). When the
/// holder ends, the budget is whole again: a body charged all one token may hold goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_memory_budget_are_503_and_the_budget_comes_back() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_BODY_MEMORY_BYTES", "1048576")]).await;
    let budget = &app.state.as_ref().unwrap().body_budget;
    // The holder: 200 kB, sent but its last bytes (charged 448 KiB of the 1 MiB: all one token may hold), then held
    // until the test says.
    let held = array_of("held", 3_000);
    assert!((190_000..250_000).contains(&held.len()), "{}", held.len());
    let (send, receive) = tokio::sync::mpsc::channel::<Bytes>(1);
    let rest = Bytes::from(held.clone()).split_off(held.len() - 10);
    let first = Bytes::from(held.clone()).split_to(held.len() - 10);
    send.send(first).await.unwrap();
    let body = Body::from_stream(futures_util::stream::unfold(receive, |mut receive| async move {
        receive.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), receive))
    }));
    let length = held.len().to_string();
    let headers = [("content-type", "application/json"), ("content-length", length.as_str())];
    let holder = app.request(Method::PUT, "/api/v1/urls", &headers, body);
    tokio::pin!(holder);
    // The holder runs until it waits for the rest of its body.
    let deadline = Instant::now() + Duration::from_secs(10);
    while budget.available_kib() > 1024 - 448 && Instant::now() < deadline {
        assert!(tokio::time::timeout(Duration::from_millis(20), &mut holder).await.is_err(), "it waits for its body");
    }
    assert_eq!(budget.available_kib(), 1024 - 448, "the holder's bytes are charged");

    // Eight more of 200 kB each, at once: none fits beside the holder.
    let others: Vec<String> = (0..8).map(|i| array_of(&format!("other{i}"), 3_000)).collect();
    let answers = futures_util::future::join_all(others.iter().map(|text| {
        let app = &app;
        async move {
            let length = text.len().to_string();
            let headers = [("content-type", "application/json"), ("content-length", length.as_str())];
            app.request(Method::PUT, "/api/v1/urls", &headers, Body::from(text.clone())).await
        }
    }))
    .await;
    for r in &answers {
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
        assert_eq!(r.json()["error"], "busy");
        let message = r.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains("as much of body_memory_bytes as one token may (458752 bytes)"), "{message}");
        assert!(message.contains("nothing of this request was kept or stored"), "{message}");
        assert_eq!(r.header("retry-after"), Some("5"));
    }
    for i in 0..8 {
        assert_eq!(app.find(&loc(&format!("other{i}/00000"))).await.status, StatusCode::NOT_FOUND);
    }
    // A small write is no token's large body: it goes through beside the holder.
    let ndjson = format!("{}\n{}\n", json!({"loc": loc("nd/1")}), json!({"loc": loc("nd/2")}));
    let r = app.put_ndjson(&ndjson).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(app.find(&loc("nd/1")).await.status, StatusCode::OK);

    // The holder finishes and is stored; then the whole budget is free again.
    send.send(rest).await.unwrap();
    drop(send);
    let r = holder.await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["created"], 3_000);
    assert_eq!(budget.available_kib(), 1024);
    let whole = array_of("whole", 6_000); // charged more than one token may hold: all it may
    let r = app.put_json(&serde_json::from_str(&whole).unwrap()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// Over a socket: a body refused for the budget is read to its end (and dropped) before the 503, so a client that
/// sends its whole body before it reads (most do) gets the answer rather than a connection closed under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_answer_reaches_a_client_that_sends_its_whole_body_first() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_BODY_MEMORY_BYTES", "1048576")]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = AppState::new(app.store.clone(), &app.config);
    let charged = state.body_budget.clone();
    let server = tokio::spawn(sitemapd::serve(state, listener, std::future::pending(), Duration::from_secs(5)));
    let answers = tokio::task::spawn_blocking(move || {
        let head = |length: usize| {
            format!(
                "PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \
                 {length}\r\nConnection: close\r\n\r\n"
            )
        };
        // The holder: declares 200 kB, sends 160 kB of it, and waits (it holds all one token may: 448 KiB).
        let mut holder = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        holder.write_all(format!("{}[{}", head(200_000), " ".repeat(160_000)).as_bytes()).unwrap();
        eventually_blocking("the holder's bytes are charged", || charged.available_kib() <= 1024 - 448);
        // 8 MB sent whole, then the answer read.
        let body = array_of("big", 120_000);
        assert!(body.len() > 8_000_000, "{}", body.len());
        let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        client.write_all(head(body.len()).as_bytes()).unwrap();
        let sent = client.write_all(body.as_bytes());
        let mut answer = Vec::new();
        let read = client.read_to_end(&mut answer);
        drop(holder);
        (
            sent.map_err(|e| e.to_string()),
            read.map_err(|e| e.to_string()),
            String::from_utf8_lossy(&answer).into_owned(),
        )
    })
    .await
    .unwrap();
    let (sent, read, answer) = answers;
    assert!(sent.is_ok() && read.is_ok(), "sent: {sent:?}, read: {read:?}, answer: {answer}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"busy\"") && answer.to_ascii_lowercase().contains("retry-after: 5"), "{answer}");
    server.abort();
}
