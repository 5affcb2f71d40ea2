//! `alternates`: hreflang alternates (`<xhtml:link rel="alternate">`), at most [`MAX_ALTERNATES`]: one link per
//! hreflang, the entry itself among them, sorted by hreflang so that the same set in another order is the same
//! entry.

use std::collections::HashMap;

use super::super::ext::Alternate;
use super::JsonTree;
use super::check::{Check, array, join, object, string, url};
use super::codes::parse_hreflang;

/// `<xhtml:link>` alternates per entry.
pub const MAX_ALTERNATES: usize = 1_000;

pub(super) fn alternates(c: &mut Check, tree: &JsonTree, loc: Option<&str>) -> Vec<Alternate> {
    let before = c.count();
    let items = array(
        c,
        "alternates",
        tree,
        ("alternates", "{\"hreflang\": ..., \"href\": URL} objects"),
        MAX_ALTERNATES,
        "a limit of this service",
    );
    let mut out: Vec<Alternate> = Vec::with_capacity(items.len());
    let mut by_lang: HashMap<String, usize> = HashMap::new();
    let mut href_errors = false;
    for (i, item) in items.iter().enumerate() {
        let path = format!("alternates[{i}]");
        let what = "{\"hreflang\": ..., \"href\": URL}";
        let Some([hreflang, href]) = object(c, &path, item, what, ["hreflang", "href"], &[]) else { continue };
        let lang_path = join(&path, "hreflang");
        let lang = hreflang.required(c, &lang_path).and_then(|t| {
            let s = string(c, &lang_path, t)?;
            c.ok(&lang_path, parse_hreflang(s))
        });
        let href_path = join(&path, "href");
        let href = href.required(c, &href_path).and_then(|t| url(c, &href_path, t));
        href_errors |= href.is_none();
        let Some(lang) = lang else { continue };
        if let Some(first) = by_lang.get(&lang) {
            c.err(
                lang_path,
                format!(
                    "{lang:?} is given twice, by alternates[{first}] and alternates[{i}]; give one link per hreflang"
                ),
            );
            continue;
        }
        by_lang.insert(lang.clone(), i);
        if let Some(href) = href {
            out.push(Alternate { hreflang: lang, href });
        }
    }
    if let Some(loc) = loc
        && !href_errors
        && !out.is_empty()
        && !out.iter().any(|a| a.href == loc)
    {
        c.err(
            "alternates",
            format!(
                "must include the entry itself: no href is its loc {loc}; add {{\"hreflang\": ..., \"href\": \"{loc}\"}} \
                 (every URL of a cluster lists every version, itself included)"
            ),
        );
    }
    if c.count() > before {
        return Vec::new();
    }
    out.sort_unstable_by(|a, b| a.hreflang.cmp(&b.hreflang));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{LOC, error, ok};
    use super::*;

    fn alt(hreflang: &str, href: &str) -> Value {
        json!({"hreflang": hreflang, "href": href})
    }

    #[test]
    fn alternates_are_canonical_and_sorted_so_order_does_not_matter() {
        let a = [alt("fr", "https://fr.example.org/p"), alt("en", LOC), alt("ES-419", "https://www.example.com/es")];
        let forward = ok(json!({"alternates": a}));
        let backward = ok(json!({"alternates": [a[2].clone(), a[0].clone(), a[1].clone()]}));
        assert_eq!(forward, backward);
        let langs: Vec<_> = forward.alternates.iter().map(|a| a.hreflang.as_str()).collect();
        assert_eq!(langs, ["en", "es-419", "fr"]);
    }

    #[test]
    fn alternate_problems_name_their_path() {
        let with = |first: Value| json!({"alternates": [alt("en", LOC), first]});
        error(with(alt("de_AT", "https://www.example.com/de")), "alternates[1].hreflang", "write \"de-AT\"");
        error(with(alt("xx", "https://www.example.com/x")), "alternates[1].hreflang", "ISO 639-1");
        error(with(alt("de", "/de")), "alternates[1].href", "absolute URL");
        error(with(json!({"href": "https://www.example.com/de"})), "alternates[1].hreflang", "is required");
        error(with(json!({"hreflang": "de"})), "alternates[1].href", "is required");
        error(
            with(json!({"hreflang": "de", "href": "https://x.test/", "rel": "alternate"})),
            "alternates[1].rel",
            "unknown",
        );
        // An alternate may be on another host.
        assert_eq!(ok(with(alt("de", "https://example.de/p/42"))).alternates.len(), 2);
    }

    #[test]
    fn one_link_per_hreflang_naming_both() {
        let fields = json!({"alternates": [alt("de-AT", "https://www.example.com/a"), alt("en", LOC),
                                           alt("de-at", "https://www.example.com/b")]});
        error(fields, "alternates[2].hreflang", "\"de-AT\" is given twice, by alternates[0] and alternates[2]");
    }

    #[test]
    fn the_alternates_must_include_the_entry_itself() {
        let fields = json!({"alternates": [alt("de", "https://www.example.com/de/p/42"), alt("en", "https://www.example.com/p/43")]});
        error(fields, "alternates", "must include the entry itself");
        // Its normalized form counts.
        assert_eq!(ok(json!({"alternates": [alt("en", "HTTPS://www.example.com:443/p/42")]})).alternates.len(), 1);
    }

    #[test]
    fn at_most_1000_alternates() {
        let mut many: Vec<Value> = (0..MAX_ALTERNATES).map(|i| alt("en", &format!("https://x.test/{i}"))).collect();
        many.push(alt("en", LOC));
        error(json!({"alternates": many}), "alternates", "has 1001 alternates");
    }
}
