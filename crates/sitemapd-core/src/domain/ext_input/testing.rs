//! What the validators' tests share: an entry at [`LOC`] parsed as the write API parses it, and valid fields to vary.

use serde_json::{Value, json};

use crate::domain::{Entry, EntryInput, Extensions, FieldError, PublicUrl};

pub(super) const LOC: &str = "https://www.example.com/p/42";

pub(super) fn public() -> PublicUrl {
    PublicUrl::parse("https://www.example.com").unwrap()
}

/// An entry at [`LOC`] with the given extension fields, parsed from text as the API does.
pub(super) fn parse(fields: Value) -> Result<Option<Box<Extensions>>, Vec<FieldError>> {
    let mut entry = fields;
    entry.as_object_mut().unwrap().insert("loc".into(), json!(LOC));
    parse_text(&entry.to_string())
}

pub(super) fn parse_text(text: &str) -> Result<Option<Box<Extensions>>, Vec<FieldError>> {
    let input: EntryInput = serde_json::from_str(text).unwrap();
    Entry::from_input(input, &public()).map(|e| e.ext)
}

pub(super) fn ok(fields: Value) -> Extensions {
    *parse(fields).unwrap().expect("extensions")
}

/// The only error for these fields: its path, and its message (which must contain `says`).
pub(super) fn error(fields: Value, path: &str, says: &str) {
    let shown = fields.to_string();
    let errors = parse(fields).unwrap_err();
    let fields = shown;
    assert_eq!(errors.len(), 1, "{fields}: {errors:?}");
    assert_eq!(errors[0].field, path, "{fields}: {errors:?}");
    assert!(errors[0].message.contains(says), "{fields}: {:?} does not say {says:?}", errors[0].message);
}

pub(super) fn video() -> Value {
    json!({"thumbnail_loc": "https://cdn.example.net/t.jpg", "title": "T", "description": "D",
           "content_loc": "https://cdn.example.net/v.mp4"})
}

/// A valid video with `key` set to `value` (or removed, for `null` here).
pub(super) fn video_with(key: &str, value: Value) -> Value {
    let mut v = video();
    if value.is_null() {
        v.as_object_mut().unwrap().remove(key);
    } else {
        v[key] = value;
    }
    json!({"videos": [v]})
}

pub(super) fn news() -> Value {
    json!({"publication": {"name": "The Example Times", "language": "en"},
           "publication_date": "2026-11-22T08:00:00Z", "title": "T"})
}

pub(super) fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}
