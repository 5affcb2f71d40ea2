//! hreflang clusters: the alternates that entries declare link URLs into clusters (the connected components of
//! "this loc names that href"), and each cluster resolves into one complete set, one link per language, that every
//! member may render, whatever order its members were written in.
//!
//! Pure and shared by both stores: the store loads a write's clusters as [`Member`]s, splits them with
//! [`clusters`], and calls [`resolve`] on each; what a member renders follows its site's [`Policy`] (its
//! declaration as sent, or the completed set). The rules, in order (docs/hreflang.md says them for people):
//! 1. every stored member's declaration claims "href H is language L" for each of its alternates;
//! 2. a claim whose code Google does not read (a UN M.49 region such as `es-419`, a withdrawn ISO 639-1 code such
//!    as `iw`, anything [`parse_hreflang`] refuses) is dropped: [`ProblemKind::InvalidCode`];
//! 3. a URL's languages are those its own declaration gives it (several when one page serves several regions,
//!    `en-GB` and `en-IE`); a URL that declares none keeps the one most claims give, else the smallest code; any
//!    other code claimed for it is dropped: [`ProblemKind::ConflictingLanguage`];
//! 4. a language claimed for several URLs keeps one, ranked by (declares itself so, number of claims, smaller
//!    href); `x-default` apart (most claims, then smaller href), so a URL may be a language and the default:
//!    [`ProblemKind::DuplicateLanguage`];
//! 5. a URL under a configured site that is not stored is left out, never rendered (and does not take part in 4):
//!    [`ProblemKind::NotStored`]; a URL on a host no configured site serves is kept as claimed;
//! 6. the set is the winners, sorted by hreflang as [`crate::domain::Extensions`] sorts its alternates;
//! 7. under [`Policy::Complete`] a stored member in the set renders the set, any other renders no alternates;
//! 8. [`ProblemKind::MissingReturn`] (an `as_sent` member that does not name back a member naming it) and
//!    [`ProblemKind::CrossSite`] (stored members in several sites: allowed, said once per site).
//!
//! [`ProblemKind::TooLarge`] is the store's to decide (it knows the pages); [`MAX_SET`] is its link limit.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

pub use crate::domain::ext::Alternate;
use crate::domain::ext_input::parse_hreflang;

/// The most links a set may have for a member to render it (one entry's limit on alternates).
pub const MAX_SET: usize = crate::domain::ext_input::MAX_ALTERNATES;

/// The fallback's hreflang.
pub const X_DEFAULT: &str = "x-default";

/// What a site's members render: their declaration (`as_sent`, the default: every byte as sent) or their
/// cluster's complete set (`complete`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    #[default]
    AsSent,
    Complete,
}

impl Policy {
    pub const ALL: [Self; 2] = [Self::AsSent, Self::Complete];

    /// `as_sent` or `complete`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AsSent => "as_sent",
            Self::Complete => "complete",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node of a cluster as the store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub href: String,
    /// The configured site whose public URL the href lies under (`Sites::for_loc`), if any.
    pub site: Option<i64>,
    /// Whether a record is stored for this href.
    pub stored: bool,
    /// Its declaration (sent alternates, sorted by hreflang); None when it declares none or is not stored.
    pub declared: Option<Vec<Alternate>>,
}

impl Member {
    /// The declaration that counts: a stored member's.
    fn declaration(&self) -> Option<&[Alternate]> {
        self.declared.as_deref().filter(|_| self.stored)
    }
}

/// Splits members (any order, hrefs distinct) into clusters: each sorted by href, the clusters sorted by key.
/// Members that neither declare nor are named by a declaration are dropped (they belong to no cluster). An href
/// that a declaration names but no member is, is not made up: the store passes every node.
pub fn clusters(members: Vec<Member>) -> Vec<Vec<Member>> {
    let index: HashMap<&str, usize> = members.iter().enumerate().map(|(i, m)| (m.href.as_str(), i)).collect();
    let mut parent: Vec<usize> = (0..members.len()).collect();
    let mut linked = vec![false; members.len()];
    for (i, m) in members.iter().enumerate() {
        for alternate in m.declaration().unwrap_or_default() {
            let Some(&j) = index.get(alternate.href.as_str()) else { continue };
            linked[i] = true;
            linked[j] = true;
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            // The smaller index as root keeps the trees shallow enough; `root` halves the paths it walks.
            parent[a.max(b)] = a.min(b);
        }
    }
    let roots: Vec<usize> = (0..members.len()).map(|i| root(&mut parent, i)).collect();
    let mut by_root: HashMap<usize, Vec<Member>> = HashMap::new();
    for ((m, r), linked) in members.into_iter().zip(roots).zip(linked) {
        if linked {
            by_root.entry(r).or_default().push(m);
        }
    }
    let mut out: Vec<Vec<Member>> = by_root.into_values().collect();
    for cluster in &mut out {
        cluster.sort_unstable_by(|a, b| a.href.cmp(&b.href));
    }
    out.sort_unstable_by(|a, b| a[0].href.cmp(&b[0].href));
    out
}

fn root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// What is wrong in a cluster. The strings are stable: the store keeps them and the API shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    DuplicateLanguage,
    ConflictingLanguage,
    InvalidCode,
    NotStored,
    MissingReturn,
    CrossSite,
    TooLarge,
}

impl ProblemKind {
    pub const ALL: [Self; 7] = [
        Self::DuplicateLanguage,
        Self::ConflictingLanguage,
        Self::InvalidCode,
        Self::NotStored,
        Self::MissingReturn,
        Self::CrossSite,
        Self::TooLarge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::DuplicateLanguage => "duplicate_language",
            Self::ConflictingLanguage => "conflicting_language",
            Self::InvalidCode => "invalid_code",
            Self::NotStored => "not_stored",
            Self::MissingReturn => "missing_return",
            Self::CrossSite => "cross_site",
            Self::TooLarge => "too_large",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem of a cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub kind: ProblemKind,
    /// The URL the problem is about (the loser, the conflicted href, the not-stored href, …).
    pub href: String,
    /// The hreflang concerned, if one ("" when none).
    pub hreflang: String,
    /// The member whose site lists the problem: a stored member of the cluster (the href itself when stored, else
    /// the smallest stored member that claims it). Problems with no stored member to list them are dropped.
    pub listed_by: String,
    /// One sentence for people: what is wrong, what sitemapd does, what to change. No internals.
    pub message: String,
}

/// A cluster resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The cluster's key (smallest member href).
    pub key: String,
    /// The complete set (step 6).
    pub set: Vec<Alternate>,
    /// For each stored member (by href): what it renders under `complete` (step 7): Some(set) or None (no links).
    pub complete: BTreeMap<String, Option<Vec<Alternate>>>,
    /// Problems sorted (kind, href, hreflang), deduplicated.
    pub problems: Vec<Problem>,
}

/// Why Google does not read a code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unread {
    /// A UN M.49 area as the region (`es-419`): Google reads ISO 3166-1 countries only.
    Area,
    /// A withdrawn ISO 639-1 language, with the code that replaced it.
    Withdrawn(&'static str),
    /// Not an hreflang at all (a code stored before the checks that refuse it).
    Malformed,
}

/// The ISO 639-1 codes withdrawn in 1989 and 2001, each with its replacement. `isolang` (2.4) knows none of them,
/// so [`parse_hreflang`] refuses them already; a database may still hold one from before that check.
const WITHDRAWN: [(&str, &str); 5] = [("in", "id"), ("iw", "he"), ("ji", "yi"), ("jw", "jv"), ("mo", "ro")];

/// An hreflang as Google reads it, in its canonical case, or why it is not read.
fn readable(code: &str) -> Result<String, Unread> {
    let language = code.split('-').next().unwrap_or_default().to_ascii_lowercase();
    if let Some(&(_, now)) = WITHDRAWN.iter().find(|(old, _)| *old == language) {
        return Err(Unread::Withdrawn(now));
    }
    let canonical = parse_hreflang(code).map_err(|_| Unread::Malformed)?;
    if canonical.rsplit('-').next().is_some_and(|region| region.bytes().all(|b| b.is_ascii_digit())) {
        return Err(Unread::Area);
    }
    Ok(canonical)
}

/// Resolves one cluster (rules 1-8 of the module's documentation). `policy_of(site)` says each stored member's site
/// policy: the messages say what that site's pages do, and `missing_return` is reported for `as_sent` sites only.
/// The result does not depend on the order of `cluster` nor of the alternates within a declaration. An href that a
/// declaration names but that is not in `cluster` counts as a URL of no configured site.
pub fn resolve(cluster: &[Member], policy_of: impl Fn(i64) -> Policy) -> Resolution {
    let nodes: BTreeMap<&str, &Member> = cluster.iter().map(|m| (m.href.as_str(), m)).collect();
    let stored = |h: &str| nodes.get(h).is_some_and(|m| m.stored);
    // Rule 5: under a configured site and not stored: never rendered.
    let withheld = |h: &str| nodes.get(h).is_some_and(|m| !m.stored && m.site.is_some());
    let policy = |h: &str| nodes.get(h).and_then(|m| m.site).map_or(Policy::AsSent, &policy_of);

    // Rules 1 and 2: the claims, by href. Each set of declarers is sorted, so counts and names are order-free.
    let mut languages: BTreeMap<&str, BTreeMap<String, BTreeSet<&str>>> = BTreeMap::new();
    let mut defaults: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut invalid: BTreeMap<(&str, &str), (Unread, BTreeSet<&str>)> = BTreeMap::new();
    let mut claimants: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut names: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (&by, member) in &nodes {
        for a in member.declaration().unwrap_or_default() {
            let href = a.href.as_str();
            claimants.entry(href).or_default().insert(by);
            names.entry(by).or_default().insert(href);
            if a.hreflang == X_DEFAULT {
                defaults.entry(href).or_default().insert(by);
                continue;
            }
            match readable(&a.hreflang) {
                Ok(code) => {
                    languages.entry(href).or_default().entry(code).or_default().insert(by);
                }
                Err(why) => {
                    invalid.entry((href, a.hreflang.as_str())).or_insert((why, BTreeSet::new())).1.insert(by);
                }
            }
        }
    }
    let listed_by = |h: &str| -> Option<String> {
        if stored(h) {
            return Some(h.to_owned());
        }
        claimants.get(h)?.iter().find(|c| stored(c)).map(|c| (*c).to_owned())
    };
    let mut problems: Vec<Problem> = Vec::new();
    let mut report = |kind: ProblemKind, href: &str, hreflang: &str, message: &dyn Fn(Policy) -> String| {
        if let Some(listed_by) = listed_by(href) {
            let message = message(policy(&listed_by));
            problems.push(Problem { kind, href: href.to_owned(), hreflang: hreflang.to_owned(), listed_by, message });
        }
    };

    for ((href, code), (why, by)) in &invalid {
        report(ProblemKind::InvalidCode, href, code, &|p| invalid_code(href, code, *why, by, p));
    }

    // Rule 3: a URL's languages. What it declares for itself, all of it (one page may serve several regions:
    // `en-GB` and `en-IE` both naming `/en/`, which Google reads); else the one claim ranked first.
    let mut language_of: BTreeMap<&str, Vec<Claim>> = BTreeMap::new();
    for (&href, claimed) in &languages {
        let rank = |(code, by): (&String, &BTreeSet<&str>)| Claim {
            code: code.clone(),
            own: by.contains(href),
            count: by.len(),
        };
        let mut claims: Vec<Claim> = claimed.iter().map(rank).collect();
        claims.sort_by(Claim::order);
        let kept: Vec<Claim> =
            if claims[0].own { claims.iter().filter(|c| c.own).cloned().collect() } else { claims[..1].to_vec() };
        let won = &kept[0];
        for (code, by) in claimed.iter().filter(|(code, _)| !kept.iter().any(|k| k.code == **code)) {
            let lost = by.len();
            report(ProblemKind::ConflictingLanguage, href, code, &|p| conflicting(href, code, by, lost, won, p));
        }
        language_of.insert(href, kept);
    }

    // Rule 4: one URL per language, among the URLs that may be rendered (rule 5).
    let mut by_language: BTreeMap<&str, Vec<(&str, &Claim)>> = BTreeMap::new();
    for (&href, claims) in language_of.iter().filter(|(h, _)| !withheld(h)) {
        for claim in claims {
            by_language.entry(claim.code.as_str()).or_default().push((href, claim));
        }
    }
    let mut set: Vec<Alternate> = Vec::new();
    for (&code, hrefs) in &mut by_language {
        hrefs.sort_unstable_by(|(a, x), (b, y)| Claim::order(x, y).then(a.cmp(b)));
        let (winner, won) = hrefs[0];
        for &(loser, lost) in &hrefs[1..] {
            let kept = stored(loser);
            report(ProblemKind::DuplicateLanguage, loser, code, &|p| {
                duplicate(loser, lost, winner, won, code, kept, p)
            });
        }
        set.push(Alternate { hreflang: code.to_owned(), href: winner.to_owned() });
    }
    let mut fallbacks: Vec<(&str, usize)> =
        defaults.iter().filter(|(h, _)| !withheld(h)).map(|(h, by)| (*h, by.len())).collect();
    fallbacks.sort_unstable_by(|a, b| (std::cmp::Reverse(a.1), a.0).cmp(&(std::cmp::Reverse(b.1), b.0)));
    if let Some(&(winner, count)) = fallbacks.first() {
        for &(loser, lost) in &fallbacks[1..] {
            report(ProblemKind::DuplicateLanguage, loser, X_DEFAULT, &|p| {
                duplicate_default(loser, lost, winner, count, p)
            });
        }
        set.push(Alternate { hreflang: X_DEFAULT.to_owned(), href: winner.to_owned() });
    }
    // Rule 6.
    set.sort_unstable_by(|a, b| a.hreflang.cmp(&b.hreflang));

    // Rule 5's report: on the href, naming who claims it.
    for (&href, by) in claimants.iter().filter(|(h, _)| withheld(h)) {
        let code = language_of.get(href).map(|c| c[0].code.as_str());
        let code = code.or_else(|| defaults.contains_key(href).then_some(X_DEFAULT)).unwrap_or_default();
        report(ProblemKind::NotStored, href, code, &|p| not_stored(href, code, by, p));
    }

    // Rule 7.
    let in_set: BTreeSet<&str> = set.iter().map(|a| a.href.as_str()).collect();
    let complete: BTreeMap<String, Option<Vec<Alternate>>> = nodes
        .values()
        .filter(|m| m.stored)
        .map(|m| (m.href.clone(), in_set.contains(m.href.as_str()).then(|| set.clone())))
        .collect();

    // Rule 8: a member naming a stored, declaring member of a served site whose page, as sent, does not name it.
    let renders = |h: &str| -> Option<&[Alternate]> {
        match policy(h) {
            Policy::AsSent => nodes.get(h).and_then(|m| m.declaration()),
            Policy::Complete => complete.get(h).and_then(|s| s.as_deref()),
        }
    };
    let mut unreturned: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for &from in nodes.keys().filter(|h| stored(h)) {
        for a in renders(from).unwrap_or_default() {
            let to = a.href.as_str();
            let Some(target) = nodes.get(to) else { continue };
            if to != from
                && target.stored
                && target.site.is_some()
                && policy(to) == Policy::AsSent
                && target.declaration().is_some()
                && !names.get(to).is_some_and(|n| n.contains(from))
            {
                unreturned.entry(to).or_default().insert(from);
            }
        }
    }
    for (&href, from) in &unreturned {
        report(ProblemKind::MissingReturn, href, "", &|_| missing_return(href, from));
    }
    let mut by_site: BTreeMap<i64, &str> = BTreeMap::new();
    for m in nodes.values().filter(|m| m.stored) {
        if let Some(site) = m.site {
            by_site.entry(site).or_insert(&m.href);
        }
    }
    if by_site.len() > 1 {
        for (&site, &first) in &by_site {
            let other = by_site.iter().filter(|(s, _)| **s != site).map(|(_, h)| *h).min().unwrap_or_default();
            report(ProblemKind::CrossSite, first, "", &|_| cross_site(first, other));
        }
    }

    problems.sort_unstable();
    problems.dedup_by(|b, a| (a.kind, &a.href, &a.hreflang) == (b.kind, &b.href, &b.hreflang));
    Resolution { key: nodes.keys().next().map(|k| (*k).to_owned()).unwrap_or_default(), set, complete, problems }
}

/// A language claimed for one href: the code, whether the href claims it itself, and by how many declarations.
#[derive(Clone, Debug)]
struct Claim {
    code: String,
    own: bool,
    count: usize,
}

impl Claim {
    /// The better claim first: its own, then more claims, then the smaller code.
    fn order(a: &Self, b: &Self) -> std::cmp::Ordering {
        (!a.own, std::cmp::Reverse(a.count), &a.code).cmp(&(!b.own, std::cmp::Reverse(b.count), &b.code))
    }
}

/// Names URLs for a message: all of them up to three, else the first two and how many more.
fn urls(list: &BTreeSet<&str>) -> String {
    let all: Vec<&str> = list.iter().copied().collect();
    match all.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] if all.len() <= 3 => format!("{} and {last}", rest.join(", ")),
        [a, b, more @ ..] => format!("{a}, {b} and {} others", more.len()),
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

fn invalid_code(href: &str, code: &str, why: Unread, by: &BTreeSet<&str>, policy: Policy) -> String {
    let claims = plural(by.len(), "gives", "give");
    let reason = match why {
        Unread::Area => " (its region is a UN M.49 area; Google reads ISO 3166-1 countries only)".to_owned(),
        Unread::Withdrawn(now) => format!(" (a withdrawn ISO 639-1 code, now \"{now}\")"),
        Unread::Malformed => " (not an ISO 639-1 language with an optional script and ISO 3166-1 country)".to_owned(),
    };
    let does = match policy {
        Policy::Complete => "sitemapd leaves that link out of the cluster",
        Policy::AsSent => "sitemapd renders it as sent (under complete it would be left out)",
    };
    let change = match why {
        Unread::Area => {
            let language = code.rsplit_once('-').map_or(code, |(l, _)| l);
            format!("give a country (such as \"{language}-MX\") or the language alone (\"{language}\")")
        }
        Unread::Withdrawn(now) => {
            let rest = code.split_once('-').map_or(String::new(), |(_, r)| format!("-{r}"));
            format!("send \"{now}{rest}\"")
        }
        Unread::Malformed => "send a valid hreflang such as en or de-AT".to_owned(),
    };
    format!(
        "{} {claims} {href} the hreflang \"{code}\", which Google does not read{reason}; {does}; {change}.",
        urls(by)
    )
}

fn conflicting(href: &str, code: &str, by: &BTreeSet<&str>, lost: usize, won: &Claim, policy: Policy) -> String {
    let claims = plural(by.len(), "gives", "give");
    let kept = &won.code;
    let reason = if won.own {
        format!("its own declaration says \"{kept}\"")
    } else if won.count > lost {
        format!("more declarations say \"{kept}\" ({} against {lost})", won.count)
    } else {
        format!("as many declarations say \"{kept}\" and the smaller code is kept")
    };
    let does = match policy {
        Policy::Complete => format!("sitemapd lists it as \"{kept}\" only"),
        Policy::AsSent => format!("each page renders its declaration as sent (under complete it is \"{kept}\" only)"),
    };
    format!(
        "{} {claims} {href} the hreflang \"{code}\", but {reason}; {does}; give a URL the same hreflang in every \
         declaration.",
        urls(by)
    )
}

fn duplicate(loser: &str, lost: &Claim, winner: &str, won: &Claim, code: &str, stored: bool, policy: Policy) -> String {
    let reason = if won.own && !lost.own {
        format!("as it declares itself \"{code}\"")
    } else if won.count > lost.count {
        format!("as more declarations name it ({} against {})", won.count, lost.count)
    } else {
        "as the smaller URL when the claims are even".to_owned()
    };
    let does = match (policy, stored) {
        (Policy::Complete, true) => {
            format!("sitemapd leaves {loser} out of the cluster's links and renders it with none")
        }
        (Policy::Complete, false) => format!("sitemapd leaves {loser} out of the cluster's links"),
        (Policy::AsSent, _) => {
            format!("each page renders its declaration as sent (under complete, {loser} would be left out)")
        }
    };
    format!(
        "{loser} and {winner} are both \"{code}\" in one cluster and {winner} is kept, {reason}; {does}; give each \
         URL its own hreflang, or remove one from the alternates."
    )
}

fn duplicate_default(loser: &str, lost: usize, winner: &str, won: usize, policy: Policy) -> String {
    let reason = if won > lost {
        format!("as more declarations name it ({won} against {lost})")
    } else {
        "as the smaller URL when the claims are even".to_owned()
    };
    let does = match policy {
        Policy::Complete => format!("sitemapd keeps only {winner} as the x-default"),
        Policy::AsSent => {
            format!("each page renders its declaration as sent (under complete, only {winner} would be x-default)")
        }
    };
    format!(
        "{loser} and {winner} are both named \"x-default\" in one cluster and {winner} is kept, {reason}; {does}; \
         name one fallback URL as x-default in every declaration."
    )
}

fn not_stored(href: &str, code: &str, by: &BTreeSet<&str>, policy: Policy) -> String {
    let named = if code.is_empty() { String::new() } else { format!(" as \"{code}\"") };
    let does = match policy {
        Policy::Complete => "so sitemapd leaves it out of the cluster's links",
        Policy::AsSent => {
            "and the declarations naming it are rendered as sent, linking to a URL this site does not list (under \
             complete it would be left out)"
        }
    };
    let their = plural(by.len(), "its", "their");
    format!(
        "{href} is named{named} by {} but is not stored here, {does}; store it, or remove it from {their} alternates.",
        urls(by)
    )
}

fn missing_return(href: &str, from: &BTreeSet<&str>) -> String {
    let names = plural(from.len(), "names", "name");
    let from = urls(from);
    format!(
        "{href} does not name {from} in its alternates though {from} {names} it, so Google ignores these links (\"no \
         return tags\"); sitemapd renders {href}'s alternates as sent; add {from} to them, or set the site's hreflang \
         policy to complete."
    )
}

fn cross_site(first: &str, other: &str) -> String {
    format!(
        "{first} is in an hreflang cluster with URLs of another configured site (such as {other}); that is allowed \
         and sitemapd keeps the cluster whole; nothing to change."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const EN: &str = "https://a.test/en";
    const DE: &str = "https://a.test/de";
    const FR: &str = "https://a.test/fr";
    const IT: &str = "https://a.test/it";
    const EXT: &str = "https://elsewhere.test/es";
    const OTHER: &str = "https://b.test/nl";

    fn alts(pairs: &[(&str, &str)]) -> Vec<Alternate> {
        let mut out: Vec<Alternate> =
            pairs.iter().map(|(l, h)| Alternate { hreflang: (*l).to_owned(), href: (*h).to_owned() }).collect();
        out.sort_by(|a, b| a.hreflang.cmp(&b.hreflang));
        out
    }

    /// A stored member of site 1 (or of no site for the external host) declaring `pairs` (none when empty).
    fn stored(href: &str, pairs: &[(&str, &str)]) -> Member {
        let site = if href.starts_with("https://a.test/") {
            Some(1)
        } else if href.starts_with("https://b.test/") {
            Some(2)
        } else {
            None
        };
        Member { href: href.to_owned(), site, stored: true, declared: (!pairs.is_empty()).then(|| alts(pairs)) }
    }

    fn absent(href: &str) -> Member {
        Member { stored: false, declared: None, ..stored(href, &[]) }
    }

    fn complete(_: i64) -> Policy {
        Policy::Complete
    }

    fn as_sent(_: i64) -> Policy {
        Policy::AsSent
    }

    fn kinds(r: &Resolution) -> Vec<(ProblemKind, &str, &str, &str)> {
        r.problems.iter().map(|p| (p.kind, p.href.as_str(), p.hreflang.as_str(), p.listed_by.as_str())).collect()
    }

    fn renders<'a>(r: &'a Resolution, href: &str) -> Option<&'a [Alternate]> {
        r.complete[href].as_deref()
    }

    #[test]
    fn names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.as_str()), Some(p));
        }
        assert_eq!(Policy::default(), Policy::AsSent);
        assert_eq!(Policy::parse("Complete"), None);
        let names: Vec<&str> = ProblemKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "duplicate_language",
                "conflicting_language",
                "invalid_code",
                "not_stored",
                "missing_return",
                "cross_site",
                "too_large"
            ]
        );
        for k in ProblemKind::ALL {
            assert_eq!(ProblemKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
        assert_eq!(serde_json::to_value(Policy::AsSent).unwrap(), serde_json::json!("as_sent"));
    }

    #[test]
    fn clusters_are_the_connected_components() {
        let members = vec![
            stored(IT, &[("it", IT)]),
            stored(FR, &[("fr", FR), ("en", EN)]),
            absent(DE),
            stored(EN, &[("en", EN), ("de", DE)]),
            stored(OTHER, &[]),
            stored(EXT, &[("es", EXT)]),
        ];
        let split = clusters(members);
        let hrefs: Vec<Vec<&str>> = split.iter().map(|c| c.iter().map(|m| m.href.as_str()).collect()).collect();
        // Sorted within and by key; OTHER declares nothing and nobody names it: in no cluster.
        assert_eq!(hrefs, [vec![DE, EN, FR], vec![IT], vec![EXT]]);
    }

    #[test]
    fn one_way_links_complete_into_one_set() {
        // EN names DE, FR names EN, DE names only itself: no member names every other.
        let cluster =
            [stored(EN, &[("en", EN), ("de", DE)]), stored(DE, &[("de", DE)]), stored(FR, &[("fr", FR), ("en", EN)])];
        let r = resolve(&cluster, complete);
        assert_eq!(r.key, DE);
        assert_eq!(r.set, alts(&[("de", DE), ("en", EN), ("fr", FR)]));
        for m in &cluster {
            assert_eq!(renders(&r, &m.href), Some(r.set.as_slice()));
        }
        assert_eq!(r.problems, []);
    }

    #[test]
    fn one_page_may_serve_several_regions_it_declares_itself() {
        // EN serves en-GB and en-IE (Google reads that); DE names EN as en-US, which EN does not say of itself.
        let cluster = [
            stored(EN, &[("en-GB", EN), ("en-IE", EN), ("de", DE)]),
            stored(DE, &[("de", DE), ("en-GB", EN), ("en-US", EN)]),
        ];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set, alts(&[("de", DE), ("en-GB", EN), ("en-IE", EN)]));
        assert_eq!(renders(&r, EN), Some(r.set.as_slice()));
        assert_eq!(renders(&r, DE), Some(r.set.as_slice()));
        assert_eq!(kinds(&r), [(ProblemKind::ConflictingLanguage, EN, "en-US", EN)]);
        // A URL that declares nothing keeps one language: two codes from others are a conflict.
        let r = resolve(&[stored(EN, &[("en", EN), ("de", DE)]), stored(FR, &[("fr", FR), ("de-AT", DE)])], complete);
        assert_eq!(r.set, alts(&[("de", DE), ("en", EN), ("fr", FR)]));
        assert_eq!(kinds(&r), [(ProblemKind::ConflictingLanguage, DE, "de-AT", EN)]);
    }

    #[test]
    fn missing_return_is_reported_under_as_sent_only() {
        let cluster =
            [stored(EN, &[("en", EN), ("de", DE)]), stored(DE, &[("de", DE)]), stored(FR, &[("fr", FR), ("en", EN)])];
        let r = resolve(&cluster, as_sent);
        // DE is named by EN and does not name it; EN is named by FR and does not name it.
        assert_eq!(kinds(&r), [(ProblemKind::MissingReturn, DE, "", DE), (ProblemKind::MissingReturn, EN, "", EN)]);
        assert!(r.problems[0].message.starts_with(&format!("{DE} does not name {EN} in its alternates")));
        assert!(r.problems[0].message.contains("no return tags"));
        // The completed set is the same under both policies: switching is a re-render.
        assert_eq!(r.set, resolve(&cluster, complete).set);
        // A member that names nobody back but declares nothing is not "missing" a return (it is completed).
        let r = resolve(&[stored(EN, &[("en", EN), ("de", DE)]), stored(DE, &[])], as_sent);
        assert_eq!(r.problems, []);
        // A complete site renders the return link: only the as_sent member is reported.
        let policy = |site: i64| if site == 1 { Policy::Complete } else { Policy::AsSent };
        let r = resolve(&[stored(EN, &[("en", EN), ("nl", OTHER)]), stored(OTHER, &[("nl", OTHER)])], policy);
        assert_eq!(
            kinds(&r).iter().filter(|p| p.0 == ProblemKind::MissingReturn).collect::<Vec<_>>(),
            [&(ProblemKind::MissingReturn, OTHER, "", OTHER)]
        );
        let r = resolve(&[stored(OTHER, &[("nl", OTHER), ("en", EN)]), stored(EN, &[("en", EN)])], policy);
        assert!(kinds(&r).iter().all(|p| p.0 != ProblemKind::MissingReturn));
    }

    #[test]
    fn codes_google_does_not_read_are_left_out() {
        // `isolang` knows none of the withdrawn codes: the write API refuses them; an old database may hold one.
        for (old, now) in WITHDRAWN {
            assert!(parse_hreflang(old).is_err(), "{old}");
            assert!(parse_hreflang(now).is_ok(), "{now}");
        }
        // The write API takes UN M.49 regions (BCP 47 does); Google reads ISO 3166-1 regions only.
        assert_eq!(parse_hreflang("es-419").as_deref(), Ok("es-419"));
        assert_eq!(readable("es-419"), Err(Unread::Area));
        assert_eq!(readable("iw-IL"), Err(Unread::Withdrawn("he")));
        assert_eq!(readable("en_US"), Err(Unread::Malformed));
        assert_eq!(readable("zh-Hant-TW").as_deref(), Ok("zh-Hant-TW"));
        assert_eq!(readable("de-at").as_deref(), Ok("de-AT"));

        let cluster = [stored(EN, &[("en", EN), ("es-419", EXT), ("iw", DE)]), stored(DE, &[("de", DE)])];
        for policy in [complete, as_sent] {
            let r = resolve(&cluster, policy);
            assert_eq!(r.set, alts(&[("de", DE), ("en", EN)]));
            assert_eq!(
                kinds(&r).iter().filter(|p| p.0 == ProblemKind::InvalidCode).collect::<Vec<_>>(),
                [&(ProblemKind::InvalidCode, DE, "iw", DE), &(ProblemKind::InvalidCode, EXT, "es-419", EN)]
            );
        }
        let r = resolve(&cluster, complete);
        let message = |code: &str| &r.problems.iter().find(|p| p.hreflang == code).unwrap().message;
        assert_eq!(
            message("iw"),
            &format!(
                "{EN} gives {DE} the hreflang \"iw\", which Google does not read (a withdrawn ISO 639-1 code, now \
                 \"he\"); sitemapd leaves that link out of the cluster; send \"he\"."
            )
        );
        assert!(message("es-419").contains("UN M.49"), "{}", message("es-419"));
        assert!(message("es-419").contains("\"es-MX\""), "{}", message("es-419"));
        // A member whose only language is unreadable is in no set: under complete it renders none.
        let r =
            resolve(&[stored(EN, &[("en", EN), ("es-419", DE)]), stored(DE, &[("es-419", DE), ("en", EN)])], complete);
        assert_eq!(r.set, alts(&[("en", EN)]));
        assert_eq!(renders(&r, DE), None);
        assert_eq!(renders(&r, EN), Some(r.set.as_slice()));
    }

    #[test]
    fn a_url_given_two_languages_keeps_its_own() {
        // DE declares itself "de"; EN and FR call it "fr": its own declaration wins over more claims.
        let cluster =
            [stored(EN, &[("en", EN), ("fr", DE)]), stored(FR, &[("fr", DE), ("it", FR)]), stored(DE, &[("de", DE)])];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set, alts(&[("de", DE), ("en", EN), ("it", FR)]));
        assert_eq!(kinds(&r), [(ProblemKind::ConflictingLanguage, DE, "fr", DE)]);
        assert_eq!(
            r.problems[0].message,
            format!(
                "{EN} and {FR} give {DE} the hreflang \"fr\", but its own declaration says \"de\"; sitemapd lists it \
                 as \"de\" only; give a URL the same hreflang in every declaration."
            )
        );
    }

    #[test]
    fn a_url_given_two_languages_by_others_keeps_the_most_claimed_then_the_smaller_code() {
        // DE declares nothing: two claims of "fr" beat one of "de".
        let cluster = [
            stored(EN, &[("en", EN), ("fr", DE)]),
            stored(FR, &[("fr", DE), ("it", FR)]),
            stored(IT, &[("de", DE), ("it", IT)]),
        ];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set.iter().find(|a| a.href == DE).map(|a| a.hreflang.as_str()), Some("fr"));
        let conflicts =
            |r: &Resolution| r.problems.iter().filter(|p| p.kind == ProblemKind::ConflictingLanguage).count();
        assert_eq!(conflicts(&r), 1);
        assert_eq!(kinds(&r)[1], (ProblemKind::ConflictingLanguage, DE, "de", EN));
        // One claim each: the smaller code.
        let cluster = [stored(EN, &[("en", EN), ("fr", EXT)]), stored(IT, &[("de", EXT), ("it", IT)])];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set, alts(&[("de", EXT), ("en", EN), ("it", IT)]));
        // EXT is stored by no site here: the smallest stored member that claims it lists it.
        assert_eq!(kinds(&r)[0], (ProblemKind::ConflictingLanguage, EXT, "fr", EN));
    }

    #[test]
    fn a_language_claimed_twice_keeps_one_url_deterministically() {
        // FR declares itself "de"; DE is called "de" by two others but does not declare: the own claim wins.
        let cluster = [
            stored(EN, &[("en", EN), ("de", DE)]),
            stored(IT, &[("it", IT), ("de", DE)]),
            stored(FR, &[("de", FR), ("en", EN)]),
            stored(DE, &[]),
        ];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set, alts(&[("de", FR), ("en", EN), ("it", IT)]));
        assert_eq!(kinds(&r), [(ProblemKind::DuplicateLanguage, DE, "de", DE)]);
        assert!(r.problems[0].message.contains("as it declares itself \"de\""), "{}", r.problems[0].message);
        assert_eq!(renders(&r, DE), None, "the loser renders no alternates");
        assert_eq!(renders(&r, FR), Some(r.set.as_slice()));
        // Neither declares itself: more claims win; then the smaller href.
        let cluster = [
            stored(EN, &[("en", EN), ("de", IT)]),
            stored(FR, &[("fr", FR), ("de", IT)]),
            stored(OTHER, &[("nl", OTHER), ("de", DE)]),
            stored(DE, &[]),
            stored(IT, &[]),
        ];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set.iter().find(|a| a.hreflang == "de").unwrap().href, IT);
        assert!(r.problems.iter().any(|p| p.message.contains("(2 against 1)")));
        let cluster = [stored(EN, &[("en", EN), ("de", IT)]), stored(FR, &[("fr", FR), ("de", DE)])];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set.iter().find(|a| a.hreflang == "de").unwrap().href, DE, "a.test/de < a.test/it");
        assert_eq!(kinds(&r), [(ProblemKind::DuplicateLanguage, IT, "de", EN)]);
    }

    #[test]
    fn x_default_is_apart_and_may_be_a_language_too() {
        let cluster = [
            stored(EN, &[("en", EN), ("x-default", EN), ("de", DE)]),
            stored(DE, &[("de", DE), ("x-default", EN), ("en", EN)]),
            stored(FR, &[("fr", FR), ("x-default", FR)]),
        ];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set, alts(&[("de", DE), ("en", EN), ("fr", FR), ("x-default", EN)]));
        assert_eq!(kinds(&r), [(ProblemKind::DuplicateLanguage, FR, "x-default", FR)]);
        // FR lost the default but is still "fr": it renders the set.
        assert_eq!(renders(&r, FR), Some(r.set.as_slice()));
        // A URL that is only the default is in the set and renders it.
        let r = resolve(&[stored(EN, &[("en", IT), ("x-default", EN)]), stored(IT, &[])], complete);
        assert_eq!(r.set, alts(&[("en", IT), ("x-default", EN)]));
        assert_eq!(renders(&r, EN), Some(r.set.as_slice()));
        assert_eq!(renders(&r, IT), Some(r.set.as_slice()));
        // Even claims: the smaller href.
        let cluster = [stored(EN, &[("en", EN), ("x-default", IT)]), stored(DE, &[("de", DE), ("x-default", FR)])];
        assert_eq!(resolve(&cluster, complete).set.last(), Some(&alts(&[("x-default", FR)])[0]));
    }

    #[test]
    fn a_served_url_that_is_not_stored_is_left_out_an_external_one_kept() {
        let cluster = [stored(EN, &[("en", EN), ("de", DE), ("es", EXT)]), absent(DE), absent(EXT)];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set, alts(&[("en", EN), ("es", EXT)]));
        assert_eq!(r.complete.keys().collect::<Vec<_>>(), [EN], "only stored members render");
        assert_eq!(kinds(&r), [(ProblemKind::NotStored, DE, "de", EN)]);
        assert_eq!(
            r.problems[0].message,
            format!(
                "{DE} is named as \"de\" by {EN} but is not stored here, so sitemapd leaves it out of the cluster's \
                 links; store it, or remove it from its alternates."
            )
        );
        // Under as_sent the message says what the pages do.
        assert!(resolve(&cluster, as_sent).problems[0].message.contains("rendered as sent"));
        // A not-stored URL does not win its language from a stored one, and deleting a member takes it out.
        let cluster = [
            stored(EN, &[("en", EN), ("de", DE)]),
            stored(FR, &[("fr", FR), ("de", DE)]),
            stored(IT, &[("de", IT)]),
            stored(DE, &[("de", DE)]),
        ];
        let before = resolve(&cluster, complete);
        assert_eq!(before.set.iter().find(|a| a.hreflang == "de").unwrap().href, DE);
        let mut deleted = cluster.to_vec();
        deleted[3] = absent(DE);
        let after = resolve(&deleted, complete);
        assert_eq!(after.set, alts(&[("de", IT), ("en", EN), ("fr", FR)]));
        assert_eq!(kinds(&after), [(ProblemKind::NotStored, DE, "de", EN)]);
    }

    #[test]
    fn a_cluster_across_sites_is_one_and_said_once_per_site() {
        let cluster = [
            stored(FR, &[("fr", FR), ("nl", OTHER), ("en", EN)]),
            stored(EN, &[("en", EN), ("fr", FR), ("nl", OTHER)]),
            stored(OTHER, &[("nl", OTHER), ("fr", FR), ("en", EN)]),
        ];
        let r = resolve(&cluster, complete);
        assert_eq!(r.set.len(), 3);
        assert_eq!(kinds(&r), [(ProblemKind::CrossSite, EN, "", EN), (ProblemKind::CrossSite, OTHER, "", OTHER)]);
        assert!(r.problems[1].message.contains(&format!("(such as {EN})")), "{}", r.problems[1].message);
    }

    #[test]
    fn a_name_no_member_holds_counts_as_external() {
        let r = resolve(&[stored(EN, &[("en", EN), ("de", DE)])], complete);
        assert_eq!(r.set, alts(&[("de", DE), ("en", EN)]));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        const HREFS: [&str; 9] = [
            "https://a.test/0",
            "https://a.test/1",
            "https://a.test/2",
            "https://a.test/3",
            "https://a.test/4",
            "https://b.test/0",
            "https://b.test/1",
            "https://x.test/0",
            "https://x.test/1",
        ];
        const CODES: [&str; 9] = ["en", "de", "fr", "de-AT", "zh-Hant", "es-419", "iw", "x-default", "pt-BR"];

        fn site_of(href: &str) -> Option<i64> {
            if href.starts_with("https://a.test/") {
                Some(1)
            } else if href.starts_with("https://b.test/") {
                Some(2)
            } else {
                None
            }
        }

        /// Random one-way links: each href of a configured site stored or not; a stored one declares some links
        /// (itself included, one per hreflang, as the write API validates them) or none. Members: every stored
        /// href and every named one.
        fn members() -> impl Strategy<Value = Vec<Member>> {
            let node = (any::<bool>(), 0..CODES.len(), prop::collection::vec((0..CODES.len(), 0..HREFS.len()), 0..5));
            prop::collection::vec(node, HREFS.len()).prop_map(|nodes| {
                let mut declared: Vec<Option<Vec<Alternate>>> = vec![None; HREFS.len()];
                let mut stored = vec![false; HREFS.len()];
                let mut named = vec![false; HREFS.len()];
                for (i, (is_stored, own, links)) in nodes.into_iter().enumerate() {
                    stored[i] = is_stored && site_of(HREFS[i]).is_some();
                    if !stored[i] || links.is_empty() {
                        continue;
                    }
                    let mut alternates: Vec<Alternate> = Vec::new();
                    for (code, href) in std::iter::once((own, i)).chain(links) {
                        if alternates.iter().all(|a| a.hreflang != CODES[code]) {
                            alternates
                                .push(Alternate { hreflang: CODES[code].to_owned(), href: HREFS[href].to_owned() });
                            named[href] = true;
                        }
                    }
                    alternates.sort_by(|a, b| a.hreflang.cmp(&b.hreflang));
                    declared[i] = Some(alternates);
                }
                (0..HREFS.len())
                    .filter(|&i| stored[i] || named[i])
                    .map(|i| Member {
                        href: HREFS[i].to_owned(),
                        site: site_of(HREFS[i]),
                        stored: stored[i],
                        declared: declared[i].take(),
                    })
                    .collect()
            })
        }

        /// The same members in another order, and each declaration's alternates too.
        fn shuffled(members: &[Member], mut seed: u64) -> Vec<Member> {
            let mut next = |n: usize| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % n as u64) as usize
            };
            let mut out = members.to_vec();
            for i in (1..out.len()).rev() {
                out.swap(i, next(i + 1));
            }
            for m in &mut out {
                if let Some(d) = &mut m.declared {
                    for i in (1..d.len()).rev() {
                        d.swap(i, next(i + 1));
                    }
                }
            }
            out
        }

        fn hrefs(clusters: &[Vec<Member>]) -> Vec<Vec<&str>> {
            clusters.iter().map(|c| c.iter().map(|m| m.href.as_str()).collect()).collect()
        }

        proptest! {
            #[test]
            fn resolution_follows_its_rules_whatever_the_order(
                members in members(),
                seed in 1u64..,
                complete_sites in (any::<bool>(), any::<bool>()),
            ) {
                let policy = |site: i64| {
                    let complete = if site == 1 { complete_sites.0 } else { complete_sites.1 };
                    if complete { Policy::Complete } else { Policy::AsSent }
                };
                let other = shuffled(&members, seed);
                let ours = clusters(members.clone());
                let theirs = clusters(other);
                prop_assert_eq!(hrefs(&ours), hrefs(&theirs));
                let by_href: BTreeMap<&str, &Member> = members.iter().map(|m| (m.href.as_str(), m)).collect();
                for (cluster, again) in ours.iter().zip(&theirs) {
                    let r = resolve(cluster, policy);
                    prop_assert_eq!(&r, &resolve(again, policy));
                    prop_assert_eq!(&r, &resolve(&shuffled(cluster, seed.rotate_left(7)), policy));
                    prop_assert_eq!(&r.key, &cluster[0].href);
                    // Sorted by hreflang, one href per hreflang.
                    prop_assert!(r.set.windows(2).all(|w| w[0].hreflang < w[1].hreflang), "{:?}", r.set);
                    for a in &r.set {
                        let m = by_href.get(a.href.as_str());
                        prop_assert!(m.is_none_or(|m| m.stored || m.site.is_none()), "{} is served, not stored", a.href);
                        prop_assert!(readable(&a.hreflang).is_ok() || a.hreflang == X_DEFAULT);
                    }
                    let stored: Vec<&Member> = cluster.iter().filter(|m| m.stored).collect();
                    prop_assert_eq!(r.complete.len(), stored.len());
                    for m in stored {
                        let in_set = r.set.iter().any(|a| a.href == m.href);
                        match &r.complete[&m.href] {
                            Some(set) => prop_assert!(in_set && set == &r.set, "{} renders a set it is not in", m.href),
                            None => prop_assert!(!in_set),
                        }
                    }
                    for p in &r.problems {
                        prop_assert!(by_href.get(p.listed_by.as_str()).is_some_and(|m| m.stored), "{p:?}");
                        prop_assert!(!p.message.is_empty() && p.message.contains(&p.href), "{p:?}");
                    }
                    let keys: Vec<_> = r.problems.iter().map(|p| (p.kind, &p.href, &p.hreflang)).collect();
                    prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
                    if !complete_sites.0 || !complete_sites.1 {
                        continue;
                    }
                    prop_assert!(r.problems.iter().all(|p| p.kind != ProblemKind::MissingReturn));
                }
            }
        }
    }
}
