//! Which site a crawler's request is for: its `Host`, or, from a trusted proxy only, the host the proxy says the
//! client asked for (`Forwarded: host=`, RFC 7239, else `X-Forwarded-Host`). From any other peer the forwarding
//! headers are ignored: a client could otherwise read another site's sitemaps by naming its host.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use crate::domain::{Site, Sites};
use crate::error::ApiError;

/// What a request's site is found with: the sites, and whom to believe about the host (`trusted_proxies`,
/// `forwarded_header`). A router's state gives it ([`AsRef`]) so that its handlers may extract [`RequestSite`].
#[derive(Clone, Debug)]
pub struct Hosts {
    pub sites: Arc<Sites>,
    pub trusted_proxies: TrustedProxies,
    pub forwarded_header: ForwardedHeader,
}

/// The site a request is for (extracted: 404 when its host is not a configured site's).
pub struct RequestSite(pub Site);

impl<S: AsRef<Hosts> + Send + Sync> FromRequestParts<S> for RequestSite {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let hosts = state.as_ref();
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
        let trusted = peer.is_some_and(|ip| hosts.trusted_proxies.trusts(ip));
        let from_proxy = trusted.then_some(hosts.forwarded_header);
        let host = request_host(parts.uri.authority().map(|a| a.as_str()), &parts.headers, from_proxy);
        match hosts.sites.for_host(host.as_deref()) {
            Some(site) => Ok(Self(site.clone())),
            None => Err(ApiError::not_found("no site is configured for this host")),
        }
    }
}

/// The peers whose forwarding headers are believed (`trusted_proxies`: comma-separated IP addresses or CIDR
/// networks). Empty: none; the `Host` header alone picks the site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// `trusted_proxies` as configured; the error is what the setting's message says after its name.
    pub fn parse(raw: &str) -> Result<Self, String> {
        raw.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.parse::<ipnet::IpNet>()
                    .or_else(|_| p.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| format!("{p:?} is not an IP address or a CIDR network"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether a request from `peer` may name its host in `Forwarded` / `X-Forwarded-Host`. An IPv4 peer seen as
    /// an IPv4-mapped IPv6 address (a dual-stack listener) is compared as IPv4.
    pub fn trusts(&self, peer: std::net::IpAddr) -> bool {
        let peer = match peer {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|net| net.contains(&peer))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As logged: each address or network.
    pub fn shown(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

/// The one header a trusted proxy's host is read from: `X-Forwarded-Host` (its last value) or `Forwarded`
/// (`host=` of its last element). Only one is believed, so that a header the client sent and the proxy passed on
/// unchanged cannot name the host instead of the one the proxy set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardedHeader {
    XForwardedHost,
    Forwarded,
}

/// The host a request names. From a trusted proxy, the host the proxy names in `header` (only that one: the other
/// may be the client's): the last `Forwarded` element's `host`, or the last `X-Forwarded-Host` value. Else the
/// authority of an absolute-form request target (RFC 9112 §3.2.2: it wins over `Host`), else `Host`.
pub fn request_host(target: Option<&str>, headers: &HeaderMap, from_proxy: Option<ForwardedHeader>) -> Option<String> {
    match from_proxy {
        Some(ForwardedHeader::Forwarded) => {
            if let Some(host) = last_value(headers, "forwarded").and_then(forwarded_host) {
                return Some(host);
            }
        }
        Some(ForwardedHeader::XForwardedHost) => {
            if let Some(host) = last_value(headers, "x-forwarded-host").map(str::trim).filter(|h| !h.is_empty()) {
                return Some(host.to_owned());
            }
        }
        None => {}
    }
    if let Some(authority) = target {
        return Some(authority.to_owned());
    }
    headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// The last comma-separated element of the last line of header `name`.
fn last_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let line = headers.get_all(name).iter().next_back()?.to_str().ok()?;
    line.rsplit(',').next()
}

/// The `host` parameter of one `Forwarded` element (`for=…;host=…;proto=…`), unquoted.
fn forwarded_host(element: &str) -> Option<String> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("host") {
            return None;
        }
        let value = value.trim();
        let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
        Some(value.replace("\\\"", "\"")).filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_static(value));
        }
        h
    }

    const XFH: Option<ForwardedHeader> = Some(ForwardedHeader::XForwardedHost);
    const FWD: Option<ForwardedHeader> = Some(ForwardedHeader::Forwarded);

    #[test]
    fn only_a_trusted_proxy_names_the_host() {
        let h = headers(&[("host", "a.test"), ("x-forwarded-host", "b.test")]);
        assert_eq!(request_host(None, &h, None).as_deref(), Some("a.test"));
        assert_eq!(request_host(None, &h, XFH).as_deref(), Some("b.test"));
    }

    #[test]
    fn only_the_configured_header_counts() {
        let h = headers(&[
            ("host", "a.test"),
            ("x-forwarded-host", "b.test"),
            ("forwarded", "for=1.2.3.4;host=evil.test, for=10.0.0.1;host=\"shop.example.com\";proto=https"),
        ]);
        assert_eq!(request_host(None, &h, XFH).as_deref(), Some("b.test"), "a client's Forwarded is not read");
        assert_eq!(request_host(None, &h, FWD).as_deref(), Some("shop.example.com"), "its last element");
        let h = headers(&[("host", "a.test"), ("forwarded", "for=10.0.0.1;proto=https"), ("x-forwarded-host", "x")]);
        assert_eq!(request_host(None, &h, FWD).as_deref(), Some("a.test"), "no host= in it: Host, not the other");
    }

    #[test]
    fn the_last_line_and_value_of_x_forwarded_host() {
        let h = headers(&[("host", "a.test"), ("x-forwarded-host", "x.test"), ("x-forwarded-host", "y.test, z.test")]);
        assert_eq!(request_host(None, &h, XFH).as_deref(), Some("z.test"));
    }

    #[test]
    fn an_absolute_form_target_wins_over_host() {
        let h = headers(&[("host", "shop.example.com")]);
        assert_eq!(request_host(Some("www.example.com"), &h, None).as_deref(), Some("www.example.com"));
        let h = headers(&[("host", "a.test"), ("x-forwarded-host", "b.test")]);
        assert_eq!(request_host(Some("c.test"), &h, XFH).as_deref(), Some("b.test"), "the proxy's word first");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        let p = TrustedProxies::parse("10.0.0.0/8, 192.168.1.5, ::1").unwrap();
        assert!(p.trusts("10.200.0.1".parse().unwrap()) && p.trusts("192.168.1.5".parse().unwrap()));
        assert!(p.trusts("::ffff:10.0.0.1".parse().unwrap()), "IPv4-mapped");
        assert!(p.trusts("::1".parse().unwrap()));
        assert!(!p.trusts("192.168.1.6".parse().unwrap()) && !p.trusts("11.0.0.1".parse().unwrap()));
        assert!(!TrustedProxies::default().trusts("127.0.0.1".parse().unwrap()), "none by default");
        assert_eq!(TrustedProxies::parse(" , ").unwrap(), TrustedProxies::default());
        assert_eq!(p.shown(), ["10.0.0.0/8", "192.168.1.5/32", "::1/128"]);
        let e = TrustedProxies::parse("10.0.0.0/33").unwrap_err();
        assert_eq!(e, "\"10.0.0.0/33\" is not an IP address or a CIDR network");
    }

    #[test]
    fn no_host_at_all() {
        assert_eq!(request_host(None, &HeaderMap::new(), XFH), None);
    }
}
