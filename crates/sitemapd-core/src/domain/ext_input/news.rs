//! `news`: Google's news extension, one `{"publication": {"name", "language"}, "publication_date", "title"}` per
//! entry; the fields Google deprecated refused by name.

use super::super::ext::{News, Publication};
use super::JsonTree;
use super::check::{Check, date, object, string, text};
use super::codes::news_language;

const MAX_PUBLICATION_NAME: usize = 256;
const MAX_NEWS_TITLE: usize = 2_048;

const NEWS_DEPRECATED: [(&str, &str); 4] = [
    ("access", "Google deprecated news:access; remove it"),
    ("genres", "Google deprecated news:genres; remove it"),
    ("keywords", "Google deprecated news:keywords; remove it"),
    ("stock_tickers", "Google deprecated news:stock_tickers; remove it"),
];

pub(super) fn news(c: &mut Check, tree: &JsonTree) -> Option<News> {
    let before = c.count();
    let [publication, publication_date, title] = object(
        c,
        "news",
        tree,
        "{\"publication\": {...}, \"publication_date\": ..., \"title\": ...}",
        ["publication", "publication_date", "title"],
        &NEWS_DEPRECATED,
    )?;
    let publication = publication.required(c, "news.publication").and_then(|t| news_publication(c, t));
    let publication_date =
        publication_date.required(c, "news.publication_date").and_then(|t| date(c, "news.publication_date", t));
    let title = title.required(c, "news.title").and_then(|t| text(c, "news.title", t, MAX_NEWS_TITLE));
    if c.count() > before {
        return None;
    }
    Some(News { publication: publication?, publication_date: publication_date?, title: title? })
}

fn news_publication(c: &mut Check, tree: &JsonTree) -> Option<Publication> {
    let path = "news.publication";
    let [name, language] = object(c, path, tree, "{\"name\": ..., \"language\": ...}", ["name", "language"], &[])?;
    let name = name
        .required(c, "news.publication.name")
        .and_then(|t| text(c, "news.publication.name", t, MAX_PUBLICATION_NAME));
    let language = language.required(c, "news.publication.language").and_then(|t| {
        let s = string(c, "news.publication.language", t)?;
        c.ok("news.publication.language", news_language(s))
    });
    Some(Publication { name: name?, language: language? })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{error, news, ok};
    use super::*;

    #[test]
    fn news_needs_publication_date_and_title() {
        let n = ok(json!({"news": news()})).news.unwrap();
        assert_eq!(n.publication, Publication { name: "The Example Times".into(), language: "en".into() });
        for key in ["publication", "publication_date", "title"] {
            let mut n = news();
            n.as_object_mut().unwrap().remove(key);
            error(json!({"news": n}), &format!("news.{key}"), "is required");
        }
        for key in ["name", "language"] {
            let mut n = news();
            n["publication"].as_object_mut().unwrap().remove(key);
            error(json!({"news": n}), &format!("news.publication.{key}"), "is required");
        }
        let mut n = news();
        n["publication"]["name"] = json!("");
        error(json!({"news": n}), "news.publication.name", "must not be empty");
        n["publication"]["name"] = json!("n".repeat(257));
        error(json!({"news": n}), "news.publication.name", "at most 256");
        let mut n = news();
        n["title"] = json!("t".repeat(2049));
        error(json!({"news": n}), "news.title", "at most 2048");
        let mut n = news();
        n["publication_date"] = json!("2026-11-22T09:00:00+01:00");
        assert_eq!(ok(json!({"news": n})).news.unwrap().publication_date, "2026-11-22T08:00:00Z");
        n["publication_date"] = json!("2026");
        error(json!({"news": n}), "news.publication_date", "YYYY alone is not accepted");
        error(json!({"news": [news()]}), "news", "must be an object");
    }

    #[test]
    fn news_language_is_iso_639_lower_case() {
        for (given, stored) in [("EN", "en"), ("haw", "haw"), ("DEU", "deu"), ("ger", "ger"), ("zh-CN", "zh-cn")] {
            let mut n = news();
            n["publication"]["language"] = json!(given);
            assert_eq!(ok(json!({"news": n})).news.unwrap().publication.language, stored);
        }
        for bad in ["xx", "english", "zh-hk", "e", "", "zh_cn", "qqq"] {
            let mut n = news();
            n["publication"]["language"] = json!(bad);
            error(json!({"news": n}), "news.publication.language", "is not an ISO 639 language code");
        }
    }

    #[test]
    fn news_fields_google_deprecated_are_refused_saying_so() {
        for key in ["access", "genres", "keywords", "stock_tickers"] {
            let mut n = news();
            n[key] = json!("x");
            error(json!({"news": n}), &format!("news.{key}"), &format!("Google deprecated news:{key}; remove it"));
        }
    }
}
