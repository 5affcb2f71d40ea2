//! What a page served without `Content-Type` is, as a browser sniffs it: WHATWG MIME Sniffing's "rules for
//! identifying an unknown MIME type" (<https://mimesniff.spec.whatwg.org/#rules-for-identifying-an-unknown-mime-type>)
//! over the body's first bytes (its "resource header", at most [`RESOURCE_HEADER`] bytes), the scriptable types
//! included, as for a page a browser navigates to.
//!
//! The checker reads the head of a page that sniffs as HTML and judges it; any other type is judged on its status
//! and headers alone, as a page served with a non-HTML `Content-Type` is. No crate does this: the sniffers on
//! crates.io match file signatures (images, archives) or are unmaintained; servo's classifier is not published on
//! its own. Only the HTML answer matters here, so the table stops at the types that come before text and binary:
//! HTML, XML, PDF, PostScript and the byte order marks; the rest is told apart as text or binary.

/// The most of a body the rules look at (the spec's 1445 bytes).
pub const RESOURCE_HEADER: usize = 1445;

/// What the rules found, by MIME type essence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniffed {
    /// `text/html`.
    Html,
    /// `text/xml`.
    Xml,
    /// `application/pdf`.
    Pdf,
    /// `application/postscript`.
    PostScript,
    /// `text/plain`: a byte order mark, or no binary data byte.
    Text,
    /// `application/octet-stream` (or an image, audio, video or archive type, which the rules test for before
    /// this but which are not read either).
    Binary,
}

/// The HTML patterns, upper case, each followed by a tag-terminating byte (space or `>`) in the body.
const HTML_TAGS: [&[u8]; 17] = [
    b"<!DOCTYPE HTML",
    b"<HTML",
    b"<HEAD",
    b"<SCRIPT",
    b"<IFRAME",
    b"<H1",
    b"<DIV",
    b"<FONT",
    b"<TABLE",
    b"<A",
    b"<STYLE",
    b"<TITLE",
    b"<B",
    b"<BODY",
    b"<BR",
    b"<P",
    b"<!--",
];

/// Sniffs `body` (only its first [`RESOURCE_HEADER`] bytes are read) with the rules for an unknown MIME type.
pub fn sniff(body: &[u8]) -> Sniffed {
    let header = &body[..body.len().min(RESOURCE_HEADER)];
    // Whitespace bytes (HT, LF, FF, CR, space) before the scriptable patterns are skipped.
    let start = header.iter().position(|b| !matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' '));
    let rest = start.map_or(&header[header.len()..], |s| &header[s..]);
    let html = HTML_TAGS.iter().any(|tag| {
        rest.len() > tag.len() && rest[..tag.len()].eq_ignore_ascii_case(tag) && matches!(rest[tag.len()], b' ' | b'>')
    });
    if html {
        return Sniffed::Html;
    }
    if rest.starts_with(b"<?xml") {
        return Sniffed::Xml;
    }
    if header.starts_with(b"%PDF-") {
        return Sniffed::Pdf;
    }
    if header.starts_with(b"%!PS-Adobe-") {
        return Sniffed::PostScript;
    }
    if header.starts_with(b"\xFE\xFF") || header.starts_with(b"\xFF\xFE") || header.starts_with(b"\xEF\xBB\xBF") {
        return Sniffed::Text;
    }
    // A binary data byte: a control byte but HT, LF, FF, CR and ESC.
    let binary = header.iter().any(|&b| matches!(b, 0x00..=0x08 | 0x0B | 0x0E..=0x1A | 0x1C..=0x1F));
    if binary { Sniffed::Binary } else { Sniffed::Text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each case: a body's start, what it sniffs as.
    #[test]
    fn bodies_sniff_as_a_browser_sniffs_them() {
        use Sniffed::*;
        let cases: &[(&[u8], Sniffed)] = &[
            (b"<!DOCTYPE html>", Html),
            (b"<!doctype HTML><html>", Html),
            (b" \t\r\n\x0C<html lang=en>", Html),
            (b"<HEAD>", Html),
            (b"<script>x</script>", Html),
            (b"<iframe src=x>", Html),
            (b"<h1>Title</h1>", Html),
            (b"<div>", Html),
            (b"<font>", Html),
            (b"<table>", Html),
            (b"<a href=x>", Html),
            (b"<style>", Html),
            (b"<title>t</title>", Html),
            (b"<b>bold", Html),
            (b"<body>", Html),
            (b"<br>", Html),
            (b"<p>text", Html),
            (b"<!-- comment -->", Html),
            (b"<!-->", Html),
            (b"<meta name=robots content=noindex><p>", Text),
            (b"<html", Text),
            (b"<htmlx>", Text),
            (b"<abbr>", Text),
            (b"<h2>", Text),
            (b"<br/>", Text),
            (b"x<html>", Text),
            (b"\xEF\xBB\xBF<!DOCTYPE html>", Text),
            (b"\xFF\xFE<\x00h\x00", Text),
            (b"<?xml version=\"1.0\"?><html>", Xml),
            (b"  <?xml ", Xml),
            (b"%PDF-1.7", Pdf),
            (b"%!PS-Adobe-3.0", PostScript),
            (b"plain text\r\n", Text),
            (b"", Text),
            (b"   ", Text),
            (b"\x1B[1mtext", Text),
            (b"\x89PNG\r\n\x1A\n", Binary),
            (b"GIF89a\x01\x00", Binary),
            (b"\x1F\x8B\x08\x00", Binary),
            (b"text\x00", Binary),
        ];
        for (body, want) in cases {
            assert_eq!(sniff(body), *want, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn only_the_resource_header_is_read() {
        let mut late_binary = vec![b' '; RESOURCE_HEADER];
        late_binary.push(0);
        assert_eq!(sniff(&late_binary), Sniffed::Text);
        let mut late_html = vec![b' '; RESOURCE_HEADER - 2];
        late_html.extend_from_slice(b"<p>");
        assert_eq!(sniff(&late_html), Sniffed::Text, "the tag's terminating byte is past the header");
        late_html.truncate(RESOURCE_HEADER - 3);
        late_html.extend_from_slice(b"<p>");
        assert_eq!(sniff(&late_html), Sniffed::Html);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let _ = sniff(&bytes);
        }
    }
}
