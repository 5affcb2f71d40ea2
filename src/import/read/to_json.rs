//! A `<url>` as read ([`Node`]s) into the JSON text of the write API's entry, which the caller validates with the
//! API's own code: every field and extension mapped (`yes`/`no` as booleans, numbers as numbers, a restriction's
//! list as an array), a field given twice kept twice, rewrites applied to the entry's URLs. The entry is built as
//! the core's [`JsonTree`] (the type the API reads extensions into) and written by its `Serialize`.

use super::xml::{Node, Ns, skip};
use super::{ReadOptions, Report};
use crate::domain::JsonTree;

/// A number as the API would receive it: an integer or a finite decimal as JSON, anything else as the string it
/// is (which validation then refuses as "must be a number").
fn number(text: &str) -> JsonTree {
    if let Ok(n) = text.parse::<u64>() {
        return JsonTree::UInt(n);
    }
    if let Ok(n) = text.parse::<i64>() {
        // A negative integer, or `-0`: a tree's integers are `UInt` unless negative.
        return u64::try_from(n).map_or(JsonTree::Int(n), JsonTree::UInt);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => JsonTree::Float(f),
        _ => JsonTree::String(text.to_owned()),
    }
}

/// `yes`/`no` (as the video extension writes them; also `true`/`false`) as a boolean, anything else as given.
fn yes_no(text: &str) -> JsonTree {
    match text.to_ascii_lowercase().as_str() {
        "yes" | "true" => JsonTree::Bool(true),
        "no" | "false" => JsonTree::Bool(false),
        _ => JsonTree::String(text.to_owned()),
    }
}

/// A `<url>` as the JSON text of the write API's entry, and its `<loc>` as read.
pub(super) fn entry_json(url: &Node, options: &ReadOptions, report: &mut Report) -> (Option<String>, String) {
    let mut entry: Vec<(String, JsonTree)> = Vec::new();
    let mut images = Vec::new();
    let mut videos = Vec::new();
    let mut alternates = Vec::new();
    let mut loc = None;
    for child in &url.children {
        let ns = child.ns.unwrap_or(Ns::Other);
        match (ns, child.name.as_str()) {
            (Ns::Sitemap, "loc") => {
                loc.get_or_insert_with(|| child.text().to_owned());
                entry.push(("loc".into(), JsonTree::String(options.rewrite(child.text()))));
            }
            (Ns::Sitemap, "lastmod" | "changefreq") => {
                entry.push((child.name.clone(), JsonTree::String(child.text().into())))
            }
            (Ns::Sitemap, "priority") => entry.push(("priority".into(), number(child.text()))),
            (Ns::Image, "image") => images.push(image(child, options, report)),
            (Ns::Video, "video") => videos.push(video(child, options, report)),
            (Ns::News, "news") => entry.push(("news".into(), news(child, report))),
            (Ns::Xhtml, "link") => match child.attr("rel") {
                Some(rel)
                    if rel.eq_ignore_ascii_case("alternate")
                        && child.attr("href").is_some_and(|h| {
                            let h = h.to_ascii_lowercase();
                            h.starts_with("android-app:") || h.starts_with("ios-app:")
                        }) =>
                {
                    // Google's app indexing (retired in 2019): a link to an app, not a page. Skipped as retired
                    // tags are; the entry is kept.
                    report.notice("retired <xhtml:link href=\"android-app:…\"> (app indexing) skipped");
                }
                Some(rel) if rel.eq_ignore_ascii_case("alternate") => {
                    let mut link = Vec::new();
                    if let Some(hreflang) = child.attr("hreflang") {
                        link.push(("hreflang".into(), JsonTree::String(hreflang.into())));
                    }
                    if let Some(href) = child.attr("href") {
                        link.push(("href".into(), JsonTree::String(options.rewrite(href))));
                    }
                    alternates.push(JsonTree::Object(link));
                }
                _ => report.notice("<xhtml:link> without rel=\"alternate\" is not kept: skipped"),
            },
            _ => skip(report, child),
        }
    }
    if let Some(section) = &options.section {
        entry.push(("section".into(), string(section.as_str())));
    }
    for (key, list) in [("images", images), ("videos", videos), ("alternates", alternates)] {
        if !list.is_empty() {
            entry.push((key.into(), JsonTree::Array(list)));
        }
    }
    let json = serde_json::to_string(&JsonTree::Object(entry)).expect("a JSON tree serializes");
    (loc, json)
}

/// The children of `parent` in its namespace named in `names` as string fields; the deprecated ones and the
/// unknown ones are skipped and counted.
fn fields(parent: &Node, names: &[&str], report: &mut Report) -> Vec<(String, JsonTree)> {
    let mut out = Vec::new();
    for child in &parent.children {
        if child.ns == parent.ns && names.contains(&child.name.as_str()) {
            out.push((child.name.clone(), string(child.text())));
        } else {
            skip(report, child);
        }
    }
    out
}

fn string(text: &str) -> JsonTree {
    JsonTree::String(text.to_owned())
}

fn image(node: &Node, options: &ReadOptions, report: &mut Report) -> JsonTree {
    let mut pairs = fields(node, &["loc"], report);
    rewrite_pairs(&mut pairs, &["loc"], options);
    JsonTree::Object(pairs)
}

fn video(node: &Node, options: &ReadOptions, report: &mut Report) -> JsonTree {
    let ns = Some(Ns::Video);
    let mut pairs = Vec::new();
    let mut tags = Vec::new();
    for child in &node.children {
        let text = child.text();
        let value = match (child.ns == ns, child.name.as_str()) {
            (true, "thumbnail_loc" | "title" | "description" | "content_loc" | "expiration_date")
            | (true, "publication_date") => string(text),
            (true, "player_loc") => {
                for retired in ["allow_embed", "autoplay"] {
                    if child.attr(retired).is_some() {
                        report.notice(format!("deprecated <video:player_loc {retired}=…> skipped"));
                    }
                }
                string(text)
            }
            (true, "duration" | "rating" | "view_count") => number(text),
            (true, "family_friendly" | "requires_subscription" | "live") => yes_no(text),
            (true, "restriction") => relationship(child, "countries", text),
            (true, "platform") => relationship(child, "platforms", text),
            (true, "uploader") => {
                let mut uploader = vec![("name".to_owned(), string(text))];
                if let Some(info) = child.attr("info") {
                    uploader.push(("info".into(), JsonTree::String(options.rewrite(info))));
                }
                JsonTree::Object(uploader)
            }
            (true, "tag") => {
                tags.push(string(text));
                continue;
            }
            _ => {
                skip(report, child);
                continue;
            }
        };
        pairs.push((child.name.clone(), value));
    }
    if !tags.is_empty() {
        pairs.push(("tags".into(), JsonTree::Array(tags)));
    }
    rewrite_pairs(&mut pairs, &["thumbnail_loc", "content_loc", "player_loc"], options);
    JsonTree::Object(pairs)
}

/// `<video:restriction relationship="allow">DE AT</video:restriction>` as `{"relationship", key: [...]}`.
fn relationship(node: &Node, key: &str, text: &str) -> JsonTree {
    let mut pairs = Vec::new();
    if let Some(relationship) = node.attr("relationship") {
        pairs.push(("relationship".to_owned(), JsonTree::String(relationship.to_owned())));
    }
    pairs.push((key.to_owned(), JsonTree::Array(text.split_ascii_whitespace().map(string).collect())));
    JsonTree::Object(pairs)
}

fn news(node: &Node, report: &mut Report) -> JsonTree {
    let mut pairs = Vec::new();
    for child in &node.children {
        match (child.ns == Some(Ns::News), child.name.as_str()) {
            (true, "publication") => {
                pairs.push(("publication".into(), JsonTree::Object(fields(child, &["name", "language"], report))))
            }
            (true, "publication_date" | "title") => pairs.push((child.name.clone(), string(child.text()))),
            _ => skip(report, child),
        }
    }
    JsonTree::Object(pairs)
}

fn rewrite_pairs(pairs: &mut [(String, JsonTree)], keys: &[&str], options: &ReadOptions) {
    for (key, value) in pairs {
        if let (true, JsonTree::String(s)) = (keys.contains(&key.as_str()), &mut *value) {
            *s = options.rewrite(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{FULL, entries, options, read_all};
    use super::super::{Format, Found};
    use super::*;
    use crate::domain::{Entry, EntryInput, PublicUrl};

    #[test]
    fn every_field_and_extension_becomes_the_write_apis_json() {
        let (items, report) = read_all(FULL.as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!((report.format, report.items, report.cut.as_deref()), (Some(Format::UrlSet), 1, None));
        assert_eq!(
            entries(&items),
            [json!({
                "loc": "https://www.example.com/p?a=1&b=2", "lastmod": "2024-05-01T08:20:00+02:00",
                "changefreq": "weekly", "priority": 0.8,
                "images": [{"loc": "https://cdn.example.com/1.jpg"}, {"loc": "https://cdn.example.com/2.jpg"}],
                "videos": [{
                    "thumbnail_loc": "https://cdn.example.com/t.jpg", "title": "Grilling & steaks",
                    "description": "Alkis \u{2019} steaks", "content_loc": "https://cdn.example.com/v.mp4",
                    "player_loc": "https://player.example.com/v", "duration": 600, "rating": 4.2, "view_count": 12345,
                    "family_friendly": true, "restriction": {"relationship": "allow", "countries": ["IE", "GB", "US"]},
                    "platform": {"relationship": "deny", "platforms": ["tv"]},
                    "uploader": {"name": "Grill Guy", "info": "https://www.example.com/u"}, "live": false,
                    "tags": ["steak", "meat"]}],
                "news": {"publication": {"name": "The Times", "language": "en"}, "publication_date": "2024-05-01",
                         "title": "Companies A, B in merger talks"},
                "alternates": [{"hreflang": "de", "href": "https://www.example.com/de/p"}],
            })]
        );
        let Found::Entry { line, loc, .. } = &items[0] else { panic!("an entry") };
        assert_eq!((*line, loc.as_deref()), (7, Some("https://www.example.com/p?a=1&b=2")));
        let notices: Vec<&str> = report.notices.keys().map(String::as_str).collect();
        assert_eq!(
            notices,
            [
                "<mobile:mobile> is not kept: skipped",
                "<xhtml:link> without rel=\"alternate\" is not kept: skipped",
                "CDATA sections: read as text",
                "deprecated <image:caption> skipped",
                "deprecated <news:keywords> skipped",
                "deprecated <video:category> skipped",
                "deprecated <video:player_loc autoplay=…> skipped",
            ]
        );
    }

    #[test]
    fn the_json_is_validated_by_the_apis_own_rules() {
        let public = PublicUrl::parse("https://www.example.com").unwrap();
        let validate = |json: &str| Entry::from_input(serde_json::from_str::<EntryInput>(json).unwrap(), &public);
        let (items, _) = read_all(FULL.replace("IE GB US", "IE GB US IE").as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        let errors = validate(json).unwrap_err();
        assert!(errors.iter().any(|e| e.field == "alternates"), "no self link: {errors:?}");
        let twice = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>https://www.example.com/a\
                     </loc><loc>https://evil.example/</loc></url></urlset>";
        let (items, _) = read_all(twice.as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        let errors = validate(json).unwrap_err();
        assert_eq!(errors[0].message, "is given more than once; give each field once", "as the API refuses it");
        let odd = "<urlset><url><loc>https://www.example.com/a</loc><priority>high</priority></url></urlset>";
        let (items, _) = read_all(odd.as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        assert_eq!(validate(json).unwrap_err()[0].message, "must be a number, not a string");
    }

    /// Google's retired app-indexing link (`android-app://…`, `ios-app://…`) is skipped and counted, as retired
    /// tags are: the entry is kept (sitemap.js's own fixtures hold one).
    #[test]
    fn an_app_indexing_link_is_skipped_and_the_entry_kept() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:xhtml="http://www.w3.org/1999/xhtml">
<url><loc>https://www.example.com/a</loc>
<xhtml:link rel="alternate" href="android-app://com.example/https/www.example.com/a"/>
<xhtml:link rel="alternate" href="ios-app://123/https/www.example.com/a"/>
<xhtml:link rel="alternate" hreflang="de" href="https://www.example.com/de/a"/>
<xhtml:link rel="alternate" hreflang="en" href="https://www.example.com/a"/>
</url></urlset>"#;
        let (items, report) = read_all(xml.as_bytes(), &options());
        let report = report.unwrap();
        let json = entries(&items);
        assert_eq!(json[0]["alternates"].as_array().unwrap().len(), 2, "{json:?}");
        assert_eq!(report.notices.get("retired <xhtml:link href=\"android-app:…\"> (app indexing) skipped"), Some(&2));
        let Found::Entry { json, .. } = &items[0] else { panic!() };
        let public = PublicUrl::parse("https://www.example.com/").unwrap();
        let input = serde_json::from_str::<EntryInput>(json).unwrap();
        assert!(Entry::from_input(input, &public).is_ok(), "{json}");
    }

    /// The import's section is the entry's `"section"`, which the API's own rules accept; none, no field.
    #[test]
    fn a_section_goes_into_each_entrys_json() {
        let public = PublicUrl::parse("https://www.example.com").unwrap();
        let shop = ReadOptions { section: Some(crate::domain::Section::parse("shop").unwrap()), ..options() };
        let (items, _) = read_all(FULL.as_bytes(), &shop);
        let entry = &entries(&items)[0];
        assert_eq!(entry["section"], "shop");
        assert_eq!(entry["loc"], "https://www.example.com/p?a=1&b=2", "the rest as without: {entry}");
        let one = "<urlset><url><loc>https://www.example.com/a</loc><lastmod>2024-05-01</lastmod></url></urlset>";
        let (items, _) = read_all(one.as_bytes(), &shop);
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        let admitted = Entry::from_input(serde_json::from_str::<EntryInput>(json).unwrap(), &public).unwrap();
        assert_eq!(admitted.section.as_ref().map(|s| s.as_str()), Some("shop"), "{json}");
        let (items, _) = read_all(FULL.as_bytes(), &options());
        assert!(entries(&items)[0].get("section").is_none(), "the default section: no field");
    }

    #[test]
    fn rewrites_apply_to_every_entry_url_and_the_first_match_wins() {
        let rewrite = ReadOptions {
            rewrites: vec![
                ("https://staging.example.com/".into(), "https://www.example.com/".into()),
                ("https://staging.example.com/p".into(), "https://never.example/".into()),
            ],
            ..options()
        };
        let (items, _) =
            read_all(FULL.replace("https://www.example.com/", "https://staging.example.com/").as_bytes(), &rewrite);
        let entry = &entries(&items)[0];
        assert_eq!(entry["loc"], "https://www.example.com/p?a=1&b=2");
        assert_eq!(entry["alternates"][0]["href"], "https://www.example.com/de/p");
        assert_eq!(entry["videos"][0]["uploader"]["info"], "https://www.example.com/u");
        assert_eq!(entry["images"][0]["loc"], "https://cdn.example.com/1.jpg", "other hosts untouched");
        let Found::Entry { loc, .. } = &items[0] else { panic!() };
        assert_eq!(loc.as_deref(), Some("https://staging.example.com/p?a=1&b=2"), "the rejects file shows it as read");
    }
}
