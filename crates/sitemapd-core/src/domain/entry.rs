//! One URL record as the write API receives it, validated field by field.

use std::fmt;

use serde::Serialize;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::ext_input::{Budget, ExtInput, MAX_TREE_NODES};
use super::{LastMod, Loc, LocScope, Section};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeFreq {
    Always,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    Never,
}

impl ChangeFreq {
    const ALL: [Self; 7] =
        [Self::Always, Self::Hourly, Self::Daily, Self::Weekly, Self::Monthly, Self::Yearly, Self::Never];

    /// Any case in; [`ChangeFreq::as_str`] gives lower case out.
    pub fn parse(raw: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(raw))
            .ok_or_else(|| format!("{raw:?} is not one of always, hourly, daily, weekly, monthly, yearly, never"))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Hourly => "hourly",
            Self::Daily => "daily",
            Self::Weekly => "weekly",
            Self::Monthly => "monthly",
            Self::Yearly => "yearly",
            Self::Never => "never",
        }
    }
}

/// A priority from 0.0 to 1.0, with at most [`Priority::MAX_DECIMALS`] decimal places so that it renders as the
/// short decimal it was given (`0.8`), and so that every entry's size has a known upper bound.
///
/// Held, stored and rendered as an integer count of millionths: an integer round-trips exactly through both
/// databases, so the size counted when an entry is written is the size rendered when it is read back (a float did
/// not: SQLite gives back `-0.0` as `0.0`, and Postgres renders it `-0.0`). Negative zero is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Priority(u32);

impl Priority {
    pub const MAX_DECIMALS: usize = 6;
    /// 1.0 in millionths.
    const ONE: u32 = 1_000_000;

    pub fn new(value: f64) -> Result<Self, String> {
        millionths(value, Self::ONE).map(Self)
    }

    /// A stored value; `None` outside 0 to 1,000,000.
    pub fn from_millionths(millionths: i64) -> Option<Self> {
        u32::try_from(millionths).ok().filter(|m| *m <= Self::ONE).map(Self)
    }

    pub fn millionths(self) -> i64 {
        i64::from(self.0)
    }

    /// The value as a number (for JSON answers): the nearest f64 to the decimal [`Priority::render`] gives.
    pub fn value(self) -> f64 {
        self.render().parse().unwrap_or_default()
    }

    /// The shortest decimal with the same value, always with a decimal point: `0.8`, `1.0`, `0.0`, `0.000001`.
    pub fn render(self) -> String {
        render_millionths(self.0)
    }
}

/// A decimal from 0 to `max` millionths with at most six decimal places, as an integer count of millionths: the
/// decimal it was given, exactly (`0.8` is 800,000), so that it renders as given and round-trips through storage.
pub(super) fn millionths(value: f64, max: u32) -> Result<u32, String> {
    // Most values are in range with at most six decimal places: then the nearest whole number of millionths, k, is
    // the one, exactly when k / 10^6 reads back as the value (IEEE division is correctly rounded, so `k / 1e6` is
    // the f64 that the decimal k·10⁻⁶ reads as; two such decimals 10⁻⁶ apart never read as one f64 here). Anything
    // else takes the decimal way below, which also words the error.
    if (0.0..=f64::from(max) / 1e6).contains(&value) {
        let k = (value * 1e6).round();
        if k / 1e6 == value && k <= f64::from(max) {
            return Ok(k as u32);
        }
    }
    decimal_millionths(value, max)
}

/// [`millionths`] by the shortest decimal that reads back as `value` (Rust's `Display` for f64).
fn decimal_millionths(value: f64, max: u32) -> Result<u32, String> {
    let range = || format!("outside 0.0 to {}", render_millionths(max));
    if !(0.0..=f64::from(max) / 1e6).contains(&value) {
        return Err(format!("{value} is {}", range()));
    }
    // Rust's `Display` for f64 prints the shortest decimal that reads back as the same number, never with an
    // exponent; `-0.0` (inside the range above) prints as `-0` and is zero.
    let text = format!("{}", value.abs());
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    if fraction.len() > Priority::MAX_DECIMALS {
        return Err(format!("{text} has more than {} decimal places", Priority::MAX_DECIMALS));
    }
    let digits = format!("{whole}{fraction:0<width$}", width = Priority::MAX_DECIMALS);
    digits.parse::<u32>().ok().filter(|m| *m <= max).ok_or_else(|| format!("{text} is {}", range()))
}

/// Millionths as the shortest decimal with the same value, always with a decimal point.
pub(super) fn render_millionths(m: u32) -> String {
    let (whole, fraction) = (m / 1_000_000, m % 1_000_000);
    let fraction = format!("{fraction:06}");
    let fraction = fraction.trim_end_matches('0');
    format!("{whole}.{}", if fraction.is_empty() { "0" } else { fraction })
}

/// A validated URL record. An omitted (or `null`) optional field is `None`: an upsert replaces the whole entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub loc: Loc,
    pub lastmod: Option<LastMod>,
    pub changefreq: Option<ChangeFreq>,
    pub priority: Option<Priority>,
    /// Images, videos, news and alternates; `None` when the entry has none (never an empty `Extensions`).
    pub ext: Option<Box<super::Extensions>>,
    /// The section whose pages list it; `None`: the default section.
    pub section: Option<Section>,
}

/// One problem with one field of one entry; `field` is empty when the entry as a whole is wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        Self { field: field.to_owned(), message: message.into() }
    }
}

/// The scalar fields, in the order their errors are reported (the extension fields, [`super::ext_input::EXT_FIELDS`], follow).
const FIELDS: [&str; 5] = ["loc", "lastmod", "changefreq", "priority", "section"];

/// Unknown fields of one entry named in its errors; any beyond are counted in one more error.
const MAX_UNKNOWN_NAMED: usize = 8;

/// A JSON value as an entry field (or a bulk-delete element) receives it: a scalar is kept, an array or an object
/// is only named. Their contents are skipped as they are read and never built, so a deep or wide value costs no
/// memory and reaches no recursion limit.
#[derive(Clone, Debug, PartialEq)]
pub enum JsonScalar {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array,
    Object,
}

impl JsonScalar {
    /// What it is, for error messages: "a string", "null", ...
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Number(_) => "a number",
            Self::String(_) => "a string",
            Self::Array => "an array",
            Self::Object => "an object",
        }
    }

    fn string(&self) -> Result<&str, String> {
        match self {
            Self::String(s) => Ok(s),
            other => Err(format!("must be a string, not {}", other.kind())),
        }
    }
}

impl<'de> Deserialize<'de> for JsonScalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = JsonScalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<JsonScalar, E> {
        Ok(JsonScalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<JsonScalar, E> {
        Ok(JsonScalar::Number(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<JsonScalar, E> {
        Ok(JsonScalar::Number(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<JsonScalar, E> {
        Ok(JsonScalar::Number(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<JsonScalar, E> {
        Ok(JsonScalar::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<JsonScalar, E> {
        Ok(JsonScalar::String(v))
    }
    fn visit_unit<E>(self) -> Result<JsonScalar, E> {
        Ok(JsonScalar::Null)
    }
    fn visit_none<E>(self) -> Result<JsonScalar, E> {
        Ok(JsonScalar::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<JsonScalar, D::Error> {
        JsonScalar::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonScalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(JsonScalar::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonScalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(JsonScalar::Object)
    }
}

/// One entry as read from JSON, before validation: what [`Entry::from_input`] needs and nothing more. A field
/// given twice is remembered as such (never "the last one wins": a proxy or validator in front may have checked
/// the first); the values of unknown fields are skipped unread. The extension fields (`images`, `videos`, `news`,
/// `alternates`) are read as small trees within one budget per entry ([`ExtInput`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EntryInput {
    /// `Some(kind)` when the entry is not a JSON object.
    not_object: Option<&'static str>,
    /// By [`FIELDS`] position; `Some(JsonScalar::Null)` for an explicit `null`.
    fields: [Option<JsonScalar>; 5],
    repeated: [bool; 5],
    ext: ExtInput,
    unknown: Vec<String>,
    more_unknown: u64,
}

impl<'de> Deserialize<'de> for EntryInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl EntryVisitor {
    fn not_object(kind: &'static str) -> EntryInput {
        EntryInput { not_object: Some(kind), ..EntryInput::default() }
    }
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = EntryInput;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EntryInput, A::Error> {
        let mut input = EntryInput::default();
        let mut budget = Budget::new(MAX_TREE_NODES);
        while let Some(key) = map.next_key::<String>()? {
            if let Some(i) = ExtInput::position(&key) {
                input.ext.read_value(i, &mut map, &mut budget)?;
                continue;
            }
            match FIELDS.iter().position(|f| *f == key) {
                Some(i) if input.fields[i].is_some() => {
                    input.repeated[i] = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Some(i) => input.fields[i] = Some(map.next_value::<JsonScalar>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                    if input.unknown.len() < MAX_UNKNOWN_NAMED {
                        input.unknown.push(key);
                    } else {
                        input.more_unknown += 1;
                    }
                }
            }
        }
        Ok(input)
    }
    fn visit_bool<E>(self, _: bool) -> Result<EntryInput, E> {
        Ok(Self::not_object("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<EntryInput, E> {
        Ok(Self::not_object("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<EntryInput, E> {
        Ok(Self::not_object("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<EntryInput, E> {
        Ok(Self::not_object("a number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<EntryInput, E> {
        Ok(Self::not_object("a string"))
    }
    fn visit_unit<E>(self) -> Result<EntryInput, E> {
        Ok(Self::not_object("null"))
    }
    fn visit_none<E>(self) -> Result<EntryInput, E> {
        Ok(Self::not_object("null"))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<EntryInput, D::Error> {
        EntryInput::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EntryInput, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::not_object("an array"))
    }
}

impl Entry {
    /// Validates one JSON entry, reporting every invalid, repeated or unknown field.
    pub fn from_json(value: Value, public: &(impl LocScope + ?Sized)) -> Result<Self, Vec<FieldError>> {
        match EntryInput::deserialize(value) {
            Ok(input) => Self::from_input(input, public),
            Err(e) => Err(vec![FieldError::new("", e.to_string())]),
        }
    }

    /// Validates one entry as read by [`EntryInput`]'s `Deserialize`, reporting every invalid, repeated or unknown
    /// field (at most [`MAX_UNKNOWN_NAMED`] unknown ones by name).
    pub fn from_input(input: EntryInput, public: &(impl LocScope + ?Sized)) -> Result<Self, Vec<FieldError>> {
        if let Some(kind) = input.not_object {
            return Err(vec![FieldError::new("", format!("an entry must be a JSON object, not {kind}"))]);
        }
        let mut errors = Vec::new();
        let mut fields = input.fields;
        for (i, field) in FIELDS.iter().enumerate() {
            if input.repeated[i] {
                // Neither value is looked at: which one was meant is unknown.
                errors.push(FieldError::new(field, "is given more than once; give each field once"));
                fields[i] = Some(JsonScalar::Null);
            }
        }
        let [loc, lastmod, changefreq, priority, section] = fields;
        fn check<T>(errors: &mut Vec<FieldError>, field: &str, result: Result<T, String>) -> Option<T> {
            result.map_err(|message| errors.push(FieldError::new(field, message))).ok()
        }
        // `null` means omitted for the optional fields only.
        let loc = match loc {
            None => check(&mut errors, "loc", Err("is required".to_owned())),
            Some(_) if input.repeated[0] => None,
            Some(v) => check(&mut errors, "loc", v.string().and_then(|s| Loc::parse(s, public))),
        };
        let lastmod = lastmod
            .filter(|v| *v != JsonScalar::Null)
            .and_then(|v| check(&mut errors, "lastmod", v.string().and_then(LastMod::parse)));
        let changefreq = changefreq
            .filter(|v| *v != JsonScalar::Null)
            .and_then(|v| check(&mut errors, "changefreq", v.string().and_then(ChangeFreq::parse)));
        let priority = priority.filter(|v| *v != JsonScalar::Null).and_then(|v| {
            let value = match v {
                JsonScalar::Number(n) => Priority::new(n),
                other => Err(format!("must be a number, not {}", other.kind())),
            };
            check(&mut errors, "priority", value)
        });
        let section = section
            .filter(|v| *v != JsonScalar::Null)
            .and_then(|v| check(&mut errors, "section", v.string().and_then(Section::parse)));
        let ext = input.ext.validate(loc.as_ref()).unwrap_or_else(|ext_errors| {
            errors.extend(ext_errors);
            None
        });
        for key in &input.unknown {
            errors.push(FieldError::new(
                key,
                "unknown field (allowed: loc, lastmod, changefreq, priority, section, images, videos, news, alternates)",
            ));
        }
        if input.more_unknown > 0 {
            errors.push(FieldError::new("", format!("{} more unknown fields", input.more_unknown)));
        }
        match loc {
            Some(loc) if errors.is_empty() => Ok(Self { loc, lastmod, changefreq, priority, ext, section }),
            _ => Err(errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::domain::PublicUrl;

    fn public() -> PublicUrl {
        PublicUrl::parse("https://www.example.com").unwrap()
    }

    #[test]
    fn changefreq_any_case_in_lower_case_out() {
        assert_eq!(ChangeFreq::parse("WeEkLy").unwrap().as_str(), "weekly");
        assert!(ChangeFreq::parse("fortnightly").is_err());
    }

    #[test]
    fn negative_zero_is_zero_and_every_priority_round_trips_through_its_millionths() {
        for raw in [-0.0, -0e0, -0.000, -0E-5] {
            let p = Priority::new(raw).unwrap();
            assert_eq!((p.render().as_str(), p.millionths()), ("0.0", 0));
        }
        for m in [0, 1, 10, 999_999, 500_000, 1_000_000, 123_456] {
            let p = Priority::from_millionths(m).unwrap();
            assert_eq!(Priority::new(p.value()), Ok(p), "{m}");
            assert_eq!(p.render().parse::<f64>().unwrap(), p.value());
        }
        assert_eq!(Priority::from_millionths(-1), None);
        assert_eq!(Priority::from_millionths(1_000_001), None);
    }

    #[test]
    fn priority_renders_as_a_short_decimal() {
        assert_eq!(Priority::new(0.8).unwrap().render(), "0.8");
        assert_eq!(
            Priority::new(f64::from(0.8f32)).map(Priority::render),
            Err("0.800000011920929 has more than 6 decimal places".into())
        );
        assert_eq!(Priority::new(1.0).unwrap().render(), "1.0");
        assert_eq!(Priority::new(0.0).unwrap().render(), "0.0");
        assert_eq!(Priority::new(0.000001).unwrap().render(), "0.000001");
        assert!(Priority::new(1.01).is_err());
        assert!(Priority::new(-0.1).is_err());
        assert!(Priority::new(0.1 + 0.2).is_err());
    }

    #[test]
    fn entry_with_all_fields_is_normalized() {
        let e = Entry::from_json(
            json!({"loc": "https://WWW.example.com/a", "lastmod": "2024-05-01T08:20+02:00",
                   "changefreq": "DAILY", "priority": 0.5}),
            &public(),
        )
        .unwrap();
        assert_eq!(e.loc.as_str(), "https://www.example.com/a");
        assert_eq!(e.lastmod.unwrap().as_str(), "2024-05-01T06:20:00Z");
        assert_eq!(e.changefreq, Some(ChangeFreq::Daily));
        assert_eq!(e.priority.unwrap().value(), 0.5);
    }

    #[test]
    fn null_counts_as_omitted() {
        let e = Entry::from_json(
            json!({"loc": "https://www.example.com/a", "lastmod": null, "changefreq": null, "priority": null}),
            &public(),
        )
        .unwrap();
        assert_eq!((e.lastmod, e.changefreq, e.priority), (None, None, None));
    }

    #[test]
    fn every_invalid_field_is_reported() {
        let errs =
            Entry::from_json(json!({"lastmod": "2024", "changefreq": 3, "priority": "0.5", "extra": true}), &public())
                .unwrap_err();
        let mut fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["changefreq", "extra", "lastmod", "loc", "priority"]);
        let errs =
            Entry::from_json(json!({"loc": "https://www.example.com/a", "colour": null}), &public()).unwrap_err();
        assert_eq!(errs[0].field, "colour");
        let errs = Entry::from_json(json!({"loc": null}), &public()).unwrap_err();
        assert_eq!(errs, [FieldError::new("loc", "must be a string, not null")]);
    }

    #[test]
    fn a_non_object_entry_is_refused_as_a_whole() {
        let errs = Entry::from_json(json!("https://www.example.com/a"), &public()).unwrap_err();
        assert_eq!(errs[0].field, "");
        assert!(errs[0].message.contains("JSON object"));
    }

    fn input(json: &str) -> EntryInput {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_repeated_field_is_refused_and_neither_value_is_used() {
        let twice = input(r#"{"loc": "https://evil.example/", "loc": "https://www.example.com/d"}"#);
        let errs = Entry::from_input(twice, &public()).unwrap_err();
        assert_eq!(errs, [FieldError::new("loc", "is given more than once; give each field once")]);
        let twice = input(r#"{"loc": "https://www.example.com/a", "priority": null, "priority": 0.5}"#);
        let errs = Entry::from_input(twice, &public()).unwrap_err();
        assert_eq!(errs, [FieldError::new("priority", "is given more than once; give each field once")]);
    }

    #[test]
    fn deep_or_wide_values_are_skipped_not_built() {
        let deep = format!(r#"{{"loc": {}0{}, "x": {{"y": [{{}}]}}}}"#, "[".repeat(10_000), "]".repeat(10_000));
        let errs = Entry::from_input(input(&deep), &public()).unwrap_err();
        assert_eq!(errs[0], FieldError::new("loc", "must be a string, not an array"));
        assert_eq!(errs[1].field, "x");
        let entry = format!("{}0{}", "[".repeat(10_000), "]".repeat(10_000));
        let errs = Entry::from_input(input(&entry), &public()).unwrap_err();
        assert_eq!(errs, [FieldError::new("", "an entry must be a JSON object, not an array")]);
        let wide: String = (0..100).map(|i| format!(r#","k{i}":{i}"#)).collect();
        let errs =
            Entry::from_input(input(&format!(r#"{{"loc":"https://www.example.com/"{wide}}}"#)), &public()).unwrap_err();
        assert_eq!(errs.len(), MAX_UNKNOWN_NAMED + 1);
        assert_eq!(errs.last().unwrap(), &FieldError::new("", "92 more unknown fields"));
    }

    #[test]
    fn from_json_and_from_input_agree() {
        for text in [
            r#"{"loc": "https://www.example.com/a", "priority": 1, "changefreq": "daily"}"#,
            r#"{"loc": "https://www.example.com/a", "priority": -1}"#,
            r#"{"loc": true, "lastmod": 3, "changefreq": [], "priority": {}}"#,
            r#"["https://www.example.com/a"]"#,
            "null",
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(Entry::from_json(value, &public()), Entry::from_input(input(text), &public()), "{text}");
        }
    }

    proptest! {
        /// The quick way gives what the decimal way gives: for every whole number of millionths, the f64s next to
        /// it, and any f64 at all.
        #[test]
        fn millionths_the_quick_way_is_the_decimal_way(k in 0u32..=5_000_001, ulps in -2i64..=2, any in any::<f64>(),
                                                        max in prop::sample::select(vec![1_000_000u32, 5_000_000])) {
            let near = f64::from_bits((f64::from(k) / 1e6).to_bits().wrapping_add_signed(ulps));
            for value in [near, any, -near, f64::from(k) / 1e6 * 10.0] {
                prop_assert_eq!(millionths(value, max), decimal_millionths(value, max), "{}", value);
            }
        }
    }
}
