//! The router and the serving loops: `app()` (every route under one front layer), `serve()` on the calling
//! runtime and `serve_threads()` (a runtime per thread), over hyper's HTTP/1 server with the connection's guards
//! ([`crate::net`]).

use std::future::Future;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use tokio::net::TcpListener;
use tower_http::metrics::InFlightRequestsLayer;
use tower_layer::Layer;

use crate::error::ApiError;
use crate::net::{line_ends, send_rate};
use crate::state::AppState;
use crate::{api, config, feed, indexnow, telemetry, view};

/// The whole service as a router: sitemaps, the write API, the HTML view (when on), `/metrics`, and health checks.
pub fn app(state: AppState) -> Router {
    // Installs the metrics recorder before the first request is counted.
    telemetry::prometheus();
    let view = if state.config.sitemaps.view { view::router() } else { Router::new() };
    let access_log = state.config.log.access;
    Router::new()
        .merge(feed::router(state.clone()))
        .merge(api::router(state.clone()))
        .merge(view)
        .merge(indexnow::router(&indexnow::targets(&state.config, &state.sites)))
        .route("/metrics", get(telemetry::scrape::get_metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { ApiError::not_found("no such resource") })
        .with_state(state)
        // One layer, not four: each layer of a router is a boxed service that every request clones, with all the
        // layers inside it, so their cost grows with the square of their number (BENCHMARKS.md, "Figures formerly
        // in code comments").
        .layer(middleware::from_fn_with_state(access_log, front))
}

/// What every request passes through, outermost first: its span ([`telemetry::request_span`]; no header is
/// recorded, so the Authorization header never reaches a log), its metrics and `answered` line
/// ([`telemetry::track_requests`], outside the panic catch so that a panic counts as the 500 it is answered
/// with), the panic catch (500), and the one-`Host` rule ([`require_one_host`]).
async fn front(
    State(access_log): State<telemetry::AccessLog>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    use futures_util::FutureExt;
    use tracing::Instrument;

    let span = telemetry::request_span(&request, access_log);
    let answer = telemetry::track_requests(access_log, request, |request| {
        std::panic::AssertUnwindSafe(require_one_host(request, next)).catch_unwind().map(|answer| {
            answer.unwrap_or_else(|_| {
                tracing::error!("a request handler panicked");
                ApiError::internal().into_response()
            })
        })
    });
    answer.instrument(span).await
}

/// RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without `Host`, and to any request with more than
/// one `Host` line or an invalid one. An HTTP/1.0 request without `Host` is served: HTTP/1.0 did not require it.
async fn require_one_host(request: axum::extract::Request, next: middleware::Next) -> Response {
    use axum::http::{Version, header};
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let problem = match (hosts.next(), hosts.next()) {
        (None, _) if request.version() >= Version::HTTP_11 => Some("an HTTP/1.1 request needs a Host header"),
        (None, _) => None,
        (Some(_), Some(_)) => Some("more than one Host header"),
        (Some(host), None) if !valid_host(host.as_bytes()) => Some("the Host header is not a host[:port]"),
        (Some(_), None) => None,
    };
    match problem {
        Some(problem) => ApiError::bad_request(format!("{problem} (RFC 9112, section 3.2)")).into_response(),
        None => next.run(request).await,
    }
}

/// `Host = uri-host [ ":" port ]` (RFC 9110 §7.2), an empty value included. No userinfo, path, query or space.
fn valid_host(value: &[u8]) -> bool {
    value.is_empty()
        || (!value.contains(&b'@')
            && std::str::from_utf8(value).is_ok_and(|v| v.parse::<axum::http::uri::Authority>().is_ok()))
}

/// Serves `app(state)` on `listener` until `shutdown` completes. Then it stops accepting connections, closes idle
/// ones, and lets the requests in flight finish, for at most `grace`: the requests still running then are cut off
/// (their connections close when the runtime ends) and it returns `Ok` all the same.
///
/// hyper's HTTP/1 server directly rather than `axum::serve`, which cannot bound the time a client takes to send its
/// request head: here a connection that has not sent a complete head within `header_read_timeout` is closed, so
/// idle or trickling clients cannot hold connections open. Likewise a connection whose client accepts no bytes of
/// a response for `write_timeout` (a write pending that long) is closed, and the response it held is dropped; so
/// is one that takes fewer than `min_send_rate` bytes a second while a response waits for it ([`send_rate`]). A
/// request head with a line that ends in a bare LF is refused with 400 ([`line_ends`]).
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let connections = Connections::new(&state.config);
    let service = app(state);
    connections.accept(service, listener, shutdown, grace).await;
    Ok(())
}

/// How each accepted connection is served: hyper's HTTP/1 settings and the wrappers of the socket (see [`serve`]).
struct Connections {
    http: hyper::server::conn::http1::Builder,
    write_timeout: Duration,
    min_send_rate: u64,
}

impl Connections {
    fn new(config: &config::Config) -> Self {
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(config.http.header_read_timeout);
        Self { http, write_timeout: config.http.write_timeout, min_send_rate: config.http.min_send_rate }
    }

    /// Accepts on `listener` and serves each connection in a task of the current runtime, until `shutdown`; then
    /// lets the requests in flight finish for at most `grace`.
    async fn accept(
        &self,
        service: Router,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) {
        use hyper_util::rt::TokioIo;
        use hyper_util::server::graceful::GracefulShutdown;
        use hyper_util::service::TowerToHyperService;

        // Counts a request from its arrival until its response body has been sent or dropped.
        let (in_flight, counter) = InFlightRequestsLayer::pair();
        let service = service.layer(in_flight);
        let graceful = GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait rather than spin; the listener itself stays.
                        tracing::warn!(error = %e, "cannot accept a connection");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let (stream, peer) = stream;
            // Without it, a response that ends in a partial segment (most bodies) can wait for the client's delayed
            // ACK (40 ms on Linux) before its last bytes leave. A socket that cannot take it is served as it is.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            // The peer's address, for the handlers that believe forwarding headers from trusted proxies only.
            let service = TowerToHyperService::new(Extension(ConnectInfo(peer)).layer(service.clone()));
            let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
            stream.set_write_timeout(Some(self.write_timeout));
            let stream = send_rate::MinSendRate::new(Box::pin(stream), self.min_send_rate, self.write_timeout);
            // A request head whose lines end in a bare LF is refused (400), as a proxy in front may read it otherwise.
            let stream = line_ends::StrictLineEnds::new(stream);
            let connection = graceful.watch(self.http.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
            tracing::warn!(
                cut_off = counter.get(),
                grace_secs = grace.as_secs(),
                "shutdown grace period over: cutting off the requests still in flight"
            );
        }
    }
}

/// Serves as [`serve`] does, from `threads` threads (at least one), each running a single-threaded runtime of its
/// own that accepts on its own handle of `listener` and serves the connections it accepted, start to end: no
/// connection, request or wake-up is handed between threads (the shape of nginx's workers). A thread that is busy
/// accepts later, so the idle ones take the new connections. Returns once `shutdown` has completed and every thread
/// has finished its requests in flight (each within `grace`).
///
/// The threads and their runtimes live on until [`Served::release`]: a pooled database connection opened by a
/// request on one of them is driven by that runtime's reactor, so the store must be closed before they end.
pub async fn serve_threads(
    state: AppState,
    listener: std::net::TcpListener,
    threads: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<Served> {
    use tokio_util::sync::CancellationToken;

    listener.set_nonblocking(true)?;
    let stop = CancellationToken::new();
    let (release, released) = tokio::sync::watch::channel(false);
    let mut handles = Vec::new();
    let mut finished = Vec::new();
    for n in 0..threads.max(1) {
        let (listener, state, stop, mut released) =
            (listener.try_clone()?, state.clone(), stop.clone(), released.clone());
        let (done, finish) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = std::thread::Builder::new().name(format!("serve-{n}")).spawn(move || {
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener)?;
                let connections = Connections::new(&state.config);
                connections.accept(app(state), listener, stop.cancelled_owned(), grace).await;
                std::io::Result::Ok(())
            })?;
            drop(done);
            runtime.block_on(async move {
                let _ = released.wait_for(|released| *released).await;
            });
            Ok(())
        })?;
        handles.push(handle);
        finished.push(finish);
    }
    drop(listener);
    shutdown.await;
    stop.cancel();
    for finish in finished {
        let _ = finish.await;
    }
    Ok(Served { release, handles })
}

/// The serving threads of [`serve_threads`], done serving and waiting to end.
pub struct Served {
    release: tokio::sync::watch::Sender<bool>,
    handles: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Served {
    /// Ends the threads (after the store is closed) and returns the first error one of them met, if any.
    pub async fn release(self) -> std::io::Result<()> {
        let _ = self.release.send(true);
        let handles = self.handles;
        tokio::task::spawn_blocking(move || {
            handles.into_iter().map(|h| h.join().unwrap_or(Ok(()))).collect::<std::io::Result<Vec<()>>>()
        })
        .await
        .unwrap_or(Ok(Vec::new()))
        .map(drop)
    }
}

/// 200 while the process runs.
async fn healthz() -> &'static str {
    "ok\n"
}

/// 200 when the store answers, else 503 (whatever the reason: a wrong password is as unready as a dead host).
async fn readyz(State(state): State<AppState>) -> Response {
    match state.reads().ping().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: the store does not answer");
            ApiError::unavailable().into_response()
        }
    }
}
