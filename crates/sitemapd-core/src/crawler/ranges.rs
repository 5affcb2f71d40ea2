//! The IP ranges a crawler's operator publishes: [`IpRanges`], a set of networks parsed from a range file (the
//! operators' JSON, or plain text an operator writes) and looked up by binary search over merged intervals.
//! Pure: reading or fetching the file is the server's.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use serde::Deserialize;

/// The largest range file read: the largest published one (Google's) is some 22 kB, so 8 MiB is room for any
/// operator's file and bounds the memory a wrong file (a log, a dump) takes.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;

/// The most networks a range file may hold: published files hold a few hundred, and 200,000 intervals take at
/// most 6.4 MB (IPv6), so a runaway file is refused rather than held.
pub const MAX_NETWORKS: usize = 200_000;

/// How much of a bad entry an error shows.
const SHOWN_CHARS: usize = 80;

/// A set of IP networks, parsed from an operator's range file.
///
/// The networks are held as sorted, merged intervals of addresses, IPv4 and IPv6 apart, so that a lookup is one
/// binary search whatever the file's order, overlaps or host bits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpRanges {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
    networks: usize,
    creation_time: Option<String>,
}

/// Why a range file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("the range file is {size} bytes; at most {MAX_BYTES} are read")]
    TooLarge { size: usize },
    #[error("the range file holds more than {MAX_NETWORKS} networks")]
    TooManyNetworks,
    /// JSON, but not `{"prefixes": [...]}`: what serde_json found, clipped.
    #[error("not a range file (JSON with \"prefixes\": [{{\"ipv4Prefix\": ...}}, ...]): {0}")]
    NotRangeJson(String),
    #[error("{at}: {problem}: {text:?}")]
    BadEntry { at: Entry, problem: Problem, text: String },
}

/// Where a bad entry is: a line of a text file (from 1) or an element of a JSON file's `prefixes` (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Line(usize),
    Prefix(usize),
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Line(n) => write!(f, "line {n}"),
            Entry::Prefix(i) => write!(f, "prefixes[{i}]"),
        }
    }
}

/// What is wrong with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("not an IP address")]
    BadAddress,
    #[error("the prefix length is not a number from 0 to {max}")]
    BadPrefixLength { max: u8 },
    #[error("an IPv6 network under \"ipv4Prefix\" or an IPv4 one under \"ipv6Prefix\"")]
    WrongFamily,
    #[error("an element of \"prefixes\" needs one \"ipv4Prefix\" or \"ipv6Prefix\" string")]
    NoPrefix,
}

/// The operators' JSON: `creationTime` and `prefixes`; other keys are ignored.
#[derive(Deserialize)]
struct RangeFile {
    #[serde(rename = "creationTime", default)]
    creation_time: Option<String>,
    prefixes: Vec<serde_json::Value>,
}

/// One network as given, before merging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Net {
    V4(u32, u32),
    V6(u128, u128),
}

impl IpRanges {
    /// Parses a range file, telling its form by its first character: `{` (or `[`) is the operators' JSON
    /// (`{"creationTime": "...", "prefixes": [{"ipv4Prefix": "a.b.c.d/n"}, {"ipv6Prefix": "x::/n"}]}`), anything
    /// else plain text (an address or a CIDR network a line; `#` starts a comment; blank lines ignored). A bare
    /// address is a /32 or /128; host bits set in a network are masked off; an IPv4-mapped IPv6 network
    /// (`::ffff:a.b.c.d/n`, n ≥ 96) is held as the IPv4 network it maps.
    pub fn parse(text: &str) -> Result<IpRanges, RangeError> {
        if text.len() > MAX_BYTES {
            return Err(RangeError::TooLarge { size: text.len() });
        }
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let (nets, creation_time) = match text.trim_start().as_bytes().first() {
            Some(b'{' | b'[') => parse_json(text)?,
            _ => (parse_text(text)?, None),
        };
        let mut ranges = IpRanges { networks: nets.len(), creation_time, ..IpRanges::default() };
        ranges.add(&nets);
        Ok(ranges)
    }

    /// Whether `ip` lies in one of the networks. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a dual-stack
    /// socket reports an IPv4 peer) is looked up as the IPv4 address it maps.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => in_intervals(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => in_intervals(&self.v4, u32::from(v4)),
                None => in_intervals(&self.v6, u128::from(v6)),
            },
        }
    }

    /// How many networks the file gave (before merging).
    pub fn len(&self) -> usize {
        self.networks
    }

    pub fn is_empty(&self) -> bool {
        self.networks == 0
    }

    /// The JSON file's `creationTime`, as given (for the logs: how old the operator's list is).
    pub fn creation_time(&self) -> Option<&str> {
        self.creation_time.as_deref()
    }

    /// Adds `other`'s networks (an operator's second file, say). The creation time stays this set's, or becomes
    /// `other`'s when this one has none.
    pub fn merge(&mut self, other: IpRanges) {
        let nets: Vec<Net> =
            other.v4.iter().map(|&(s, e)| Net::V4(s, e)).chain(other.v6.iter().map(|&(s, e)| Net::V6(s, e))).collect();
        self.add(&nets);
        self.networks += other.networks;
        if self.creation_time.is_none() {
            self.creation_time = other.creation_time;
        }
    }

    /// Adds networks' intervals (not counting them) and sorts and merges the intervals again.
    fn add(&mut self, nets: &[Net]) {
        for net in nets {
            match *net {
                Net::V4(s, e) => self.v4.push((s, e)),
                Net::V6(s, e) => self.v6.push((s, e)),
            }
        }
        normalize(&mut self.v4);
        normalize(&mut self.v6);
    }
}

fn parse_json(text: &str) -> Result<(Vec<Net>, Option<String>), RangeError> {
    let file: RangeFile = serde_json::from_str(text).map_err(|e| RangeError::NotRangeJson(clip(&e.to_string())))?;
    if file.prefixes.len() > MAX_NETWORKS {
        return Err(RangeError::TooManyNetworks);
    }
    let nets = file
        .prefixes
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let at = Entry::Prefix(index);
            let bad = |problem| RangeError::BadEntry { at, problem, text: clip(&value.to_string()) };
            let (v4, v6) = (value.get("ipv4Prefix"), value.get("ipv6Prefix"));
            let (text, want_v4) = match (v4, v6) {
                (Some(serde_json::Value::String(s)), None) => (s, true),
                (None, Some(serde_json::Value::String(s))) => (s, false),
                _ => return Err(bad(Problem::NoPrefix)),
            };
            let net =
                parse_net(text.trim()).map_err(|problem| RangeError::BadEntry { at, problem, text: clip(text) })?;
            // By the written form: a mapped IPv6 network under "ipv6Prefix" is held as IPv4, and is still IPv6.
            if want_v4 == text.contains(':') {
                return Err(RangeError::BadEntry { at, problem: Problem::WrongFamily, text: clip(text) });
            }
            Ok(net)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((nets, file.creation_time))
}

fn parse_text(text: &str) -> Result<Vec<Net>, RangeError> {
    let mut nets = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let entry = line.split_once('#').map_or(line, |(before, _)| before).trim();
        if entry.is_empty() {
            continue;
        }
        if nets.len() == MAX_NETWORKS {
            return Err(RangeError::TooManyNetworks);
        }
        let net = parse_net(entry).map_err(|problem| RangeError::BadEntry {
            at: Entry::Line(i + 1),
            problem,
            text: clip(entry),
        })?;
        nets.push(net);
    }
    Ok(nets)
}

/// One address or CIDR network (`a.b.c.d[/n]`, `x::y[/n]`) as an interval, host bits masked off.
fn parse_net(text: &str) -> Result<Net, Problem> {
    let (addr, len) = match text.split_once('/') {
        Some((addr, len)) => (addr, Some(len)),
        None => (text, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| Problem::BadAddress)?;
    let max: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        // Digits only: `u8::from_str` would take "+8".
        Some(len) if (1..=3).contains(&len.len()) && len.bytes().all(|b| b.is_ascii_digit()) => {
            len.parse::<u8>().ok().filter(|&n| n <= max).ok_or(Problem::BadPrefixLength { max })?
        }
        Some(_) => return Err(Problem::BadPrefixLength { max }),
    };
    Ok(match addr {
        IpAddr::V4(a) => v4_net(a, len),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(mapped) if len >= 96 => v4_net(mapped, len - 96),
            _ => {
                let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
                let start = u128::from(a) & mask;
                Net::V6(start, start | !mask)
            }
        },
    })
}

fn v4_net(addr: Ipv4Addr, len: u8) -> Net {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
    let start = u32::from(addr) & mask;
    Net::V4(start, start | !mask)
}

/// Sorts intervals and joins those that overlap or touch, so that at most one can hold an address.
fn normalize<T: Copy + Ord + Step>(intervals: &mut Vec<(T, T)>) {
    intervals.sort_unstable();
    let mut merged: Vec<(T, T)> = Vec::with_capacity(intervals.len());
    for &(start, end) in intervals.iter() {
        match merged.last_mut() {
            Some(last) if start <= last.1.next_or_max() => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    *intervals = merged;
}

/// The address after this one, or this one when it is the last: whether an interval starting there touches.
trait Step {
    fn next_or_max(self) -> Self;
}

impl Step for u32 {
    fn next_or_max(self) -> Self {
        self.saturating_add(1)
    }
}

impl Step for u128 {
    fn next_or_max(self) -> Self {
        self.saturating_add(1)
    }
}

/// Whether sorted, disjoint intervals hold `x`: the last interval starting at or before `x` must reach it.
fn in_intervals<T: Copy + Ord>(intervals: &[(T, T)], x: T) -> bool {
    let after = intervals.partition_point(|&(start, _)| start <= x);
    after > 0 && intervals[after - 1].1 >= x
}

/// At most [`SHOWN_CHARS`] characters of `text`, for an error message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use proptest::prelude::*;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn parse(text: &str) -> IpRanges {
        IpRanges::parse(text).unwrap()
    }

    #[test]
    fn reads_the_operators_json_and_ignores_other_keys() {
        let r = parse(
            r#"{"creationTime": "2026-08-21T14:45:42.000000", "syncToken": "1",
                "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "2001:4860:4801:10::/64", "x": 1}]}"#,
        );
        assert_eq!(r.len(), 2);
        assert!(!r.is_empty());
        assert_eq!(r.creation_time(), Some("2026-08-21T14:45:42.000000"));
        assert!(r.contains(ip("66.249.64.5")));
        assert!(r.contains(ip("2001:4860:4801:10::1")));
        assert!(!r.contains(ip("66.249.64.32")));
        assert!(!r.contains(ip("2001:4860:4801:11::")));
    }

    #[test]
    fn json_without_creation_time_or_prefixes_entries() {
        let r = parse(r#"{"prefixes": []}"#);
        assert!(r.is_empty());
        assert_eq!(r.creation_time(), None);
        assert!(!r.contains(ip("0.0.0.0")));
        assert!(!r.contains(ip("::")));
    }

    #[test]
    fn reads_plain_text_with_comments_blank_lines_and_whitespace() {
        let r = parse(
            "\u{feff}# DuckDuckBot\r\n\r\n  20.191.45.212  \r\n57.152.72.128 # a bare address\n\t10.0.0.0/8\n# 11.0.0.0/8\n2001:db8::/32\n",
        );
        assert_eq!(r.len(), 4);
        assert_eq!(r.creation_time(), None);
        assert!(r.contains(ip("20.191.45.212")));
        assert!(!r.contains(ip("20.191.45.213")), "a bare address is a /32");
        assert!(r.contains(ip("57.152.72.128")));
        assert!(r.contains(ip("10.255.255.255")));
        assert!(!r.contains(ip("11.0.0.1")), "a commented line is not read");
        assert!(r.contains(ip("2001:db8:ffff::1")));
        assert!(parse("").is_empty());
        assert!(parse("# nothing\n\n   \n").is_empty());
    }

    #[test]
    fn a_bare_ipv6_address_is_a_slash_128() {
        let r = parse("2001:db8::7");
        assert!(r.contains(ip("2001:db8::7")));
        assert!(!r.contains(ip("2001:db8::6")));
        assert!(!r.contains(ip("2001:db8::8")));
    }

    #[test]
    fn host_bits_are_masked_not_refused() {
        let r = parse("10.1.2.3/8\n2001:db8::1/32");
        assert!(r.contains(ip("10.0.0.0")));
        assert!(r.contains(ip("10.255.255.255")));
        assert!(!r.contains(ip("11.0.0.0")));
        assert!(r.contains(ip("2001:db8::")));
        assert!(!r.contains(ip("2001:db9::")));
        assert_eq!(r, parse("10.0.0.0/8\n2001:db8::/32"));
    }

    #[test]
    fn the_first_and_last_address_are_inside_and_their_neighbours_outside() {
        let r = parse("192.0.2.64/26\n2001:db8:0:1::/64");
        assert!(!r.contains(ip("192.0.2.63")));
        assert!(r.contains(ip("192.0.2.64")));
        assert!(r.contains(ip("192.0.2.127")));
        assert!(!r.contains(ip("192.0.2.128")));
        assert!(!r.contains(ip("2001:db8::ffff:ffff:ffff:ffff")));
        assert!(r.contains(ip("2001:db8:0:1::")));
        assert!(r.contains(ip("2001:db8:0:1:ffff:ffff:ffff:ffff")));
        assert!(!r.contains(ip("2001:db8:0:2::")));
    }

    #[test]
    fn the_whole_space_and_its_ends() {
        let r = parse("0.0.0.0/0\n::/0");
        for a in ["0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] {
            assert!(r.contains(ip(a)), "{a}");
        }
        let ends = parse("0.0.0.0/32\n255.255.255.255\n::\nffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");
        assert!(ends.contains(ip("0.0.0.0")) && ends.contains(ip("255.255.255.255")));
        assert!(!ends.contains(ip("0.0.0.1")) && !ends.contains(ip("255.255.255.254")));
        assert!(ends.contains(ip("::")) && !ends.contains(ip("::1")));
        assert!(ends.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
    }

    #[test]
    fn overlapping_and_adjacent_networks_merge_into_one_interval() {
        // Adjacent (.0/25 and .128/25), nested (/26 inside /24), overlapping, out of order, repeated.
        let r = parse("198.51.100.128/25\n198.51.100.0/25\n198.51.100.64/26\n198.51.100.0/24\n203.0.113.0/24\n");
        assert_eq!(r.len(), 5);
        assert_eq!(r.v4, vec![(0xc633_6400, 0xc633_64ff), (0xcb00_7100, 0xcb00_71ff)]);
        let r = parse("2001:db8::/33\n2001:db8:8000::/33\n2001:db8::/48");
        assert_eq!(r.v6, vec![(0x2001_0db8 << 96, (0x2001_0db8 << 96) | ((1u128 << 96) - 1))]);
        // Touching the last address does not overflow.
        let r = parse("255.255.255.0/24\n255.255.255.255");
        assert_eq!(r.v4, vec![(0xffff_ff00, u32::MAX)]);
        // A gap of one address is kept.
        let r = parse("192.0.2.0/31\n192.0.2.3");
        assert_eq!(r.v4.len(), 2);
        assert!(!r.contains(ip("192.0.2.2")));
    }

    #[test]
    fn an_ipv4_mapped_ipv6_address_is_looked_up_as_ipv4() {
        let r = parse("66.249.64.0/27");
        assert!(r.contains(ip("::ffff:66.249.64.1")));
        assert!(r.contains(IpAddr::V6(Ipv4Addr::new(66, 249, 64, 31).to_ipv6_mapped())));
        assert!(!r.contains(ip("::ffff:66.249.64.32")));
        // Only the mapped form: the deprecated IPv4-compatible form (::a.b.c.d) is an IPv6 address.
        assert!(!r.contains(ip("::66.249.64.1")));
        // A mapped network in the file is held as IPv4.
        let m = parse("::ffff:192.0.2.0/120");
        assert!(m.contains(ip("192.0.2.255")));
        assert!(m.contains(ip("::ffff:192.0.2.1")));
        assert!(!m.contains(ip("192.0.3.0")));
    }

    #[test]
    fn merge_adds_the_other_sets_networks() {
        let mut a = parse(r#"{"creationTime": "a", "prefixes": [{"ipv4Prefix": "192.0.2.0/25"}]}"#);
        a.merge(parse("192.0.2.128/25\n2001:db8::/32"));
        assert_eq!(a.len(), 3);
        assert_eq!(a.creation_time(), Some("a"));
        assert_eq!(a.v4, vec![(0xc000_0200, 0xc000_02ff)]);
        assert!(a.contains(ip("2001:db8::1")));
        let mut b = IpRanges::default();
        b.merge(parse(r#"{"creationTime": "b", "prefixes": []}"#));
        assert_eq!(b.creation_time(), Some("b"));
    }

    fn error(text: &str) -> RangeError {
        IpRanges::parse(text).unwrap_err()
    }

    #[test]
    fn a_bad_prefix_length_names_its_line_and_text() {
        for (text, max) in [("10.0.0.0/33", 32), ("2001:db8::/129", 128), ("10.0.0.0/", 32), ("10.0.0.0/+8", 32)] {
            let e = error(&format!("# header\n192.0.2.1\n{text}\n"));
            assert_eq!(
                e,
                RangeError::BadEntry {
                    at: Entry::Line(3),
                    problem: Problem::BadPrefixLength { max },
                    text: text.to_owned()
                }
            );
        }
        assert_eq!(
            error("10.0.0.0/33").to_string(),
            "line 1: the prefix length is not a number from 0 to 32: \"10.0.0.0/33\""
        );
        for text in ["10.0.0.0/0008", "10.0.0.0/-1", "10.0.0.0/8/8", "10.0.0.0/ 8"] {
            assert!(matches!(error(text), RangeError::BadEntry { problem: Problem::BadPrefixLength { .. }, .. }));
        }
    }

    #[test]
    fn a_bad_address_names_its_entry() {
        for text in ["10.0.0.256", "10.0.0", "example.com", "fe80::1%eth0", "10.0.0.1 10.0.0.2", "::ffff::1"] {
            let e = error(&format!("192.0.2.1\n{text}"));
            assert_eq!(e, RangeError::BadEntry { at: Entry::Line(2), problem: Problem::BadAddress, text: text.into() });
        }
        let e = error(r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}, {"ipv4Prefix": "192.0.2.x/24"}]}"#);
        assert_eq!(
            e,
            RangeError::BadEntry { at: Entry::Prefix(1), problem: Problem::BadAddress, text: "192.0.2.x/24".into() }
        );
        assert_eq!(e.to_string(), "prefixes[1]: not an IP address: \"192.0.2.x/24\"");
    }

    #[test]
    fn the_shown_text_is_clipped() {
        let long = "1".repeat(5000);
        let RangeError::BadEntry { text, .. } = error(&long) else { panic!("not a bad entry") };
        assert_eq!(text.chars().count(), SHOWN_CHARS + 1);
        assert!(text.ends_with('…'));
        // Clipping counts characters, never cutting one.
        let RangeError::BadEntry { text, .. } = error(&"é".repeat(200)) else { panic!("not a bad entry") };
        assert_eq!(text, format!("{}…", "é".repeat(SHOWN_CHARS)));
    }

    #[test]
    fn json_entries_of_the_wrong_shape_or_family_are_refused() {
        let cases = [
            (r#"{"ipv4Prefix": "2001:db8::/32"}"#, Problem::WrongFamily),
            (r#"{"ipv6Prefix": "192.0.2.0/24"}"#, Problem::WrongFamily),
            (r#"{"ipv4Prefix": "::ffff:192.0.2.0/120"}"#, Problem::WrongFamily),
            (r#"{"ipv4Prefix": 7}"#, Problem::NoPrefix),
            (r#"{"prefix": "192.0.2.0/24"}"#, Problem::NoPrefix),
            (r#"{"ipv4Prefix": "192.0.2.0/24", "ipv6Prefix": "2001:db8::/32"}"#, Problem::NoPrefix),
            (r#""192.0.2.0/24""#, Problem::NoPrefix),
        ];
        for (entry, problem) in cases {
            let e = error(&format!(r#"{{"prefixes": [{entry}]}}"#));
            assert!(
                matches!(e, RangeError::BadEntry { at: Entry::Prefix(0), problem: p, .. } if p == problem),
                "{entry}: {e}"
            );
        }
        // A mapped network under "ipv6Prefix" is IPv6 as written.
        assert!(parse(r#"{"prefixes": [{"ipv6Prefix": "::ffff:192.0.2.0/120"}]}"#).contains(ip("192.0.2.1")));
    }

    #[test]
    fn json_that_is_not_a_range_file_is_refused() {
        for text in [
            "{}",
            r#"{"prefixes": {"ipv4Prefix": "192.0.2.0/24"}}"#,
            r#"{"prefixes": [], "creationTime": 5}"#,
            "[]",
            r#"[{"ipv4Prefix": "192.0.2.0/24"}]"#,
            r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}]"#,
            "  {",
        ] {
            assert!(matches!(error(text), RangeError::NotRangeJson(_)), "{text}");
        }
        assert!(error("{}").to_string().starts_with("not a range file"));
        // Deep nesting is serde_json's recursion limit, an error and not a stack overflow; under a key that is
        // ignored it is skipped without recursion.
        let deep = format!(r#"{{"prefixes": [{}{}]}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(error(&deep), RangeError::NotRangeJson(_)));
        let ignored = format!(r#"{{"x": {}{}, "prefixes": []}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&ignored).is_empty());
        // The message is clipped.
        let e = error(&format!(r#"{{"prefixes": "{}"}}"#, "x".repeat(1000)));
        let RangeError::NotRangeJson(message) = e else { panic!("{e}") };
        assert!(message.chars().count() <= SHOWN_CHARS + 1, "{message}");
    }

    #[test]
    fn too_large_input_is_refused() {
        let big = " ".repeat(MAX_BYTES + 1);
        assert_eq!(error(&big), RangeError::TooLarge { size: MAX_BYTES + 1 });
        assert!(parse(&" ".repeat(MAX_BYTES)).is_empty());
    }

    #[test]
    fn too_many_networks_are_refused() {
        let lines = |n: u32| (0..n).map(|i| Ipv4Addr::from(i).to_string()).collect::<Vec<_>>().join("\n");
        let limit = u32::try_from(MAX_NETWORKS).unwrap();
        assert_eq!(parse(&lines(limit)).len(), MAX_NETWORKS);
        assert_eq!(error(&lines(limit + 1)), RangeError::TooManyNetworks);
        let json =
            |n: usize| format!(r#"{{"prefixes": [{}]}}"#, vec![r#"{"ipv4Prefix": "192.0.2.0/24"}"#; n].join(","));
        assert_eq!(parse(&json(MAX_NETWORKS)).len(), MAX_NETWORKS);
        assert_eq!(error(&json(MAX_NETWORKS + 1)), RangeError::TooManyNetworks);
    }

    /// The range files shipped in `config/crawlers/` (their sources: `SOURCES.md` there), each with an address
    /// its own data puts inside: the first address of one of its networks.
    const SHIPPED: &[(&str, &str, &[&str])] = &[
        (
            "googlebot",
            include_str!("../../../../config/crawlers/googlebot.json"),
            &["66.249.66.1", "192.178.4.0", "2001:4860:4801:10::"],
        ),
        ("applebot", include_str!("../../../../config/crawlers/applebot.json"), &["17.241.208.160", "17.166.20.0"]),
        (
            "duckduckbot",
            include_str!("../../../../config/crawlers/duckduckbot.json"),
            &["20.191.45.212", "98.70.219.37"],
        ),
    ];

    const SOURCES: &str = include_str!("../../../../config/crawlers/SOURCES.md");

    #[test]
    fn every_shipped_range_file_parses_and_holds_its_known_addresses() {
        for &(name, text, inside) in SHIPPED {
            assert!(crate::crawler::Crawler::from_name(name).is_some(), "{name}.json is named for no crawler");
            let ranges = IpRanges::parse(text).unwrap_or_else(|e| panic!("{name}.json: {e}"));
            assert!(!ranges.is_empty(), "{name}.json");
            // Every entry was read: as many networks as the file names prefixes.
            assert_eq!(ranges.len(), text.matches("Prefix\"").count(), "{name}.json");
            for ip in inside {
                assert!(ranges.contains(ip.parse().unwrap()), "{name}.json lacks {ip}");
            }
            assert!(!ranges.contains(ip("192.0.2.1")) && !ranges.contains(ip("2001:db8::1")), "{name}.json");
            // SOURCES.md names the file with its creation time and count.
            let creation = ranges.creation_time().unwrap_or_else(|| panic!("{name}.json has no creationTime"));
            let row = SOURCES
                .lines()
                .find(|l| l.starts_with(&format!("| `{name}.json` |")))
                .unwrap_or_else(|| panic!("SOURCES.md has no row for {name}.json"));
            assert!(row.contains(creation) && row.contains(&format!("| {} |", ranges.len())), "{row}");
        }
    }

    #[test]
    fn every_file_in_config_crawlers_is_tested() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/crawlers");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|f| f != "SOURCES.md")
            .collect();
        files.sort();
        let mut shipped: Vec<String> = SHIPPED.iter().map(|(name, ..)| format!("{name}.json")).collect();
        shipped.sort();
        assert_eq!(files, shipped);
    }

    /// A network as the proptests make it: an address and a prefix length.
    #[derive(Clone, Debug)]
    enum Given {
        V4(Ipv4Addr, u8),
        V6(Ipv6Addr, u8),
    }

    impl Given {
        fn text(&self) -> String {
            match self {
                Given::V4(a, n) => format!("{a}/{n}"),
                Given::V6(a, n) => format!("{a}/{n}"),
            }
        }

        /// The naive rule: the address and the network agree on the prefix's bits.
        fn holds(&self, ip: IpAddr) -> bool {
            let ip = match ip {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                v4 => v4,
            };
            match (self, ip) {
                (Given::V4(a, n), IpAddr::V4(ip)) => {
                    *n == 0 || (u32::from(*a) ^ u32::from(ip)) >> (32 - u32::from(*n)) == 0
                }
                (Given::V6(a, n), IpAddr::V6(ip)) => {
                    *n == 0 || (u128::from(*a) ^ u128::from(ip)) >> (128 - u32::from(*n)) == 0
                }
                _ => false,
            }
        }

        /// Addresses at the network's edges: its first and last, and the ones just outside.
        fn edges(&self) -> Vec<IpAddr> {
            match self {
                Given::V4(a, n) => {
                    let mask = if *n == 0 { 0 } else { u32::MAX << (32 - u32::from(*n)) };
                    let (first, last) = (u32::from(*a) & mask, u32::from(*a) | !mask);
                    [first, last, first.wrapping_sub(1), last.wrapping_add(1)]
                        .map(|x| IpAddr::V4(Ipv4Addr::from(x)))
                        .to_vec()
                }
                Given::V6(a, n) => {
                    let mask = if *n == 0 { 0 } else { u128::MAX << (128 - u32::from(*n)) };
                    let (first, last) = (u128::from(*a) & mask, u128::from(*a) | !mask);
                    [first, last, first.wrapping_sub(1), last.wrapping_add(1)]
                        .map(|x| IpAddr::V6(Ipv6Addr::from(x)))
                        .to_vec()
                }
            }
        }
    }

    fn given() -> impl Strategy<Value = Given> {
        prop_oneof![
            // Mostly long prefixes, as published files hold, with short ones to make overlaps.
            (any::<u32>(), prop_oneof![3 => 16u8..=32, 1 => 0u8..16]).prop_map(|(a, n)| Given::V4(a.into(), n)),
            // Addresses in one /16, so that networks overlap and touch.
            (any::<u16>(), 16u8..=32).prop_map(|(a, n)| Given::V4(Ipv4Addr::from(0xc000_0000 | u32::from(a)), n)),
            (any::<u128>(), 0u8..=128).prop_map(|(a, n)| Given::V6(a.into(), n)),
            (any::<u16>(), 112u8..=128)
                .prop_map(|(a, n)| Given::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) | u128::from(a)), n)),
        ]
    }

    proptest! {
        #[test]
        fn contains_agrees_with_a_naive_check(
            nets in prop::collection::vec(given(), 0..40),
            random in prop::collection::vec(any::<u32>().prop_map(|a| IpAddr::V4(a.into())), 0..20),
            random6 in prop::collection::vec(any::<u128>().prop_map(|a| IpAddr::V6(a.into())), 0..20),
            json in any::<bool>(),
        ) {
            let text = if json {
                let entries: Vec<String> = nets
                    .iter()
                    .map(|n| match n {
                        Given::V4(..) => format!(r#"{{"ipv4Prefix": "{}"}}"#, n.text()),
                        Given::V6(..) => format!(r#"{{"ipv6Prefix": "{}"}}"#, n.text()),
                    })
                    .collect();
                format!(r#"{{"creationTime": "t", "prefixes": [{}]}}"#, entries.join(", "))
            } else {
                nets.iter().map(Given::text).collect::<Vec<_>>().join("\n")
            };
            let ranges = IpRanges::parse(&text).unwrap();
            prop_assert_eq!(ranges.len(), nets.len());
            let edges = nets.iter().flat_map(Given::edges);
            let mapped: Vec<IpAddr> =
                random.iter().chain(edges.clone().collect::<Vec<_>>().iter()).filter_map(|ip| match ip {
                    IpAddr::V4(v4) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
                    IpAddr::V6(_) => None,
                }).collect();
            for ip in random.iter().copied().chain(random6).chain(edges).chain(mapped) {
                let naive = nets.iter().any(|n| n.holds(ip));
                prop_assert_eq!(ranges.contains(ip), naive, "{}", ip);
            }
            // Merged intervals are sorted, disjoint and not touching.
            for w in ranges.v4.windows(2) {
                prop_assert!(w[0].1 < w[1].0 && w[1].0 - w[0].1 > 1);
            }
            for w in ranges.v6.windows(2) {
                prop_assert!(w[0].1 < w[1].0 && w[1].0 - w[0].1 > 1);
            }
        }
    }
}
