//! The text form of a page (`/sitemap-N.txt`): the sitemaps.org plain text sitemap, each loc of the page followed
//! by a line feed, in page order, UTF-8, no header. Its bytes fit the page's limits by construction (see
//! [`line_len`]), so it needs no limit of its own.

use std::io;

use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};

use crate::store::EntryStream;

/// Chunks of about this many bytes, cut after whole lines (so their bounds depend on the content alone, which keeps
/// a page's gzip, and so its strong ETag, the same whenever it is rendered).
const CHUNK: usize = 64 * 1024;

/// The bytes of `loc`'s line: the loc and its line feed. The loc's `<url>` element in the XML page is
/// `<url><loc>` + the loc escaped (never shorter than the loc) + `</loc>` … `</url>\n`: at least 22 bytes more than
/// the line. So a page's text is shorter than its `<urlset>` (which also has an envelope the text has not), and a
/// page that fits `max_bytes` as XML fits as text; its URL count is the same.
pub fn line_len(loc: &str) -> u64 {
    loc.len() as u64 + 1
}

/// Appends `loc`'s line.
pub fn write_line(out: &mut Vec<u8>, loc: &str) {
    out.extend_from_slice(loc.as_bytes());
    out.push(b'\n');
}

/// The text sitemap for a stream of a page's entries, in chunks of about [`CHUNK`] bytes cut after whole lines.
/// An empty page is an empty body (never served: an empty page is 404).
pub fn lines(entries: EntryStream) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    async_stream::try_stream! {
        let mut entries = entries;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        while let Some(e) = entries.try_next().await.map_err(io::Error::other)? {
            write_line(&mut buf, &e.loc);
            if buf.len() >= CHUNK {
                yield Bytes::from(std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096)));
            }
        }
        if !buf.is_empty() {
            yield Bytes::from(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use proptest::prelude::*;

    use super::*;
    use crate::domain::Priority;
    use crate::page::render::{URLSET_TAIL, url_len, urlset_head, write_url};
    use crate::page::{Fields, page_bytes};
    use crate::store::PageEntry;

    fn entry(loc: &str) -> PageEntry {
        PageEntry { loc: loc.to_owned(), lastmod: None, changefreq: None, priority: None, ext: None }
    }

    #[tokio::test]
    async fn lines_are_the_locs_in_order_cut_after_whole_lines() {
        let locs: Vec<String> = (0..5000).map(|i| format!("https://www.example.com/p/{i}?a=1&b=2")).collect();
        let entries = futures_util::stream::iter(locs.iter().map(|l| Ok(entry(l))).collect::<Vec<_>>()).boxed();
        let chunks: Vec<Bytes> = lines(entries).try_collect().await.unwrap();
        assert!(chunks.len() > 1, "a large page comes in several chunks");
        assert!(chunks.iter().all(|c| c.ends_with(b"\n")), "each chunk ends a line");
        let text: Vec<u8> = chunks.concat();
        assert_eq!(String::from_utf8(text).unwrap(), locs.iter().map(|l| format!("{l}\n")).collect::<String>());
        let empty: Vec<Bytes> = lines(futures_util::stream::empty().boxed()).try_collect().await.unwrap();
        assert!(empty.is_empty());
    }

    fn fields() -> impl Strategy<Value = Fields> {
        (proptest::option::of(Just("2024-05-01".to_owned())), proptest::option::of(0u32..=1_000_000)).prop_map(
            |(lastmod, priority)| Fields {
                lastmod,
                priority: priority.and_then(|p| Priority::from_millionths(i64::from(p))),
                ..Fields::default()
            },
        )
    }

    proptest! {
        /// Why a text page needs no limit of its own: for any locs (`&`, `<`, `'`, `"` escape longer in XML, and a
        /// loc that needs none still has its `<url><loc>…</loc></url>` around it) and any fields, each line is
        /// shorter than the entry's `<url>` element, so the text of a page is at most its XML page's bytes, which
        /// placement keeps within `max_bytes`; and both list the same URLs, so the URL limit holds too.
        #[test]
        fn a_pages_text_is_no_larger_than_its_xml(
            page in proptest::collection::vec(
                ("https://www\\.example\\.com/[a-zA-Z0-9&'\"<>%?=#._~/-]{0,300}", fields()),
                1..40,
            ),
        ) {
            let mut xml = urlset_head(Default::default()).as_bytes().to_vec();
            let mut text = Vec::new();
            let mut byte_size = 0;
            for (loc, fields) in &page {
                write_url(&mut xml, loc, fields);
                write_line(&mut text, loc);
                prop_assert!(line_len(loc) + 22 <= url_len(loc, fields), "{loc}");
                byte_size += url_len(loc, fields) as i64;
            }
            xml.extend_from_slice(URLSET_TAIL.as_bytes());
            prop_assert_eq!(text.len() as u64, page.iter().map(|(loc, _)| line_len(loc)).sum::<u64>());
            prop_assert!(text.len() < xml.len());
            // The bytes the limit rule counts for the XML page (`Limits::fits_bytes`): the text is within them.
            prop_assert!(text.len() as i64 <= page_bytes(byte_size));
        }
    }
}
