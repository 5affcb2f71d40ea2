//! Atom 1.0 feeds (RFC 4287) of a site's or a section's newest changes, with deletions as RFC 6721 tombstones:
//! the merge of entries and tombstones by time, the item and byte caps, and the deterministic renderer. Pure: the
//! store reads the rows ([`FeedItem`]s are made of them), the server serves the bytes.
//!
//! The same items render to the same bytes: no clock, no version, no hash order. Text is escaped as a page's is
//! ([`quick_xml::escape::escape`], the five entities); a `lastmod` is read as a page's is
//! ([`crate::domain::LastMod`]) and written as an RFC 3339 date-time.

use std::collections::HashSet;

use quick_xml::escape::escape;
use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use crate::domain::LastMod;

/// The most bytes a feed has, uncompressed: items that would pass it are left out.
pub const MAX_FEED_BYTES: usize = 262_144;

pub const ATOM_NS: &str = "http://www.w3.org/2005/Atom";
/// RFC 6721's namespace, bound to the prefix `at`.
pub const TOMBSTONES_NS: &str = "http://purl.org/atompub/tombstones/1.0";

const TAIL: &str = "</feed>\n";

/// What a feed says of itself.
#[derive(Clone, Copy, Debug)]
pub struct FeedMeta<'a> {
    /// The feed's public URL: its `<id>` and its `<link rel="self">`.
    pub id: &'a str,
    /// Its `<title>` and `<author><name>`.
    pub title: &'a str,
    /// The site's public URL: its `<link rel="alternate">`.
    pub site_url: &'a str,
    /// The WebSub hubs that announce it: one `<link rel="hub">` each, in this order.
    pub hubs: &'a [&'a str],
}

/// One item of a feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedItem {
    /// A created or updated URL: an `<entry>`.
    Entry {
        loc: String,
        /// The stored `lastmod` (a W3C Datetime), if any: the entry's `<updated>`.
        lastmod: Option<String>,
        /// When its change was stored (microseconds since the Unix epoch): its place in the feed, and its
        /// `<updated>` without a `lastmod`.
        changed_us: i64,
    },
    /// A deleted URL: an `<at:deleted-entry>`.
    Deleted {
        loc: String,
        /// When it was deleted (microseconds since the Unix epoch).
        removed_us: i64,
    },
}

impl FeedItem {
    pub fn loc(&self) -> &str {
        match self {
            Self::Entry { loc, .. } | Self::Deleted { loc, .. } => loc,
        }
    }

    /// When the change it reports was stored: its place in the feed.
    pub fn at_us(&self) -> i64 {
        match self {
            Self::Entry { changed_us, .. } => *changed_us,
            Self::Deleted { removed_us, .. } => *removed_us,
        }
    }
}

/// A rendered feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedFeed {
    /// The document, UTF-8.
    pub bytes: Vec<u8>,
    /// The newest stored change time among the items written (0, the Unix epoch, when there is none): the feed's
    /// `<updated>` (to the second) and the answer's `Last-Modified`.
    pub updated_us: i64,
    /// The items written, entries and tombstones.
    pub items: usize,
    /// Of those, the tombstones.
    pub deleted: usize,
}

/// The items as a feed lists them: newest first by [`FeedItem::at_us`] (a stable sort: items of one time keep the
/// order they were given in, which the store makes deterministic), and of the items of one loc only the first, the
/// newest (an entry and a tombstone of one loc: the newer only).
pub fn merge(items: &[FeedItem]) -> Vec<&FeedItem> {
    let mut ordered: Vec<&FeedItem> = items.iter().collect();
    ordered.sort_by_key(|item| std::cmp::Reverse(item.at_us()));
    let mut seen = HashSet::with_capacity(ordered.len());
    ordered.retain(|item| seen.insert(item.loc()));
    ordered
}

/// Renders the feed of `items` (in any order: [`merge`]d here): at most `max_items` of them, newest first, and only
/// as many as keep the document within `max_bytes`. The first item that would pass it is left out, and so is every
/// older one, so that a feed always holds every change newer than its oldest item. The head is always written (a
/// `max_bytes` smaller than the head alone gives a feed with no item, still well-formed).
pub fn render(meta: &FeedMeta, items: &[FeedItem], max_items: usize, max_bytes: usize) -> RenderedFeed {
    let mut body = Vec::new();
    let (mut written, mut deleted, mut updated_us) = (0, 0, 0);
    let mut item = Vec::with_capacity(512);
    for next in merge(items).into_iter().take(max_items) {
        item.clear();
        write_item(&mut item, next);
        // The head's length depends on `updated_us`, which only the first item sets: its `<updated>` has a fixed
        // width (20 bytes) whatever the time, so the head is measured once, with the epoch.
        if head_len(meta) + body.len() + item.len() + TAIL.len() > max_bytes {
            break;
        }
        if written == 0 {
            updated_us = next.at_us();
        }
        body.extend_from_slice(&item);
        written += 1;
        deleted += usize::from(matches!(next, FeedItem::Deleted { .. }));
    }
    let mut bytes = Vec::with_capacity(head_len(meta) + body.len() + TAIL.len());
    write_head(&mut bytes, meta, updated_us);
    bytes.extend_from_slice(&body);
    bytes.extend_from_slice(TAIL.as_bytes());
    RenderedFeed { bytes, updated_us, items: written, deleted }
}

fn head_len(meta: &FeedMeta) -> usize {
    let mut head = Vec::with_capacity(512);
    write_head(&mut head, meta, 0);
    head.len()
}

fn write_head(out: &mut Vec<u8>, meta: &FeedMeta, updated_us: i64) {
    out.extend_from_slice(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.extend_from_slice(format!("<feed xmlns=\"{ATOM_NS}\" xmlns:at=\"{TOMBSTONES_NS}\">\n").as_bytes());
    element(out, "id", meta.id);
    element(out, "title", meta.title);
    element(out, "updated", &rfc3339_seconds(updated_us));
    out.extend_from_slice(b"<author><name>");
    out.extend_from_slice(escape(meta.title).as_bytes());
    out.extend_from_slice(b"</name></author>\n");
    link(out, "self", meta.id);
    link(out, "alternate", meta.site_url);
    for hub in meta.hubs {
        link(out, "hub", hub);
    }
    out.extend_from_slice(b"<generator>sitemapd</generator>\n");
}

fn write_item(out: &mut Vec<u8>, item: &FeedItem) {
    match item {
        FeedItem::Entry { loc, lastmod, changed_us } => {
            let updated =
                lastmod.as_deref().and_then(rfc3339_of_lastmod).unwrap_or_else(|| rfc3339_seconds(*changed_us));
            let loc = escape(loc.as_str());
            out.extend_from_slice(b"<entry><id>");
            out.extend_from_slice(loc.as_bytes());
            out.extend_from_slice(b"</id><title>");
            out.extend_from_slice(loc.as_bytes());
            out.extend_from_slice(b"</title><link href=\"");
            out.extend_from_slice(loc.as_bytes());
            out.extend_from_slice(b"\"/><updated>");
            out.extend_from_slice(updated.as_bytes());
            out.extend_from_slice(b"</updated></entry>\n");
        }
        FeedItem::Deleted { loc, removed_us } => {
            out.extend_from_slice(b"<at:deleted-entry ref=\"");
            out.extend_from_slice(escape(loc.as_str()).as_bytes());
            out.extend_from_slice(b"\" when=\"");
            out.extend_from_slice(rfc3339_seconds(*removed_us).as_bytes());
            out.extend_from_slice(b"\"/>\n");
        }
    }
}

/// `<name>text</name>\n`, the text escaped.
fn element(out: &mut Vec<u8>, name: &str, text: &str) {
    out.extend_from_slice(format!("<{name}>").as_bytes());
    out.extend_from_slice(escape(text).as_bytes());
    out.extend_from_slice(format!("</{name}>\n").as_bytes());
}

/// `<link rel="rel" href="href"/>\n`, the href escaped.
fn link(out: &mut Vec<u8>, rel: &str, href: &str) {
    out.extend_from_slice(format!("<link rel=\"{rel}\" href=\"").as_bytes());
    out.extend_from_slice(escape(href).as_bytes());
    out.extend_from_slice(b"\"/>\n");
}

/// A stored `lastmod` (a W3C Datetime of any precision) as an RFC 3339 date-time: read as a page reads it
/// ([`LastMod::parse`]: in UTC, with seconds, a fraction kept as given), a date alone at its midnight in UTC.
/// `None` for a value that does not read (written by hand): the entry then shows its stored change time.
pub fn rfc3339_of_lastmod(stored: &str) -> Option<String> {
    let lastmod = LastMod::parse(stored).ok()?;
    let mut out = lastmod.as_str().to_owned();
    if out.len() == "YYYY-MM-DD".len() {
        out.push_str("T00:00:00Z");
    }
    Some(out)
}

/// The latest time [`rfc3339_seconds`] writes as it is: 9999-12-31T23:59:59Z.
const MAX_SECONDS: i64 = 253_402_300_799;

const TO_SECONDS: &[BorrowedFormatItem<'_>] = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

/// A time (microseconds since the Unix epoch) as an RFC 3339 date-time in UTC, to the second (truncated). A time
/// outside the Unix epoch to the year 9999 (never stored by sitemapd) is written as the nearest of the two.
pub fn rfc3339_seconds(us: i64) -> String {
    let seconds = us.div_euclid(1_000_000).clamp(0, MAX_SECONDS);
    OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|t| t.format(TO_SECONDS).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: FeedMeta<'static> = FeedMeta {
        id: "https://www.example.com/feed.atom",
        title: "Example",
        site_url: "https://www.example.com/",
        hubs: &[],
    };

    fn entry(loc: &str, lastmod: Option<&str>, changed_us: i64) -> FeedItem {
        FeedItem::Entry { loc: loc.to_owned(), lastmod: lastmod.map(str::to_owned), changed_us }
    }

    fn deleted(loc: &str, removed_us: i64) -> FeedItem {
        FeedItem::Deleted { loc: loc.to_owned(), removed_us }
    }

    fn text(feed: &RenderedFeed) -> &str {
        std::str::from_utf8(&feed.bytes).unwrap()
    }

    /// The locs of a feed's items, in document order (`-` before a tombstone's).
    fn items_of(feed: &RenderedFeed) -> Vec<String> {
        text(feed)
            .lines()
            .filter_map(|line| {
                if let Some(rest) = line.strip_prefix("<entry><id>") {
                    Some(rest.split("</id>").next().unwrap().to_owned())
                } else {
                    line.strip_prefix("<at:deleted-entry ref=\"")
                        .map(|rest| format!("-{}", rest.split('"').next().unwrap()))
                }
            })
            .collect()
    }

    #[test]
    fn a_feed_renders_exactly() {
        let hubs = ["https://hub.test/?a=1&b=2"];
        let meta = FeedMeta { hubs: &hubs, title: "Ex & <co>", ..META };
        let items = [
            entry("https://www.example.com/a?x=1&y='2'", Some("2024-05-01"), 1_700_000_000_500_000),
            deleted("https://www.example.com/gone", 1_700_000_100_000_000),
        ];
        let feed = render(&meta, &items, 200, MAX_FEED_BYTES);
        assert_eq!(
            text(&feed),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <feed xmlns=\"http://www.w3.org/2005/Atom\" xmlns:at=\"http://purl.org/atompub/tombstones/1.0\">\n\
             <id>https://www.example.com/feed.atom</id>\n\
             <title>Ex &amp; &lt;co&gt;</title>\n\
             <updated>2023-11-14T22:15:00Z</updated>\n\
             <author><name>Ex &amp; &lt;co&gt;</name></author>\n\
             <link rel=\"self\" href=\"https://www.example.com/feed.atom\"/>\n\
             <link rel=\"alternate\" href=\"https://www.example.com/\"/>\n\
             <link rel=\"hub\" href=\"https://hub.test/?a=1&amp;b=2\"/>\n\
             <generator>sitemapd</generator>\n\
             <at:deleted-entry ref=\"https://www.example.com/gone\" when=\"2023-11-14T22:15:00Z\"/>\n\
             <entry><id>https://www.example.com/a?x=1&amp;y=&apos;2&apos;</id>\
             <title>https://www.example.com/a?x=1&amp;y=&apos;2&apos;</title>\
             <link href=\"https://www.example.com/a?x=1&amp;y=&apos;2&apos;\"/>\
             <updated>2024-05-01T00:00:00Z</updated></entry>\n\
             </feed>\n"
        );
        assert_eq!((feed.items, feed.deleted, feed.updated_us), (2, 1, 1_700_000_100_000_000));
    }

    #[test]
    fn an_empty_feed_is_updated_at_the_epoch() {
        let feed = render(&META, &[], 200, MAX_FEED_BYTES);
        assert!(text(&feed).contains("<updated>1970-01-01T00:00:00Z</updated>"), "{}", text(&feed));
        assert!(text(&feed).ends_with("<generator>sitemapd</generator>\n</feed>\n"));
        assert_eq!((feed.items, feed.deleted, feed.updated_us), (0, 0, 0));
    }

    #[test]
    fn every_lastmod_form_becomes_an_rfc3339_date_time() {
        for (stored, rfc3339) in [
            ("2024-05-01", "2024-05-01T00:00:00Z"),
            ("2024-05-01T08:20Z", "2024-05-01T08:20:00Z"),
            ("2024-05-01T08:20:07Z", "2024-05-01T08:20:07Z"),
            ("2024-05-01T08:20:07.5Z", "2024-05-01T08:20:07.5Z"),
            ("2024-05-01T08:20:07.123456789Z", "2024-05-01T08:20:07.123456789Z"),
            ("2024-05-01T08:20+02:00", "2024-05-01T06:20:00Z"),
            ("2024-05-01T08:20:07-05:30", "2024-05-01T13:50:07Z"),
            ("2024-05-01T08:20:07.250+01:00", "2024-05-01T07:20:07.250Z"),
            ("2024-01-01T00:30:00+01:00", "2023-12-31T23:30:00Z"),
        ] {
            assert_eq!(rfc3339_of_lastmod(stored).as_deref(), Some(rfc3339), "{stored}");
            let feed = render(&META, &[entry("https://www.example.com/a", Some(stored), 5)], 10, MAX_FEED_BYTES);
            assert!(text(&feed).contains(&format!("<updated>{rfc3339}</updated></entry>")), "{stored}");
        }
        for bad in ["", "2024", "2024-05", "yesterday", "2024-05-01T08:20"] {
            assert_eq!(rfc3339_of_lastmod(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn without_a_lastmod_an_entry_shows_its_stored_change_time_to_the_second() {
        let items = [
            entry("https://www.example.com/a", None, 1_700_000_000_999_999),
            entry("https://www.example.com/b", Some("not a date"), 86_400_000_000),
        ];
        let feed = render(&META, &items, 10, MAX_FEED_BYTES);
        assert!(text(&feed).contains("/a</id><title>https://www.example.com/a</title><link href=\"https://www.example.com/a\"/><updated>2023-11-14T22:13:20Z</updated>"));
        assert!(text(&feed).contains("/b\"/><updated>1970-01-02T00:00:00Z</updated>"), "{}", text(&feed));
        assert!(text(&feed).contains("\n<updated>2023-11-14T22:13:20Z</updated>\n"), "the feed's: the newest");
    }

    #[test]
    fn times_out_of_range_are_clamped_not_a_panic() {
        assert_eq!(rfc3339_seconds(-1), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(i64::MIN), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339_seconds(1_999_999), "1970-01-01T00:00:01Z");
    }

    #[test]
    fn items_are_merged_newest_first_and_a_loc_is_listed_once() {
        let items = [
            entry("https://x.test/old", None, 10),
            deleted("https://x.test/d", 30),
            entry("https://x.test/new", None, 40),
            // Deleted, then stored again: the entry, newer.
            deleted("https://x.test/back", 20),
            entry("https://x.test/back", None, 25),
            // Stored, then deleted: the tombstone, newer.
            entry("https://x.test/gone", None, 5),
            deleted("https://x.test/gone", 35),
        ];
        let feed = render(&META, &items, 100, MAX_FEED_BYTES);
        let expected = [
            "https://x.test/new",
            "-https://x.test/gone",
            "-https://x.test/d",
            "https://x.test/back",
            "https://x.test/old",
        ];
        assert_eq!(items_of(&feed), expected);
        assert_eq!((feed.items, feed.deleted, feed.updated_us), (5, 2, 40));
    }

    #[test]
    fn items_of_one_time_keep_the_order_given() {
        let items =
            [entry("https://x.test/b", None, 7), entry("https://x.test/a", None, 7), deleted("https://x.test/c", 7)];
        let feed = render(&META, &items, 100, MAX_FEED_BYTES);
        assert_eq!(items_of(&feed), ["https://x.test/b", "https://x.test/a", "-https://x.test/c"]);
        assert_eq!(render(&META, &items, 100, MAX_FEED_BYTES), feed, "the same items, the same bytes");
    }

    #[test]
    fn at_most_max_items_the_newest() {
        let items: Vec<FeedItem> = (0..50).map(|i| entry(&format!("https://x.test/{i}"), None, i)).collect();
        let feed = render(&META, &items, 3, MAX_FEED_BYTES);
        assert_eq!(items_of(&feed), ["https://x.test/49", "https://x.test/48", "https://x.test/47"]);
        assert_eq!((feed.items, feed.updated_us), (3, 49));
    }

    #[test]
    fn an_item_that_would_pass_the_byte_cap_is_left_out_with_every_older_one() {
        let small = |i: i64| entry(&format!("https://x.test/{i}"), None, i);
        let big = entry(&format!("https://x.test/{}", "&".repeat(3000)), None, 50);
        let items = [small(60), big, small(40)];
        let whole = render(&META, &items, 100, MAX_FEED_BYTES);
        assert_eq!(whole.items, 3);
        // Room for the first item and a little more, not for the big one.
        let first = render(&META, &items, 1, MAX_FEED_BYTES);
        let cap = first.bytes.len() + 100;
        let feed = render(&META, &items, 100, cap);
        assert_eq!(items_of(&feed), ["https://x.test/60"]);
        assert!(feed.bytes.len() <= cap);
        assert_eq!(feed.bytes, first.bytes);
        // Exactly the whole feed's length: everything fits; a byte less, the last item is left out.
        assert_eq!(render(&META, &items, 100, whole.bytes.len()).items, 3);
        assert_eq!(render(&META, &items, 100, whole.bytes.len() - 1).items, 2);
        // No room for any item: the head and the tail, still a feed.
        let none = render(&META, &items, 100, 10);
        assert_eq!((none.items, none.updated_us), (0, 0));
        assert!(text(&none).ends_with("</feed>\n"));
    }

    mod properties {
        use proptest::prelude::*;
        use quick_xml::events::Event;

        use super::*;

        /// Checks that `xml` is one well-formed element with only the five predefined entities, and returns how
        /// many `<entry>` and `<at:deleted-entry>` it holds.
        fn well_formed(xml: &[u8]) -> Result<(usize, usize), String> {
            let mut reader = quick_xml::Reader::from_reader(xml);
            let (mut depth, mut roots, mut entries, mut deleted) = (0usize, 0, 0, 0);
            let check_attributes = |e: &quick_xml::events::BytesStart| -> Result<(), String> {
                for attr in e.attributes() {
                    let attr = attr.map_err(|e| e.to_string())?;
                    attr.normalized_value(quick_xml::XmlVersion::Explicit1_0).map_err(|e| e.to_string())?;
                }
                Ok(())
            };
            loop {
                match reader.read_event().map_err(|e| format!("at {}: {e}", reader.buffer_position()))? {
                    Event::Start(e) => {
                        check_attributes(&e)?;
                        roots += usize::from(depth == 0);
                        depth += 1;
                        entries += usize::from(e.name().as_ref() == "entry");
                    }
                    Event::Empty(e) => {
                        check_attributes(&e)?;
                        deleted += usize::from(e.name().as_ref() == "at:deleted-entry");
                    }
                    Event::End(_) => depth -= 1,
                    Event::GeneralRef(r) if !matches!(&*r, "amp" | "lt" | "gt" | "apos" | "quot") => {
                        return Err(format!("entity &{};", &*r));
                    }
                    Event::Text(t) if depth == 0 && !t.trim().is_empty() => {
                        return Err("text outside the root".into());
                    }
                    Event::Eof => break,
                    _ => {}
                }
            }
            if depth != 0 || roots != 1 {
                return Err(format!("depth {depth} at the end, {roots} roots"));
            }
            Ok((entries, deleted))
        }

        fn item() -> impl Strategy<Value = FeedItem> {
            // Locs as stored: printable ASCII (non-ASCII is percent-encoded), the XML specials among it.
            let loc = "https://x\\.test/[ -~]{0,400}";
            let lastmod = prop_oneof![
                Just(None),
                "[0-9]{4}-[0-9]{2}-[0-9]{2}".prop_map(Some),
                "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})"
                    .prop_map(Some),
                "[ -~]{0,30}".prop_map(Some),
            ];
            prop_oneof![
                (loc, lastmod, any::<i64>()).prop_map(|(loc, lastmod, changed_us)| FeedItem::Entry {
                    loc,
                    lastmod,
                    changed_us
                }),
                (loc, any::<i64>()).prop_map(|(loc, removed_us)| FeedItem::Deleted { loc, removed_us }),
            ]
        }

        proptest! {
            #[test]
            fn a_feed_is_well_formed_and_within_its_caps(
                items in prop::collection::vec(item(), 0..150),
                max_items in 1usize..=1000,
                max_bytes in prop_oneof![Just(MAX_FEED_BYTES), 2_000usize..60_000],
                title in "[^\u{0}-\u{1f}\u{7f}-\u{9f}\u{fffe}\u{ffff}]{0,40}",
            ) {
                let hubs = ["https://hub.test/a?b=1&c=<2>"];
                let meta = FeedMeta { title: &title, hubs: &hubs, ..META };
                let feed = render(&meta, &items, max_items, max_bytes);
                prop_assert!(feed.bytes.len() <= max_bytes, "{} bytes", feed.bytes.len());
                let (entries, deleted) = well_formed(&feed.bytes).map_err(TestCaseError::fail)?;
                prop_assert_eq!(entries + deleted, feed.items);
                prop_assert_eq!(deleted, feed.deleted);
                prop_assert!(feed.items <= max_items);
                prop_assert_eq!(feed.updated_us, merge(&items).first().filter(|_| feed.items > 0).map_or(0, |i| i.at_us()));
                let again = render(&meta, &items, max_items, max_bytes);
                prop_assert_eq!(again.bytes, feed.bytes);
            }
        }
    }
}
