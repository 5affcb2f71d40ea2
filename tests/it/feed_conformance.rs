//! The Atom feeds against the standards and real readers: every feed the tests make validates against RFC 4287's
//! RELAX NG schema with RFC 6721 tombstones and RFC 3339 dates (`tests/feeds/feed.rnc`, through trang and
//! xmllint) and RFC 4287's Schematron rules; Python's feedparser and npm's rss-parser read exactly the changes
//! the API stored (same locs, same order, same times), and rss-parser the deletions as tombstones. The checks
//! themselves are tested first, on a hand-written feed (`tests/feeds/fixtures/sample.atom`) and broken copies of it.

use serde_json::{Value, json};

use crate::support::{Reader, atom_problems, read_feed, validate_atom};

const SAMPLE: &str = include_str!("../feeds/fixtures/sample.atom");

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `SAMPLE` with `from` replaced by `to` (which must be there).
fn broken(from: &str, to: &str) -> String {
    assert!(SAMPLE.contains(from), "the sample has no {from:?}");
    SAMPLE.replacen(from, to, 1)
}

#[test]
#[cfg_attr(
    any(sitemapd_no_xmllint, sitemapd_no_trang),
    ignore = "needs xmllint and trang (Debian: libxml2-utils trang)"
)]
fn the_schema_passes_the_sample_feed_plain_and_gzipped() {
    validate_atom(SAMPLE.as_bytes());
    validate_atom(&gzip(SAMPLE.as_bytes()));
}

#[test]
#[cfg_attr(
    any(sitemapd_no_xmllint, sitemapd_no_trang),
    ignore = "needs xmllint and trang (Debian: libxml2-utils trang)"
)]
fn the_schema_fails_a_feed_that_breaks_the_rfcs() {
    let first_entry = "<entry><id>https://www.example.com/a?x=1&amp;y='2'</id>";
    let cases: Vec<(&str, String, &str)> = vec![
        ("no feed <id>", broken("<id>https://www.example.com/feed.atom</id>\n", ""), "Relax-NG"),
        ("no entry <id>", broken(first_entry, "<entry>"), "Relax-NG"),
        ("two feed <id>", broken("<generator>", "<id>urn:x</id><generator>"), "Relax-NG"),
        ("a date alone", broken("2026-11-27T00:00:00Z", "2026-11-27"), "Relax-NG"),
        ("no offset (RFC 3339)", broken("2026-11-27T00:00:00Z", "2026-11-27T00:00:00"), "Relax-NG"),
        ("a lowercase z", broken("2026-11-27T00:00:00Z", "2026-11-27T00:00:00z"), "Relax-NG"),
        ("month 13", broken("2026-11-27T00:00:00Z", "2026-13-27T00:00:00Z"), "Relax-NG"),
        ("no feed <updated>", broken("<updated>2026-11-28T12:00:05Z</updated>\n", ""), "Relax-NG"),
        ("a tombstone without when", broken(r#" when="2026-11-28T10:30:00Z""#, ""), "Relax-NG"),
        ("a tombstone without ref", broken(r#" ref="https://www.example.com/gone""#, ""), "Relax-NG"),
        ("a tombstone's when a date", broken(r#"when="2026-11-28T10:30:00Z""#, r#"when="2026-11-28""#), "Relax-NG"),
        (
            "an unknown tombstone element",
            broken("at:deleted-entry ref=\"https://www.example.com/gone\"", "at:deleted ref=\"x\""),
            "Relax-NG",
        ),
        (
            "not Atom's namespace",
            broken("xmlns=\"http://www.w3.org/2005/Atom\"", "xmlns=\"http://example.com/\""),
            "Relax-NG",
        ),
        ("an entry without a link", broken("<link href=\"https://www.example.com/day\"/>", ""), "Schematron"),
        ("no author anywhere", broken("<author><name>Example — blog</name></author>\n", ""), "Schematron"),
    ];
    for (what, feed, by) in cases {
        match atom_problems(feed.as_bytes()) {
            Ok(()) => panic!("a feed with {what} passed:\n{feed}"),
            Err(problems) => assert!(problems.contains(by), "{what}: not found by {by}:\n{problems}"),
        }
    }
    let mut bad_utf8 = SAMPLE.as_bytes().to_vec();
    bad_utf8.extend_from_slice(&[0xff, 0xfe]);
    assert!(atom_problems(&bad_utf8).unwrap_err().contains("not UTF-8"));
}

/// What the readers should make of `SAMPLE`: its entries (id = link = loc, the UTC second of `<updated>`) and its
/// tombstones (ref, when), each in document order.
fn sample_expected() -> (Value, Value) {
    let entries = json!([
        {"id": "https://www.example.com/a?x=1&y='2'", "link": "https://www.example.com/a?x=1&y='2'", "updated_s": 1_795_863_600},
        {"id": "https://www.example.com/caf%C3%A9/ünï", "link": "https://www.example.com/caf%C3%A9/ünï", "updated_s": 1_795_860_900},
        {"id": "https://www.example.com/day", "link": "https://www.example.com/day", "updated_s": 1_795_737_600},
    ]);
    let deleted = json!([
        {"ref": "https://www.example.com/gone", "when_s": 1_795_861_800},
        {"ref": "https://www.example.com/older", "when_s": 1_795_680_000},
    ]);
    (entries, deleted)
}

/// `read`'s entries (and tombstones) with only the fields `sample_expected` names.
fn seen(read: &Value) -> (Value, Value) {
    let entries = read["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| json!({"id": e["id"], "link": e["link"], "updated_s": e["updated_s"]}))
        .collect();
    let deleted = match &read["deleted"] {
        Value::Null => Value::Null,
        d => d.as_array().unwrap().iter().map(|d| json!({"ref": d["ref"], "when_s": d["when_s"]})).collect(),
    };
    (entries, deleted)
}

#[test]
#[cfg_attr(sitemapd_no_feedparser, ignore = "needs feedparser in target/feeds-venv: tests/feeds/setup.sh")]
fn feedparser_reads_the_sample_feed() {
    let read = read_feed(Reader::Feedparser, &gzip(SAMPLE.as_bytes()));
    let (entries, _) = sample_expected();
    assert_eq!(seen(&read), (entries, Value::Null), "{read:#}");
    assert_eq!(read["id"], "https://www.example.com/feed.atom");
    assert_eq!(read["title"], "Example — blog");
    assert_eq!(read["updated_s"], 1_795_867_205);
}

#[test]
#[cfg_attr(
    any(sitemapd_no_node, sitemapd_no_rss_parser),
    ignore = "needs node and rss-parser in tests/feeds/node: tests/feeds/setup.sh"
)]
fn rss_parser_reads_the_sample_feed_tombstones_included() {
    let read = read_feed(Reader::RssParser, SAMPLE.as_bytes());
    assert_eq!(seen(&read), sample_expected(), "{read:#}");
    assert_eq!(read["id"], "https://www.example.com/feed.atom");
    assert_eq!(read["self"], "https://www.example.com/feed.atom");
    assert_eq!(read["updated_s"], 1_795_867_205);
}
