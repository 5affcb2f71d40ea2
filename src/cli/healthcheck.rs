//! `sitemapd healthcheck`: exit 0 when the server on the configured address answers `GET /healthz` with 200
//! within 3 seconds, for container health checks (the image needs no HTTP client).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `GET /healthz` over HTTP/1.0 on `bind` (a wildcard address is reached on the loopback address of its family).
pub(crate) async fn healthcheck(bind: SocketAddr) -> anyhow::Result<()> {
    let mut addr = bind;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let probe = async {
        let mut stream = TcpStream::connect(addr).await.with_context(|| format!("cannot connect to {addr}"))?;
        stream.write_all(format!("GET /healthz HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
        // The status line is all that matters; the answer is a few hundred bytes.
        let mut response = Vec::new();
        stream.take(4096).read_to_end(&mut response).await?;
        let response = String::from_utf8_lossy(&response);
        let status_line = response.lines().next().unwrap_or_default();
        match status_line.split(' ').nth(1) {
            Some("200") => Ok(()),
            _ => anyhow::bail!("http://{addr}/healthz answered {status_line:?}"),
        }
    };
    tokio::time::timeout(Duration::from_secs(3), probe)
        .await
        .with_context(|| format!("no answer from http://{addr}/healthz within 3 seconds"))?
}
