//! An entry's extensions (`images`, `videos`, `news`, `alternates`) as the write API receives them: each read as a
//! small JSON tree ([`JsonTree`]) within a per-entry node budget, then validated into [`Extensions`] by pure
//! functions that report every problem (up to [`MAX_EXT_ERRORS`]) with a path a person can act on
//! (`videos[0].restriction.countries[1]`).
//!
//! The rest of an entry is never built as a tree (see [`super::EntryInput`]); these four fields are, because they
//! nest, but never beyond [`MAX_TREE_NODES`] values per entry: past that the rest is skipped unread and the field
//! is refused as too large, so a hostile body costs about its size whatever it holds.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::ext::{
    Alternate, Extensions, Image, News, Platform, Publication, Rating, Relationship, Restriction, Uploader, Video,
};
use super::loc::absolute_url;
use super::{FieldError, LastMod, Loc};

/// The four extension fields of an entry, in the order their errors are reported.
pub const EXT_FIELDS: [&str; 4] = ["images", "videos", "news", "alternates"];

/// JSON values (scalars, arrays, objects; an object's key is not counted apart from its value) the four extension
/// fields of one entry may hold together. The largest valid entry (1,000 images, 100 videos each restricted to
/// every country with 32 tags, 1,000 alternates) holds about 36,000.
pub const MAX_TREE_NODES: usize = 50_000;

/// Problems reported for one entry's extensions; any beyond are counted in one more error.
pub const MAX_EXT_ERRORS: usize = 50;

/// Google's limit of `<image:image>` per `<url>`.
pub const MAX_IMAGES: usize = 1_000;
/// This service's limit of `<video:video>` per entry (Google sets none).
pub const MAX_VIDEOS: usize = 100;
/// `<xhtml:link>` alternates per entry.
pub const MAX_ALTERNATES: usize = 1_000;

const MAX_VIDEO_TITLE: usize = 100;
const MAX_VIDEO_DESCRIPTION: usize = 2_048;
const MAX_DURATION: u64 = 28_800;
const MAX_TAGS: usize = 32;
const MAX_TAG: usize = 256;
const MAX_UPLOADER_NAME: usize = 255;
const MAX_PUBLICATION_NAME: usize = 256;
const MAX_NEWS_TITLE: usize = 2_048;
/// Unknown keys are named in paths up to this many characters.
const MAX_KEY_SHOWN: usize = 64;

/// A JSON value as the extension fields receive it. An object keeps its pairs in order, repeated keys included, so
/// that a key given twice is seen (and refused) rather than silently overwritten.
#[derive(Clone, Debug, PartialEq)]
pub enum JsonTree {
    Null,
    Bool(bool),
    /// A non-negative integer written without fraction or exponent (`600`).
    UInt(u64),
    /// A negative integer written without fraction or exponent (`-3`).
    Int(i64),
    /// Any other number (`600.5`, `1e3`, an integer beyond 64 bits).
    Float(f64),
    String(String),
    Array(Vec<JsonTree>),
    Object(Vec<(String, JsonTree)>),
}

impl JsonTree {
    /// What it is, for error messages: "a string", "null", ...
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::UInt(_) | Self::Int(_) | Self::Float(_) => "a number",
            Self::String(_) => "a string",
            Self::Array(_) => "an array",
            Self::Object(_) => "an object",
        }
    }

    /// How many values it holds, itself included: what it cost of a [`Budget`].
    pub fn nodes(&self) -> usize {
        1 + match self {
            Self::Array(items) => items.iter().map(Self::nodes).sum(),
            Self::Object(pairs) => pairs.iter().map(|(_, v)| v.nodes()).sum(),
            _ => 0,
        }
    }
}

/// How many more JSON values may be built into trees; once spent, what remains is skipped unread.
#[derive(Clone, Debug)]
pub struct Budget {
    left: usize,
    exceeded: bool,
}

impl Budget {
    pub fn new(nodes: usize) -> Self {
        Self { left: nodes, exceeded: false }
    }

    /// True once a value had to be skipped: a tree read since is incomplete.
    pub fn exceeded(&self) -> bool {
        self.exceeded
    }

    pub fn left(&self) -> usize {
        self.left
    }
}

/// Reads one JSON value as a tree, spending one unit of `budget` per value. When the budget runs out the rest of
/// the value is skipped with [`IgnoredAny`] (built no further) and [`Budget::exceeded`] becomes true: the tree is
/// then incomplete and must be refused. Nesting is bounded by the deserializer (serde_json's recursion limit).
pub fn read_tree<'de, D: Deserializer<'de>>(deserializer: D, budget: &mut Budget) -> Result<JsonTree, D::Error> {
    TreeSeed { budget }.deserialize(deserializer)
}

struct TreeSeed<'b> {
    budget: &'b mut Budget,
}

impl<'de> DeserializeSeed<'de> for TreeSeed<'_> {
    type Value = JsonTree;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonTree, D::Error> {
        if self.budget.left == 0 {
            self.budget.exceeded = true;
            deserializer.deserialize_ignored_any(IgnoredAny)?;
            return Ok(JsonTree::Null);
        }
        self.budget.left -= 1;
        deserializer.deserialize_any(TreeVisitor { budget: self.budget })
    }
}

struct TreeVisitor<'b> {
    budget: &'b mut Budget,
}

impl<'de> Visitor<'de> for TreeVisitor<'_> {
    type Value = JsonTree;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<JsonTree, E> {
        Ok(JsonTree::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<JsonTree, E> {
        Ok(u64::try_from(v).map_or(JsonTree::Int(v), JsonTree::UInt))
    }
    fn visit_u64<E>(self, v: u64) -> Result<JsonTree, E> {
        Ok(JsonTree::UInt(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<JsonTree, E> {
        Ok(JsonTree::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<JsonTree, E> {
        Ok(JsonTree::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<JsonTree, E> {
        Ok(JsonTree::String(v))
    }
    fn visit_unit<E>(self) -> Result<JsonTree, E> {
        Ok(JsonTree::Null)
    }
    fn visit_none<E>(self) -> Result<JsonTree, E> {
        Ok(JsonTree::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<JsonTree, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonTree, A::Error> {
        let mut items = Vec::new();
        while !self.budget.exceeded {
            match seq.next_element_seed(TreeSeed { budget: &mut *self.budget })? {
                Some(item) if !self.budget.exceeded => items.push(item),
                Some(_) => {}
                None => return Ok(JsonTree::Array(items)),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(JsonTree::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonTree, A::Error> {
        let mut pairs = Vec::new();
        while !self.budget.exceeded {
            let Some(key) = map.next_key::<String>()? else { return Ok(JsonTree::Object(pairs)) };
            let value = map.next_value_seed(TreeSeed { budget: &mut *self.budget })?;
            if !self.budget.exceeded {
                pairs.push((key, value));
            }
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(JsonTree::Object(pairs))
    }
}

/// Skips a value unread, telling whether it was `null`.
struct NullOrSkip;

impl<'de> DeserializeSeed<'de> for NullOrSkip {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NullOrSkip {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(true)
    }
    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(true)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

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
        if budget.left == 0 {
            // Spent by the fields before: this one is refused too, unless it is `null` (omitted).
            let null = map.next_value_seed(NullOrSkip)?;
            budget.exceeded = true;
            *field = if null { Given::Value(JsonTree::Null) } else { Given::TooLarge };
            return Ok(());
        }
        let tree = map.next_value_seed(TreeSeed { budget: &mut *budget })?;
        *field = if budget.exceeded() { Given::TooLarge } else { Given::Value(tree) };
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

/// The problems found so far, at most [`MAX_EXT_ERRORS`] kept.
#[derive(Default)]
struct Check {
    errors: Vec<FieldError>,
    more: usize,
}

impl Check {
    fn err(&mut self, field: impl Into<String>, message: impl Into<String>) {
        if self.errors.len() < MAX_EXT_ERRORS {
            self.errors.push(FieldError { field: field.into(), message: message.into() });
        } else {
            self.more += 1;
        }
    }

    /// Problems found so far, kept or counted: compared before and after a part to tell whether it was valid.
    fn count(&self) -> usize {
        self.errors.len() + self.more
    }

    /// The value of `result`, or its problem reported at `field`.
    fn ok<T>(&mut self, field: &str, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.err(field, message)).ok()
    }

    fn finish(mut self) -> Result<(), Vec<FieldError>> {
        if self.more > 0 {
            self.errors.push(FieldError {
                field: String::new(),
                message: format!(
                    "{} more problems in images, videos, news or alternates (only the first {MAX_EXT_ERRORS} are \
                     listed)",
                    self.more
                ),
            });
        }
        if self.errors.is_empty() { Ok(()) } else { Err(self.errors) }
    }
}

fn join(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// An unknown key as shown in a path: at most [`MAX_KEY_SHOWN`] characters.
fn shown(key: &str) -> String {
    match key.char_indices().nth(MAX_KEY_SHOWN) {
        Some((cut, _)) => format!("{}…", &key[..cut]),
        None => key.to_owned(),
    }
}

/// A field of an object as found.
#[derive(Clone, Copy)]
enum Slot<'a> {
    Absent,
    Given(&'a JsonTree),
    Repeated,
}

impl<'a> Slot<'a> {
    /// The value of a required field; "is required" when absent.
    fn required(self, c: &mut Check, path: &str) -> Option<&'a JsonTree> {
        match self {
            Self::Absent => {
                c.err(path, "is required");
                None
            }
            Self::Given(tree) => Some(tree),
            Self::Repeated => None,
        }
    }

    /// The value of an optional field; `null` means omitted.
    fn optional(self) -> Option<&'a JsonTree> {
        match self {
            Self::Given(JsonTree::Null) | Self::Absent | Self::Repeated => None,
            Self::Given(tree) => Some(tree),
        }
    }
}

/// The fields of the object at `path` by `known` position. Each field given twice, each retired field (with the
/// message saying so) and each unknown field is reported. `what` says what the object is, for a value that is not
/// one.
fn object<'a, const N: usize>(
    c: &mut Check,
    path: &str,
    tree: &'a JsonTree,
    what: &str,
    known: [&str; N],
    retired: &[(&str, &str)],
) -> Option<[Slot<'a>; N]> {
    let JsonTree::Object(pairs) = tree else {
        c.err(path, format!("must be an object ({what}), not {}", tree.kind()));
        return None;
    };
    let mut slots = [Slot::Absent; N];
    for (key, value) in pairs {
        if let Some(i) = known.iter().position(|k| k == key) {
            slots[i] = match slots[i] {
                Slot::Absent => Slot::Given(value),
                Slot::Given(_) => {
                    c.err(join(path, key), "is given more than once; give each field once");
                    Slot::Repeated
                }
                Slot::Repeated => Slot::Repeated,
            };
        } else if let Some((_, message)) = retired.iter().find(|(k, _)| k == key) {
            c.err(join(path, key), *message);
        } else {
            c.err(join(path, &shown(key)), format!("unknown field (allowed: {})", known.join(", ")));
        }
    }
    Some(slots)
}

/// The items of the array at `path`: `null` and `[]` are none; more than `max` is refused as a whole (`limit`
/// says whose limit). `noun` names the items, `shape` (if not empty) says what each is.
fn array<'a>(
    c: &mut Check,
    path: &str,
    tree: &'a JsonTree,
    (noun, shape): (&str, &str),
    max: usize,
    limit: &str,
) -> &'a [JsonTree] {
    match tree {
        JsonTree::Null => &[],
        JsonTree::Array(items) if items.len() > max => {
            c.err(path, format!("has {} {noun}; at most {max} are allowed ({limit}): send fewer", items.len()));
            &[]
        }
        JsonTree::Array(items) => items,
        other if shape.is_empty() => {
            c.err(path, format!("must be an array of {noun}, not {}", other.kind()));
            &[]
        }
        other => {
            c.err(path, format!("must be an array of {noun} ({shape}), not {}", other.kind()));
            &[]
        }
    }
}

fn string<'a>(c: &mut Check, path: &str, tree: &'a JsonTree) -> Option<&'a str> {
    match tree {
        JsonTree::String(s) => Some(s),
        other => {
            c.err(path, format!("must be a string, not {}", other.kind()));
            None
        }
    }
}

/// The first character of `text` that XML 1.0 cannot carry, if any.
pub fn forbidden_char(text: &str) -> Option<char> {
    text.chars()
        .find(|&ch| matches!(ch, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}'))
}

/// Text that is rendered as an element's content or attribute: stored exactly as given, but not blank, at most
/// `max` characters, and without characters XML 1.0 cannot carry.
fn text(c: &mut Check, path: &str, tree: &JsonTree, max: usize) -> Option<String> {
    let s = string(c, path, tree)?;
    c.ok(path, check_text(s, max)).map(|()| s.to_owned())
}

fn check_text(s: &str, max: usize) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("must not be empty or only white space".into());
    }
    if let Some(ch) = forbidden_char(s) {
        return Err(format!(
            "contains the control character U+{:04X}, which XML 1.0 cannot carry; remove it",
            ch as u32
        ));
    }
    let len = s.chars().count();
    if len > max {
        return Err(format!("is {len} characters long; at most {max} are allowed"));
    }
    Ok(())
}

fn url(c: &mut Check, path: &str, tree: &JsonTree) -> Option<String> {
    let s = string(c, path, tree)?;
    c.ok(path, absolute_url(s))
}

fn date(c: &mut Check, path: &str, tree: &JsonTree) -> Option<String> {
    let s = string(c, path, tree)?;
    c.ok(path, LastMod::parse(s).map(|d| d.as_str().to_owned()))
}

fn boolean(c: &mut Check, path: &str, tree: &JsonTree) -> Option<bool> {
    match tree {
        JsonTree::Bool(b) => Some(*b),
        other => {
            c.err(path, format!("must be true or false, not {}", other.kind()));
            None
        }
    }
}

/// A whole number from `min` to `max`, written without fraction or exponent; `what` describes the range.
fn integer(c: &mut Check, path: &str, tree: &JsonTree, min: u64, max: u64, what: &str) -> Option<u64> {
    match tree {
        JsonTree::UInt(n) if (min..=max).contains(n) => Some(*n),
        JsonTree::UInt(n) => {
            c.err(path, format!("{n} is out of range: must be {what}"));
            None
        }
        JsonTree::Int(n) => {
            c.err(path, format!("{n} is out of range: must be {what}"));
            None
        }
        JsonTree::Float(n) => {
            c.err(path, format!("{n} is not a whole number written without fraction or exponent: must be {what}"));
            None
        }
        other => {
            c.err(path, format!("must be a number ({what}), not {}", other.kind()));
            None
        }
    }
}

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

const IMAGE_DROPPED: [(&str, &str); 4] = [
    ("caption", "Google dropped image:caption in 2022; remove it"),
    ("title", "Google dropped image:title in 2022; remove it"),
    ("geo_location", "Google dropped image:geo_location in 2022; remove it"),
    ("license", "Google dropped image:license in 2022; remove it"),
];

fn images(c: &mut Check, tree: &JsonTree) -> Vec<Image> {
    let items = array(c, "images", tree, ("images", "{\"loc\": URL} objects"), MAX_IMAGES, "Google's limit per URL");
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("images[{i}]");
        let Some([loc]) = object(c, &path, item, "{\"loc\": URL}", ["loc"], &IMAGE_DROPPED) else { continue };
        if let Some(loc) = loc.required(c, &join(&path, "loc")).and_then(|t| url(c, &join(&path, "loc"), t)) {
            out.push(Image { loc });
        }
    }
    out
}

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

fn videos(c: &mut Check, tree: &JsonTree, loc: Option<&str>) -> Vec<Video> {
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

const NEWS_DEPRECATED: [(&str, &str); 4] = [
    ("access", "Google deprecated news:access; remove it"),
    ("genres", "Google deprecated news:genres; remove it"),
    ("keywords", "Google deprecated news:keywords; remove it"),
    ("stock_tickers", "Google deprecated news:stock_tickers; remove it"),
];

fn news(c: &mut Check, tree: &JsonTree) -> Option<News> {
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

fn alternates(c: &mut Check, tree: &JsonTree, loc: Option<&str>) -> Vec<Alternate> {
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

/// An ISO 3166-1 alpha-2 country code in any case, upper case out.
pub fn country(raw: &str) -> Result<String, String> {
    if raw.len() == 2 && raw.bytes().all(|b| b.is_ascii_alphabetic()) && celes::Country::from_alpha2(raw).is_ok() {
        Ok(raw.to_ascii_uppercase())
    } else {
        Err(format!("{:?} is not an ISO 3166-1 alpha-2 country code (two letters, such as DE or US)", shown(raw)))
    }
}

/// ISO 639-2/B codes (bibliographic), which ISO 639-3 does not list: each has a 639-2/T twin that it does.
const ISO_639_2B: [&str; 20] = [
    "alb", "arm", "baq", "bur", "chi", "cze", "dut", "fre", "geo", "ger", "gre", "ice", "mac", "mao", "may", "per",
    "rum", "slo", "tib", "wel",
];

/// A `news:language`: ISO 639-1 (two letters) or ISO 639-2/3 (three letters), or `zh-cn` / `zh-tw`; any case in,
/// lower case out (the news XSD's `zh-cn|zh-tw|([a-z]{2,3})`).
pub fn news_language(raw: &str) -> Result<String, String> {
    let lower = raw.to_ascii_lowercase();
    let known = match lower.len() {
        _ if !lower.bytes().all(|b| b.is_ascii_lowercase()) => lower == "zh-cn" || lower == "zh-tw",
        2 => isolang::Language::from_639_1(&lower).is_some(),
        3 => isolang::Language::from_639_3(&lower).is_some() || ISO_639_2B.contains(&lower.as_str()),
        _ => false,
    };
    if known {
        Ok(lower)
    } else {
        Err(format!(
            "{:?} is not an ISO 639 language code: give two letters (ISO 639-1, such as en), three (ISO 639-2/3, \
             such as haw), or zh-cn / zh-tw",
            shown(raw)
        ))
    }
}

/// The UN M.49 area codes that BCP 47 registers as regions (`es-419`).
const M49_REGIONS: [&str; 31] = [
    "001", "002", "003", "005", "009", "011", "013", "014", "015", "017", "018", "019", "021", "029", "030", "034",
    "035", "039", "053", "054", "057", "061", "142", "143", "145", "150", "151", "154", "155", "202", "419",
];

/// An `hreflang`: `x-default`, or an ISO 639-1 language, optionally followed by a script (four letters) and a
/// region (ISO 3166-1 alpha-2, or a UN M.49 area such as `419`), separated by `-`. Any case in; BCP 47's canonical
/// case out: `de-AT`, `zh-Hant-TW`, `x-default`.
pub fn parse_hreflang(raw: &str) -> Result<String, String> {
    if raw.eq_ignore_ascii_case("x-default") {
        return Ok("x-default".to_owned());
    }
    if raw.contains('_') {
        let dashed = raw.replace('_', "-");
        let suggestion = parse_hreflang(&dashed).unwrap_or(dashed);
        return Err(format!(
            "{:?} separates with '_'; hreflang (BCP 47) uses '-': write {:?}",
            shown(raw),
            shown(&suggestion)
        ));
    }
    let form = "expected a language, then optionally a script and a region: en, de-AT, zh-Hant-TW, es-419, or \
                x-default";
    let letters = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_alphabetic());
    let mut parts = raw.split('-');
    let lang = parts.next().unwrap_or_default().to_ascii_lowercase();
    if !(letters(&lang, 2) && isolang::Language::from_639_1(&lang).is_some()) {
        return Err(format!(
            "{:?} does not start with an ISO 639-1 language code (two letters, such as en); {form}",
            shown(raw)
        ));
    }
    let mut out = lang;
    let mut next = parts.next();
    if let Some(script) = next.filter(|s| letters(s, 4)) {
        out.push('-');
        out.push_str(&script[..1].to_ascii_uppercase());
        out.push_str(&script[1..].to_ascii_lowercase());
        next = parts.next();
    }
    if let Some(region) = next {
        if letters(region, 2) && celes::Country::from_alpha2(region).is_ok() {
            out.push('-');
            out.push_str(&region.to_ascii_uppercase());
        } else if M49_REGIONS.contains(&region) {
            out.push('-');
            out.push_str(region);
        } else {
            return Err(format!(
                "{:?} in {:?} is neither a script (four letters) nor a region (an ISO 3166-1 alpha-2 country code \
                 such as AT, or a UN M.49 area such as 419); {form}",
                shown(region),
                shown(raw)
            ));
        }
        if parts.next().is_some() {
            return Err(format!("{:?} has more than a language, a script and a region; {form}", shown(raw)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::domain::{Entry, EntryInput, MAX_LOC_LEN, PublicUrl};

    const LOC: &str = "https://www.example.com/p/42";

    fn public() -> PublicUrl {
        PublicUrl::parse("https://www.example.com").unwrap()
    }

    /// An entry at [`LOC`] with the given extension fields, parsed from text as the API does.
    fn parse(fields: Value) -> Result<Option<Box<Extensions>>, Vec<FieldError>> {
        let mut entry = fields;
        entry.as_object_mut().unwrap().insert("loc".into(), json!(LOC));
        parse_text(&entry.to_string())
    }

    fn parse_text(text: &str) -> Result<Option<Box<Extensions>>, Vec<FieldError>> {
        let input: EntryInput = serde_json::from_str(text).unwrap();
        Entry::from_input(input, &public()).map(|e| e.ext)
    }

    fn ok(fields: Value) -> Extensions {
        *parse(fields).unwrap().expect("extensions")
    }

    /// The only error for these fields: its path, and its message (which must contain `says`).
    fn error(fields: Value, path: &str, says: &str) {
        let shown = fields.to_string();
        let errors = parse(fields).unwrap_err();
        let fields = shown;
        assert_eq!(errors.len(), 1, "{fields}: {errors:?}");
        assert_eq!(errors[0].field, path, "{fields}: {errors:?}");
        assert!(errors[0].message.contains(says), "{fields}: {:?} does not say {says:?}", errors[0].message);
    }

    fn video() -> Value {
        json!({"thumbnail_loc": "https://cdn.example.net/t.jpg", "title": "T", "description": "D",
               "content_loc": "https://cdn.example.net/v.mp4"})
    }

    /// A valid video with `key` set to `value` (or removed, for `null` here).
    fn video_with(key: &str, value: Value) -> Value {
        let mut v = video();
        if value.is_null() {
            v.as_object_mut().unwrap().remove(key);
        } else {
            v[key] = value;
        }
        json!({"videos": [v]})
    }

    fn news() -> Value {
        json!({"publication": {"name": "The Example Times", "language": "en"},
               "publication_date": "2026-11-22T08:00:00Z", "title": "T"})
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

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
    fn images_are_absolute_normalized_urls_on_any_host() {
        let ext =
            ok(json!({"images": [{"loc": "HTTPS://CDN.Example.NET:443/a|b.jpg"}, {"loc": "http://other.test/x"}]}));
        assert_eq!(
            ext.images,
            [Image { loc: "https://cdn.example.net/a%7Cb.jpg".into() }, Image { loc: "http://other.test/x".into() }]
        );
        error(json!({"images": [{"loc": "/relative.jpg"}]}), "images[0].loc", "not an absolute URL");
        error(json!({"images": [{"loc": "ftp://cdn.example.net/a.jpg"}]}), "images[0].loc", "http or https");
        error(json!({"images": [{"loc": "https://u:p@cdn.example.net/a.jpg"}]}), "images[0].loc", "user information");
        error(json!({"images": [{"loc": "https://cdn.example.net/a.jpg#x"}]}), "images[0].loc", "fragment");
        let long = format!("https://cdn.example.net/{}", "a".repeat(MAX_LOC_LEN));
        error(json!({"images": [{"loc": long}]}), "images[0].loc", "shorter than 2048");
        error(json!({"images": [{}]}), "images[0].loc", "is required");
        error(json!({"images": [{"loc": 3}]}), "images[0].loc", "must be a string, not a number");
        error(json!({"images": ["https://cdn.example.net/a.jpg"]}), "images[0]", "must be an object");
        error(json!({"images": {"loc": "https://cdn.example.net/a.jpg"}}), "images", "must be an array");
    }

    #[test]
    fn at_most_1000_images() {
        let image = json!({"loc": "https://cdn.example.net/a.jpg"});
        assert_eq!(ok(json!({"images": vec![image.clone(); MAX_IMAGES]})).images.len(), MAX_IMAGES);
        error(json!({"images": vec![image; MAX_IMAGES + 1]}), "images", "has 1001 images");
    }

    #[test]
    fn image_fields_google_dropped_are_refused_saying_so() {
        for key in ["caption", "title", "geo_location", "license"] {
            let fields = json!({"images": [{"loc": "https://cdn.example.net/a.jpg", key: "x"}]});
            error(fields, &format!("images[0].{key}"), &format!("Google dropped image:{key} in 2022; remove it"));
        }
        let fields = json!({"images": [{"loc": "https://cdn.example.net/a.jpg", "colour": "red"}]});
        error(fields, "images[0].colour", "unknown field (allowed: loc)");
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
    fn control_characters_xml_cannot_carry_are_refused_where_they_are() {
        error(video_with("title", json!("a\u{7}b")), "videos[0].title", "U+0007, which XML 1.0 cannot carry");
        error(video_with("description", json!("a\u{0}")), "videos[0].description", "U+0000");
        error(video_with("tags", json!(["ok", "a\u{ffff}"])), "videos[0].tags[1]", "U+FFFF");
        error(video_with("uploader", json!({"name": "\u{1b}[31m"})), "videos[0].uploader.name", "U+001B");
        let mut n = news();
        n["title"] = json!("\u{fffe}");
        error(json!({"news": n}), "news.title", "U+FFFE");
        // Tab, line feed and carriage return are XML characters: kept as given.
        assert_eq!(ok(video_with("title", json!("a\tb\r\nc"))).videos[0].title, "a\tb\r\nc");
        assert_eq!(forbidden_char("\u{b}"), Some('\u{b}'));
        assert_eq!(forbidden_char("\u{c}\u{e}"), Some('\u{c}'));
        assert_eq!(forbidden_char("\u{1f}"), Some('\u{1f}'));
        assert_eq!(forbidden_char("\u{20}\u{d7ff}\u{e000}\u{fffd}\u{10000}"), None);
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
    fn hreflang_forms() {
        for (given, canonical) in [
            ("en", "en"),
            ("DE-at", "de-AT"),
            ("zh-hant-tw", "zh-Hant-TW"),
            ("sr-LATN", "sr-Latn"),
            ("es-419", "es-419"),
            ("X-DEFAULT", "x-default"),
        ] {
            assert_eq!(parse_hreflang(given).as_deref(), Ok(canonical), "{given}");
        }
        assert!(parse_hreflang("de_AT").unwrap_err().contains("uses '-': write \"de-AT\""));
        assert!(parse_hreflang("deu").unwrap_err().contains("ISO 639-1"));
        assert!(parse_hreflang("xx").unwrap_err().contains("ISO 639-1"));
        assert!(parse_hreflang("en-XY").unwrap_err().contains("\"XY\" in \"en-XY\" is neither a script"));
        assert!(parse_hreflang("en-999").is_err());
        assert!(parse_hreflang("en-").is_err());
        assert!(parse_hreflang("en-US-x").unwrap_err().contains("more than a language"));
        assert!(parse_hreflang("en-Latn-Latn").is_err());
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
    fn the_tree_stops_growing_at_the_budget() {
        let numbers = format!("[{}0]", "0,".repeat(200_000));
        let mut budget = Budget::new(1_000);
        let tree = read_tree(&mut serde_json::Deserializer::from_str(&numbers), &mut budget).unwrap();
        assert!(budget.exceeded());
        assert_eq!(budget.left(), 0);
        assert!(tree.nodes() <= 1_000, "{}", tree.nodes());
        // Within the budget, the tree is whole; integers, floats and repeated keys are told apart.
        let mut budget = Budget::new(100);
        let text = r#"{"a": [600, 600.5, 1e3, -3, null, true, "s"], "a": {}}"#;
        let tree = read_tree(&mut serde_json::Deserializer::from_str(text), &mut budget).unwrap();
        assert!(!budget.exceeded());
        assert_eq!(tree.nodes(), 10);
        assert_eq!(budget.left(), 90);
        let items = vec![
            JsonTree::UInt(600),
            JsonTree::Float(600.5),
            JsonTree::Float(1000.0),
            JsonTree::Int(-3),
            JsonTree::Null,
            JsonTree::Bool(true),
            JsonTree::String("s".into()),
        ];
        assert_eq!(
            tree,
            JsonTree::Object(vec![("a".into(), JsonTree::Array(items)), ("a".into(), JsonTree::Object(vec![]))])
        );
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

    #[test]
    fn absurd_nesting_is_still_a_parse_error_of_the_body() {
        let deep = format!(r#"{{"loc": "{LOC}", "images": {}{}}}"#, "[".repeat(200), "]".repeat(200));
        assert!(serde_json::from_str::<EntryInput>(&deep).unwrap_err().to_string().contains("recursion limit"));
        // Outside the extension fields nesting is skipped as before.
        let deep = format!(r#"{{"loc": "{LOC}", "x": {}{}}}"#, "[".repeat(10_000), "]".repeat(10_000));
        assert!(serde_json::from_str::<EntryInput>(&deep).is_ok());
    }
}
