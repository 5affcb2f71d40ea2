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
#[derive(Clone, Debug)]
pub struct HeadScan {
    bytes: Vec<u8>,
    limit: usize,
    done: bool,
}

impl HeadScan {
    /// A scan that keeps at most `limit` bytes (`health_head_bytes`).
    pub fn new(limit: usize) -> Self {
        HeadScan { bytes: Vec::new(), limit, done: limit == 0 }
    }

    /// Takes the next chunk of the body (what fits within the limit); true when reading should stop: the head
    /// ended or the limit is reached. A chunk after that is ignored.
    pub fn push(&mut self, chunk: &[u8]) -> bool {
        if self.done {
            return true;
        }
        let room = self.limit - self.bytes.len();
        self.bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        self.done = self.bytes.len() == self.limit || head_ended(&self.bytes);
        self.done
    }

    /// The bytes kept so far, for [`crate::health::judge`].
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
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
