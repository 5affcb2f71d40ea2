//! `videos`: Google's video extension, at most [`MAX_VIDEOS`] per entry (this service's limit), each an object of
//! the fields Google reads (the deprecated ones refused by name), its restriction and platform lists normalized.

use super::super::ext::{Platform, Rating, Relationship, Restriction, Uploader, Video};
use super::JsonTree;
use super::check::{Check, Slot, array, boolean, date, integer, join, object, shown, string, text, url};
use super::codes::country;

/// This service's limit of `<video:video>` per entry (Google sets none).
pub const MAX_VIDEOS: usize = 100;

const MAX_VIDEO_TITLE: usize = 100;
const MAX_VIDEO_DESCRIPTION: usize = 2_048;
const MAX_DURATION: u64 = 28_800;
const MAX_TAGS: usize = 32;
const MAX_TAG: usize = 256;
const MAX_UPLOADER_NAME: usize = 255;

const VIDEO_FIELDS: [&str; 17] = [
    "thumbnail_loc",
    "title",
    "description",
    "content_loc",
    "player_loc",
    "duration",
    "expiration_date",
    "rating",
    "view_count",
    "publication_date",
    "family_friendly",
    "restriction",
    "platform",
    "requires_subscription",
    "uploader",
    "live",
    "tags",
];

const VIDEO_DEPRECATED: [(&str, &str); 6] = [
    ("category", "Google deprecated video:category; remove it"),
    ("gallery_loc", "Google deprecated video:gallery_loc; remove it"),
    ("price", "Google deprecated video:price; remove it"),
    ("tvshow", "Google deprecated video:tvshow; remove it"),
    ("autoplay", "Google deprecated player_loc's autoplay attribute; remove it"),
    ("allow_embed", "Google deprecated player_loc's allow_embed attribute; remove it"),
];

pub(super) fn videos(c: &mut Check, tree: &JsonTree, loc: Option<&str>) -> Vec<Video> {
    let items = array(c, "videos", tree, ("videos", "objects"), MAX_VIDEOS, "a limit of this service, not Google's");
    items.iter().enumerate().filter_map(|(i, item)| video(c, &format!("videos[{i}]"), item, loc)).collect()
}

fn video(c: &mut Check, path: &str, tree: &JsonTree, loc: Option<&str>) -> Option<Video> {
    let before = c.count();
    let f = object(c, path, tree, "a video", VIDEO_FIELDS, &VIDEO_DEPRECATED)?;
    let p = |key: &str| join(path, key);
    let [
        thumbnail_loc,
        title,
        description,
        content_loc,
        player_loc,
        duration,
        expiration_date,
        rating,
        view_count,
        publication_date,
        family_friendly,
        restriction,
        platform,
        requires_subscription,
        uploader,
        live,
        tags,
    ] = f;
    let thumbnail_loc = thumbnail_loc.required(c, &p("thumbnail_loc")).and_then(|t| url(c, &p("thumbnail_loc"), t));
    let title = title.required(c, &p("title")).and_then(|t| text(c, &p("title"), t, MAX_VIDEO_TITLE));
    let description =
        description.required(c, &p("description")).and_then(|t| text(c, &p("description"), t, MAX_VIDEO_DESCRIPTION));
    let mut player = |key: &str, slot: Slot| {
        let tree = slot.optional()?;
        if key == "player_loc" && matches!(tree, JsonTree::Object(_)) {
            c.err(
                p(key),
                "must be a URL string: Google deprecated player_loc's attributes (allow_embed, autoplay); give only \
                 the URL",
            );
            return None;
        }
        let found = url(c, &p(key), tree)?;
        if loc == Some(found.as_str()) {
            c.err(
                p(key),
                format!(
                    "is the entry's own loc; give the URL of the video file (content_loc) or of its player \
                     (player_loc), not of the page: {found}"
                ),
            );
            return None;
        }
        Some(found)
    };
    let content_loc_v = player("content_loc", content_loc);
    let player_loc_v = player("player_loc", player_loc);
    if matches!(
        (content_loc, player_loc),
        (Slot::Absent | Slot::Given(JsonTree::Null), Slot::Absent | Slot::Given(JsonTree::Null))
    ) {
        c.err(p("content_loc"), "content_loc or player_loc is required: give at least one of them");
    }
    let duration = duration
        .optional()
        .and_then(|t| integer(c, &p("duration"), t, 1, MAX_DURATION, "a whole number of seconds from 1 to 28800"));
    let expiration_date = expiration_date.optional().and_then(|t| date(c, &p("expiration_date"), t));
    let rating = rating.optional().and_then(|t| match t {
        JsonTree::UInt(n) => c.ok(&p("rating"), Rating::new(*n as f64)),
        JsonTree::Int(n) => c.ok(&p("rating"), Rating::new(*n as f64)),
        JsonTree::Float(n) => c.ok(&p("rating"), Rating::new(*n)),
        other => {
            c.err(p("rating"), format!("must be a number from 0.0 to 5.0, not {}", other.kind()));
            None
        }
    });
    let view_count =
        view_count.optional().and_then(|t| integer(c, &p("view_count"), t, 0, u64::MAX, "a whole number, 0 or more"));
    let publication_date = publication_date.optional().and_then(|t| date(c, &p("publication_date"), t));
    let family_friendly = family_friendly.optional().and_then(|t| boolean(c, &p("family_friendly"), t));
    let restriction = restriction.optional().and_then(|t| video_restriction(c, &p("restriction"), t));
    let platform = platform.optional().and_then(|t| video_platform(c, &p("platform"), t));
    let requires_subscription =
        requires_subscription.optional().and_then(|t| boolean(c, &p("requires_subscription"), t));
    let uploader = uploader.optional().and_then(|t| video_uploader(c, &p("uploader"), t));
    let live = live.optional().and_then(|t| boolean(c, &p("live"), t));
    let tags = tags.optional().map_or_else(Vec::new, |t| video_tags(c, &p("tags"), t));
    if c.count() > before {
        return None;
    }
    Some(Video {
        thumbnail_loc: thumbnail_loc?,
        title: title?,
        description: description?,
        content_loc: content_loc_v,
        player_loc: player_loc_v,
        duration: duration.map(|d| d as u32),
        expiration_date,
        rating,
        view_count,
        publication_date,
        family_friendly,
        restriction,
        platform,
        requires_subscription,
        uploader,
        live,
        tags,
    })
}

fn video_restriction(c: &mut Check, path: &str, tree: &JsonTree) -> Option<Restriction> {
    let (relationship, countries) = relationship_list(c, path, tree, &RESTRICTION, country)?;
    Some(Restriction { relationship, countries })
}

fn video_platform(c: &mut Check, path: &str, tree: &JsonTree) -> Option<Platform> {
    let platform = |s: &str| {
        let found = ["web", "mobile", "tv"].into_iter().find(|p| p.eq_ignore_ascii_case(s));
        found.map(str::to_owned).ok_or_else(|| format!("{:?} is not one of web, mobile, tv", shown(s)))
    };
    let (relationship, platforms) = relationship_list(c, path, tree, &PLATFORM, platform)?;
    Some(Platform { relationship, platforms })
}

/// What a `{"relationship", LIST}` object (a video's restriction or platform) names and lists, for its messages.
struct ListShape {
    /// The key of the list.
    key: &'static str,
    /// The object's form.
    form: &'static str,
    /// What the list holds: `(plural, examples)`.
    items: (&'static str, &'static str),
    /// The message for an empty list.
    empty: &'static str,
}

const RESTRICTION: ListShape = ListShape {
    key: "countries",
    form: "{\"relationship\": \"allow\" or \"deny\", \"countries\": [...]}",
    items: ("ISO 3166-1 alpha-2 country codes", ""),
    empty: "must list at least one ISO 3166-1 alpha-2 country code (such as DE or US)",
};

const PLATFORM: ListShape = ListShape {
    key: "platforms",
    form: "{\"relationship\": \"allow\" or \"deny\", \"platforms\": [...]}",
    items: ("platforms", "web, mobile, tv"),
    empty: "must list at least one of web, mobile, tv",
};

/// `allow` or `deny`, in any case.
fn relationship(c: &mut Check, path: &str, tree: &JsonTree) -> Option<Relationship> {
    let s = string(c, path, tree)?;
    if s.eq_ignore_ascii_case("allow") {
        Some(Relationship::Allow)
    } else if s.eq_ignore_ascii_case("deny") {
        Some(Relationship::Deny)
    } else {
        c.err(path, format!("{:?} is neither allow nor deny", shown(s)));
        None
    }
}

/// `{"relationship": allow|deny, KEY: [...]}`: the relationship and the list, each item read by `item` (its
/// normalized form, or what is wrong), duplicates dropped in first order; `None` when anything is wrong.
fn relationship_list(
    c: &mut Check,
    path: &str,
    tree: &JsonTree,
    shape: &ListShape,
    item: impl Fn(&str) -> Result<String, String>,
) -> Option<(Relationship, Vec<String>)> {
    let before = c.count();
    let [relationship_slot, list_slot] = object(c, path, tree, shape.form, ["relationship", shape.key], &[])?;
    let rel_path = join(path, "relationship");
    let relationship = relationship_slot.required(c, &rel_path).and_then(|t| relationship(c, &rel_path, t));
    let list_path = join(path, shape.key);
    let mut list: Vec<String> = Vec::new();
    if let Some(t) = list_slot.required(c, &list_path) {
        let items = array(c, &list_path, t, shape.items, usize::MAX, "");
        if items.is_empty() && matches!(t, JsonTree::Array(_) | JsonTree::Null) {
            c.err(&list_path, shape.empty);
        }
        for (i, tree) in items.iter().enumerate() {
            let item_path = format!("{list_path}[{i}]");
            let Some(value) = string(c, &item_path, tree).and_then(|s| c.ok(&item_path, item(s))) else { continue };
            if !list.contains(&value) {
                list.push(value);
            }
        }
    }
    if c.count() > before {
        return None;
    }
    Some((relationship?, list))
}

fn video_uploader(c: &mut Check, path: &str, tree: &JsonTree) -> Option<Uploader> {
    let before = c.count();
    let [name, info] = object(c, path, tree, "{\"name\": ..., \"info\": URL}", ["name", "info"], &[])?;
    let name_path = join(path, "name");
    let name = name.required(c, &name_path).and_then(|t| text(c, &name_path, t, MAX_UPLOADER_NAME));
    let info = info.optional().and_then(|t| url(c, &join(path, "info"), t));
    if c.count() > before {
        return None;
    }
    Some(Uploader { name: name?, info })
}

fn video_tags(c: &mut Check, path: &str, tree: &JsonTree) -> Vec<String> {
    let items = array(c, path, tree, ("tags", "strings"), MAX_TAGS, "Google's limit per video");
    items.iter().enumerate().filter_map(|(i, t)| text(c, &format!("{path}[{i}]"), t, MAX_TAG)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{LOC, error, ok, parse_text, strings, video, video_with};
    use super::*;

    #[test]
    fn a_video_needs_thumbnail_title_description_and_content_or_player() {
        assert_eq!(ok(json!({"videos": [video()]})).videos.len(), 1);
        for key in ["thumbnail_loc", "title", "description"] {
            error(video_with(key, Value::Null), &format!("videos[0].{key}"), "is required");
        }
        let mut v = video();
        v.as_object_mut().unwrap().remove("content_loc");
        error(json!({"videos": [v.clone()]}), "videos[0].content_loc", "content_loc or player_loc is required");
        v["player_loc"] = json!("https://player.example.net/42");
        assert_eq!(ok(json!({"videos": [v]})).videos[0].player_loc.as_deref(), Some("https://player.example.net/42"));
        error(video_with("thumbnail_loc", json!("thumb.jpg")), "videos[0].thumbnail_loc", "absolute URL");
    }

    #[test]
    fn content_and_player_loc_must_not_be_the_page_itself() {
        error(video_with("content_loc", json!("https://WWW.example.com/p/42")), "videos[0].content_loc", "own loc");
        error(video_with("player_loc", json!(LOC)), "videos[0].player_loc", "own loc");
    }

    #[test]
    fn video_text_limits() {
        assert_eq!(ok(video_with("title", json!("é".repeat(100)))).videos[0].title.chars().count(), 100);
        error(video_with("title", json!("é".repeat(101))), "videos[0].title", "at most 100");
        error(video_with("description", json!("d".repeat(2049))), "videos[0].description", "at most 2048");
        error(video_with("title", json!(" \t ")), "videos[0].title", "must not be empty");
        error(video_with("description", json!("")), "videos[0].description", "must not be empty");
    }

    #[test]
    fn duration_is_a_whole_number_of_seconds_up_to_eight_hours() {
        assert_eq!(ok(video_with("duration", json!(1))).videos[0].duration, Some(1));
        assert_eq!(ok(video_with("duration", json!(28_800))).videos[0].duration, Some(28_800));
        error(video_with("duration", json!(0)), "videos[0].duration", "0 is out of range");
        error(video_with("duration", json!(28_801)), "videos[0].duration", "from 1 to 28800");
        error(video_with("duration", json!(-5)), "videos[0].duration", "out of range");
        error(video_with("duration", json!(600.5)), "videos[0].duration", "not a whole number");
        error(video_with("duration", json!("600")), "videos[0].duration", "not a string");
        let text = format!(
            r#"{{"loc": "{LOC}", "videos": [{{"thumbnail_loc": "https://cdn.example.net/t.jpg",
            "title": "T", "description": "D", "content_loc": "https://cdn.example.net/v.mp4", "duration": 1e3}}]}}"#
        );
        let errors = parse_text(&text).unwrap_err();
        assert_eq!(errors[0].field, "videos[0].duration");
        assert!(errors[0].message.contains("without fraction or exponent"), "{errors:?}");
    }

    #[test]
    fn rating_view_count_dates_and_booleans() {
        assert_eq!(ok(video_with("rating", json!(5))).videos[0].rating, Some(Rating::new(5.0).unwrap()));
        assert_eq!(ok(video_with("rating", json!(0.0))).videos[0].rating, Some(Rating::new(0.0).unwrap()));
        error(video_with("rating", json!(5.1)), "videos[0].rating", "outside 0.0 to 5.0");
        error(video_with("rating", json!(-1)), "videos[0].rating", "outside 0.0 to 5.0");
        error(video_with("rating", json!("4")), "videos[0].rating", "must be a number");
        assert_eq!(ok(video_with("view_count", json!(0))).videos[0].view_count, Some(0));
        assert_eq!(ok(video_with("view_count", json!(u64::MAX))).videos[0].view_count, Some(u64::MAX));
        error(video_with("view_count", json!(-1)), "videos[0].view_count", "0 or more");
        error(video_with("view_count", json!(1.5)), "videos[0].view_count", "not a whole number");
        let v = ok(video_with("expiration_date", json!("2027-01-01T02:00:00.50+02:00")));
        assert_eq!(v.videos[0].expiration_date.as_deref(), Some("2027-01-01T00:00:00.50Z"));
        error(video_with("expiration_date", json!("2027-01")), "videos[0].expiration_date", "YYYY-MM is not accepted");
        error(video_with("publication_date", json!("yesterday")), "videos[0].publication_date", "YYYY-MM-DD");
        for key in ["family_friendly", "requires_subscription", "live"] {
            error(video_with(key, json!("yes")), &format!("videos[0].{key}"), "must be true or false, not a string");
            assert_eq!(ok(video_with(key, Value::Null)).videos[0].live, None);
        }
    }

    #[test]
    fn restriction_countries_are_iso_codes_upper_case_without_duplicates() {
        let r = |countries: Value| video_with("restriction", json!({"relationship": "deny", "countries": countries}));
        let ext = ok(r(json!(["us", "Gb", "US", "gb", "FR"])));
        let restriction = ext.videos[0].restriction.clone().unwrap();
        assert_eq!(
            restriction,
            Restriction { relationship: Relationship::Deny, countries: strings(&["US", "GB", "FR"]) }
        );
        error(r(json!(["DE", "XY"])), "videos[0].restriction.countries[1]", "\"XY\" is not an ISO 3166-1 alpha-2");
        error(r(json!(["DE", "DEU"])), "videos[0].restriction.countries[1]", "ISO 3166-1 alpha-2");
        error(r(json!([])), "videos[0].restriction.countries", "at least one");
        error(r(json!("DE")), "videos[0].restriction.countries", "must be an array");
        let bad = video_with("restriction", json!({"relationship": "block", "countries": ["DE"]}));
        error(bad, "videos[0].restriction.relationship", "neither allow nor deny");
        let missing = video_with("restriction", json!({"countries": ["DE"]}));
        error(missing, "videos[0].restriction.relationship", "is required");
        let extra = video_with("restriction", json!({"relationship": "allow", "countries": ["DE"], "x": 1}));
        error(extra, "videos[0].restriction.x", "unknown field (allowed: relationship, countries)");
    }

    #[test]
    fn platforms_are_web_mobile_tv_lower_case_without_duplicates() {
        let p = |platforms: Value| video_with("platform", json!({"relationship": "allow", "platforms": platforms}));
        assert_eq!(
            ok(p(json!(["Mobile", "WEB", "mobile"]))).videos[0].platform.clone().unwrap().platforms,
            ["mobile", "web"]
        );
        error(p(json!(["web", "console"])), "videos[0].platform.platforms[1]", "not one of web, mobile, tv");
        error(p(json!([])), "videos[0].platform.platforms", "at least one");
    }

    #[test]
    fn uploader_and_tags() {
        let u = ok(video_with("uploader", json!({"name": "Me"}))).videos[0].uploader.clone().unwrap();
        assert_eq!(u, Uploader { name: "Me".into(), info: None });
        error(video_with("uploader", json!({"info": "https://a.test/"})), "videos[0].uploader.name", "is required");
        error(video_with("uploader", json!({"name": "n".repeat(256)})), "videos[0].uploader.name", "at most 255");
        error(video_with("uploader", json!({"name": "Me", "info": "me.html"})), "videos[0].uploader.info", "absolute");
        error(video_with("uploader", json!("Me")), "videos[0].uploader", "must be an object");
        assert_eq!(ok(video_with("tags", json!(vec!["t"; 32]))).videos[0].tags.len(), 32);
        error(video_with("tags", json!(vec!["t"; 33])), "videos[0].tags", "has 33 tags; at most 32");
        error(video_with("tags", json!(["a", ""])), "videos[0].tags[1]", "must not be empty");
        error(video_with("tags", json!(["a", "t".repeat(257)])), "videos[0].tags[1]", "at most 256");
        error(video_with("tags", json!(["a", 1])), "videos[0].tags[1]", "must be a string");
    }

    #[test]
    fn video_fields_google_deprecated_are_refused_saying_so() {
        for key in ["category", "gallery_loc", "price", "tvshow"] {
            error(video_with(key, json!("x")), &format!("videos[0].{key}"), &format!("Google deprecated video:{key}"));
        }
        for key in ["autoplay", "allow_embed"] {
            error(video_with(key, json!("yes")), &format!("videos[0].{key}"), "Google deprecated player_loc's");
        }
        let player = json!({"loc": "https://player.example.net/42", "allow_embed": "yes"});
        error(video_with("player_loc", player), "videos[0].player_loc", "Google deprecated player_loc's attributes");
        error(video_with("content_loc", json!({})), "videos[0].content_loc", "must be a string, not an object");
        error(video_with("colour", json!(1)), "videos[0].colour", "unknown field (allowed: thumbnail_loc, title,");
    }

    #[test]
    fn at_most_100_videos_our_own_limit() {
        assert_eq!(ok(json!({"videos": vec![video(); MAX_VIDEOS]})).videos.len(), MAX_VIDEOS);
        error(json!({"videos": vec![video(); MAX_VIDEOS + 1]}), "videos", "a limit of this service, not Google's");
    }
}
