//! One URL record as the write API receives it, validated field by field.

use serde::Serialize;
use serde_json::Value;

use super::{LastMod, Loc, PublicUrl};

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
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Priority(f64);

impl Priority {
    pub const MAX_DECIMALS: usize = 6;

    pub fn new(value: f64) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&value) {
            return Err(format!("{value} is outside 0.0 to 1.0"));
        }
        let p = Self(value);
        let text = p.render();
        let decimals = text.split_once('.').map_or(0, |(_, f)| f.len());
        if decimals > Self::MAX_DECIMALS {
            return Err(format!("{text} has more than {} decimal places", Self::MAX_DECIMALS));
        }
        Ok(p)
    }

    pub fn value(self) -> f64 {
        self.0
    }

    /// The shortest decimal that reads back as the same number, always with a decimal point: `0.8`, `1.0`.
    pub fn render(self) -> String {
        render_priority(self.0)
    }
}

/// See [`Priority::render`]; also used on values read back from the store.
pub fn render_priority(value: f64) -> String {
    // Rust's `Display` for f64 prints the shortest round-trip decimal and never uses an exponent.
    let mut s = format!("{value}");
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

/// A validated URL record. An omitted (or `null`) optional field is `None`: an upsert replaces the whole entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub loc: Loc,
    pub lastmod: Option<LastMod>,
    pub changefreq: Option<ChangeFreq>,
    pub priority: Option<Priority>,
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

impl Entry {
    /// Validates one JSON entry, reporting every invalid or unknown field.
    pub fn from_json(value: Value, public: &PublicUrl) -> Result<Self, Vec<FieldError>> {
        let Value::Object(map) = value else {
            return Err(vec![FieldError::new("", format!("an entry must be a JSON object, not {}", kind(&value)))]);
        };
        let mut errors = Vec::new();
        let (mut loc, mut lastmod, mut changefreq, mut priority) = (None, None, None, None);
        let mut saw_loc = false;
        for (key, value) in map {
            // `null` means omitted for the optional fields only; an unknown field is refused whatever its value.
            if value.is_null() && matches!(key.as_str(), "lastmod" | "changefreq" | "priority") {
                continue;
            }
            let result = match key.as_str() {
                "loc" => {
                    saw_loc = true;
                    string(&value).and_then(|s| Loc::parse(s, public)).map(|v| loc = Some(v))
                }
                "lastmod" => string(&value).and_then(LastMod::parse).map(|v| lastmod = Some(v)),
                "changefreq" => string(&value).and_then(ChangeFreq::parse).map(|v| changefreq = Some(v)),
                "priority" => value
                    .as_f64()
                    .ok_or_else(|| format!("must be a number, not {}", kind(&value)))
                    .and_then(Priority::new)
                    .map(|v| priority = Some(v)),
                _ => Err("unknown field (allowed: loc, lastmod, changefreq, priority)".to_owned()),
            };
            if let Err(message) = result {
                errors.push(FieldError::new(&key, message));
            }
        }
        if !saw_loc {
            errors.push(FieldError::new("loc", "is required"));
        }
        match loc {
            Some(loc) if errors.is_empty() => Ok(Self { loc, lastmod, changefreq, priority }),
            _ => Err(errors),
        }
    }
}

fn string(value: &Value) -> Result<&str, String> {
    value.as_str().ok_or_else(|| format!("must be a string, not {}", kind(value)))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn public() -> PublicUrl {
        PublicUrl::parse("https://www.example.com").unwrap()
    }

    #[test]
    fn changefreq_any_case_in_lower_case_out() {
        assert_eq!(ChangeFreq::parse("WeEkLy").unwrap().as_str(), "weekly");
        assert!(ChangeFreq::parse("fortnightly").is_err());
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
}
