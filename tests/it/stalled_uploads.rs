//! Stalled and trickling uploads over real sockets: they hold only what they sent of the body memory budget, are
//! cut with 408 at the idle limit or below the minimum receive rate (their share freed), and never keep another
//! site's one-entry writes, the sitemaps or an honest large upload from going through.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sitemapd::AppState;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::both_backends;
use crate::support::{Backend, TestApp, note, urlencode};

const SITES: &str = "www=https://www.example.com/, shop=https://shop.example.com/";
/// Site `www`'s token sends the stalled and slow uploads; site `shop`'s the small writes.
const TOKENS: &str = "www=token-www, shop=token-shop";

/// The real server on a loopback port, and its state (to read the body budget).
async fn serve(app: &TestApp) -> (u16, AppState, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = AppState::new(app.store.clone(), &app.config);
    let server = tokio::spawn(sitemapd::serve(state.clone(), listener, std::future::pending(), Duration::from_secs(5)));
    (port, state, server)
}

/// The head of a chunked `PUT /api/v1/urls`.
fn chunked_head(token: &str, content_type: &str) -> String {
    format!(
        "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: \
         {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// An upload that sends its head and `first` bytes of body, then nothing.
async fn stalled(port: u16, token: &str, content_type: &str, first: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(chunked_head(token, content_type).as_bytes()).await.unwrap();
    if !first.is_empty() {
        stream.write_all(&chunk(first)).await.unwrap();
    }
    stream
}

/// An answer read from `stream`: its status and body, or `None` if none came within `within`.
async fn answer(stream: &mut (impl AsyncRead + Unpin), within: Duration) -> Option<(u16, String)> {
    let read = async {
        let mut raw = Vec::new();
        let mut buf = [0; 8192];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if raw.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    return Some((status, String::from_utf8_lossy(&raw[end + 4..end + 4 + length]).into_owned()));
                }
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok().flatten()
}

/// A write over a connection of its own: its status, body and how long the answer took.
async fn put(port: u16, token: &str, body: &[u8]) -> (u16, String, Duration) {
    let head = format!(
        "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    send(port, head, body).await
}

/// `GET path` of `host`'s sitemaps.
async fn get(port: u16, host: &str, path: &str) -> (u16, String, Duration) {
    send(port, format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"), b"").await
}

async fn send(port: u16, head: String, body: &[u8]) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let (status, text) = answer(&mut stream, Duration::from_secs(60)).await.expect("an answer");
    (status, text, started.elapsed())
}

fn one_entry(site: &str, i: usize) -> Vec<u8> {
    json!([{"loc": format!("https://{site}.example.com/one/{i}")}]).to_string().into_bytes()
}

fn array_of(site: &str, prefix: &str, n: usize) -> Vec<u8> {
    let entries: Vec<Value> =
        (0..n).map(|i| json!({"loc": format!("https://{site}.example.com/{prefix}/{i:06}")})).collect();
    Value::Array(entries).to_string().into_bytes()
}

/// Polls `check` until it holds, for at most `within`.
async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// With the default budget (192 MiB) and idle limit: four uploads that sent their headers and no body, thirty that
/// send 1 KB a second, and two that sent 8 MiB and stalled, all of site `www`'s token, are in flight; site `shop`'s
/// ten one-entry writes are all accepted, the sitemaps answer, and a large honest upload of `www`'s goes through.
async fn stalled_and_slow_uploads_stop_no_other_write(b: Backend) {
    // No cut for pace here (the longest idle limit, no minimum rate): the uploads stay in flight, and what keeps
    // the writes going is the budget alone.
    let vars = [
        ("SITEMAPD_SITES", SITES),
        ("SITEMAPD_API_TOKENS", TOKENS),
        ("SITEMAPD_BODY_IDLE", "300s"),
        ("SITEMAPD_MIN_RECEIVE_RATE", "0"),
    ];
    let app = TestApp::spawn(b, &vars).await;
    let (port, state, server) = serve(&app).await;
    let (status, text, _) = put(port, "token-shop", &one_entry("shop", 1000)).await;
    assert_eq!(status, 200, "{text}");
    let total = state.body_budget.available_kib();

    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(stalled(port, "token-www", "application/json", b"").await);
    }
    for _ in 0..2 {
        let mut big = b"[".to_vec();
        big.extend(std::iter::repeat_n(b' ', 8 << 20));
        held.push(stalled(port, "token-www", "application/json", &big).await);
    }
    // Thirty uploads at 1 KB a second (a JSON array and NDJSON lines), for as long as the test runs.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut drips = Vec::new();
    for i in 0..30 {
        let content_type = if i % 2 == 0 { "application/json" } else { "application/x-ndjson" };
        let mut stream = stalled(port, "token-www", content_type, b"").await;
        let mut stopped = stopped.clone();
        drips.push(tokio::spawn(async move {
            let line = format!("{}\n", json!({"loc": format!("https://www.example.com/drip/{i}/{}", "x".repeat(960))}));
            while !*stopped.borrow() {
                if stream.write_all(&chunk(line.as_bytes())).await.is_err() {
                    break;
                }
                let _ = tokio::time::timeout(Duration::from_secs(1), stopped.changed()).await;
            }
        }));
    }
    assert!(
        eventually(Duration::from_secs(20), || state.body_budget.available_kib() < total - 40_000).await,
        "the 8 MiB uploads are read and held: {} of {total} KiB free",
        state.body_budget.available_kib()
    );

    let mut accepted = 0;
    let mut slowest = Duration::ZERO;
    for i in 0..10 {
        let (status, text, took) = put(port, "token-shop", &one_entry("shop", i)).await;
        if status == 200 {
            accepted += 1;
        } else {
            note(&format!("one-entry write {i}: {status} after {took:?}: {text}"));
        }
        slowest = slowest.max(took);
    }
    let (index, xml, _) = get(port, "shop.example.com", "/sitemap.xml").await;
    note(&format!(
        "{b:?}: {accepted} of 10 one-entry writes accepted beside 36 stalled or slow uploads (slowest {slowest:?}); \
         {} of {total} KiB of the budget free",
        state.body_budget.available_kib()
    ));
    assert_eq!(accepted, 10, "one-entry writes accepted beside stalled and slow uploads");
    assert_eq!(index, 200, "{xml}");
    let (page, xml, _) = get(port, "shop.example.com", "/sitemap-1.xml").await;
    assert_eq!(page, 200, "{xml}");
    assert!(xml.contains("https://shop.example.com/one/9"), "{xml}");

    // A large honest upload of the token whose uploads are stalled: 30,000 entries, about 2 MB.
    let large = array_of("www", "large", 30_000);
    let (status, text, _) = put(port, "token-www", &large).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["created"], 30_000);

    stop.send(true).unwrap();
    for drip in drips {
        drip.await.unwrap();
    }
    drop(held);
    assert!(
        eventually(Duration::from_secs(30), || state.body_budget.available_kib() == total).await,
        "every share is given back: {} of {total} KiB",
        state.body_budget.available_kib()
    );
    server.abort();
}

/// With a 1 s idle limit and a 1 MiB budget: a JSON upload that sent 200 kB and stalled holds its share until it
/// is cut with 408, then the share is free again and a large write fits; an NDJSON upload that stalls after two
/// lines is cut the same way, its two lines committed; one that trickles under the minimum rate is cut too.
async fn a_stalled_body_is_cut_with_408_and_its_share_freed(b: Backend) {
    let vars = [
        ("SITEMAPD_SITES", SITES),
        ("SITEMAPD_API_TOKENS", TOKENS),
        ("SITEMAPD_BODY_MEMORY_BYTES", "1048576"),
        ("SITEMAPD_BODY_IDLE", "1s"),
        ("SITEMAPD_API_TIMEOUT", "30s"),
    ];
    let app = TestApp::spawn(b, &vars).await;
    let (port, state, server) = serve(&app).await;
    let total = state.body_budget.available_kib();

    let started = Instant::now();
    let body = array_of("www", "held", 4_500);
    let mut holder = stalled(port, "token-www", "application/json", &body[..200_000]).await;
    assert!(
        eventually(Duration::from_secs(10), || state.body_budget.available_kib() <= total - 440).await,
        "the 200 kB sent are charged: {} of {total} KiB free",
        state.body_budget.available_kib()
    );
    let (status, text) = answer(&mut holder, Duration::from_secs(20)).await.expect("an answer to the stalled upload");
    let waited = started.elapsed();
    assert_eq!(status, 408, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"], "request_timeout");
    assert!(error["message"].as_str().unwrap().contains("api.body_idle"), "{text}");
    assert!(waited >= Duration::from_secs(1), "not before the idle limit: {waited:?}");
    assert!(
        eventually(Duration::from_secs(5), || state.body_budget.available_kib() == total).await,
        "the share is freed: {} of {total} KiB",
        state.body_budget.available_kib()
    );
    // The budget is whole: a write charged all one token may hold goes through.
    let (status, text, _) = put(port, "token-shop", &array_of("shop", "big", 4_500)).await;
    assert_eq!(status, 200, "{text}");

    // NDJSON: two lines, then nothing. The lines before the cut are committed.
    let lines: String =
        (0..2).map(|i| format!("{}\n", json!({"loc": format!("https://www.example.com/nd/{i}")}))).collect();
    let mut nd = stalled(port, "token-www", "application/x-ndjson", lines.as_bytes()).await;
    let (status, text) = answer(&mut nd, Duration::from_secs(20)).await.expect("an answer to the stalled NDJSON");
    assert_eq!(status, 408, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((error["line"].clone(), error["committed"].clone()), (json!(3), json!(2)), "{text}");
    let find = format!(
        "GET /api/v1/urls?loc={} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer token-www\r\nConnection: \
         close\r\n\r\n",
        urlencode("https://www.example.com/nd/1")
    );
    let (status, text, _) = send(port, find, b"").await;
    assert_eq!(status, 200, "the lines before the cut are stored: {text}");

    // Under the minimum rate (2,048 bytes a second over each 1 s of waiting): 100 bytes every 200 ms.
    let (mut read, mut write) = stalled(port, "token-www", "application/json", b"[").await.into_split();
    let drip = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if write.write_all(&chunk(&[b' '; 100])).await.is_err() {
                break;
            }
        }
    });
    let mut answered = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), read.read_to_string(&mut answered)).await;
    drip.abort();
    assert!(answered.starts_with("HTTP/1.1 408"), "{answered}");
    assert!(answered.contains("min_receive_rate"), "{answered}");
    assert!(
        eventually(Duration::from_secs(5), || state.body_budget.available_kib() == total).await,
        "every share is freed: {} of {total} KiB",
        state.body_budget.available_kib()
    );
    server.abort();
}

both_backends!(stalled_and_slow_uploads_stop_no_other_write, a_stalled_body_is_cut_with_408_and_its_share_freed);
