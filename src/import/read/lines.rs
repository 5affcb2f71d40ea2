//! The line formats, a line at a time: a text sitemap (one URL a line), a robots.txt (its `Sitemap:` lines) and
//! NDJSON in the write API's form (each line an entry, rewritten when rewrites are given).

use std::io::BufRead;
use std::ops::ControlFlow;

use super::metered::Metered;
use super::{Format, Found, MAX_ENTRIES, MAX_EVENT_BYTES, ReadOptions, Report, shorten};

/// A text sitemap, a robots.txt or NDJSON, a line at a time. A line longer than its bound (the API's
/// `max_line_bytes` for NDJSON, [`MAX_EVENT_BYTES`] else) or not UTF-8 is reported as invalid and skipped to its
/// end, in bounded memory; a last line that a limit cut short is dropped.
pub(super) fn read_lines<R: BufRead>(
    input: &mut Metered<R>,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
    format: Format,
) -> Result<(), String> {
    input.max_event = u64::MAX;
    let max = if format == Format::Ndjson { options.max_line_bytes.max(1) } else { MAX_EVENT_BYTES };
    let mut line = Vec::new();
    loop {
        line.clear();
        let line_no = input.newlines + 1;
        // The line, up to its newline; what passes `max` (and its `\r\n`) is counted, not kept.
        let (mut length, mut ended) = (0u64, false);
        loop {
            let buf = input.fill_buf().map_err(|e| format!("cannot read (line {line_no}): {e}"))?;
            if buf.is_empty() {
                break;
            }
            let (take, found_end) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            let room = usize::try_from((max + 2).saturating_sub(line.len() as u64)).unwrap_or(usize::MAX);
            line.extend_from_slice(&buf[..take.min(room)]);
            length += take as u64;
            input.consume(take);
            if found_end {
                ended = true;
                break;
            }
        }
        if length == 0 {
            return Ok(());
        }
        if !ended && (input.cut || input.any_cut.get()) {
            // The limit cut this line short: it is not what the source says.
            return Ok(());
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let body_length = length - (line.len() - body.len()) as u64;
        let invalid = |reason: String| Found::Invalid { line: line_no, loc: None, reason };
        if format != Format::Robots && body.contains(&0) {
            return Err(format!(
                "line {line_no} holds a NUL byte: it is no text sitemap (binary, or UTF-16 or UTF-32 without a byte \
                 order mark)"
            ));
        }
        let item = if body_length > max && format == Format::Robots {
            continue;
        } else if body_length > max {
            invalid(format!("the line is longer than {max} bytes"))
        } else if let Ok(text) = std::str::from_utf8(body) {
            match format {
                Format::Robots => {
                    let text = text.split('#').next().unwrap_or_default();
                    match text.split_once(':') {
                        Some((key, value))
                            if key.trim().eq_ignore_ascii_case("sitemap") && !value.trim().is_empty() =>
                        {
                            if key.trim() != "Sitemap" {
                                report.notice(format!("robots.txt line {:?}: any case is read", shorten(key.trim())));
                            }
                            Found::Sitemap { line: line_no, loc: value.trim().to_owned() }
                        }
                        _ => continue,
                    }
                }
                Format::Text => {
                    let url = text.trim();
                    if url.is_empty() {
                        continue;
                    }
                    if !is_http_url(url) {
                        report.items += 1;
                        let reason = "the line is not an http or https URL (not copied here)".to_owned();
                        if found(Found::NotAnEntry { line: line_no, reason }).is_break() {
                            return Ok(());
                        }
                        continue;
                    }
                    let json = match &options.section {
                        Some(section) => {
                            serde_json::json!({ "loc": options.rewrite(url), "section": section.as_str() })
                        }
                        None => serde_json::json!({ "loc": options.rewrite(url) }),
                    }
                    .to_string();
                    Found::Entry { line: line_no, loc: Some(url.to_owned()), json }
                }
                _ => {
                    let text = text.trim();
                    if text.is_empty() {
                        continue;
                    }
                    let (loc, json) = ndjson_line(text, options);
                    Found::Entry { line: line_no, loc, json }
                }
            }
        } else if format == Format::Robots {
            continue;
        } else {
            invalid("the line is not valid UTF-8".to_owned())
        };
        report.items += 1;
        if !matches!(format, Format::Ndjson | Format::Robots) && report.items > MAX_ENTRIES {
            report.items = MAX_ENTRIES;
            report.cut = Some(format!("it lists more than {MAX_ENTRIES} URLs: the first {MAX_ENTRIES} were read"));
            return Ok(());
        }
        if found(item).is_break() {
            return Ok(());
        }
    }
}

/// Whether a text sitemap's line is an entry at all: a URL (it starts with `http://` or `https://`, any case) or a
/// relative one (`/path`, a legacy generator's mistake worth showing), without a blank. Anything else (a file that
/// is no sitemap: `/etc/passwd`, an environment) is rejected without being copied.
fn is_http_url(line: &str) -> bool {
    let scheme = |s: &str| line.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s));
    (scheme("http://") || scheme("https://") || line.starts_with('/')) && !line.contains(char::is_whitespace)
}

/// One NDJSON line: its loc (for the rejects file) and the JSON to validate, rewritten when rewrites are given, in
/// the import's section when it has one (a line's own section is kept unless the import's replaces it). Without
/// rewrites or a section to replace, the line is kept as sent, so a field given twice stays twice.
fn ndjson_line(text: &str, options: &ReadOptions) -> (Option<String>, String) {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(text) else {
        return (None, text.to_owned());
    };
    let loc = value.get("loc").and_then(|l| l.as_str()).map(str::to_owned);
    let section = match (&options.section, value.as_object()) {
        (Some(section), Some(object)) if options.section_replaces || !object.contains_key("section") => {
            Some(section.as_str())
        }
        _ => None,
    };
    if options.rewrites.is_empty() {
        let text = match section {
            Some(section) if value.get("section").is_none() => with_section(text, section),
            Some(section) => {
                value["section"] = section.into();
                value.to_string()
            }
            None => text.to_owned(),
        };
        return (loc, text);
    }
    rewrite_value(&mut value, options);
    if let Some(section) = section {
        value["section"] = section.into();
    }
    (loc, value.to_string())
}

/// `object` (the text of a JSON object) with `"section"` as its first field and the rest as sent.
fn with_section(object: &str, section: &str) -> String {
    let field = format!("{{\"section\":{}", serde_json::Value::from(section));
    let rest = object.trim_start().strip_prefix('{').unwrap_or(object);
    if rest.trim_start().starts_with('}') { format!("{field}{rest}") } else { format!("{field},{rest}") }
}

/// Applies the rewrites to the URL fields of an entry in the write API's form.
fn rewrite_value(value: &mut serde_json::Value, options: &ReadOptions) {
    fn at(value: &mut serde_json::Value, key: &str, options: &ReadOptions) {
        if let Some(serde_json::Value::String(s)) = value.get_mut(key) {
            *s = options.rewrite(s);
        }
    }
    fn each(value: &mut serde_json::Value, list: &str, f: impl Fn(&mut serde_json::Value)) {
        if let Some(serde_json::Value::Array(items)) = value.get_mut(list) {
            items.iter_mut().for_each(f);
        }
    }
    at(value, "loc", options);
    each(value, "images", |i| at(i, "loc", options));
    each(value, "alternates", |a| at(a, "href", options));
    each(value, "videos", |v| {
        for key in ["thumbnail_loc", "content_loc", "player_loc"] {
            at(v, key, options);
        }
        if let Some(uploader) = v.get_mut("uploader") {
            at(uploader, "info", options);
        }
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{entries, options, read_all};
    use super::super::{MAX_BYTES, MAX_ROBOTS_BYTES, read};
    use super::*;
    use crate::domain::Section;

    #[test]
    fn text_sitemaps_robots_and_ndjson_are_read_a_line_at_a_time() {
        let text = "\u{feff}https://www.example.com/a\r\n\r\n  https://www.example.com/b  \nnot a url";
        let (items, report) = read_all(text.as_bytes(), &options());
        assert_eq!(report.unwrap().format, Some(Format::Text));
        let lines: Vec<(u64, Option<String>)> = items
            .iter()
            .map(|f| match f {
                Found::Entry { line, loc, .. } => (*line, loc.clone()),
                Found::NotAnEntry { line, reason } => (*line, Some(reason.clone())),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            lines,
            [
                (1, Some("https://www.example.com/a".into())),
                (3, Some("https://www.example.com/b".into())),
                (4, Some("the line is not an http or https URL (not copied here)".into()))
            ],
            "a line that is no URL is never copied"
        );

        let robots = "User-agent: *\nDisallow: /x # Sitemap: https://no.example/\nSitemap: https://a.example/s.xml\n\
                      sitemap:https://a.example/news.xml\r\nSITEMAP :  https://b.example/i.xml.gz # main\nSitemap:\n";
        let (items, report) = read_all(robots.as_bytes(), &ReadOptions { robots: true, ..options() });
        assert_eq!(report.unwrap().format, Some(Format::Robots));
        let locs: Vec<&str> = items
            .iter()
            .map(|f| match f {
                Found::Sitemap { loc, .. } => loc.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(locs, ["https://a.example/s.xml", "https://a.example/news.xml", "https://b.example/i.xml.gz"]);

        let ndjson = "{\"loc\":\"https://old.example/a\",\"loc\":\"x\"}\n\n{\"loc\":\"https://old.example/b\",\
                      \"images\":[{\"loc\":\"https://old.example/i.jpg\"}]}\n";
        let (items, _) = read_all(ndjson.as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!() };
        assert_eq!(json, "{\"loc\":\"https://old.example/a\",\"loc\":\"x\"}", "as sent: a field twice stays twice");
        let rewrite =
            ReadOptions { rewrites: vec![("https://old.example/".into(), "https://new.example/".into())], ..options() };
        let (items, _) = read_all(ndjson.as_bytes(), &rewrite);
        assert_eq!(
            entries(&items)[1],
            json!({"loc": "https://new.example/b", "images": [{"loc": "https://new.example/i.jpg"}]})
        );
        let long = format!("{{\"loc\":\"{}\"}}\n{{\"loc\":\"https://www.example.com/next\"}}\n", "a".repeat(70_000));
        let (items, result) = read_all(long.as_bytes(), &options());
        result.unwrap();
        let Found::Invalid { line: 1, reason, .. } = &items[0] else { panic!("not refused") };
        assert_eq!(reason, "the line is longer than 65536 bytes");
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/next"})], "the next line is read");
    }

    /// The import's section goes into each entry: a text line's, an NDJSON line's that names none (the rest of
    /// the line as sent, a field twice still twice); an NDJSON line's own section stays unless the import's
    /// replaces it (`--section`), rewrites or not.
    #[test]
    fn the_sections_go_into_each_lines_json() {
        let blog = ReadOptions { section: Some(Section::parse("blog").unwrap()), ..options() };
        let (items, _) = read_all(b"https://www.example.com/a\n", &blog);
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/a", "section": "blog"})]);

        let ndjson = "{\"loc\":\"https://old.example/a\",\"loc\":\"x\"}\n{ }\n{\"loc\":\"https://old.example/b\",\
                      \"section\":\"shop\"}\n{\"loc\":\"https://old.example/c\",\"section\":null}\n[1]\n";
        let (items, _) = read_all(ndjson.as_bytes(), &blog);
        let json: Vec<&str> = items
            .iter()
            .map(|f| match f {
                Found::Entry { json, .. } => json.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            json,
            [
                "{\"section\":\"blog\",\"loc\":\"https://old.example/a\",\"loc\":\"x\"}",
                "{\"section\":\"blog\" }",
                "{\"loc\":\"https://old.example/b\",\"section\":\"shop\"}",
                "{\"loc\":\"https://old.example/c\",\"section\":null}",
                "[1]",
            ],
            "a line's own section (null: the default section) is kept; what is no object stays as it is, refused"
        );
        let replaced = ReadOptions { section_replaces: true, ..blog };
        let (items, _) = read_all(ndjson.as_bytes(), &replaced);
        let values = entries(&items[2..4]);
        assert_eq!(values[0], json!({"loc": "https://old.example/b", "section": "blog"}));
        assert_eq!(values[1], json!({"loc": "https://old.example/c", "section": "blog"}));
        let rewritten =
            ReadOptions { rewrites: vec![("https://old.example/".into(), "https://new.example/".into())], ..replaced };
        let (items, _) = read_all(ndjson.as_bytes(), &rewritten);
        assert_eq!(entries(&items[2..3]), [json!({"loc": "https://new.example/b", "section": "blog"})]);
        let kept = ReadOptions { section_replaces: false, ..rewritten };
        let (items, _) = read_all(ndjson.as_bytes(), &kept);
        assert_eq!(entries(&items[2..3]), [json!({"loc": "https://new.example/b", "section": "shop"})]);
        let (items, _) = read_all(ndjson.as_bytes(), &kept);
        assert_eq!(entries(&items[1..2]), [json!({"section": "blog"})]);
    }

    #[test]
    fn a_line_the_limit_cuts_short_is_dropped_and_a_bad_line_is_skipped() {
        let url = "https://www.example.com/abcdefghijklmnopqrstuvwxyz\n";
        let mut text = "\n".repeat(MAX_BYTES as usize - 20);
        text.push_str(url);
        let (items, report) = read_all(text.as_bytes(), &options());
        assert!(items.is_empty(), "never a truncated URL: {items:?}");
        assert!(report.unwrap().cut.is_some());

        let robots = format!(
            "{}\nSitemap: https://a.example/other.xml-that-is-cut.xml\n",
            "#".repeat(MAX_ROBOTS_BYTES as usize - 20)
        );
        let (items, _) = read_all(robots.as_bytes(), &ReadOptions { robots: true, ..options() });
        assert!(items.is_empty(), "never a truncated sitemap URL: {items:?}");

        let mut bytes = b"https://www.example.com/a\n".to_vec();
        bytes.extend(vec![b'x'; 2 << 20]);
        bytes.extend(b"\nhttps://www.example.com/\xff\nhttps://www.example.com/b\n");
        let (items, report) = read_all(&bytes, &options());
        report.unwrap();
        let kinds: Vec<String> = items
            .iter()
            .map(|f| match f {
                Found::Entry { loc, .. } => loc.clone().unwrap(),
                Found::Invalid { reason, .. } => reason.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds[0], "https://www.example.com/a");
        assert_eq!(
            kinds,
            [
                "https://www.example.com/a",
                "the line is longer than 1048576 bytes",
                "the line is not valid UTF-8",
                "https://www.example.com/b"
            ],
            "the rest is read"
        );
    }

    #[test]
    fn the_reader_stops_when_told() {
        let (mut seen, many) = (0, "https://www.example.com/a\n".repeat(10));
        let result = read(many.as_bytes(), &options(), &mut |_| {
            seen += 1;
            if seen == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
        assert!(result.is_ok());
        assert_eq!(seen, 3);
    }
}
