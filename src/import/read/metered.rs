//! The reader's meter: a `BufRead` that counts every byte that passes, so that a source is read in bounded memory
//! whatever it holds (its bytes cut at a limit, one event or line at a bound) and errors can name a line.

use std::cell::Cell;
use std::io::{self, BufRead, Read};
use std::rc::Rc;

use super::MAX_EVENT_BYTES;

/// A `BufRead` that counts what passes: the bytes (cut at `limit`, which sets `cut`), the newlines (line numbers),
/// and the bytes since the last [`Metered::mark`] (refused past `max_event`).
pub(super) struct Metered<R> {
    pub(super) inner: R,
    pub(super) consumed: u64,
    pub(super) limit: u64,
    /// Set once the format has no byte limit (NDJSON): shared by the compressed and the inflated counter.
    pub(super) unlimited: Rc<Cell<bool>>,
    /// Set when either counter cut the input (the compressed one may end it cleanly between gzip members).
    pub(super) any_cut: Rc<Cell<bool>>,
    pub(super) cut: bool,
    pub(super) newlines: u64,
    pub(super) marked: u64,
    pub(super) max_event: u64,
}

impl<R: BufRead> Metered<R> {
    pub(super) fn new(inner: R, limit: u64, unlimited: Rc<Cell<bool>>) -> Self {
        let any_cut = Rc::new(Cell::new(false));
        Self {
            inner,
            consumed: 0,
            limit,
            unlimited,
            any_cut,
            cut: false,
            newlines: 0,
            marked: 0,
            max_event: MAX_EVENT_BYTES,
        }
    }

    /// Starts counting an event's bytes again.
    pub(super) fn mark(&mut self) {
        self.marked = self.consumed;
    }
}

impl<R: BufRead> Read for Metered<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Metered<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.consumed - self.marked >= self.max_event {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("one element, text or line is longer than {} bytes", self.max_event),
            ));
        }
        if self.consumed >= self.limit && !self.unlimited.get() {
            // Past the limit only if there is more.
            if !self.cut && !self.inner.fill_buf()?.is_empty() {
                self.cut = true;
                self.any_cut.set(true);
            }
            return Ok(&[]);
        }
        let room = if self.unlimited.get() { u64::MAX } else { self.limit - self.consumed };
        let buf = self.inner.fill_buf()?;
        let n = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        Ok(&buf[..n])
    }

    fn consume(&mut self, amount: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let n = amount.min(buf.len());
            self.newlines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        }
        self.consumed += amount as u64;
        self.inner.consume(amount);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use serde_json::json;

    use super::super::testing::{entries, gzip, options, read_all};
    use super::super::{MAX_BYTES, MAX_COMPRESSED_BYTES, MAX_ENTRIES};

    #[test]
    fn a_sitemap_past_the_protocols_limits_is_read_up_to_them() {
        let mut many = String::from("<urlset>");
        for i in 0..=MAX_ENTRIES {
            many.push_str(&format!("<url><loc>https://www.example.com/{i}</loc></url>"));
        }
        many.push_str("</urlset>");
        let (items, report) = read_all(many.as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!(items.len() as u64, MAX_ENTRIES);
        assert_eq!(report.cut.as_deref(), Some("it lists more than 50000 URLs: the first 50000 were read"));

        // A gzip bomb: 60 MB of comments in 60 KB; read up to 50 MiB, in bounded memory.
        let comment = format!("<!--{}-->", "x".repeat(1000));
        let mut bomb = String::from("<urlset><url><loc>https://www.example.com/first</loc></url>");
        bomb.push_str(&comment.repeat(60_000));
        bomb.push_str("<url><loc>https://www.example.com/last</loc></url></urlset>");
        let compressed = gzip(bomb.as_bytes());
        assert!(compressed.len() < 1_000_000, "{}", compressed.len());
        let (items, report) = read_all(&compressed, &options());
        let report = report.unwrap();
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/first"})]);
        assert_eq!(report.cut.as_deref(), Some("it is larger than 52428800 bytes uncompressed: read up to the limit"));
        // Exactly at the limit is whole.
        let mut exact = String::from("<urlset><url><loc>https://www.example.com/a</loc></url>");
        let tail = "</urlset>";
        while MAX_BYTES as usize - exact.len() - tail.len() > 2 * comment.len() {
            exact.push_str(&comment);
        }
        let pad = MAX_BYTES as usize - exact.len() - tail.len() - 7;
        exact.push_str(&format!("<!--{}-->", " ".repeat(pad)));
        exact.push_str(tail);
        assert_eq!(exact.len() as u64, MAX_BYTES);
        let (items, report) = read_all(exact.as_bytes(), &options());
        assert_eq!((items.len(), report.unwrap().cut), (1, None));
        let (items, report) = read_all(format!("{exact}\n").as_bytes(), &options());
        assert_eq!(items.len(), 1);
        assert!(report.unwrap().cut.is_some(), "one byte more is past the limit");
    }

    #[test]
    fn a_line_the_compressed_limit_cuts_between_gzip_members_is_dropped() {
        // Empty members (inflating to nothing) up to the compressed limit, which then falls exactly between the
        // member holding the start of a URL and the member holding its end.
        let start = gzip(b"https://www.example.com/kept\nhttps://www.example.com/trunc");
        let empty = gzip(b"");
        let mut bytes = Vec::with_capacity(MAX_COMPRESSED_BYTES as usize + 64);
        while bytes.len() + empty.len() + start.len() <= MAX_COMPRESSED_BYTES as usize {
            bytes.extend_from_slice(&empty);
        }
        // Fill the rest with a member whose stored size makes the boundary exact.
        let rest = MAX_COMPRESSED_BYTES as usize - bytes.len() - start.len();
        assert!(rest == 0 || rest >= empty.len(), "{rest}");
        if rest > 0 {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
            z.write_all(&vec![b'\n'; rest - empty.len() - 5]).unwrap();
            bytes.extend(z.finish().unwrap());
        }
        bytes.extend_from_slice(&start);
        assert_eq!(bytes.len() as u64, MAX_COMPRESSED_BYTES);
        bytes.extend(gzip(b"ated\n"));
        let (items, report) = read_all(&bytes, &options());
        assert!(report.unwrap().cut.is_some());
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/kept"})], "never /trunc");
    }

    #[test]
    fn ndjson_has_no_sitemap_limits() {
        let line = format!("{{\"loc\":\"https://www.example.com/{}\"}}\n", "a".repeat(1000));
        let n = MAX_BYTES as usize / line.len() + 10;
        let (items, report) = read_all(line.repeat(n).as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!((items.len(), report.cut), (n, None));
    }
}
