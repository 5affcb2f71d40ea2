//! The bounded JSON tree: one JSON value read as a [`JsonTree`] within a [`Budget`] of values, the rest skipped
//! unread once the budget is spent, so that a hostile value costs about its size whatever it holds. A tree is
//! written back as JSON as it was read (its [`Serialize`]): the import builds the write API's entries as trees and
//! sends them as that text.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

/// A JSON value as the extension fields receive it (and as the import builds an entry). An object keeps its pairs in
/// order, repeated keys included, so that a key given twice is seen (and refused) rather than silently overwritten.
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

/// The JSON text of the tree: an object's pairs in order, a repeated key repeated; numbers as serde_json writes
/// them (`600`, `-3`, `600.5`, `1000.0`). `Float` is finite in every tree read or built here (JSON has no NaN).
impl Serialize for JsonTree {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => serializer.serialize_unit(),
            Self::Bool(b) => serializer.serialize_bool(*b),
            Self::UInt(n) => serializer.serialize_u64(*n),
            Self::Int(n) => serializer.serialize_i64(*n),
            Self::Float(n) => serializer.serialize_f64(*n),
            Self::String(s) => serializer.serialize_str(s),
            Self::Array(items) => serializer.collect_seq(items),
            Self::Object(pairs) => serializer.collect_map(pairs.iter().map(|(key, value)| (key, value))),
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

/// Reads the value of one field of an object (an entry's extension field) as a tree within `budget`; `None` when it
/// did not fit, so that the field is refused as too large. A budget spent by the fields before refuses this one too,
/// unless it is `null` (omitted): that is read as [`JsonTree::Null`], unbuilt.
pub(super) fn read_field<'de, A: MapAccess<'de>>(
    map: &mut A,
    budget: &mut Budget,
) -> Result<Option<JsonTree>, A::Error> {
    if budget.left == 0 {
        let null = map.next_value_seed(NullOrSkip)?;
        budget.exceeded = true;
        return Ok(null.then_some(JsonTree::Null));
    }
    let tree = map.next_value_seed(TreeSeed { budget: &mut *budget })?;
    Ok((!budget.exceeded).then_some(tree))
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

#[cfg(test)]
mod tests {
    use super::super::testing::LOC;
    use super::*;
    use crate::domain::EntryInput;

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
    fn a_tree_is_written_as_the_json_it_was_read_from() {
        let text = r#"{"a":[600,600.5,1000.0,-3,null,true,"s\"\\\u0001é"],"a":{},"b":[{"c":false}]}"#;
        let mut budget = Budget::new(100);
        let tree = read_tree(&mut serde_json::Deserializer::from_str(text), &mut budget).unwrap();
        assert_eq!(serde_json::to_string(&tree).unwrap(), text, "pairs in order, the repeated key kept");
        // Numbers in serde_json's form, as a serde_json::Value of them is written.
        for (number, written) in
            [("1e3", "1000.0"), ("0.80", "0.8"), ("-0.0", "-0.0"), ("18446744073709551616", "1.8446744073709552e+19")]
        {
            let tree = read_tree(&mut serde_json::Deserializer::from_str(number), &mut Budget::new(1)).unwrap();
            let value: serde_json::Value = serde_json::from_str(number).unwrap();
            assert_eq!(
                (serde_json::to_string(&tree).unwrap(), value.to_string()),
                (written.to_owned(), written.to_owned())
            );
        }
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
