//! Sites: the hosts one deployment serves, each a name and a public URL, and which site a `loc` or a request's host
//! belongs to. Pure: the HTTP layer finds the host, the store assigns the ids.

use std::fmt;

use super::loc::PublicUrl;

/// The site that data stored before sites existed belongs to (migration 0004), and the name of the one site a
/// deployment without `sites` serves.
pub const DEFAULT_SITE: &str = "default";

/// A site's name: 1 to 63 of `a-z 0-9 - _`, starting with a letter or digit. It names the site in the
/// configuration, in token scopes, in metrics and in the view, and maps it to its stored id.
pub fn check_site_name(name: &str) -> Result<(), String> {
    let ok = (1..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "site name {name:?} must be 1 to 63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
        ))
    }
}

/// A configured site: its name and public URL, before the store gives it its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteSpec {
    pub name: String,
    pub public_url: PublicUrl,
}

/// A site as served: its stored id, its name, its public URL, and the authority requests reach it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub id: i64,
    pub name: String,
    pub public_url: PublicUrl,
    /// `host[:port]`, lower case, the port only when it is not the scheme's default.
    authority: String,
}

impl Site {
    pub fn new(id: i64, spec: SiteSpec) -> Self {
        let authority = authority_of(spec.public_url.as_str());
        Self { id, name: spec.name, public_url: spec.public_url, authority }
    }

    /// `host[:port]` as requests name it.
    pub fn authority(&self) -> &str {
        &self.authority
    }
}

/// The configured sites, in configuration order. Never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sites(Vec<Site>);

impl Sites {
    /// `sites` must not be empty; their names and authorities are distinct (the configuration checks it first,
    /// with messages naming the setting).
    pub fn new(sites: Vec<Site>) -> Self {
        assert!(!sites.is_empty(), "at least one site");
        Self(sites)
    }

    /// One site named [`DEFAULT_SITE`], id 1, at `public_url`: a deployment without `sites`, and tests.
    pub fn single(public_url: PublicUrl) -> Self {
        Self(vec![Site::new(1, SiteSpec { name: DEFAULT_SITE.to_owned(), public_url })])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Site> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The one site when only one is configured: it answers whatever the request's host is.
    pub fn only(&self) -> Option<&Site> {
        match self.0.as_slice() {
            [site] => Some(site),
            _ => None,
        }
    }

    pub fn by_id(&self, id: i64) -> Option<&Site> {
        self.0.iter().find(|s| s.id == id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Site> {
        self.0.iter().find(|s| s.name == name)
    }

    /// The site a normalized `loc` lies under (the path-segment rule of [`PublicUrl::contains`]); of nested public
    /// URLs, the longest.
    pub fn for_loc(&self, loc: &str) -> Option<&Site> {
        self.0.iter().filter(|s| s.public_url.contains(loc)).max_by_key(|s| s.public_url.as_str().len())
    }

    /// The site a request for `host` (a `Host` value: `host[:port]`, any case) is for. With one site configured,
    /// that site whatever the host; with several, the one whose public URL has this authority, else none.
    pub fn for_host(&self, host: Option<&str>) -> Option<&Site> {
        if let Some(site) = self.only() {
            return Some(site);
        }
        let host = host?.trim().trim_end_matches('.').to_ascii_lowercase();
        self.0.iter().find(|s| s.authority == host || without_default_port(&host, &s.public_url) == s.authority)
    }

    /// Why a loc under no site is refused: the sites it could have been under.
    pub fn outside_message(&self) -> String {
        match self.only() {
            Some(site) => format!("must lie under the public URL {} (the sitemaps.org location rule)", site.public_url),
            None => format!("must lie under the public URL of a configured site: {self}"),
        }
    }
}

impl fmt::Display for Sites {
    /// `www (https://www.example.com/), shop (https://shop.example.com/)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, site) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} ({})", site.name, site.public_url)?;
        }
        Ok(())
    }
}

/// The authority of an http(s) URL as a `Host` header gives it: lower case, without the scheme's default port.
fn authority_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split('/').next().unwrap_or("").to_ascii_lowercase();
    let default = if scheme == "https" { ":443" } else { ":80" };
    authority.strip_suffix(default).map(str::to_owned).unwrap_or(authority)
}

/// `host` without the default port of `public_url`'s scheme (a client may send `Host: example.com:443`).
fn without_default_port<'a>(host: &'a str, public_url: &PublicUrl) -> &'a str {
    let default = if public_url.as_str().starts_with("https:") { ":443" } else { ":80" };
    host.strip_suffix(default).unwrap_or(host)
}

/// What a `loc` must lie under: one public URL, or any configured site's.
pub trait LocScope {
    /// `Ok` when the normalized `loc` lies under it, else the message saying where it must lie.
    fn admits(&self, loc: &str) -> Result<(), String>;
}

impl LocScope for PublicUrl {
    fn admits(&self, loc: &str) -> Result<(), String> {
        if self.contains(loc) {
            Ok(())
        } else {
            Err(format!("must lie under the public URL {self} (the sitemaps.org location rule)"))
        }
    }
}

impl LocScope for Sites {
    fn admits(&self, loc: &str) -> Result<(), String> {
        match self.for_loc(loc) {
            Some(_) => Ok(()),
            None => Err(self.outside_message()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: i64, name: &str, url: &str) -> Site {
        Site::new(id, SiteSpec { name: name.into(), public_url: PublicUrl::parse(url).unwrap() })
    }

    fn three() -> Sites {
        Sites::new(vec![
            site(1, "www", "https://www.example.com/"),
            site(2, "shop", "https://shop.example.com/"),
            site(3, "de", "http://example.de:8080/"),
        ])
    }

    #[test]
    fn a_loc_goes_to_the_site_it_lies_under() {
        let sites = three();
        assert_eq!(sites.for_loc("https://shop.example.com/a").unwrap().name, "shop");
        assert_eq!(sites.for_loc("https://www.example.com/").unwrap().name, "www");
        assert_eq!(sites.for_loc("http://example.de:8080/x").unwrap().name, "de");
        assert!(sites.for_loc("http://example.de/x").is_none(), "another port is another origin");
        assert!(sites.for_loc("https://other.example.com/").is_none());
        let message = sites.admits("https://other.example.com/").unwrap_err();
        assert!(message.contains("www (https://www.example.com/), shop (https://shop.example.com/)"), "{message}");
    }

    #[test]
    fn nested_public_urls_give_the_longest() {
        let sites = Sites::new(vec![site(1, "all", "https://a.test/"), site(2, "blog", "https://a.test/blog/")]);
        assert_eq!(sites.for_loc("https://a.test/blog/post").unwrap().name, "blog");
        assert_eq!(sites.for_loc("https://a.test/blogger").unwrap().name, "all", "path-segment boundary");
    }

    #[test]
    fn hosts_are_matched_by_authority() {
        let sites = three();
        assert_eq!(sites.for_host(Some("SHOP.example.com")).unwrap().name, "shop");
        assert_eq!(sites.for_host(Some("shop.example.com:443")).unwrap().name, "shop");
        assert_eq!(sites.for_host(Some("www.example.com.")).unwrap().name, "www", "a fully qualified name");
        assert_eq!(sites.for_host(Some("example.de:8080")).unwrap().name, "de");
        assert!(sites.for_host(Some("example.de")).is_none(), "the site's port is part of its authority");
        assert!(sites.for_host(Some("shop.example.com:8443")).is_none());
        assert!(sites.for_host(Some("evil.test")).is_none());
        assert!(sites.for_host(None).is_none());
    }

    #[test]
    fn one_site_answers_any_host() {
        let sites = Sites::single(PublicUrl::parse("https://www.example.com/").unwrap());
        assert_eq!(sites.for_host(Some("anything.test")).unwrap().id, 1);
        assert_eq!(sites.for_host(None).unwrap().name, DEFAULT_SITE);
    }

    #[test]
    fn site_names() {
        for ok in ["www", "shop-de", "a", "x_1", "0"] {
            assert!(check_site_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "WWW", "-a", "a b", "a.b", "é", &"a".repeat(64)] {
            assert!(check_site_name(bad).is_err(), "{bad:?}");
        }
    }
}
