//! Clients that request pages and never read them, against `serve()` on a loopback port: they must hold neither a
//! page-stream slot nor a database snapshot, and their connections are closed after the write timeout. A client
//! that reads, but below the minimum send rate, is disconnected too.

use std::time::Duration;

use serde_json::json;
use sitemapd::AppState;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, eventually, gunzip, server_closed};

/// Entries per page; two pages. Each loc carries about 1,850 characters of a hash's digits (six bits a character),
/// so that even the gzip of a page (about 6.5 MB of 8.5 MB) is larger than what the server's socket buffer can hold
/// (`net.ipv4.tcp_wmem` allows 4 MB by default) plus the client's.
const PER_PAGE: usize = 4_500;
const WRITE_TIMEOUT_SECS: u64 = 1;

fn digits(i: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    // splitmix64, ten characters from each value.
    (0..185u64)
        .flat_map(|k| {
            let mut z = (i as u64).wrapping_mul(185).wrapping_add(k).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (0..10).map(move |d| ALPHABET[((z >> (6 * d)) & 63) as usize] as char)
        })
        .collect()
}

fn loc(i: usize) -> String {
    format!("{PUBLIC_URL}/slow/{i:05}/{}", digits(i))
}

struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn content_length(&self) -> usize {
        self.header("content-length").expect("a Content-Length").parse().unwrap()
    }
}

fn request(method: &str, path: &str, headers: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One request on a connection of its own, read to its end (bounded in time, for liveness only).
async fn ask(port: u16, method: &str, path: &str, headers: &str, body: &str) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request(method, path, headers, body).as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut raw))
        .await
        .expect("answered, not hung")
        .expect("read the answer");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete head") + 4;
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    Answer { status, head, body: raw[split..].to_vec() }
}

/// A connection with a small receive buffer that sends `path`'s request, reads the status line and then nothing.
async fn never_read(port: u16, path: &str, headers: &str) -> (TcpStream, String) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    stream.write_all(request("GET", path, headers, "").as_bytes()).await.unwrap();
    let mut status = [0; 12];
    stream.read_exact(&mut status).await.unwrap();
    (stream, format!("{path} {headers:?}: {}", String::from_utf8_lossy(&status)))
}

/// Reads what is left of a never-read answer: what the socket buffers held, then the end of a closed connection
/// (a reset, when the server discarded what it could not send, is a close too). The body's declared length and
/// the body bytes that arrived.
async fn rest(mut stream: TcpStream) -> (usize, usize) {
    let mut raw = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf)).await;
        match read.expect("the server closed the connection; without a write timeout it would send the rest") {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("the rest of the head arrived") + 4;
    let head = Answer { status: 200, head: String::from_utf8(raw[..split].to_vec()).unwrap(), body: Vec::new() };
    (head.content_length(), raw.len() - split)
}

async fn never_reading_clients_hold_no_slot_and_are_disconnected(b: Backend) {
    let write_timeout = format!("{WRITE_TIMEOUT_SECS}s");
    let vars = [
        // Three page-stream slots, a 1 s wait for one (then 503), and the default 60 s stream timeout.
        ("SITEMAPD_DB_MAX_CONNECTIONS", "4"),
        ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s"),
        ("SITEMAPD_PAGE_MAX_URLS", "4500"),
        ("SITEMAPD_WRITE_TIMEOUT", write_timeout.as_str()),
        ("SITEMAPD_STATE_TTL", "0s"),
    ];
    let app = TestApp::spawn(b, &vars).await;
    let ndjson: String = (0..2 * PER_PAGE).map(|i| format!("{}\n", json!({"loc": loc(i)}))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, axum::http::StatusCode::OK);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = AppState::new(app.store.clone(), &app.config);
    let server = tokio::spawn(sitemapd::serve(state, listener, std::future::pending(), Duration::from_secs(5)));

    // Twice as many never-reading connections as there are slots, for both pages, identity and gzip.
    let gzip = "Accept-Encoding: gzip\r\n";
    let mut stalled = Vec::new();
    for page in [1, 2, 1, 2] {
        let path = format!("/sitemap-{page}.xml");
        stalled.push(never_read(port, &path, "").await);
        stalled.push(never_read(port, &path, gzip).await);
    }

    // Meanwhile another client gets every page whole, in both representations, and a changed page too.
    let plain = ask(port, "GET", "/sitemap-1.xml", "", "").await;
    assert_eq!(plain.status, 200, "{}", plain.head);
    assert_eq!(plain.body.len(), plain.content_length());
    assert!(plain.body.len() > 8_000_000, "{} bytes", plain.body.len());
    let zipped = ask(port, "GET", "/sitemap-2.xml", gzip, "").await;
    assert_eq!(zipped.status, 200, "{}", zipped.head);
    assert!(zipped.body.len() > 6_000_000, "{} gzip bytes", zipped.body.len());
    let ct = "Content-Type: application/json\r\n";
    let change = json!([{"loc": loc(PER_PAGE + 7), "priority": 0.3}]);
    let put = ask(port, "PUT", "/api/v1/urls", ct, &change.to_string()).await;
    assert_eq!(put.status, 200, "{}", String::from_utf8_lossy(&put.body));
    for headers in [gzip, ""] {
        let page = ask(port, "GET", "/sitemap-2.xml", headers, "").await;
        assert_eq!(page.status, 200, "changed page, {headers:?}: {}", page.head);
        assert_eq!(page.body.len(), page.content_length());
        let text = if headers.is_empty() { String::from_utf8(page.body.clone()).unwrap() } else { gunzip(&page.body) };
        assert!(text.contains("<priority>0.3</priority>"));
        assert_ne!(page.header("etag"), zipped.header("etag"));
    }

    // Past the write timeout, the server closes each stalled connection (its end leaves ESTABLISHED, seen in the
    // kernel's table without a read, which would let the write go on), with its answer cut short: what arrives is
    // what the socket buffers held, far less than the page.
    for (stream, _) in &stalled {
        let client = stream.local_addr().unwrap().port();
        eventually("the server closes a never-read connection", || async { server_closed(port, client) }).await;
    }
    for (stream, status) in stalled {
        assert!(status.ends_with("HTTP/1.1 200"), "{status}");
        let (length, got) = rest(stream).await;
        assert!(got < length, "a never-read answer was cut off, not kept until read: {got} of {length} bytes arrived");
    }
    server.abort();
}

both_backends!(never_reading_clients_hold_no_slot_and_are_disconnected);

/// A client that reads, but below `min_send_rate`: 64 KiB every 5 ms through a 4 KiB receive buffer takes about
/// 0.5 MB/s on loopback, often enough that no write waits for the 3 s write timeout; the floor is 4 MB/s. Without
/// the floor it gets the whole 8.5 MB page (in about 15 s); with it, the connection is closed after a window of
/// waiting and what arrives is what was sent before (and the socket buffers held). SQLite only: the floor is the
/// connection's, whatever the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reading_below_the_minimum_send_rate_is_disconnected() {
    let vars =
        [("SITEMAPD_PAGE_MAX_URLS", "4500"), ("SITEMAPD_WRITE_TIMEOUT", "3s"), ("SITEMAPD_MIN_SEND_RATE", "4000000")];
    let app = TestApp::spawn(Backend::Sqlite, &vars).await;
    let ndjson: String = (0..PER_PAGE).map(|i| format!("{}\n", json!({"loc": loc(i)}))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, axum::http::StatusCode::OK);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = AppState::new(app.store.clone(), &app.config);
    let server = tokio::spawn(sitemapd::serve(state, listener, std::future::pending(), Duration::from_secs(5)));

    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    stream.write_all(request("GET", "/sitemap-1.xml", "", "").as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        // Not a gate: the pause between reads is the slow reader's pace, what the floor is about.
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(tokio::time::Instant::now() < deadline, "still open after 60 s with {} bytes read", raw.len());
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete head") + 4;
    let head = Answer { status: 200, head: String::from_utf8(raw[..split].to_vec()).unwrap(), body: Vec::new() };
    let (length, got) = (head.content_length(), raw.len() - split);
    assert!(length > 8_000_000, "{length}");
    assert!(got < length, "an answer read below min_send_rate was cut off: {got} of {length} bytes arrived");
    server.abort();
}
