//! The validation kit the extension validators are written in: [`Check`] collects the problems (at most
//! [`MAX_EXT_ERRORS`], each with its path), and one function per kind of value (an object's known fields, an
//! array within its limit, text XML can carry, a URL, a date, a boolean, an integer in range) reads it from a
//! [`JsonTree`] or reports what is wrong.

use super::super::loc::absolute_url;
use super::super::{FieldError, LastMod};
use super::{JsonTree, MAX_EXT_ERRORS};

/// Unknown keys are named in paths up to this many characters.
const MAX_KEY_SHOWN: usize = 64;

/// The problems found so far, at most [`MAX_EXT_ERRORS`] kept.
#[derive(Default)]
pub(super) struct Check {
    errors: Vec<FieldError>,
    more: usize,
}

impl Check {
    pub(super) fn err(&mut self, field: impl Into<String>, message: impl Into<String>) {
        if self.errors.len() < MAX_EXT_ERRORS {
            self.errors.push(FieldError { field: field.into(), message: message.into() });
        } else {
            self.more += 1;
        }
    }

    /// Problems found so far, kept or counted: compared before and after a part to tell whether it was valid.
    pub(super) fn count(&self) -> usize {
        self.errors.len() + self.more
    }

    /// The value of `result`, or its problem reported at `field`.
    pub(super) fn ok<T>(&mut self, field: &str, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.err(field, message)).ok()
    }

    pub(super) fn finish(mut self) -> Result<(), Vec<FieldError>> {
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

pub(super) fn join(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// An unknown key as shown in a path: at most [`MAX_KEY_SHOWN`] characters.
pub(super) fn shown(key: &str) -> String {
    match key.char_indices().nth(MAX_KEY_SHOWN) {
        Some((cut, _)) => format!("{}…", &key[..cut]),
        None => key.to_owned(),
    }
}

/// A field of an object as found.
#[derive(Clone, Copy)]
pub(super) enum Slot<'a> {
    Absent,
    Given(&'a JsonTree),
    Repeated,
}

impl<'a> Slot<'a> {
    /// The value of a required field; "is required" when absent.
    pub(super) fn required(self, c: &mut Check, path: &str) -> Option<&'a JsonTree> {
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
    pub(super) fn optional(self) -> Option<&'a JsonTree> {
        match self {
            Self::Given(JsonTree::Null) | Self::Absent | Self::Repeated => None,
            Self::Given(tree) => Some(tree),
        }
    }
}

/// The fields of the object at `path` by `known` position. Each field given twice, each retired field (with the
/// message saying so) and each unknown field is reported. `what` says what the object is, for a value that is not
/// one.
pub(super) fn object<'a, const N: usize>(
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
pub(super) fn array<'a>(
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

pub(super) fn string<'a>(c: &mut Check, path: &str, tree: &'a JsonTree) -> Option<&'a str> {
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
pub(super) fn text(c: &mut Check, path: &str, tree: &JsonTree, max: usize) -> Option<String> {
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

pub(super) fn url(c: &mut Check, path: &str, tree: &JsonTree) -> Option<String> {
    let s = string(c, path, tree)?;
    c.ok(path, absolute_url(s))
}

pub(super) fn date(c: &mut Check, path: &str, tree: &JsonTree) -> Option<String> {
    let s = string(c, path, tree)?;
    c.ok(path, LastMod::parse(s).map(|d| d.as_str().to_owned()))
}

pub(super) fn boolean(c: &mut Check, path: &str, tree: &JsonTree) -> Option<bool> {
    match tree {
        JsonTree::Bool(b) => Some(*b),
        other => {
            c.err(path, format!("must be true or false, not {}", other.kind()));
            None
        }
    }
}

/// A whole number from `min` to `max`, written without fraction or exponent; `what` describes the range.
pub(super) fn integer(c: &mut Check, path: &str, tree: &JsonTree, min: u64, max: u64, what: &str) -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{error, news, ok, video_with};
    use super::*;

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
}
