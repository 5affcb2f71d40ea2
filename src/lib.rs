//! sitemapd: keeps a website's URL records in a database and serves its sitemaps.org sitemaps.
//!
//! Request flow: `app` routes `/sitemap*.xml[.gz]` to [`sitemap`] and `/api/v1/*` to [`api`]; both reach the
//! database only through the [`store::Store`] trait, whose write path delegates page assignment to
//! [`pagination`]. See ARCHITECTURE.md.

pub mod api;
pub mod config;
pub mod domain;
pub mod error;
pub mod pagination;
pub mod sitemap;
pub mod state;
pub mod store;

use std::future::Future;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

use crate::error::ApiError;
pub use crate::state::AppState;

/// The whole service as a router: sitemaps, the write API, and health checks.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(sitemap::router())
        .merge(api::router(state.clone()))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { ApiError::not_found("no such resource") })
        .with_state(state)
        .layer(CatchPanicLayer::custom(|_| {
            tracing::error!("a request handler panicked");
            ApiError::internal().into_response()
        }))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request| {
                    // The matched route as the span's field, so logs group by route, not by raw path.
                    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str);
                    tracing::info_span!("request", method = %request.method(), route, uri = %request.uri())
                })
                // One line per answered request, with its status and latency.
                .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
        )
}

/// Serves `app(state)` on `listener` until `shutdown` completes, then finishes in-flight requests.
///
/// hyper's HTTP/1 server directly rather than `axum::serve`, which cannot bound the time a client takes to send its
/// request head: here a connection that has not sent a complete head within `header_read_timeout` is closed, so
/// idle or trickling clients cannot hold connections open. Graceful shutdown as `axum::serve` does it: stop
/// accepting, let each connection finish its request in flight, then close.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;

    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(state.header_read_timeout);
    let service = TowerToHyperService::new(app(state));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin; the listener itself stays.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service.clone()));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// 200 while the process runs.
async fn healthz() -> &'static str {
    "ok\n"
}

/// 200 when the store answers, else 503 (whatever the reason: a wrong password is as unready as a dead host).
async fn readyz(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: the store does not answer");
            ApiError::unavailable().into_response()
        }
    }
}
