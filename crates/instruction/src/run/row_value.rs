//! [`RowValue`]: one value of a row handed to [`crate::Engine::visit_rows`]'s visitor,
//! borrowed from the snapshot where it can be (a text read from a table is not copied).

use std::borrow::Cow;

/// One column's value in a visited row. Its JSON form ([`RowValue::to_json`]) is the value
/// [`crate::Engine::run`] would put in that row's `values`.
#[derive(Debug, Clone, PartialEq)]
pub enum RowValue<'a> {
    /// No value (a `count ( )` column outside a grouping).
    Null,
    /// A number.
    Int(i64),
    /// A fraction (an average).
    Float(f64),
    /// A text, a state's name or a key of one component; borrowed from the snapshot when it
    /// is a text read from a table.
    Text(Cow<'a, str>),
    /// A node's key path of several components (the keys of the entries from the root down),
    /// borrowed from the snapshot as [`RowValue::Text`] is.
    Key(Vec<Cow<'a, str>>),
    /// A list: a key path of several components, or the nodes of a shortest path.
    Json(serde_json::Value),
}

impl<'a> RowValue<'a> {
    /// The value of a result row's JSON value (borrowing its text).
    pub fn from_json(value: &'a serde_json::Value) -> RowValue<'a> {
        match value {
            serde_json::Value::Null => RowValue::Null,
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => RowValue::Int(i),
                None => n.as_f64().map_or(RowValue::Null, RowValue::Float),
            },
            serde_json::Value::String(s) => RowValue::Text(Cow::Borrowed(s)),
            other => RowValue::Json(other.clone()),
        }
    }

    /// The value as [`crate::Engine::run`]'s rows hold it.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            RowValue::Null => serde_json::Value::Null,
            RowValue::Int(i) => serde_json::Value::from(*i),
            RowValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
            RowValue::Text(t) => serde_json::Value::String(t.to_string()),
            RowValue::Key(k) => k.iter().map(|c| serde_json::Value::String(c.to_string())).collect(),
            RowValue::Json(v) => v.clone(),
        }
    }

    /// Whether the value owns memory (a text not borrowed, a key path, a list): only these
    /// need dropping. Rows of numbers and borrowed texts are emptied without a drop call per
    /// value, which is not inlined and cost a fifth of a streamed query.
    pub(crate) fn owns(&self) -> bool {
        !matches!(self, RowValue::Null | RowValue::Int(_) | RowValue::Float(_) | RowValue::Text(Cow::Borrowed(_)))
    }

    /// The number, if the value is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            RowValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The last key of a node's key path (its own entry's key, or its matrix target's last
    /// one), if the value is a key path; a text of one component is its own last key.
    pub fn last_key(&self) -> Option<&str> {
        match self {
            RowValue::Key(k) => k.last().map(|c| &**c),
            RowValue::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The text, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            RowValue::Text(t) => Some(t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RowValue;
    use serde_json::json;

    #[test]
    fn json_values_come_back_as_they_went_in() {
        for v in [json!(null), json!(7), json!(-3), json!(2.5), json!("a b"), json!(["x", "y"]), json!([["a"], "b"])] {
            assert_eq!(RowValue::from_json(&v).to_json(), v, "{v}");
        }
        assert_eq!(RowValue::from_json(&json!(7)).as_i64(), Some(7));
        assert_eq!(RowValue::from_json(&json!("t")).as_str(), Some("t"));
        assert_eq!(RowValue::from_json(&json!(2.5)).as_i64(), None);
    }
}
