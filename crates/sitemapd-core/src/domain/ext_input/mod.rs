//! An entry's extensions (`images`, `videos`, `news`, `alternates`) as the write API receives them: each read as a
//! small JSON tree ([`JsonTree`]) within a per-entry node budget, then validated into [`Extensions`] by pure
//! functions that report every problem (up to [`MAX_EXT_ERRORS`]) with a path a person can act on
//! (`videos[0].restriction.countries[1]`).
//!
//! The rest of an entry is never built as a tree (see [`super::EntryInput`]); these four fields are, because they
//! nest, but never beyond [`MAX_TREE_NODES`] values per entry: past that the rest is skipped unread and the field
//! is refused as too large, so a hostile body costs about its size whatever it holds.
//!
//! One idea a file: `tree` reads the bounded JSON tree, `check` is the validation kit (paths, objects, arrays,
//! text, URLs, dates, numbers), `image`, `video`, `news` and `alternate` validate one field each, and `codes`
//! parses the language and country codes they carry. This file holds what ties them together: an entry's four
//! fields as read ([`ExtInput`]) and their validation into [`Extensions`].

use serde::de::{IgnoredAny, MapAccess};

use super::ext::Extensions;
use super::{FieldError, Loc};

mod alternate;
mod check;
mod codes;
mod image;
mod news;
#[cfg(test)]
mod testing;
mod tree;
mod video;

pub use alternate::MAX_ALTERNATES;
pub use check::forbidden_char;
pub use codes::{country, news_language, parse_hreflang};
pub use image::MAX_IMAGES;
pub use tree::{Budget, JsonTree, read_tree};
pub use video::MAX_VIDEOS;

use alternate::alternates;
use check::Check;
use image::images;
use news::news;
use tree::read_field;
use video::videos;

/// The four extension fields of an entry, in the order their errors are reported.
pub const EXT_FIELDS: [&str; 4] = ["images", "videos", "news", "alternates"];

/// JSON values (scalars, arrays, objects; an object's key is not counted apart from its value) the four extension
/// fields of one entry may hold together. The largest valid entry (1,000 images, 100 videos each restricted to
/// every country with 32 tags, 1,000 alternates) holds about 36,000.
pub const MAX_TREE_NODES: usize = 50_000;

/// Problems reported for one entry's extensions; any beyond are counted in one more error.
pub const MAX_EXT_ERRORS: usize = 50;

/// One extension field of an entry as read.
#[derive(Clone, Debug, Default, PartialEq)]
enum Given {
    #[default]
    Absent,
    Value(JsonTree),
    /// Cut short by the entry's [`Budget`].
    TooLarge,
    /// Given more than once: neither value is looked at.
    Repeated,
}

/// The four extension fields of one entry as read by [`super::EntryInput`], before validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtInput {
    /// By [`EXT_FIELDS`] position.
    fields: [Given; 4],
}

impl ExtInput {
    /// The position of an extension field's name in [`EXT_FIELDS`].
    pub(super) fn position(key: &str) -> Option<usize> {
        EXT_FIELDS.iter().position(|f| *f == key)
    }

    /// Reads the value of the field at `position` from `map` within `budget`.
    pub(super) fn read_value<'de, A: MapAccess<'de>>(
        &mut self,
        position: usize,
        map: &mut A,
        budget: &mut Budget,
    ) -> Result<(), A::Error> {
        let field = &mut self.fields[position];
        if *field != Given::Absent {
            map.next_value::<IgnoredAny>()?;
            *field = Given::Repeated;
            return Ok(());
        }
        *field = match read_field(map, budget)? {
            Some(tree) => Given::Value(tree),
            None => Given::TooLarge,
        };
        Ok(())
    }

    /// Validates the four fields against the entry's own `loc` (`None` when that is invalid: the checks that
    /// compare with it are then skipped). `Ok(None)` when the entry has no extensions (every field omitted, `null`
    /// or empty); otherwise every problem, each with its path, at most [`MAX_EXT_ERRORS`] and then one error
    /// counting the rest.
    pub fn validate(&self, loc: Option<&Loc>) -> Result<Option<Box<Extensions>>, Vec<FieldError>> {
        let mut c = Check::default();
        let mut ext = Extensions::default();
        let loc = loc.map(Loc::as_str);
        for (i, given) in self.fields.iter().enumerate() {
            let name = EXT_FIELDS[i];
            let tree = match given {
                Given::Absent | Given::Value(JsonTree::Null) => continue,
                Given::Repeated => {
                    c.err(name, "is given more than once; give each field once");
                    continue;
                }
                Given::TooLarge => {
                    c.err(
                        name,
                        format!(
                            "is too large: images, videos, news and alternates together may hold at most \
                             {MAX_TREE_NODES} JSON values per entry"
                        ),
                    );
                    continue;
                }
                Given::Value(tree) => tree,
            };
            match i {
                0 => ext.images = images(&mut c, tree),
                1 => ext.videos = videos(&mut c, tree, loc),
                2 => ext.news = news(&mut c, tree),
                _ => ext.alternates = alternates(&mut c, tree, loc),
            }
        }
        c.finish()?;
        Ok((!ext.is_empty()).then(|| Box::new(ext)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::ext::{
        Alternate, Image, News, Platform, Publication, Rating, Relationship, Restriction, Uploader, Video,
    };
    use super::testing::{LOC, news, ok, parse, parse_text, public, strings};
    use super::*;
    use crate::domain::{Entry, EntryInput};

    #[test]
    fn a_full_entry_parses_into_its_normalized_extensions() {
        let text = r#"{"loc": "https://www.example.com/p/42",
          "images": [{"loc": "https://cdn.example.net/p/42/front.jpg"}],
          "videos": [{"thumbnail_loc": "https://cdn.example.net/p/42/thumb.jpg", "title": "Unboxing",
                      "description": "  The box, opened.\n", "content_loc": "https://cdn.example.net/p/42/v.mp4",
                      "player_loc": "https://player.example.net/?v=42",
                      "duration": 600, "expiration_date": "2027-01-01", "rating": 4.5, "view_count": 1200,
                      "publication_date": "2026-11-20T11:00+01:00", "family_friendly": true,
                      "restriction": {"relationship": "allow", "countries": ["de", "AT", "DE"]},
                      "platform": {"relationship": "DENY", "platforms": ["TV", "tv", "web"]},
                      "requires_subscription": false,
                      "uploader": {"name": "Example", "info": "https://www.example.com/about"}, "live": false,
                      "tags": ["boxes", "unboxing"]}],
          "news": {"publication": {"name": "The Example Times", "language": "ZH-TW"},
                   "publication_date": "2026-11-22T08:00:00Z", "title": "Boxes"},
          "alternates": [{"hreflang": "en", "href": "https://www.example.com/p/42"},
                         {"hreflang": "DE-at", "href": "https://www.example.com/de-at/p/42"},
                         {"hreflang": "X-Default", "href": "https://WWW.example.com/p/42"},
                         {"hreflang": "zh-hant-tw", "href": "https://example.tw/p/42"}]}"#;
        let ext = *parse_text(text).unwrap().unwrap();
        let expected = Extensions {
            images: vec![Image { loc: "https://cdn.example.net/p/42/front.jpg".into() }],
            videos: vec![Video {
                thumbnail_loc: "https://cdn.example.net/p/42/thumb.jpg".into(),
                title: "Unboxing".into(),
                description: "  The box, opened.\n".into(),
                content_loc: Some("https://cdn.example.net/p/42/v.mp4".into()),
                player_loc: Some("https://player.example.net/?v=42".into()),
                duration: Some(600),
                expiration_date: Some("2027-01-01".into()),
                rating: Some(Rating::new(4.5).unwrap()),
                view_count: Some(1200),
                publication_date: Some("2026-11-20T10:00:00Z".into()),
                family_friendly: Some(true),
                restriction: Some(Restriction { relationship: Relationship::Allow, countries: strings(&["DE", "AT"]) }),
                platform: Some(Platform { relationship: Relationship::Deny, platforms: strings(&["tv", "web"]) }),
                requires_subscription: Some(false),
                uploader: Some(Uploader { name: "Example".into(), info: Some("https://www.example.com/about".into()) }),
                live: Some(false),
                tags: strings(&["boxes", "unboxing"]),
            }],
            news: Some(News {
                publication: Publication { name: "The Example Times".into(), language: "zh-tw".into() },
                publication_date: "2026-11-22T08:00:00Z".into(),
                title: "Boxes".into(),
            }),
            alternates: vec![
                Alternate { hreflang: "de-AT".into(), href: "https://www.example.com/de-at/p/42".into() },
                Alternate { hreflang: "en".into(), href: "https://www.example.com/p/42".into() },
                Alternate { hreflang: "x-default".into(), href: "https://www.example.com/p/42".into() },
                Alternate { hreflang: "zh-Hant-TW".into(), href: "https://example.tw/p/42".into() },
            ],
        };
        assert_eq!(ext, expected);
        // The stored form reads back as itself.
        let stored = serde_json::to_string(&ext).unwrap();
        assert_eq!(serde_json::from_str::<Extensions>(&stored).unwrap(), expected);
        // And, sent again as input, validates to itself: the normalized form is a fixed point.
        assert_eq!(ok(serde_json::from_str(&stored).unwrap()), expected);
        // A serde_json::Value of the same entry gives the same.
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(Entry::from_json(value, &public()).unwrap().ext.map(|e| *e), Some(expected));
    }

    #[test]
    fn null_or_empty_extensions_are_none_never_some_empty() {
        let none = json!({"images": [], "videos": null, "news": null, "alternates": []});
        assert_eq!(parse(none).unwrap(), None);
        assert_eq!(parse(json!({})).unwrap(), None);
        assert_eq!(ok(json!({"images": null, "alternates": [], "news": news()})).news.unwrap().title, "T");
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_level() {
        let twice = format!(
            r#"{{"loc": "{LOC}", "images": [{{"loc": "https://cdn.example.net/a.jpg", "loc": "https://evil.test/"}}]}}"#
        );
        let errors = parse_text(&twice).unwrap_err();
        assert_eq!(
            errors,
            [FieldError {
                field: "images[0].loc".into(),
                message: "is given more than once; give each field once".into()
            }]
        );
        let twice = format!(
            r#"{{"loc": "{LOC}", "videos": [{{"thumbnail_loc": "https://cdn.example.net/t.jpg", "title": "T",
                "description": "D", "content_loc": "https://cdn.example.net/v.mp4",
                "restriction": {{"relationship": "allow", "relationship": "deny", "countries": ["DE"]}}}}]}}"#
        );
        let errors = parse_text(&twice).unwrap_err();
        assert_eq!(errors[0].field, "videos[0].restriction.relationship");
        assert!(errors[0].message.contains("more than once"));
        assert_eq!(errors.len(), 1, "{errors:?}");
        let twice = format!(r#"{{"loc": "{LOC}", "images": [], "images": [{{"loc": "https://cdn.example.net/a"}}]}}"#);
        let errors = parse_text(&twice).unwrap_err();
        assert_eq!(
            errors,
            [FieldError { field: "images".into(), message: "is given more than once; give each field once".into() }]
        );
    }

    #[test]
    fn every_problem_is_reported_up_to_a_bound() {
        let errors =
            parse(json!({"images": [{"loc": 1}], "videos": [{}], "news": {}, "alternates": [{}]})).unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "images[0].loc",
                "videos[0].thumbnail_loc",
                "videos[0].title",
                "videos[0].description",
                "videos[0].content_loc",
                "news.publication",
                "news.publication_date",
                "news.title",
                "alternates[0].hreflang",
                "alternates[0].href",
            ]
        );
        let bad = vec![json!({"loc": "nope"}); 200];
        let errors = parse(json!({"images": bad, "lastmod": "2024"})).unwrap_err();
        assert_eq!(errors.len(), 1 + MAX_EXT_ERRORS + 1, "lastmod, 50 images, the count");
        assert_eq!(errors[0].field, "lastmod");
        assert_eq!(errors[50].field, "images[49].loc");
        assert_eq!(
            errors[51],
            FieldError {
                field: String::new(),
                message: "150 more problems in images, videos, news or alternates (only the first 50 are listed)"
                    .into()
            }
        );
    }

    #[test]
    fn the_unknown_field_message_lists_the_extensions() {
        let errors = parse(json!({"image": []})).unwrap_err();
        assert_eq!(errors[0].field, "image");
        assert!(errors[0].message.contains("images, videos, news, alternates"));
    }

    #[test]
    fn checks_against_loc_are_skipped_when_loc_itself_is_invalid() {
        let text =
            r#"{"loc": "https://elsewhere.test/p", "alternates": [{"hreflang": "en", "href": "https://x.test/"}]}"#;
        let errors = parse_text(text).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "loc");
    }

    #[test]
    fn a_huge_extension_is_refused_as_too_large_and_not_built() {
        let text =
            format!(r#"{{"loc": "{LOC}", "images": [{}0], "alternates": [1], "news": null}}"#, "0,".repeat(200_000));
        let input: EntryInput = serde_json::from_str(&text).unwrap();
        // What is kept of the entry is the tree up to the budget: its debug form stays small.
        let kept = format!("{input:?}").len();
        assert!(kept < 12 * MAX_TREE_NODES, "{kept}");
        let errors = Entry::from_input(input, &public()).unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["images", "alternates"], "news is null: omitted, not too large");
        assert!(errors[0].message.contains("too large"));
        assert!(errors[0].message.contains("at most 50000 JSON values"));
        // alternates came after the budget ran out: skipped unread, and refused too.
        assert!(errors[1].message.contains("too large"));
    }
}
