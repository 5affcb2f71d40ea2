//! Which site a crawler's request is for: its `Host`, or, from a trusted proxy only, the host the proxy says the
//! client asked for (`Forwarded: host=`, RFC 7239, else `X-Forwarded-Host`). From any other peer the forwarding
//! headers are ignored: a client could otherwise read another site's sitemaps by naming its host.

use std::net::{IpAddr, SocketAddr};
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

/// The client's address: the peer's, or, when the peer is a trusted proxy, the one the proxies name in the
/// forwarding header `header` says (`X-Forwarded-For` with [`ForwardedHeader::XForwardedHost`], `Forwarded: for=`
/// with [`ForwardedHeader::Forwarded`]): the last address that is not itself a trusted proxy, read from the right
/// (each proxy appends the peer it saw, so what lies left of the first untrusted address may be the client's own
/// invention). `None` when that element is not an address (`unknown`, an obfuscated name) or the peer is unknown.
/// From an untrusted peer the headers are never read.
pub fn client_addr(
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
    header: ForwardedHeader,
) -> Option<IpAddr> {
    let peer = unmap(peer?);
    if !trusted.trusts(peer) {
        return Some(peer);
    }
    let name = match header {
        ForwardedHeader::XForwardedHost => "x-forwarded-for",
        ForwardedHeader::Forwarded => "forwarded",
    };
    let lines: Vec<&str> = headers.get_all(name).iter().map(|v| v.to_str().ok()).collect::<Option<_>>()?;
    let mut elements = lines.iter().flat_map(|line| line.split(',')).rev().peekable();
    if elements.peek().is_none() {
        // A trusted proxy that names no client: the request is its own.
        return Some(peer);
    }
    let mut last = peer;
    for element in elements {
        let value = match header {
            ForwardedHeader::XForwardedHost => Some(element.trim()),
            ForwardedHeader::Forwarded => forwarded_param(element, "for"),
        };
        let addr = unmap(value.and_then(parse_node)?);
        if !trusted.trusts(addr) {
            return Some(addr);
        }
        last = addr;
    }
    // Every hop a trusted proxy: the first one is the client as far as anyone can tell.
    Some(last)
}

/// An IPv4 address seen as IPv4-mapped IPv6 (a dual-stack listener), as IPv4.
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A node as forwarding headers write it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]:4711`,
/// quoted or not.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
    let node = node.strip_prefix('"').and_then(|n| n.strip_suffix('"')).unwrap_or(node);
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = node.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        return (after.is_empty() || after.starts_with(':')).then(|| inside.parse().ok()).flatten();
    }
    let (host, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The last comma-separated element of the last line of header `name`.
fn last_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let line = headers.get_all(name).iter().next_back()?.to_str().ok()?;
    line.rsplit(',').next()
}

/// The `host` parameter of one `Forwarded` element (`for=…;host=…;proto=…`), unquoted.
fn forwarded_host(element: &str) -> Option<String> {
    forwarded_param(element, "host").and_then(|value| {
        let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
        Some(value.replace("\\\"", "\"")).filter(|v| !v.is_empty())
    })
}

/// Parameter `name`'s value in one `Forwarded` element, trimmed (quotes kept).
fn forwarded_param<'e>(element: &'e str, name: &str) -> Option<&'e str> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
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

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn the_client_address_from_an_untrusted_peer_is_the_peer() {
        let none = TrustedProxies::default();
        let h = headers(&[("x-forwarded-for", "66.249.66.1"), ("forwarded", "for=66.249.66.1")]);
        for header in [ForwardedHeader::XForwardedHost, ForwardedHeader::Forwarded] {
            assert_eq!(client_addr(ip("203.0.113.9"), &h, &none, header), ip("203.0.113.9"));
        }
        let p = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(client_addr(ip("203.0.113.9"), &h, &p, ForwardedHeader::XForwardedHost), ip("203.0.113.9"));
        assert_eq!(client_addr(ip("::ffff:203.0.113.9"), &h, &p, ForwardedHeader::XForwardedHost), ip("203.0.113.9"));
        assert_eq!(client_addr(None, &h, &p, ForwardedHeader::XForwardedHost), None);
    }

    #[test]
    fn the_client_address_from_trusted_proxies_is_the_last_untrusted_hop() {
        let p = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let xff = |v: &'static str| headers(&[("x-forwarded-for", v)]);
        let peer = ip("10.0.0.1");
        let by = |h: &HeaderMap| client_addr(peer, h, &p, ForwardedHeader::XForwardedHost);
        assert_eq!(by(&xff("66.249.66.1")), ip("66.249.66.1"));
        // The client's own invention left of the address the first proxy saw.
        assert_eq!(by(&xff("66.249.66.1, 203.0.113.9")), ip("203.0.113.9"));
        // Trusted hops on the right are skipped, over several lines too.
        assert_eq!(
            by(&headers(&[("x-forwarded-for", "66.249.66.1"), ("x-forwarded-for", "10.1.1.1")])),
            ip("66.249.66.1")
        );
        assert_eq!(by(&xff("[2001:db8::1]:4711")), ip("2001:db8::1"));
        assert_eq!(by(&xff("192.0.2.7:80")), ip("192.0.2.7"));
        assert_eq!(by(&xff("10.2.2.2")), ip("10.2.2.2"), "every hop trusted: the first");
        assert_eq!(by(&xff("unknown")), None);
        assert_eq!(by(&xff("66.249.66.1, garbage")), None, "an unreadable hop hides who is left of it");
        assert_eq!(by(&HeaderMap::new()), peer, "a proxy's own request");
        // The header not configured is not read.
        assert_eq!(by(&headers(&[("forwarded", "for=66.249.66.1")])), peer);
        let fwd = |v: &'static str| client_addr(peer, &headers(&[("forwarded", v)]), &p, ForwardedHeader::Forwarded);
        assert_eq!(fwd("for=66.249.66.1;proto=https"), ip("66.249.66.1"));
        assert_eq!(fwd("for=\"[2001:db8::1]:4711\", for=10.0.0.2"), ip("2001:db8::1"));
        assert_eq!(fwd("For=192.0.2.60;host=example.com"), ip("192.0.2.60"));
        assert_eq!(fwd("for=_hidden"), None);
        assert_eq!(fwd("host=example.com"), None, "an element without for names nobody");
    }
}
