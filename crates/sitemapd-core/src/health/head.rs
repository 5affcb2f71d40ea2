//! What a page's `<head>` says to a search engine: its robots `<meta>` tags and its `rel=canonical` `<link>`.
//!
//! The checker reads only a prefix of a page's body: it feeds the body's chunks to a [`HeadScan`], which keeps at
//! most its limit of bytes and says when to stop (the head ended, or the limit is reached), then hands the bytes
//! to [`crate::health::judge`], which reads them with [`Head::scan`]. Both tokenize the bytes as a browser does
//! (html5gum, WHATWG's tokenizer, switching to raw text inside `<script>`, `<style>`, `<title>` and the like),
//! so a tag inside a comment, a script or an attribute value is not a tag. Invalid UTF-8 is read lossily.

use html5gum::{DefaultEmitter, Token, Tokenizer};

/// The robots directives and the canonical link found in a page's head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// Each `<meta name="robots|googlebot" content="…">`: the name lowercased, the content as written.
    pub robots: Vec<(String, String)>,
    /// The `href` of the first `<link rel="… canonical …">`, as written (character references decoded).
    pub canonical: Option<String>,
}

impl Head {
    /// Reads the tags of `prefix` up to `</head>` or `<body>` (or its end).
    pub fn scan(prefix: &[u8]) -> Head {
        let mut head = Head::default();
        for token in tokens(prefix) {
            match token {
                Token::StartTag(tag) if tag.name.as_slice() == b"body" => break,
                Token::EndTag(tag) if tag.name.as_slice() == b"head" => break,
                Token::StartTag(tag) if tag.name.as_slice() == b"meta" => {
                    let name = attribute(&tag, b"name").map(|n| n.trim().to_ascii_lowercase());
                    if let Some(name) = name.filter(|n| n == "robots" || n == "googlebot") {
                        head.robots.push((name, attribute(&tag, b"content").unwrap_or_default()));
                    }
                }
                Token::StartTag(tag) if tag.name.as_slice() == b"link" && head.canonical.is_none() => {
                    let rel = attribute(&tag, b"rel").unwrap_or_default();
                    if rel.split_ascii_whitespace().any(|t| t.eq_ignore_ascii_case("canonical")) {
                        head.canonical = attribute(&tag, b"href");
                    }
                }
                _ => {}
            }
        }
        head
    }
}

/// Whether `prefix` reaches the end of the head: a `</head>` or `<body>` tag outside comments and scripts.
///
/// Cheap when it is not there: the bytes are tokenized only once they hold `</head` or `<body` in any case.
pub fn head_ended(prefix: &[u8]) -> bool {
    if !contains_ignore_case(prefix, b"</head") && !contains_ignore_case(prefix, b"<body") {
        return false;
    }
    tokens(prefix).any(|token| match token {
        Token::StartTag(tag) => tag.name.as_slice() == b"body",
        Token::EndTag(tag) => tag.name.as_slice() == b"head",
        _ => false,
    })
}

/// A body prefix read chunk by chunk: at most `limit` bytes, until the head ends.
///
/// Linear in the bytes pushed, however they are cut: the bytes are searched for `</head` or `<body` once each,
/// and tokenized (only when one was seen) from the end of the last tag or comment after which the tokenizer is back
/// in its data state ([`html5gum::naive_next_state`] says which start tags are not: `<script>`, `<style>`,
/// `<title>`, …), so a finished tag is not tokenized again. What may be tokenized again is an unfinished stretch
/// (an open `<script>`, comment or tag): that is done only when it is short or when the bytes that came since
/// the last tokenizing are at least an eighth of it, so that all the tokenizing is at most nine times the bytes.
/// A head that ended inside such a stretch may so be seen a few chunks late (never past the limit).
#[derive(Clone, Debug)]
pub struct HeadScan {
    bytes: Vec<u8>,
    limit: usize,
    done: bool,
    /// Where tokenizing resumes, in the data state: the end of the last tag or comment that leaves it there.
    resume: usize,
    /// Where the last `</head` or `<body` (any case) found starts, if one was.
    needle: Option<usize>,
    /// How many bytes there were when they were last tokenized (0: never).
    tokenized: usize,
    /// The bytes searched and tokenized so far: the work done, for tests.
    work: usize,
}

/// A stretch this short is tokenized again at each chunk (a tag cut in two: `</he` + `ad>`).
const SHORT: usize = 64;

/// How much of an unfinished stretch must have come since it was last tokenized for it to be tokenized again.
const AMORTIZE: usize = 8;

impl HeadScan {
    /// A scan that keeps at most `limit` bytes (`health_head_bytes`).
    pub fn new(limit: usize) -> Self {
        HeadScan { bytes: Vec::new(), limit, done: limit == 0, resume: 0, needle: None, tokenized: 0, work: 0 }
    }

    /// Takes the next chunk of the body (what fits within the limit); true when reading should stop: the head
    /// ended or the limit is reached. A chunk after that is ignored.
    pub fn push(&mut self, chunk: &[u8]) -> bool {
        if self.done {
            return true;
        }
        let room = self.limit - self.bytes.len();
        let before = self.bytes.len();
        self.bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        // Search what came, with the few bytes before it that a needle may start in.
        let from = before.saturating_sub(NEEDLE - 1).max(self.resume);
        if let Some(at) = rfind_needle(&self.bytes[from..]) {
            self.needle = Some(from + at);
        }
        self.work += self.bytes.len() - from;
        self.done = self.bytes.len() == self.limit || self.tokenize_if_due();
        self.done
    }

    /// Tokenizes from `resume` when a needle lies there and it is worth it; true when the head ended.
    fn tokenize_if_due(&mut self) -> bool {
        let len = self.bytes.len();
        if self.needle.is_none_or(|at| at < self.resume) {
            return false;
        }
        let stretch = len - self.resume;
        let fresh = len - self.tokenized;
        if stretch > SHORT && fresh * AMORTIZE < stretch {
            return false;
        }
        self.tokenized = len;
        self.work += stretch;
        let start = self.resume;
        let mut emitter = DefaultEmitter::<usize>::new_with_span();
        emitter.naively_switch_states(true);
        for token in Tokenizer::new_with_emitter(&self.bytes[start..], emitter) {
            let (end, data_after) = match token {
                Ok(Token::StartTag(tag)) if tag.name.as_slice() == b"body" => return true,
                Ok(Token::EndTag(tag)) if tag.name.as_slice() == b"head" => return true,
                Ok(Token::StartTag(tag)) => (tag.span.end, html5gum::naive_next_state(&tag.name).is_none()),
                Ok(Token::EndTag(tag)) => (tag.span.end, true),
                // A comment or doctype ends at `>`, or at the end of the bytes: then it may go on.
                Ok(Token::Comment(c)) => (c.span.end, start + c.span.end < len),
                Ok(Token::Doctype(d)) => (d.span.end, start + d.span.end < len),
                Ok(_) => continue,
                Err(never) => match never {},
            };
            if data_after {
                self.resume = start + end;
            }
        }
        false
    }

    /// The bytes kept so far, for [`crate::health::judge`].
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The bytes searched and tokenized so far (each byte counted once per time it was looked at).
    pub fn work(&self) -> usize {
        self.work
    }
}

/// The longest needle: `</head` and `<body` are both this long.
const NEEDLE: usize = 6;

/// Where the last `</head` or `<body` (any case) of `bytes` starts.
fn rfind_needle(bytes: &[u8]) -> Option<usize> {
    let at = |needle: &[u8]| bytes.windows(needle.len()).rposition(|w| w.eq_ignore_ascii_case(needle));
    match (at(b"</head"), at(b"<body")) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The tokens of `bytes` as a browser would see them (raw text inside `<script>`, `<style>`, …).
fn tokens(bytes: &[u8]) -> impl Iterator<Item = Token> + '_ {
    let mut emitter = DefaultEmitter::default();
    emitter.naively_switch_states(true);
    Tokenizer::new_with_emitter(bytes, emitter).map(|token| match token {
        Ok(token) => token,
        Err(never) => match never {},
    })
}

/// A tag's attribute (names are lowercased by the tokenizer), decoded lossily.
fn attribute(tag: &html5gum::StartTag<()>, name: &[u8]) -> Option<String> {
    tag.attributes.get(name).map(|value| String::from_utf8_lossy(value.as_slice()).into_owned())
}

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn robots(html: &str) -> Vec<(String, String)> {
        Head::scan(html.as_bytes()).robots
    }
    fn canonical(html: &str) -> Option<String> {
        Head::scan(html.as_bytes()).canonical
    }
    fn pair(name: &str, content: &str) -> Vec<(String, String)> {
        vec![(name.to_owned(), content.to_owned())]
    }

    /// Each case: a page's start, the robots metas found.
    #[test]
    fn robots_metas_are_read_as_a_browser_reads_them() {
        let cases: &[(&str, Vec<(String, String)>)] = &[
            (r#"<head><meta name="robots" content="noindex"></head>"#, pair("robots", "noindex")),
            (r#"<meta name=robots content=noindex>"#, pair("robots", "noindex")),
            (r#"<META NAME="ROBOTS" CONTENT="NoIndex">"#, pair("robots", "NoIndex")),
            (r#"<meta name=' googlebot ' content='none'/>"#, pair("googlebot", "none")),
            (r#"<meta content="noindex" name="robots">"#, pair("robots", "noindex")),
            (r#"<meta name="robots" content="&#110;oindex">"#, pair("robots", "noindex")),
            (r#"<meta name="robots">"#, pair("robots", "")),
            (r#"<meta name="bingbot" content="noindex">"#, vec![]),
            (r#"<meta property="robots" content="noindex">"#, vec![]),
            // Not tags: a comment, a script, a style, a title, an attribute value.
            (r#"<!-- <meta name="robots" content="noindex"> -->"#, vec![]),
            (r#"<script>document.write('<meta name="robots" content="noindex">')</script>"#, vec![]),
            (r#"<script><!-- </head> --></script><meta name=robots content=x>"#, pair("robots", "x")),
            (r#"<style>/* <meta name="robots" content="noindex"> */</style>"#, vec![]),
            (r#"<title><meta name="robots" content="noindex"></title>"#, vec![]),
            (r#"<meta name="description" content='<meta name="robots" content="noindex">'>"#, vec![]),
            // After the head: not read.
            (r#"<head></head><meta name="robots" content="noindex">"#, vec![]),
            (r#"<body><meta name="robots" content="noindex">"#, vec![]),
            (r#"<BODY class=x><meta name="robots" content="noindex">"#, vec![]),
            (
                r#"<meta name="robots" content="index"><meta name="googlebot" content="noindex">"#,
                vec![("robots".into(), "index".into()), ("googlebot".into(), "noindex".into())],
            ),
        ];
        for (html, want) in cases {
            assert_eq!(&robots(html), want, "{html}");
        }
    }

    /// Each case: a page's start, the canonical found.
    #[test]
    fn the_first_canonical_link_is_read() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"<link rel="canonical" href="https://a.example/x">"#, Some("https://a.example/x")),
            (r#"<link rel=canonical href=/x>"#, Some("/x")),
            (r#"<LINK REL="Canonical" HREF="/x">"#, Some("/x")),
            (r#"<link rel="alternate canonical" href="/x">"#, Some("/x")),
            (r#"<link href="/x?a=1&amp;b=2" rel="canonical">"#, Some("/x?a=1&b=2")),
            (r#"<link rel="canonical" href="/a"><link rel="canonical" href="/b">"#, Some("/a")),
            (r#"<link rel="alternate" href="/x"><link rel="canonical" href="/y">"#, Some("/y")),
            (r#"<link rel="canonicalize" href="/x">"#, None),
            (r#"<link rel="alternate" hreflang="de" href="/de">"#, None),
            (r#"<link rel="canonical">"#, None),
            (r#"<!--<link rel="canonical" href="/x">-->"#, None),
            (r#"<script>"<link rel='canonical' href='/x'>"</script>"#, None),
            (r#"</head><link rel="canonical" href="/x">"#, None),
        ];
        for (html, want) in cases {
            assert_eq!(canonical(html).as_deref(), *want, "{html}");
        }
    }

    /// Each case: a prefix, whether the head ended in it.
    #[test]
    fn the_head_ends_at_its_end_tag_or_the_body() {
        let cases: &[(&str, bool)] = &[
            ("<html><head><title>x</title>", false),
            ("<html><head><title>x</title></head>", true),
            ("<html><head></HEAD >", true),
            ("<html><body>", true),
            ("<html><Body class=x>", true),
            ("<html><head></he", false),
            ("<html><bodyx>", false),
            ("<!-- </head> <body> -->", false),
            ("<script>if (a</head>) {}</script>", false),
            ("<script>'<body>'</script><title>", false),
            ("<title></head></title>", false),
            ("<meta content='</head>'>", false),
            ("", false),
        ];
        for (prefix, want) in cases {
            assert_eq!(head_ended(prefix.as_bytes()), *want, "{prefix}");
        }
    }

    #[test]
    fn a_scan_keeps_at_most_its_limit_and_stops_when_the_head_ends() {
        let mut scan = HeadScan::new(200);
        assert!(!scan.push(b"<html><head><title>x</title>"));
        assert!(!scan.push(b"<meta name=robots content=noindex></he"));
        assert!(scan.push(b"ad><body>"));
        assert!(scan.push(b"more"), "a chunk after the end is ignored");
        assert!(scan.bytes().ends_with(b"</head><body>"));

        let mut scan = HeadScan::new(10);
        assert!(!scan.push(b"<html>"));
        assert!(scan.push(b"<head><title>"));
        assert_eq!(scan.into_bytes(), b"<html><hea");
        assert!(HeadScan::new(0).push(b"<html>"));
    }

    /// A 256 KiB head in 26-byte pieces, in the shapes that made the scan quadratic (each prefix searched and
    /// tokenized again): the bytes looked at stay within a few times the bytes, whatever the shape.
    #[test]
    fn the_scan_is_linear_in_the_bytes_however_they_come() {
        const HEAD: usize = 256 << 10;
        let shapes: [(&str, &str, &str); 5] = [
            ("metas", "<head>", r#"<meta name="x" content="y">"#),
            ("fake ends in a script", "<head><script>", "'</head>' + '<body>';"),
            ("fake ends in a comment", "<head><!--", " </head> <body> "),
            ("an endless end tag", "<head></head ", "a=b "),
            ("look-alike tags", "<head>", "<header></header><bodyx>"),
        ];
        for (name, start, filler) in shapes {
            let mut page = start.as_bytes().to_vec();
            while page.len() < HEAD {
                page.extend_from_slice(filler.as_bytes());
            }
            page.truncate(HEAD);
            let mut scan = HeadScan::new(HEAD);
            let mut ended = false;
            for piece in page.chunks(26) {
                ended = scan.push(piece);
                if ended {
                    break;
                }
            }
            assert!(ended, "{name}: the limit ends the scan");
            assert!(scan.work() <= 10 * HEAD, "{name}: {} bytes looked at for {HEAD}", scan.work());
        }
    }

    /// A head that ends in a piece of its own, or in a tag cut in two, is seen at once.
    #[test]
    fn an_end_cut_anywhere_is_seen_at_once() {
        let page = r#"<!doctype html><html><head><title>t</title><meta name="robots" content="noindex"></head><body>x"#;
        let end = page.find("</head>").unwrap() + "</head>".len();
        for cut in 1..end {
            let mut scan = HeadScan::new(1 << 20);
            assert!(!scan.push(&page.as_bytes()[..cut]), "{cut}");
            assert!(scan.push(&page.as_bytes()[cut..end]), "{cut}");
        }
        for piece in 1..8 {
            let mut scan = HeadScan::new(1 << 20);
            let pushed = page.as_bytes()[..end].chunks(piece).map(|c| scan.push(c)).collect::<Vec<_>>();
            assert_eq!(pushed.iter().position(|&done| done), Some(pushed.len() - 1), "pieces of {piece}");
        }
    }

    /// A fake end inside a long script delays nothing: the real one is seen within an eighth of the bytes after.
    #[test]
    fn a_real_end_after_a_long_script_is_seen_soon() {
        let script = format!("<head><script>{}</script>", "if (a < '</head>') {} ".repeat(200));
        let page = format!("{script}</head><body>{}", " ".repeat(10_000));
        let mut scan = HeadScan::new(1 << 20);
        let pieces: Vec<_> = page.as_bytes().chunks(26).collect();
        let done = pieces.iter().position(|p| scan.push(p)).expect("the end is seen");
        let seen_at = (done + 1) * 26;
        assert!(seen_at >= script.len() + "</head>".len());
        assert!(seen_at <= (script.len() + 7) * 9 / 8 + 26, "seen at {seen_at} of {}", page.len());
        assert!(head_ended(scan.bytes()));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Head::scan(&bytes);
            let _ = head_ended(&bytes);
            let mut scan = HeadScan::new(100);
            for chunk in bytes.chunks(7) {
                scan.push(chunk);
            }
        }

        /// Pushed in any pieces, the scan stops only where the head ended (or at the limit), and pushed at once
        /// it stops exactly when the head ended.
        #[test]
        fn the_scan_agrees_with_a_whole_tokenizing(
            parts in proptest::collection::vec(prop_oneof![
                Just("<head>"), Just("</head>"), Just("</HEAD "), Just("<body>"), Just("<body"), Just(">"),
                Just("<script>"), Just("</script>"), Just("<title>"), Just("</title>"), Just("<!--"), Just("-->"),
                Just("<meta name=robots content=noindex>"), Just("<a href='</head>'>"), Just("\r\n"), Just("\r"),
                Just("<!doctype html>"), Just("x"), Just("<"), Just("/"), Just("</"), Just("<style>"),
                Just("</style>"), Just("<br/>"), Just("</header>"), Just("'"), Just("\""),
            ], 0..40),
            piece in 1usize..30,
        ) {
            let page = parts.concat();
            let mut scan = HeadScan::new(1 << 20);
            for chunk in page.as_bytes().chunks(piece) {
                if scan.push(chunk) {
                    prop_assert!(head_ended(scan.bytes()), "{:?} stopped at {:?}", page, String::from_utf8_lossy(scan.bytes()));
                    break;
                }
            }
            let mut whole = HeadScan::new(1 << 20);
            prop_assert_eq!(whole.push(page.as_bytes()), head_ended(page.as_bytes()), "{:?}", page);
        }

        /// Whatever surrounds it, a meta inside a comment or a script is not seen.
        #[test]
        fn a_meta_in_a_comment_or_a_script_is_not_seen(
            before in "[a-z <>=\"'/]{0,20}",
            after in "[a-z <>=\"'/]{0,20}",
            in_script in any::<bool>(),
        ) {
            let meta = r#"<meta name="robots" content="noindex"><link rel=canonical href=/x>"#;
            let hidden = if in_script {
                format!("<head><script>{before}{meta}{after}</script>")
            } else {
                format!("<head><!--{before}{meta}{after}-->")
            };
            // Only what ends the comment or the script early can show it: `<!-->`, or `</script` itself.
            prop_assume!(in_script || !before.starts_with('>'));
            prop_assume!(!in_script || !(before.contains("</script") || after.contains("</script")));
            let head = Head::scan(hidden.as_bytes());
            prop_assert!(head.robots.is_empty(), "{hidden}: {:?}", head.robots);
            prop_assert_eq!(head.canonical, None);
        }
    }
}
