//! The typed `filters` argument: Weaviate's REST `where` shape (`operator`, `operands`, `path`,
//! one `value*`), checked as a whole before anything is sent, then written either as GraphQL
//! input or as REST JSON.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::graphql::{Input, Name};

/// The deepest nesting of operands accepted.
const MAX_DEPTH: usize = 10;
/// The most conditions (leaves and groups) in one filter.
const MAX_NODES: usize = 200;

/// A filter operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) enum Operator {
    And,
    Or,
    Not,
    Equal,
    NotEqual,
    Like,
    GreaterThan,
    GreaterThanEqual,
    LessThan,
    LessThanEqual,
    ContainsAny,
    ContainsAll,
    IsNull,
}

impl Operator {
    fn as_str(self) -> &'static str {
        match self {
            Operator::And => "And",
            Operator::Or => "Or",
            Operator::Not => "Not",
            Operator::Equal => "Equal",
            Operator::NotEqual => "NotEqual",
            Operator::Like => "Like",
            Operator::GreaterThan => "GreaterThan",
            Operator::GreaterThanEqual => "GreaterThanEqual",
            Operator::LessThan => "LessThan",
            Operator::LessThanEqual => "LessThanEqual",
            Operator::ContainsAny => "ContainsAny",
            Operator::ContainsAll => "ContainsAll",
            Operator::IsNull => "IsNull",
        }
    }
}

/// A condition on objects, in Weaviate's `where` shape. Groups (`And`, `Or`, `Not`) have
/// `operands`; conditions have a `path` (a property name, or a reference path) and exactly one
/// value: `valueText`, `valueInt`, `valueNumber`, `valueBoolean`, `valueDate` (RFC 3339), or for
/// `ContainsAny`/`ContainsAll` one of the `...Array` values. `IsNull` takes `valueBoolean`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Filter {
    pub(crate) operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) operands: Vec<Filter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_int: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_number: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_boolean: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_text_array: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_int_array: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_number_array: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_boolean_array: Option<Vec<bool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value_date_array: Option<Vec<String>>,
}

/// The one value of a condition.
enum Single<'a> {
    Text(&'a str),
    Int(i64),
    Number(f64),
    Boolean(bool),
    Date(&'a str),
    Many(&'static str, Input),
}

impl Filter {
    /// Check the whole filter: operator arity, names in paths, exactly one fitting value, finite
    /// numbers, dates, size.
    ///
    /// # Errors
    ///
    /// A message naming the position (`filters.operands[1].path`) of the first problem.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut nodes = 0;
        self.check("filters", 0, &mut nodes)
    }

    fn check(&self, at: &str, depth: usize, nodes: &mut usize) -> Result<(), String> {
        *nodes += 1;
        if depth > MAX_DEPTH {
            return Err(format!("{at}: filters nest at most {MAX_DEPTH} levels deep"));
        }
        if *nodes > MAX_NODES {
            return Err(format!("filters: at most {MAX_NODES} conditions in one filter"));
        }
        match self.operator {
            Operator::And | Operator::Or | Operator::Not => {
                if self.path.is_some() || self.value_count() > 0 {
                    return Err(format!(
                        "{at}: `{}` combines `operands`; it takes no path or value",
                        self.operator.as_str()
                    ));
                }
                let arity_ok = match self.operator {
                    Operator::Not => self.operands.len() == 1,
                    _ => !self.operands.is_empty(),
                };
                if !arity_ok {
                    return Err(format!(
                        "{at}.operands: `{}` needs {}",
                        self.operator.as_str(),
                        if self.operator == Operator::Not {
                            "exactly one operand"
                        } else {
                            "at least one operand"
                        }
                    ));
                }
                for (index, operand) in self.operands.iter().enumerate() {
                    operand.check(&format!("{at}.operands[{index}]"), depth + 1, nodes)?;
                }
                Ok(())
            }
            operator => {
                if !self.operands.is_empty() {
                    return Err(format!(
                        "{at}: `{}` compares a property; `operands` belong to And, Or and Not",
                        operator.as_str()
                    ));
                }
                let path = self.path.as_deref().unwrap_or_default();
                if path.is_empty() {
                    return Err(format!(
                        "{at}.path: `{}` needs a property path",
                        operator.as_str()
                    ));
                }
                for (index, segment) in path.iter().enumerate() {
                    Name::parse(segment, &format!("{at}.path[{index}]"))?;
                }
                if self.value_count() != 1 {
                    return Err(format!(
                        "{at}: `{}` needs exactly one value field (valueText, valueInt, valueNumber, valueBoolean, valueDate or an ...Array)",
                        operator.as_str()
                    ));
                }
                let single = self.single(at)?;
                let fits = match (operator, &single) {
                    (Operator::IsNull, Single::Boolean(_)) => true,
                    (Operator::IsNull, _) => false,
                    (Operator::Like, Single::Text(_)) => true,
                    (Operator::Like, _) => false,
                    (Operator::ContainsAny | Operator::ContainsAll, _) => true,
                    (_, Single::Many(..)) => false,
                    _ => true,
                };
                if fits {
                    Ok(())
                } else {
                    Err(format!("{at}: this value does not fit `{}`", operator.as_str()))
                }
            }
        }
    }

    fn value_count(&self) -> usize {
        [
            self.value_text.is_some(),
            self.value_int.is_some(),
            self.value_number.is_some(),
            self.value_boolean.is_some(),
            self.value_date.is_some(),
            self.value_text_array.is_some(),
            self.value_int_array.is_some(),
            self.value_number_array.is_some(),
            self.value_boolean_array.is_some(),
            self.value_date_array.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count()
    }

    fn single(&self, at: &str) -> Result<Single<'_>, String> {
        let finite = |number: f64| {
            if number.is_finite() {
                Ok(number)
            } else {
                Err(format!("{at}: numbers must be finite"))
            }
        };
        let date = |text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .map(|_| ())
                .map_err(|_| format!("{at}.valueDate: `{text}` is not an RFC 3339 date-time"))
        };
        if let Some(text) = &self.value_text {
            return Ok(Single::Text(text));
        }
        if let Some(number) = self.value_int {
            return Ok(Single::Int(number));
        }
        if let Some(number) = self.value_number {
            return finite(number).map(Single::Number);
        }
        if let Some(flag) = self.value_boolean {
            return Ok(Single::Boolean(flag));
        }
        if let Some(text) = &self.value_date {
            date(text)?;
            return Ok(Single::Date(text));
        }
        if let Some(items) = &self.value_text_array {
            return Ok(Single::Many("valueText", Input::strings(items)));
        }
        if let Some(items) = &self.value_int_array {
            return Ok(Single::Many(
                "valueInt",
                Input::List(items.iter().copied().map(Input::Int).collect()),
            ));
        }
        if let Some(items) = &self.value_number_array {
            let mut list = Vec::with_capacity(items.len());
            for item in items {
                list.push(Input::Float(finite(*item)?));
            }
            return Ok(Single::Many("valueNumber", Input::List(list)));
        }
        if let Some(items) = &self.value_boolean_array {
            return Ok(Single::Many(
                "valueBoolean",
                Input::List(items.iter().copied().map(Input::Bool).collect()),
            ));
        }
        if let Some(items) = &self.value_date_array {
            for item in items {
                date(item)?;
            }
            return Ok(Single::Many("valueDate", Input::strings(items)));
        }
        Err(format!("{at}: a value is missing"))
    }

    /// The filter as a GraphQL `where` argument (call [`Filter::validate`] first).
    pub(crate) fn to_input(&self) -> Input {
        let mut fields = vec![("operator", Input::Enum(self.operator.as_str()))];
        if !self.operands.is_empty() {
            fields.push((
                "operands",
                Input::List(self.operands.iter().map(Filter::to_input).collect()),
            ));
        }
        if let Some(path) = &self.path {
            fields.push(("path", Input::strings(path)));
        }
        if let Ok(single) = self.single("filters") {
            fields.push(match single {
                Single::Text(text) => ("valueText", Input::String(text.to_owned())),
                Single::Int(number) => ("valueInt", Input::Int(number)),
                Single::Number(number) => ("valueNumber", Input::Float(number)),
                Single::Boolean(flag) => ("valueBoolean", Input::Bool(flag)),
                Single::Date(text) => ("valueDate", Input::String(text.to_owned())),
                Single::Many(key, list) => (key, list),
            });
        }
        Input::Object(fields)
    }

    /// The filter as REST JSON (the batch delete's `match.where`).
    pub(crate) fn to_rest(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<Filter, String> {
        let filter: Filter = serde_json::from_value(value).map_err(|error| error.to_string())?;
        filter.validate()?;
        Ok(filter)
    }

    #[test]
    fn good_filters_pass_and_keep_their_rest_shape() {
        let cases = [
            json!({"path": ["year"], "operator": "GreaterThan", "valueInt": 2000}),
            json!({"operator": "And", "operands": [
                {"path": ["year"], "operator": "GreaterThan", "valueInt": 2000},
                {"path": ["status"], "operator": "Equal", "valueText": "published"}]}),
            json!({"operator": "Not", "operands": [{"path": ["x"], "operator": "IsNull", "valueBoolean": true}]}),
            json!({"path": ["tags"], "operator": "ContainsAny", "valueTextArray": ["a", "b"]}),
            json!({"path": ["at"], "operator": "LessThan", "valueDate": "2020-01-01T00:00:00Z"}),
        ];
        for case in cases {
            let filter = parse(case.clone()).unwrap_or_else(|error| panic!("{case}: {error}"));
            assert_eq!(filter.to_rest(), case);
        }
    }

    #[test]
    fn bad_filters_are_refused_with_their_position() {
        let cases = [
            (json!({"operator": "Equal", "valueInt": 1}), "filters.path"),
            (json!({"operator": "And", "operands": []}), "at least one operand"),
            (
                json!({"operator": "Not", "operands": [
                {"path": ["a"], "operator": "Equal", "valueInt": 1},
                {"path": ["a"], "operator": "Equal", "valueInt": 2}]}),
                "exactly one operand",
            ),
            (
                json!({"path": ["a"], "operator": "Equal", "valueInt": 1, "valueText": "x"}),
                "exactly one value",
            ),
            (json!({"path": ["a\") { x"], "operator": "Equal", "valueInt": 1}), "filters.path[0]"),
            (json!({"path": ["a"], "operator": "Like", "valueInt": 1}), "does not fit `Like`"),
            (
                json!({"path": ["a"], "operator": "Equal", "valueTextArray": ["x"]}),
                "does not fit `Equal`",
            ),
            (json!({"path": ["a"], "operator": "Equal", "valueDate": "yesterday"}), "RFC 3339"),
            (
                json!({"operator": "Or", "operands": [{"operator": "Equal", "path": ["a"], "valueInt": 1, "operands": [{"operator": "IsNull", "path": ["a"], "valueBoolean": true}]}]}),
                "filters.operands[0]",
            ),
            (json!({"path": ["a"], "operator": "Equals", "valueInt": 1}), "unknown variant"),
        ];
        for (case, expected) in cases {
            let error = parse(case.clone()).unwrap_err();
            assert!(error.contains(expected), "{case}: {error}");
        }
    }

    #[test]
    fn arrays_become_lists_in_graphql() {
        let filter = parse(
            json!({"path": ["n"], "operator": "ContainsAll", "valueNumberArray": [1.0, 2.5]}),
        )
        .unwrap();
        assert_eq!(
            filter.to_input(),
            Input::Object(vec![
                ("operator", Input::Enum("ContainsAll")),
                ("path", Input::strings(&["n".to_owned()])),
                ("valueNumber", Input::List(vec![Input::Float(1.0), Input::Float(2.5)])),
            ])
        );
    }
}
