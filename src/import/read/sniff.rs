//! What a source is, by its first bytes: gzip by its magic number (inflated as a stream, every member), another
//! encoding, archive or binary refused saying what it is, then past a UTF-8 BOM and whitespace a sitemap or index
//! (`<`), NDJSON (`{`) or a text sitemap; a robots.txt is said by the caller. Here the byte limits are set and,
//! once the reading stopped, said.

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::rc::Rc;

use flate2::bufread::MultiGzDecoder;

use super::lines::read_lines;
use super::metered::Metered;
use super::xml::read_xml;
use super::{Format, Found, MAX_BYTES, MAX_COMPRESSED_BYTES, MAX_ROBOTS_BYTES, ReadOptions, Report};

pub(super) fn read_into(
    input: impl Read,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
) -> Result<(), String> {
    // The magic numbers are looked for in the first bytes however the input arrives (a pipe or an HTTP body may
    // give one byte first).
    let (head, input) = peek(input)?;
    report.gzip = head.starts_with(&[0x1f, 0x8b]);
    if !report.gzip {
        undecodable(&head)?;
    }
    let input = io::Cursor::new(head).chain(input);
    let unlimited = Rc::new(Cell::new(false));
    let any_cut = Rc::new(Cell::new(false));
    let mut raw = Metered::new(BufReader::with_capacity(64 * 1024, input), MAX_COMPRESSED_BYTES, unlimited.clone());
    raw.any_cut = any_cut.clone();
    let limit = if options.robots { MAX_ROBOTS_BYTES } else { MAX_BYTES };
    if report.gzip {
        // Events are counted in the text a gzip body inflates to, never in its compressed bytes.
        raw.max_event = u64::MAX;
        let (head, inflated) = match peek(MultiGzDecoder::new(raw)) {
            Ok(pair) => pair,
            Err(e) => return Err(format!("{e} (in its gzip)")),
        };
        if head.starts_with(&[0x1f, 0x8b]) {
            return Err("it is gzip inside gzip: decompress it once (gunzip) and import what that gives".to_owned());
        }
        undecodable(&head)?;
        let inflated = BufReader::with_capacity(64 * 1024, io::Cursor::new(head).chain(inflated));
        let mut text = Metered::new(inflated, limit, unlimited);
        text.any_cut = any_cut;
        let result = read_text(&mut text, options, found, report);
        let compressed_cut = text.inner.get_ref().get_ref().1.get_ref().cut;
        finish(result, text.cut, limit, report, compressed_cut)
    } else {
        raw.limit = limit;
        let result = read_text(&mut raw, options, found, report);
        finish(result, raw.cut, limit, report, false)
    }
}

/// How many bytes [`peek`] looks at: the longest magic number below.
const HEAD_BYTES: usize = 8;

/// The first [`HEAD_BYTES`] bytes of `input` (fewer when it is shorter), read however they arrive, and the rest.
fn peek<R: Read>(mut input: R) -> Result<(Vec<u8>, R), String> {
    let mut head = [0u8; HEAD_BYTES];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read: {e}")),
        }
    }
    Ok((head[..got].to_vec(), input))
}

/// Refuses text that is no UTF-8 sitemap by its first bytes: another Unicode encoding (by its byte order mark, or
/// the NUL bytes of UTF-16 or UTF-32 without one), an archive or compression other than gzip, or binary. Read as
/// text, each would be thousands of rejected "lines"; it is one failed source, saying what it is.
fn undecodable(head: &[u8]) -> Result<(), String> {
    const CONVERT: &str = "sitemaps are UTF-8 (convert it first, e.g. iconv -f";
    let encoding = if head.starts_with(&[0, 0, 0xfe, 0xff]) {
        Some("UTF-32BE")
    } else if head.starts_with(&[0xff, 0xfe, 0, 0]) {
        Some("UTF-32LE")
    } else if head.starts_with(&[0xfe, 0xff]) {
        Some("UTF-16BE")
    } else if head.starts_with(&[0xff, 0xfe]) {
        Some("UTF-16LE")
    } else {
        None
    };
    if let Some(encoding) = encoding {
        return Err(format!("it is {encoding} (by its byte order mark): {CONVERT} {encoding} -t UTF-8)"));
    }
    let archive = [
        (&b"PK\x03\x04"[..], "a zip archive: unzip it and import the sitemaps it holds"),
        (b"BZh", "bzip2-compressed: decompress it (bunzip2) first, or gzip it"),
        (b"\xfd7zXZ\x00", "xz-compressed: decompress it (unxz) first, or gzip it"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it (unzstd) first, or gzip it"),
        (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: extract it and import the sitemaps it holds"),
    ];
    if let Some((_, what)) = archive.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Err(format!("it is {what}"));
    }
    if head.contains(&0) {
        // UTF-16 and UTF-32 without a byte order mark put NUL bytes beside ASCII; text never holds one.
        return Err(format!(
            "it holds NUL bytes: binary, or UTF-16 or UTF-32 without a byte order mark ({CONVERT} UTF-16 -t UTF-8)"
        ));
    }
    Ok(())
}

/// The outcome once the reading stopped: a limit that was reached explains whatever error it caused.
fn finish(
    result: Result<(), String>,
    cut: bool,
    limit: u64,
    report: &mut Report,
    compressed_cut: bool,
) -> Result<(), String> {
    if compressed_cut {
        report.cut = Some(format!("its compressed bytes pass {MAX_COMPRESSED_BYTES}: read up to there"));
    } else if cut {
        report.cut = Some(format!("it is larger than {limit} bytes uncompressed: read up to the limit"));
    }
    match result {
        Err(_) if report.cut.is_some() => Ok(()),
        other => other,
    }
}

fn read_text<R: BufRead>(
    input: &mut Metered<R>,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
) -> Result<(), String> {
    let (first, bom, space) = skip_bom_and_space(input).map_err(|e| format!("cannot read: {e}"))?;
    if bom {
        report.notice("a byte order mark before the text: read past");
    }
    if space && first == Some(b'<') {
        report.notice("whitespace before the XML declaration or root: read past");
    }
    if options.robots {
        report.format = Some(Format::Robots);
        return read_lines(input, options, found, report, Format::Robots);
    }
    match first {
        None => Err("it is empty".to_owned()),
        Some(b'<') => read_xml(input, options, found, report),
        Some(b'{') => {
            // `export` writes any number of entries: only the line length bounds NDJSON.
            report.format = Some(Format::Ndjson);
            input.unlimited.set(true);
            read_lines(input, options, found, report, Format::Ndjson)
        }
        Some(_) => {
            report.format = Some(Format::Text);
            read_lines(input, options, found, report, Format::Text)
        }
    }
}

/// Consumes a UTF-8 byte order mark and leading whitespace: the first byte after them, if any, whether there was
/// a byte order mark, and whether there was whitespace.
fn skip_bom_and_space<R: BufRead>(input: &mut Metered<R>) -> io::Result<(Option<u8>, bool, bool)> {
    // A byte at a time: the input may arrive a byte at a time.
    let mut bom = 0;
    for expected in [0xef, 0xbb, 0xbf] {
        match input.fill_buf()?.first() {
            Some(&b) if b == expected => {
                input.consume(1);
                bom += 1;
            }
            _ => break,
        }
    }
    let mut space = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok((None, bom == 3, space));
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                let first = buf[i];
                space |= i > 0;
                input.consume(i);
                input.mark();
                return Ok((Some(first), bom == 3, space));
            }
            None => {
                let n = buf.len();
                space = true;
                input.consume(n);
                input.mark();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{entries, gzip, options, read_all};
    use super::super::{MAX_EVENT_BYTES, read};
    use super::*;

    /// What is no UTF-8 sitemap fails as a source, saying what it is, rather than giving thousands of rejected
    /// "lines"; what is read before it is kept.
    #[test]
    fn undecodable_sources_fail_saying_what_they_are() {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                   <url><loc>https://www.example.com/a</loc></url></urlset>\n";
        let utf16 = |le: bool, bom: bool| -> Vec<u8> {
            let mut out = Vec::new();
            if bom {
                out.extend(if le { [0xff, 0xfe] } else { [0xfe, 0xff] });
            }
            for unit in xml.encode_utf16() {
                out.extend(if le { unit.to_le_bytes() } else { unit.to_be_bytes() });
            }
            out
        };
        let utf32le: Vec<u8> =
            [0xfeff_u32].into_iter().chain(xml.chars().map(u32::from)).flat_map(u32::to_le_bytes).collect();
        let utf32be: Vec<u8> =
            [0xfeff_u32].into_iter().chain(xml.chars().map(u32::from)).flat_map(u32::to_be_bytes).collect();
        let mut zip = b"PK\x03\x04".to_vec();
        zip.extend_from_slice(xml.as_bytes());
        let binary: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
        let mut late_nul = b"https://www.example.com/a\nhttps://www.example.com/b\n".to_vec();
        late_nul.extend_from_slice(b"\x00\x01\x02garbage\nhttps://www.example.com/c\n");
        for (name, bytes, says, kept) in [
            ("UTF-16LE", utf16(true, true), "it is UTF-16LE (by its byte order mark)", 0),
            ("UTF-16BE", utf16(false, true), "it is UTF-16BE (by its byte order mark)", 0),
            ("UTF-16 without a BOM", utf16(true, false), "it holds NUL bytes", 0),
            ("UTF-32LE", utf32le, "it is UTF-32LE", 0),
            ("UTF-32BE", utf32be, "it is UTF-32BE", 0),
            ("gzip in gzip", gzip(&gzip(xml.as_bytes())), "gzip inside gzip", 0),
            ("UTF-16 in gzip", gzip(&utf16(true, true)), "it is UTF-16LE", 0),
            ("zip", zip, "a zip archive", 0),
            ("bzip2", b"BZh91AY&SY".to_vec(), "bzip2", 0),
            ("xz", b"\xfd7zXZ\x00\x00".to_vec(), "xz", 0),
            ("binary", binary, "NUL", 0),
            ("a NUL byte on line 3", late_nul, "line 3 holds a NUL byte", 2),
        ] {
            let (items, report) = read_all(&bytes, &options());
            let e = report.expect_err(name);
            assert!(e.message.contains(says), "{name}: {}", e.message);
            assert_eq!(items.len(), kept, "{name}: {items:?}");
        }
        // A UTF-8 declaration with a UTF-8 body is read, of course.
        let (items, report) = read_all(xml.replace("UTF-16", "UTF-8").as_bytes(), &options());
        assert_eq!((items.len(), report.unwrap().format), (1, Some(Format::UrlSet)));
    }

    #[test]
    fn gzip_is_known_by_its_magic_and_every_member_is_read() {
        let mut two = gzip(b"<urlset><url><loc>https://www.example.com/a</loc></url>");
        two.extend(gzip(b"<url><loc>https://www.example.com/b</loc></url></urlset>"));
        let (items, report) = read_all(&two, &options());
        let report = report.unwrap();
        assert!(report.gzip);
        assert_eq!(entries(&items).len(), 2);
        let (items, report) = read_all(&gzip(b"https://www.example.com/t\n"), &options());
        assert_eq!(report.unwrap().format, Some(Format::Text));
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/t"})]);
    }

    #[test]
    fn a_gzip_body_of_many_megabytes_is_read_whole() {
        // Hex paths compress to about half: past one event's bound in gzip bytes alone.
        let mut xml = String::from("<urlset>\n");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..40_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            xml.push_str(&format!(
                "<url><loc>https://www.example.com/{x:016x}{:016x}</loc></url>\n",
                x.rotate_left(29)
            ));
        }
        xml.push_str("</urlset>\n");
        let compressed = gzip(xml.as_bytes());
        assert!(compressed.len() as u64 > MAX_EVENT_BYTES, "{}", compressed.len());
        let (items, report) = read_all(&compressed, &options());
        let report = report.unwrap();
        assert_eq!((items.len(), report.cut), (40_000, None));
    }

    /// A reader that gives one byte a read, as a pipe or an HTTP body may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let Some((first, rest)) = self.0.split_first() else { return Ok(0) };
            if out.is_empty() {
                return Ok(0);
            }
            out[0] = *first;
            self.0 = rest;
            Ok(1)
        }
    }

    #[test]
    fn gzip_and_a_byte_order_mark_are_known_however_the_bytes_arrive() {
        let xml = "\u{feff}<urlset><url><loc>https://www.example.com/a</loc></url></urlset>";
        for bytes in [xml.as_bytes().to_vec(), gzip(xml.as_bytes())] {
            let mut items = Vec::new();
            let report = read(Trickle(&bytes), &options(), &mut |f| {
                items.push(f);
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!(report.format, Some(Format::UrlSet));
            assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/a"})]);
        }
    }
}
