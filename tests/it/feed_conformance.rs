//! The Atom feeds against the standards and real readers: every feed the tests make validates against RFC 4287's
//! RELAX NG schema with RFC 6721 tombstones and RFC 3339 dates (`tests/feeds/feed.rnc`, through trang and
//! xmllint) and RFC 4287's Schematron rules; Python's feedparser and npm's rss-parser read exactly the changes
//! the API stored (same locs, same order, same times), and rss-parser the deletions as tombstones. The checks
//! themselves are tested first, on a hand-written feed (`tests/feeds/fixtures/sample.atom`) and broken copies of it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::support::{Backend, PUBLIC_URL, Reader, TestApp, atom_problems, read_feed, validate_atom};

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

// --- the feeds sitemapd serves --------------------------------------------------------------------------------

/// One item of a feed: an entry (its loc and the instant of its `<updated>`, in whole seconds) or an RFC 6721
/// tombstone (its ref and when).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    Entry { loc: String, updated_s: i64 },
    Deleted { loc: String, when_s: i64 },
}

/// A record as stored: what the feeds are made of.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    id: i64,
    loc: String,
    lastmod: Option<String>,
    changed_us: Option<i64>,
    section: i64,
    excluded: bool,
}

/// A tombstone as stored.
#[derive(Clone, Debug)]
pub(crate) struct Removed {
    loc: String,
    removed_us: i64,
    pub(crate) section: Option<i64>,
}

/// The default site's records, tombstones and sections (name → id), read with the test's own SQL.
pub(crate) async fn stored(app: &TestApp) -> (Vec<Stored>, Vec<Removed>, BTreeMap<String, i64>) {
    use sqlx::Connection;
    let records = "SELECT id, loc, lastmod, changed_us, page_id >> 20, CAST(CASE WHEN excluded THEN 1 ELSE 0 END AS BIGINT) \
                   FROM urls WHERE site_id = 1";
    let removed = "SELECT loc, removed_us, section_id FROM removed WHERE site_id = 1";
    let sections = "SELECT name, id FROM sections WHERE site_id = 1";
    type Row = (i64, String, Option<String>, Option<i64>, i64, i64);
    type Rows = (Vec<Row>, Vec<(String, i64, Option<i64>)>, Vec<(String, i64)>);
    let url = &app.db.direct_url;
    let (rows, gone, names): Rows = if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        (
            sqlx::query_as(records).fetch_all(&mut c).await.unwrap(),
            sqlx::query_as(removed).fetch_all(&mut c).await.unwrap(),
            sqlx::query_as(sections).fetch_all(&mut c).await.unwrap(),
        )
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        (
            sqlx::query_as(records).fetch_all(&mut c).await.unwrap(),
            sqlx::query_as(removed).fetch_all(&mut c).await.unwrap(),
            sqlx::query_as(sections).fetch_all(&mut c).await.unwrap(),
        )
    };
    let records = rows
        .into_iter()
        .map(|(id, loc, lastmod, changed_us, section, excluded)| Stored {
            id,
            loc,
            lastmod,
            changed_us,
            section,
            excluded: excluded != 0,
        })
        .collect();
    let removed = gone.into_iter().map(|(loc, removed_us, section)| Removed { loc, removed_us, section }).collect();
    (records, removed, names.into_iter().collect())
}

/// The instant of a stored lastmod (a date alone, or RFC 3339), in whole seconds.
fn lastmod_s(lastmod: &str) -> i64 {
    use time::format_description::well_known::Rfc3339;
    if let Ok(at) = time::OffsetDateTime::parse(lastmod, &Rfc3339) {
        return at.unix_timestamp();
    }
    let date = time::Date::parse(lastmod, time::macros::format_description!("[year]-[month]-[day]"))
        .unwrap_or_else(|e| panic!("a stored lastmod {lastmod:?}: {e}"));
    date.midnight().assume_utc().unix_timestamp()
}

/// What the feed of `section` (`None`: the site's) must hold, from the stored rows alone (the contract of issue
/// 39): the records written since migration 0015 (a `changed_us`), not excluded, newest change first (ties: the
/// newer id first), merged by time with the tombstones (ties: by loc, descending; after the entries of their time), the newer alone of an entry and a
/// tombstone for one loc, at most `limit`. An entry's `<updated>` is its lastmod, else its change time. Also
/// the feed's `<updated>`: the newest stored time among them, in seconds (none: 0).
pub(crate) fn expected(
    records: &[Stored],
    removed: &[Removed],
    section: Option<i64>,
    limit: usize,
) -> (Vec<Item>, i64) {
    // (time, 0 for an entry and 1 for a tombstone, the entry's id): newest first, entries before tombstones of
    // the same time, the newer id first; tombstones of one time by loc, descending (they are pushed so, and the
    // sort is stable).
    let mut timed: Vec<(i64, u8, i64, Item)> = Vec::new();
    for r in records.iter().filter(|r| !r.excluded && section.is_none_or(|s| r.section == s)) {
        let Some(changed_us) = r.changed_us else { continue };
        let updated_s = r.lastmod.as_deref().map_or(changed_us.div_euclid(1_000_000), lastmod_s);
        timed.push((changed_us, 0, r.id, Item::Entry { loc: r.loc.clone(), updated_s }));
    }
    let mut gone: Vec<&Removed> = removed.iter().filter(|d| section.is_none() || d.section == section).collect();
    gone.sort_by(|a, b| b.loc.cmp(&a.loc));
    for d in gone {
        let item = Item::Deleted { loc: d.loc.clone(), when_s: d.removed_us.div_euclid(1_000_000) };
        timed.push((d.removed_us, 1, 0, item));
    }
    timed.sort_by_key(|t| (std::cmp::Reverse(t.0), t.1, std::cmp::Reverse(t.2)));
    let mut seen = std::collections::BTreeSet::new();
    let items: Vec<(i64, Item)> = timed
        .into_iter()
        .filter(|(_, _, _, item)| {
            seen.insert(match item {
                Item::Entry { loc, .. } | Item::Deleted { loc, .. } => loc.clone(),
            })
        })
        .take(limit)
        .map(|(at, _, _, item)| (at, item))
        .collect();
    let updated = items.iter().map(|(at, _)| at.div_euclid(1_000_000)).max().unwrap_or(0);
    (items.into_iter().map(|(_, item)| item).collect(), updated)
}

/// The feed's items in document order, read from its XML: each `<entry>`'s `<id>` and `<updated>`, each
/// `<at:deleted-entry>`'s `ref` and `when`, the times as instants in whole seconds.
fn items_in(xml: &str) -> Vec<Item> {
    use quick_xml::events::Event;
    use time::format_description::well_known::Rfc3339;
    let at = |text: &str| time::OffsetDateTime::parse(text, &Rfc3339).unwrap().unix_timestamp();
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut items, mut path, mut id, mut updated) = (Vec::new(), Vec::<String>::new(), String::new(), String::new());
    loop {
        let event = reader.read_event().expect("well-formed XML");
        match event {
            Event::Start(e) => path.push(AsRef::<str>::as_ref(&e.name()).to_owned()),
            Event::Empty(e) if AsRef::<str>::as_ref(&e.name()) == "at:deleted-entry" => {
                let attr = |name: &str| {
                    let a = e.try_get_attribute(name).unwrap().unwrap_or_else(|| panic!("a tombstone without {name}"));
                    a.normalized_value(quick_xml::XmlVersion::Explicit1_0).unwrap().into_owned()
                };
                items.push(Item::Deleted { loc: attr("ref"), when_s: at(&attr("when")) });
            }
            Event::Text(t) => {
                let text: &str = &t;
                match path.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                    ["feed", "entry", "id"] => id.push_str(text),
                    ["feed", "entry", "updated"] => updated.push_str(text),
                    _ => {}
                }
            }
            Event::GeneralRef(r) if path.last().is_some_and(|p| p == "id") && path.len() == 3 => {
                id.push_str(match &*r {
                    "amp" => "&",
                    "apos" => "'",
                    "quot" => "\"",
                    "lt" => "<",
                    "gt" => ">",
                    other => panic!("unexpected entity {other}"),
                });
            }
            Event::End(_) => {
                let closed = path.pop();
                if closed.as_deref() == Some("entry") {
                    items.push(Item::Entry {
                        loc: std::mem::take(&mut id),
                        updated_s: at(&std::mem::take(&mut updated)),
                    });
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    items
}

/// Checks one feed as served: 200 `application/atom+xml`, identity and gzip valid against the schema, its items in
/// document order exactly `want`, its `<updated>` `updated_s`, and both readers reading the same: feedparser the
/// entries (ids, links, times, order), rss-parser those and the tombstones.
pub(crate) async fn check_feed(app: &TestApp, path: &str, want: &[Item], updated_s: i64) -> Vec<u8> {
    let what = path;
    let r = app.get(path, &[]).await;
    assert_eq!(r.status.as_u16(), 200, "{what}: {}", r.text());
    assert!(r.header("content-type").is_some_and(|t| t.starts_with("application/atom+xml")), "{what}: {:?}", r.headers);
    let gz = app.get(path, &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"), "{what}");
    assert_eq!(crate::support::identity(&gz.body), r.body.to_vec(), "{what}: the gzip is of the identity bytes");
    validate_atom(&r.body);
    validate_atom(&gz.body);
    let xml = r.text();
    assert_eq!(items_in(&xml), want, "{what}: the items, in document order\n{xml}");
    let entries: Vec<Value> = want
        .iter()
        .filter_map(|i| match i {
            Item::Entry { loc, updated_s } => Some(json!({"id": loc, "link": loc, "updated_s": updated_s})),
            Item::Deleted { .. } => None,
        })
        .collect();
    let deleted: Vec<Value> = want
        .iter()
        .filter_map(|i| match i {
            Item::Deleted { loc, when_s } => Some(json!({"ref": loc, "when_s": when_s})),
            Item::Entry { .. } => None,
        })
        .collect();
    for reader in [Reader::Feedparser, Reader::RssParser] {
        let read = read_feed(reader, &gz.body);
        let (seen_entries, seen_deleted) = seen(&read);
        assert_eq!(seen_entries, Value::Array(entries.clone()), "{what}: {reader:?}'s entries");
        match reader {
            Reader::Feedparser => assert_eq!(seen_deleted, Value::Null),
            Reader::RssParser => {
                assert_eq!(seen_deleted, Value::Array(deleted.clone()), "{what}: rss-parser's tombstones")
            }
        }
        assert_eq!(read["updated_s"], updated_s, "{what}: {reader:?}: the feed's <updated>");
        let public = format!("{PUBLIC_URL}{path}");
        assert_eq!(read["id"], public.as_str(), "{what}: {reader:?}: the feed's id");
    }
    r.body.to_vec()
}

/// The longest loc sitemapd stores: 2047 characters (`MAX_LOC_LEN` is 2048, exclusive).
fn longest_loc(tail: &str) -> String {
    let head = format!("{PUBLIC_URL}/{tail}/");
    format!("{head}{}", "l".repeat(2047 - head.len()))
}

/// Every feed the API's writes make (the site's, two sections'), with tombstones, locs with `&`, `'` and
/// non-ASCII characters, the longest loc, every lastmod precision (none, a date, minutes, seconds, fractions, an
/// offset), an update and deletes, a title and hub URLs with `&`, `'` and `<`: valid, exactly the stored changes
/// in order, read so by both readers, the hubs as links (a hub's user name and password, which the publisher sends
/// to the hub, never in the public feed).
async fn feeds_hold_exactly_the_stored_changes(b: Backend) {
    let vars = [
        ("SITEMAPD_FEEDS", "true"),
        ("SITEMAPD_REMOVED_RETENTION", "30d"),
        ("SITEMAPD_FEED_TITLES", "default=Example & 'Co' — Ünï <news>"),
        (
            "SITEMAPD_FEED_HUBS",
            "default=https://hub.example.net/publish?a=1&b='2', https://pub:s3cret@hub2.example.net/",
        ),
    ];
    let app = TestApp::spawn(b, &vars).await;
    let loc = |p: &str| format!("{PUBLIC_URL}/{p}");
    let put = |body: Value| {
        let app = &app;
        async move {
            let r = app.put_json(&body).await;
            assert_eq!(r.status.as_u16(), 200, "{}", r.text());
        }
    };
    put(json!([
        {"loc": loc("a?x=1&y=2")},
        {"loc": loc("it's"), "lastmod": "2024-05-01"},
        {"loc": loc("café/日本?q=ü"), "lastmod": "2024-05-01T08:20+02:00"},
        {"loc": loc("p/seconds"), "lastmod": "2024-06-01T12:00:00Z"},
        {"loc": loc("p/fraction"), "lastmod": "2024-06-01T12:00:00.123456-05:00"},
        {"loc": longest_loc("long")},
    ]))
    .await;
    put(json!([
        {"loc": loc("blog/1"), "section": "blog"},
        {"loc": loc("blog/2&3"), "section": "blog", "lastmod": "2025-01-01T00:00:00+14:00"},
        {"loc": loc("shop/ä"), "section": "shop"},
    ]))
    .await;
    for gone in [loc("a?x=1&y=2"), loc("blog/1")] {
        let r = app.delete_loc(&gone).await;
        assert_eq!(r.status.as_u16(), 204, "{}", r.text());
    }
    put(json!([{"loc": loc("p/seconds"), "lastmod": "2024-06-02T12:00:00Z"}])).await;

    let (records, removed, sections) = stored(&app).await;
    assert_eq!(sections.len(), 2, "{sections:?}");
    assert!(records.iter().any(|r| r.loc.len() == 2047), "the longest loc is stored");
    let mut feeds = vec![("/feed.atom".to_owned(), None)];
    feeds.extend(sections.iter().map(|(name, id)| (format!("/feed-{name}.atom"), Some(*id))));
    for (path, section) in feeds {
        let (want, updated_s) = expected(&records, &removed, section, 200);
        assert!(want.iter().any(|i| matches!(i, Item::Entry { .. })), "{path}: {want:?}");
        let body = check_feed(&app, &path, &want, updated_s).await;
        // The hubs, as links rel="hub" (feedparser keeps every link of the feed), as the configuration reads them
        // (a URL's `'` in a query is percent-encoded).
        assert!(!String::from_utf8_lossy(&body).contains("s3cret"), "{path}: a hub's password is published");
        let links = read_feed(Reader::Feedparser, &body)["links"].clone();
        let hubs: Vec<&str> = links
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["rel"] == "hub")
            .map(|l| l["href"].as_str().unwrap())
            .collect();
        assert_eq!(
            hubs,
            ["https://hub.example.net/publish?a=1&b=%272%27", "https://hub2.example.net/"],
            "{path}: {links}"
        );
    }
    let (site, _) = expected(&records, &removed, None, 200);
    assert_eq!(site.iter().filter(|i| matches!(i, Item::Deleted { .. })).count(), 2, "{site:?}");
}

/// Locs so long that the feed reaches its byte cap (`MAX_FEED_BYTES`, 262,144) before its item limit: the items
/// that fit, the newest first, a valid feed that both readers read.
async fn a_feed_cut_by_the_byte_cap_is_valid_and_holds_the_newest(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_FEEDS", "true"), ("SITEMAPD_FEED_ENTRIES", "1000")]).await;
    let entries: Vec<Value> = (0..150).map(|i| json!({"loc": longest_loc(&format!("n{i:03}"))})).collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text());
    let (records, removed, _) = stored(&app).await;
    let (all, _) = expected(&records, &removed, None, 1000);
    assert_eq!(all.len(), 150);
    let body = app.get("/feed.atom", &[]).await.body;
    assert!(body.len() <= 262_144, "{} bytes", body.len());
    let served = items_in(std::str::from_utf8(&body).unwrap());
    assert!(!served.is_empty() && served.len() < all.len(), "cut by bytes: {} of {}", served.len(), all.len());
    let (want, updated_s) = expected(&records, &removed, None, served.len());
    check_feed(&app, "/feed.atom", &want, updated_s).await;
}

crate::both_backends!(
    #[cfg_attr(
        any(sitemapd_no_xmllint, sitemapd_no_trang, sitemapd_no_node, sitemapd_no_feedparser, sitemapd_no_rss_parser),
        ignore = "needs xmllint, trang, node and the feed readers (tests/feeds/setup.sh)"
    )]
    feeds_hold_exactly_the_stored_changes,
    #[cfg_attr(
        any(sitemapd_no_xmllint, sitemapd_no_trang, sitemapd_no_node, sitemapd_no_feedparser, sitemapd_no_rss_parser),
        ignore = "needs xmllint, trang, node and the feed readers (tests/feeds/setup.sh)"
    )]
    a_feed_cut_by_the_byte_cap_is_valid_and_holds_the_newest,
);
