//! The outgoing HTTP client's common part (IndexNow and WebSub notifications, `sitemapd import`): rustls with the *ring*
//! provider and the root certificates compiled in (webpki-roots), as the Postgres driver's TLS, so the binary needs
//! no CA files and links one crypto library; a `User-Agent` naming sitemapd and its version.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;

/// `sitemapd/<version>`.
pub const USER_AGENT: &str = concat!("sitemapd/", env!("CARGO_PKG_VERSION"));

/// A client builder with TLS and the `User-Agent` set; timeouts and redirects are the caller's.
pub fn builder() -> anyhow::Result<reqwest::ClientBuilder> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS configuration")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(reqwest::Client::builder().tls_backend_preconfigured(tls).user_agent(USER_AGENT))
}

/// The client of a notification (IndexNow, WebSub): every request bounded by `timeout` (connecting by at most 10 s
/// of it). It follows no redirect: a 302 or 303 would turn the `POST` into a bodiless `GET`, and a 307 or 308 would
/// tell whatever host the endpoint names. A 3xx is an answer.
pub fn notifier(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    builder()?
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .build()
        .context("cannot build the HTTP client")
}

/// An error and its causes, `: `-separated (reqwest's own message names only the URL).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut shown = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        shown.push_str(": ");
        shown.push_str(&cause.to_string());
        source = cause.source();
    }
    shown
}

/// `Retry-After` as delta-seconds or an HTTP date (RFC 9110 §10.2.3), as a delay from `now`; `None` when it is
/// neither.
pub fn retry_after(value: &reqwest::header::HeaderValue, now: SystemTime) -> Option<Duration> {
    let value = value.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notifier_builds_with_the_preconfigured_tls() {
        notifier(Duration::from_secs(5)).expect("reqwest takes the rustls configuration");
    }
}
