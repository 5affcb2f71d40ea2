//! API tokens and what each may reach (`api.tokens`): held as SHA-256 digests, never in clear, and compared in
//! constant time. The settings parse them ([`ApiTokens::parse`]); the write API asks what a presented token may
//! do ([`ApiTokens::access`]).

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::site::check_site_name;

/// The API tokens (`api.tokens`: comma-separated, blanks ignored) as SHA-256 digests: compared in constant time and
/// never kept in clear. Shown as `[N redacted]`. `TOKEN` is good for every site; `SITE=TOKEN` (or `SITE:TOKEN`)
/// for that site only
/// (the same token given for several sites is good for each of them).
#[derive(Clone, Default)]
pub struct ApiTokens(Vec<([u8; 32], Access)>);

/// What a token may read and write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Every site (a token without scope, or no tokens configured on a loopback address).
    All,
    /// These sites, by name.
    Sites(Vec<String>),
}

impl Access {
    pub fn may(&self, site: &str) -> bool {
        match self {
            Self::All => true,
            Self::Sites(names) => names.iter().any(|n| n == site),
        }
    }
}

impl ApiTokens {
    /// `api.tokens` as configured; the error is what the setting's message says after its name.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut tokens: Vec<([u8; 32], Access)> = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (access, token) = match scope_split(item) {
                Some((site, separator, token)) => {
                    check_site_name(site.trim()).map_err(|e| {
                        format!("a token with a '{separator}' is SITE{separator}TOKEN, and its SITE is wrong: {e}")
                    })?;
                    (Access::Sites(vec![site.trim().to_owned()]), token.trim())
                }
                None => (Access::All, item),
            };
            if token.is_empty() {
                return Err("an empty token".to_owned());
            }
            let digest = digest(token);
            match tokens.iter_mut().find(|(d, _)| *d == digest) {
                Some((_, Access::All)) => {}
                Some((_, scope)) if access == Access::All => *scope = Access::All,
                Some((_, Access::Sites(names))) => {
                    if let Access::Sites(more) = access {
                        names.extend(more);
                        names.sort();
                        names.dedup();
                    }
                }
                None => tokens.push((digest, access)),
            }
        }
        Ok(Self(tokens))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The sites named in token scopes.
    pub fn scoped_sites(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .flat_map(|(_, access)| match access {
                Access::All => &[][..],
                Access::Sites(names) => names.as_slice(),
            })
            .map(String::as_str)
    }

    /// What `token` may do, if it is one of the tokens. Every known digest is compared, each in constant time, so
    /// the time taken does not depend on the presented token's bytes.
    pub fn access(&self, token: &str) -> Option<&Access> {
        let presented = digest(token);
        let mut found = None;
        for (known, access) in &self.0 {
            if bool::from(known.ct_eq(&presented)) {
                found = Some(access);
            }
        }
        found
    }

    /// Whether `token` is one of the tokens (any scope).
    pub fn matches(&self, token: &str) -> bool {
        self.access(token).is_some()
    }
}

/// A scoped token's site, separator and token: `SITE=TOKEN` (as sites and keys are given) or `SITE:TOKEN` (the
/// older form), whichever separator comes first; `None` for a token of every site. A token that ends in `=` and
/// holds no other separator (base64 padding: `dG9rZW4=`) is a token of every site.
fn scope_split(item: &str) -> Option<(&str, char, &str)> {
    let at = item.find([':', '='])?;
    let (site, separator, token) = (&item[..at], char::from(item.as_bytes()[at]), &item[at + 1..]);
    if separator == '=' && token.bytes().all(|b| b == b'=') {
        return None;
    }
    Some((site, separator, token))
}

impl fmt::Debug for ApiTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{} redacted]", self.0.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reaches_every_site_its_scopes_name() {
        let t = ApiTokens::parse("all, shop:s, www:both, shop:both, www:all, shop:s").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.access("all"), Some(&Access::All), "a scope given to a global token does not narrow it");
        assert_eq!(t.access("s"), Some(&Access::Sites(vec!["shop".into()])), "a scope given twice counts once");
        assert!(t.access("both").is_some_and(|a| a.may("www") && a.may("shop") && !a.may("blog")));
        assert_eq!(t.access("shop:s"), None, "the scope is not part of the token");
        assert_eq!(t.access("x"), None);
        assert!(t.matches("all") && !t.matches(""));
        assert_eq!(format!("{t:?}"), "[3 redacted]");
    }

    #[test]
    fn the_first_separator_scopes_and_padding_does_not() {
        let t = ApiTokens::parse("shop=s, www = w:x, dG9rZW4=, ab==, shop:f=g").unwrap();
        assert_eq!(t.access("w:x"), Some(&Access::Sites(vec!["www".into()])));
        assert_eq!(t.access("f=g"), Some(&Access::Sites(vec!["shop".into()])));
        assert_eq!(t.access("dG9rZW4="), Some(&Access::All));
        assert_eq!(t.scoped_sites().collect::<Vec<_>>(), ["shop", "www", "shop"]);
        assert_eq!(ApiTokens::parse("a, shop:").unwrap_err(), "an empty token");
        assert!(ApiTokens::parse("Shop Site=t").unwrap_err().starts_with("a token with a '=' is SITE=TOKEN"));
    }
}
