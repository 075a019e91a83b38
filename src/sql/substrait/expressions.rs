//! Expressions to SQL: field references, scalar and aggregate functions, casts, `IF`/`CASE`,
//! `IN` lists and sort keys, with the shapes of the functions orca knows.

use serde_json::{Map, Value};

use super::fragments::{
    Kind, P_ADD, P_AND, P_ATOM, P_CMP, P_IN, P_IS, P_MUL, P_NEG, P_NOT, P_OP, P_OR, Sql, binary,
    call, chain, compare, texts,
};
use super::json::{
    array, count, describe, enum_value, get, index, invalid, object, oneof, required, text,
    unsigned,
};
use super::literals::{literal, pg_type};
use super::relations::{Context, Scope};
use super::{PlanError, Result};

impl Context {
    pub(super) fn measure(
        &self,
        measure: &Value,
        path: &str,
        scope: &mut Scope<'_>,
    ) -> Result<(Sql, String)> {
        let measure = object(measure, path)?;
        let function_path = format!("{path}.measure");
        let function = object(required(measure, "measure", path)?, &function_path)?;
        let name = self.function(function, &function_path)?;
        let Some(shape) = aggregate_shape(&name) else {
            if scalar_shape(&name).is_some() {
                return Err(invalid(
                    &function_path,
                    format!("{name} is a scalar function, not an aggregate"),
                ));
            }
            return Err(PlanError::UnknownFunction(name));
        };
        if let Some(phase) = get(function, "phase") {
            let phase_path = format!("{function_path}.phase");
            if matches!(enum_value(phase, &phase_path, &PHASES)?, 1 | 2) {
                return Err(invalid(
                    &phase_path,
                    "partial (intermediate) aggregation is not supported",
                ));
            }
        }
        let distinct = match get(function, "invocation") {
            None => false,
            Some(invocation) => {
                enum_value(invocation, &format!("{function_path}.invocation"), &INVOCATIONS)? == 2
            }
        };
        let args = arguments(function, &function_path)?;
        let (min, max) = match shape {
            Aggregate::Plain(_, min, max) => (min, max),
            Aggregate::Count => (0, 1),
            Aggregate::Sum0 | Aggregate::Deviation(..) => (1, 1),
        };
        let values = self.values(&args, &name, (min, max), &function_path, scope)?;
        let mut order = Vec::new();
        for (i, sort) in array(function, "sorts", &function_path)?.iter().enumerate() {
            let key = self.sort_key(sort, &format!("{function_path}.sorts[{i}]"), scope)?;
            order.extend(key);
        }
        let filter = match get(measure, "filter") {
            Some(filter) => Some(self.expr(filter, &format!("{path}.filter"), scope)?),
            None => None,
        };

        let sql_name = match shape {
            Aggregate::Plain(sql_name, ..) => sql_name,
            Aggregate::Count => "count",
            Aggregate::Sum0 => "sum",
            Aggregate::Deviation(sample, population) => {
                match option(function, "distribution").as_deref() {
                    Some("POPULATION") => population,
                    _ => sample,
                }
            }
        };
        let mut text = if values.is_empty() {
            if distinct {
                return Err(invalid(
                    &format!("{function_path}.invocation"),
                    "a distinct count needs an argument",
                ));
            }
            format!("{sql_name}(*)")
        } else {
            let distinct = if distinct { "DISTINCT " } else { "" };
            let order = if order.is_empty() {
                String::new()
            } else {
                format!(" ORDER BY {}", order.join(", "))
            };
            format!("{sql_name}({distinct}{}{order})", texts(&values))
        };
        if let Some(filter) = filter {
            text = format!("{text} FILTER (WHERE {})", filter.text);
        }
        if shape == Aggregate::Sum0 {
            text = format!("coalesce({text}, 0)");
        }
        Ok((Sql::atom(text), name))
    }

    /// One `ORDER BY` key, or `None` for a constant key (which orders nothing, and which
    /// PostgreSQL would read as a column position).
    pub(super) fn sort_key(
        &self,
        sort: &Value,
        path: &str,
        scope: &mut Scope<'_>,
    ) -> Result<Option<String>> {
        let sort = object(sort, path)?;
        if get(sort, "comparisonFunctionReference").is_some() {
            return Err(invalid(
                &format!("{path}.comparisonFunctionReference"),
                "custom sort comparisons are not supported",
            ));
        }
        let key = self.expr(required(sort, "expr", path)?, &format!("{path}.expr"), scope)?;
        let direction = match get(sort, "direction") {
            None => 0,
            Some(direction) => enum_value(direction, &format!("{path}.direction"), &DIRECTIONS)?,
        };
        let suffix = match direction {
            1 => " ASC NULLS FIRST",
            2 => " ASC NULLS LAST",
            3 => " DESC NULLS FIRST",
            4 => " DESC NULLS LAST",
            // Unspecified, and clustered (any order that keeps equal keys together).
            _ => "",
        };
        if matches!(key.kind, Kind::Constant(_)) {
            return Ok(None);
        }
        Ok(Some(format!("{}{suffix}", key.wrap(P_IS + 1))))
    }

    // -----------------------------------------------------------------------------------------
    // Expressions.

    pub(super) fn expr(&self, e: &Value, path: &str, scope: &mut Scope<'_>) -> Result<Sql> {
        let (kind, body) = oneof(object(e, path)?, path, &[], "an expression")?;
        let path = format!("{path}.{kind}");
        match kind.as_str() {
            "literal" => literal(object(body, &path)?, &path),
            "selection" => selection(object(body, &path)?, &path, scope),
            "scalarFunction" => self.scalar(object(body, &path)?, &path, scope),
            "cast" => {
                let cast = object(body, &path)?;
                let ty = pg_type(required(cast, "type", &path)?, &format!("{path}.type"))?;
                let input =
                    self.expr(required(cast, "input", &path)?, &format!("{path}.input"), scope)?;
                Ok(Sql::atom(format!("CAST({} AS {ty})", input.text)))
            }
            "ifThen" => {
                let body = object(body, &path)?;
                let clauses = array(body, "ifs", &path)?;
                if clauses.is_empty() {
                    return Err(invalid(&format!("{path}.ifs"), "expected at least one clause"));
                }
                let mut text = String::from("CASE");
                for (i, clause) in clauses.iter().enumerate() {
                    let clause_path = format!("{path}.ifs[{i}]");
                    let clause = object(clause, &clause_path)?;
                    let condition = self.expr(
                        required(clause, "if", &clause_path)?,
                        &format!("{clause_path}.if"),
                        scope,
                    )?;
                    let then = self.expr(
                        required(clause, "then", &clause_path)?,
                        &format!("{clause_path}.then"),
                        scope,
                    )?;
                    text.push_str(&format!(" WHEN {} THEN {}", condition.text, then.text));
                }
                if let Some(otherwise) = get(body, "else") {
                    let otherwise = self.expr(otherwise, &format!("{path}.else"), scope)?;
                    text.push_str(&format!(" ELSE {}", otherwise.text));
                }
                text.push_str(" END");
                Ok(Sql::atom(text))
            }
            "switchExpression" => {
                let body = object(body, &path)?;
                let subject =
                    self.expr(required(body, "match", &path)?, &format!("{path}.match"), scope)?;
                let clauses = array(body, "ifs", &path)?;
                if clauses.is_empty() {
                    return Err(invalid(&format!("{path}.ifs"), "expected at least one clause"));
                }
                let mut text = format!("CASE {}", subject.text);
                for (i, clause) in clauses.iter().enumerate() {
                    let clause_path = format!("{path}.ifs[{i}]");
                    let clause = object(clause, &clause_path)?;
                    let if_path = format!("{clause_path}.if");
                    let value = literal(
                        object(required(clause, "if", &clause_path)?, &if_path)?,
                        &if_path,
                    )?;
                    let then = self.expr(
                        required(clause, "then", &clause_path)?,
                        &format!("{clause_path}.then"),
                        scope,
                    )?;
                    text.push_str(&format!(" WHEN {} THEN {}", value.text, then.text));
                }
                if let Some(otherwise) = get(body, "else") {
                    let otherwise = self.expr(otherwise, &format!("{path}.else"), scope)?;
                    text.push_str(&format!(" ELSE {}", otherwise.text));
                }
                text.push_str(" END");
                Ok(Sql::atom(text))
            }
            "singularOrList" => {
                let body = object(body, &path)?;
                let value =
                    self.expr(required(body, "value", &path)?, &format!("{path}.value"), scope)?;
                let options =
                    self.exprs(array(body, "options", &path)?, &format!("{path}.options"), scope)?;
                if options.is_empty() {
                    return Ok(Sql::constant("FALSE".to_owned(), Some("boolean")));
                }
                Ok(Sql::new(format!("{} IN ({})", value.wrap(P_IN + 1), texts(&options)), P_IN))
            }
            "multiOrList" => {
                let body = object(body, &path)?;
                let values =
                    self.exprs(array(body, "value", &path)?, &format!("{path}.value"), scope)?;
                if values.is_empty() {
                    return Err(invalid(&format!("{path}.value"), "expected at least one value"));
                }
                let mut records = Vec::new();
                for (i, record) in array(body, "options", &path)?.iter().enumerate() {
                    let record_path = format!("{path}.options[{i}]");
                    let fields_path = format!("{record_path}.fields");
                    let fields = self.exprs(
                        array(object(record, &record_path)?, "fields", &record_path)?,
                        &fields_path,
                        scope,
                    )?;
                    if fields.len() != values.len() {
                        return Err(invalid(
                            &fields_path,
                            format!("{} fields for {} values", fields.len(), values.len()),
                        ));
                    }
                    records.push(format!("({})", texts(&fields)));
                }
                if records.is_empty() {
                    return Ok(Sql::constant("FALSE".to_owned(), Some("boolean")));
                }
                Ok(Sql::new(format!("({}) IN ({})", texts(&values), records.join(", ")), P_IN))
            }
            _ => Err(invalid(&path, "unsupported expression")),
        }
    }

    fn exprs(&self, items: &[Value], path: &str, scope: &mut Scope<'_>) -> Result<Vec<Sql>> {
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.expr(item, &format!("{path}[{i}]"), scope))
            .collect()
    }

    /// The base name of the function a `functionReference` points to.
    pub(super) fn function(&self, function: &Map<String, Value>, path: &str) -> Result<String> {
        let anchor = unsigned(function, "functionReference", path)?;
        self.functions.get(&anchor).cloned().ok_or_else(|| {
            invalid(
                &format!("{path}.functionReference"),
                format!("no extension function has anchor {anchor}"),
            )
        })
    }

    /// The value arguments, rendered, after checking that there are `min..=max` of them and
    /// nothing else.
    pub(super) fn values(
        &self,
        args: &[(Arg<'_>, String)],
        name: &str,
        (min, max): (usize, usize),
        path: &str,
        scope: &mut Scope<'_>,
    ) -> Result<Vec<Sql>> {
        if args.len() < min || args.len() > max {
            let expected = match (min, max) {
                (min, max) if min == max => count(min, "argument"),
                (min, usize::MAX) => format!("at least {}", count(min, "argument")),
                (min, max) => format!("{min} to {max} arguments"),
            };
            return Err(invalid(
                &format!("{path}.arguments"),
                format!("{name} takes {expected}, found {}", args.len()),
            ));
        }
        args.iter()
            .map(|(arg, arg_path)| match arg {
                Arg::Value(value) => self.expr(value, arg_path, scope),
                Arg::Enum(_) | Arg::Type => {
                    Err(invalid(arg_path, format!("{name} takes only value arguments")))
                }
            })
            .collect()
    }

    pub(super) fn scalar(
        &self,
        function: &Map<String, Value>,
        path: &str,
        scope: &mut Scope<'_>,
    ) -> Result<Sql> {
        let name = self.function(function, path)?;
        let Some(shape) = scalar_shape(&name) else {
            if aggregate_shape(&name).is_some() {
                return Err(invalid(
                    path,
                    format!(
                        "{name} is an aggregate function; it can only be a measure of an aggregate relation"
                    ),
                ));
            }
            return Err(PlanError::UnknownFunction(name));
        };
        let args = arguments(function, path)?;
        let values =
            |min, max, scope: &mut Scope<'_>| self.values(&args, &name, (min, max), path, scope);
        Ok(match shape {
            Scalar::Binary(op, prec) => {
                let v = values(2, 2, scope)?;
                binary(op, prec, &v[0], &v[1])
            }
            Scalar::Compare(op, prec) => {
                let v = values(2, 2, scope)?;
                compare(op, prec, &v[0], &v[1])
            }
            Scalar::Chain(op, prec) => chain(op, prec, &values(1, usize::MAX, scope)?),
            Scalar::Not => {
                let v = values(1, 1, scope)?;
                Sql::new(format!("NOT {}", v[0].wrap(P_NOT)), P_NOT)
            }
            Scalar::Negate => {
                let v = values(1, 1, scope)?;
                let operand = if v[0].text.starts_with('-') {
                    format!("({})", v[0].text)
                } else {
                    v[0].wrap(P_NEG)
                };
                Sql::new(format!("-{operand}"), P_NEG)
            }
            Scalar::Postfix(op) => {
                let v = values(1, 1, scope)?;
                // `x = 1 IS NULL` would be right, but `(x = 1) IS NULL` reads better.
                Sql::new(format!("{} {op}", v[0].wrap(P_OP)), P_IS)
            }
            Scalar::Call(sql_name, min, max) => call(sql_name, &values(min, max, scope)?),
            Scalar::Between => {
                let v = values(3, 3, scope)?;
                Sql::new(
                    format!(
                        "{} BETWEEN {} AND {}",
                        v[0].wrap(P_IN + 1),
                        v[1].wrap(P_IN + 1),
                        v[2].wrap(P_IN + 1)
                    ),
                    P_IN,
                )
            }
            Scalar::Like(insensitive) => {
                let v = values(2, 2, scope)?;
                let insensitive = insensitive
                    || option(function, "case_sensitivity")
                        .is_some_and(|o| o.starts_with("CASE_INSENSITIVE"));
                let op = if insensitive { "ILIKE" } else { "LIKE" };
                Sql::new(format!("{} {op} {}", v[0].wrap(P_IN + 1), v[1].wrap(P_IN + 1)), P_IN)
            }
            Scalar::Round => {
                let v = values(1, 2, scope)?;
                let x = format!("CAST({} AS numeric)", v[0].text);
                match v.get(1) {
                    Some(digits) => Sql::atom(format!("round({x}, {})", digits.text)),
                    None => Sql::atom(format!("round({x})")),
                }
            }
            Scalar::Contains => {
                let v = values(2, 2, scope)?;
                Sql::new(format!("strpos({}, {}) > 0", v[0].text, v[1].text), P_CMP)
            }
            Scalar::EndsWith => {
                let v = values(2, 2, scope)?;
                Sql::new(
                    format!(
                        "right({}, char_length({})) = {}",
                        v[0].text,
                        v[1].text,
                        v[1].wrap(P_CMP + 1)
                    ),
                    P_CMP,
                )
            }
            Scalar::Extract => self.extract(&args, path, scope)?,
        })
    }

    /// `extract(component, [indexing | timezone,] x)` as `EXTRACT(FIELD FROM x)`.
    pub(super) fn extract(
        &self,
        args: &[(Arg<'_>, String)],
        path: &str,
        scope: &mut Scope<'_>,
    ) -> Result<Sql> {
        let (Some((Arg::Enum(component), component_path)), true) =
            (args.first(), (2..=3).contains(&args.len()))
        else {
            return Err(invalid(
                &format!("{path}.arguments"),
                "extract takes a component (an enum argument), optionally a time zone, and a value",
            ));
        };
        let field = match component.to_ascii_uppercase().as_str() {
            "YEAR" => "YEAR",
            "ISO_YEAR" => "ISOYEAR",
            "QUARTER" => "QUARTER",
            "MONTH" => "MONTH",
            "DAY" => "DAY",
            "DAY_OF_YEAR" => "DOY",
            "HOUR" => "HOUR",
            "MINUTE" => "MINUTE",
            "SECOND" => "SECOND",
            other => {
                return Err(invalid(
                    component_path,
                    format!("extract component {other} is not supported"),
                ));
            }
        };
        let value = |index: usize, scope: &mut Scope<'_>| match args.get(index) {
            Some((Arg::Value(value), arg_path)) => self.expr(value, arg_path, scope),
            Some((_, arg_path)) => Err(invalid(arg_path, "expected a value argument")),
            None => Err(invalid(&format!("{path}.arguments"), "missing argument")),
        };
        let x = value(args.len() - 1, scope)?;
        let source = match args.get(1) {
            Some((Arg::Value(_), _)) if args.len() == 3 => {
                let zone = value(1, scope)?;
                format!("{} AT TIME ZONE {}", x.wrap(P_ATOM), zone.wrap(P_ATOM))
            }
            _ => x.text,
        };
        let text = format!("EXTRACT({field} FROM {source})");
        // Substrait's SECOND is whole seconds; PostgreSQL's has the fraction.
        Ok(Sql::atom(if field == "SECOND" { format!("floor({text})") } else { text }))
    }
}

pub(super) fn selection(
    selection: &Map<String, Value>,
    path: &str,
    scope: &mut Scope<'_>,
) -> Result<Sql> {
    for root in ["outerReference", "expression", "lambdaParameterReference"] {
        if get(selection, root).is_some() {
            return Err(invalid(&format!("{path}.{root}"), "unsupported field reference root"));
        }
    }
    if get(selection, "maskedReference").is_some() {
        return Err(invalid(
            &format!("{path}.maskedReference"),
            "masked references are not supported",
        ));
    }
    let direct_path = format!("{path}.directReference");
    let direct = object(required(selection, "directReference", path)?, &direct_path)?;
    let (kind, segment) = oneof(direct, &direct_path, &[], "a reference segment")?;
    let segment_path = format!("{direct_path}.{kind}");
    if kind != "structField" {
        return Err(invalid(&segment_path, "only struct field references are supported"));
    }
    let segment = object(segment, &segment_path)?;
    if get(segment, "child").is_some() {
        return Err(invalid(
            &format!("{segment_path}.child"),
            "references into nested fields are not supported",
        ));
    }
    let field = index(segment, "field", &segment_path)?;
    scope.column(field, &format!("{segment_path}.field"))
}

// ---------------------------------------------------------------------------------------------
// Functions.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    Binary(&'static str, u8),
    Compare(&'static str, u8),
    Chain(&'static str, u8),
    Not,
    Negate,
    Postfix(&'static str),
    /// A PostgreSQL function of the same arguments, with the arity.
    Call(&'static str, usize, usize),
    Between,
    /// `LIKE`, or `ILIKE` when `true`.
    Like(bool),
    Round,
    Contains,
    EndsWith,
    Extract,
}

fn scalar_shape(name: &str) -> Option<Scalar> {
    use Scalar::{
        Between, Binary, Call, Chain, Compare, Contains, EndsWith, Extract, Like, Negate, Not,
        Postfix, Round,
    };
    const MANY: usize = usize::MAX;
    Some(match name {
        "add" => Binary("+", P_ADD),
        "subtract" => Binary("-", P_ADD),
        "multiply" => Binary("*", P_MUL),
        "divide" => Binary("/", P_MUL),
        "modulus" | "mod" => Binary("%", P_MUL),
        "negate" => Negate,
        "abs" => Call("abs", 1, 1),
        "sign" => Call("sign", 1, 1),
        "sqrt" => Call("sqrt", 1, 1),
        "exp" => Call("exp", 1, 1),
        "ln" => Call("ln", 1, 1),
        "log10" => Call("log10", 1, 1),
        "power" => Call("power", 2, 2),
        "floor" => Call("floor", 1, 1),
        "ceil" => Call("ceil", 1, 1),
        "round" => Round,
        "equal" => Compare("=", P_CMP),
        "not_equal" => Compare("<>", P_CMP),
        "lt" => Compare("<", P_CMP),
        "lte" => Compare("<=", P_CMP),
        "gt" => Compare(">", P_CMP),
        "gte" => Compare(">=", P_CMP),
        "is_distinct_from" => Compare("IS DISTINCT FROM", P_IS),
        "is_not_distinct_from" => Compare("IS NOT DISTINCT FROM", P_IS),
        "between" => Between,
        "is_null" => Postfix("IS NULL"),
        "is_not_null" => Postfix("IS NOT NULL"),
        "is_true" => Postfix("IS TRUE"),
        "is_false" => Postfix("IS FALSE"),
        "is_not_true" => Postfix("IS NOT TRUE"),
        "is_not_false" => Postfix("IS NOT FALSE"),
        "and" => Chain("AND", P_AND),
        "or" => Chain("OR", P_OR),
        "not" => Not,
        "xor" => Compare("<>", P_CMP),
        "coalesce" => Call("coalesce", 1, MANY),
        "nullif" => Call("nullif", 2, 2),
        "least_skip_null" => Call("least", 1, MANY),
        "greatest_skip_null" => Call("greatest", 1, MANY),
        "like" => Like(false),
        "ilike" => Like(true),
        "concat" => Chain("||", P_OP),
        "lower" => Call("lower", 1, 1),
        "upper" => Call("upper", 1, 1),
        "substring" => Call("substring", 2, 3),
        "trim" => Call("btrim", 1, 2),
        "ltrim" => Call("ltrim", 1, 2),
        "rtrim" => Call("rtrim", 1, 2),
        "char_length" => Call("char_length", 1, 1),
        "octet_length" => Call("octet_length", 1, 1),
        "bit_length" => Call("bit_length", 1, 1),
        "replace" => Call("replace", 3, 3),
        "strpos" => Call("strpos", 2, 2),
        "reverse" => Call("reverse", 1, 1),
        "left" => Call("left", 2, 2),
        "right" => Call("right", 2, 2),
        "lpad" => Call("lpad", 2, 3),
        "rpad" => Call("rpad", 2, 3),
        "repeat" => Call("repeat", 2, 2),
        "starts_with" => Call("starts_with", 2, 2),
        "ends_with" => EndsWith,
        "contains" => Contains,
        "extract" => Extract,
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    /// A PostgreSQL aggregate of the same arguments, with the arity.
    Plain(&'static str, usize, usize),
    /// `count(x)`, or `count(*)` without arguments.
    Count,
    /// `sum`, but 0 over no rows.
    Sum0,
    /// The sample and population variants, chosen by the `distribution` option.
    Deviation(&'static str, &'static str),
}

fn aggregate_shape(name: &str) -> Option<Aggregate> {
    Some(match name {
        "sum" => Aggregate::Plain("sum", 1, 1),
        "avg" => Aggregate::Plain("avg", 1, 1),
        "min" => Aggregate::Plain("min", 1, 1),
        "max" => Aggregate::Plain("max", 1, 1),
        "bool_and" => Aggregate::Plain("bool_and", 1, 1),
        "bool_or" => Aggregate::Plain("bool_or", 1, 1),
        "string_agg" => Aggregate::Plain("string_agg", 2, 2),
        "count" | "count_star" => Aggregate::Count,
        "sum0" => Aggregate::Sum0,
        "std_dev" => Aggregate::Deviation("stddev_samp", "stddev_pop"),
        "variance" => Aggregate::Deviation("var_samp", "var_pop"),
        _ => return None,
    })
}

const DIRECTIONS: [&str; 6] = [
    "SORT_DIRECTION_UNSPECIFIED",
    "SORT_DIRECTION_ASC_NULLS_FIRST",
    "SORT_DIRECTION_ASC_NULLS_LAST",
    "SORT_DIRECTION_DESC_NULLS_FIRST",
    "SORT_DIRECTION_DESC_NULLS_LAST",
    "SORT_DIRECTION_CLUSTERED",
];

const PHASES: [&str; 5] = [
    "AGGREGATION_PHASE_UNSPECIFIED",
    "AGGREGATION_PHASE_INITIAL_TO_INTERMEDIATE",
    "AGGREGATION_PHASE_INTERMEDIATE_TO_INTERMEDIATE",
    "AGGREGATION_PHASE_INITIAL_TO_RESULT",
    "AGGREGATION_PHASE_INTERMEDIATE_TO_RESULT",
];

const INVOCATIONS: [&str; 3] = [
    "AGGREGATION_INVOCATION_UNSPECIFIED",
    "AGGREGATION_INVOCATION_ALL",
    "AGGREGATION_INVOCATION_DISTINCT",
];

/// A function argument.
pub(super) enum Arg<'a> {
    Value(&'a Value),
    Enum(String),
    Type,
}

/// A function's arguments (`arguments`, or the deprecated `args`), each with its path.
pub(super) fn arguments<'a>(
    function: &'a Map<String, Value>,
    path: &str,
) -> Result<Vec<(Arg<'a>, String)>> {
    let mut args = Vec::new();
    if let Some(Value::Array(deprecated)) = get(function, "args")
        && get(function, "arguments").is_none()
    {
        for (i, value) in deprecated.iter().enumerate() {
            let arg_path = format!("{path}.args[{i}]");
            args.push((expression_arg(value, &arg_path)?, arg_path));
        }
        return Ok(args);
    }
    for (i, arg) in array(function, "arguments", path)?.iter().enumerate() {
        let arg_path = format!("{path}.arguments[{i}]");
        let (kind, value) = oneof(object(arg, &arg_path)?, &arg_path, &[], "a function argument")?;
        let value_path = format!("{arg_path}.{kind}");
        let arg = match kind.as_str() {
            "value" => expression_arg(value, &value_path)?,
            "enum" => Arg::Enum(enum_text(value, &value_path)?),
            "type" => Arg::Type,
            _ => return Err(invalid(&value_path, "unknown kind of function argument")),
        };
        args.push((arg, value_path));
    }
    Ok(args)
}

/// An expression argument, or the deprecated enum expression in its place.
fn expression_arg<'a>(value: &'a Value, path: &str) -> Result<Arg<'a>> {
    match object(value, path)?.get("enum") {
        Some(e) => Ok(Arg::Enum(enum_text(e, &format!("{path}.enum"))?)),
        None => Ok(Arg::Value(value)),
    }
}

/// An enum argument: a string, or `{ "specified": "..." }`.
fn enum_text(value: &Value, path: &str) -> Result<String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Object(o) => match get(o, "specified") {
            Some(s) => Ok(text(s, &format!("{path}.specified"))?.to_owned()),
            None => Err(invalid(path, "an unspecified enum argument is not supported")),
        },
        other => Err(invalid(path, format!("expected an enum, found {}", describe(other)))),
    }
}

/// The first preference of a function option, upper-cased.
fn option(function: &Map<String, Value>, name: &str) -> Option<String> {
    let options = get(function, "options")?.as_array()?;
    let option = options.iter().find(|o| o.get("name").and_then(Value::as_str) == Some(name))?;
    let first = option.get("preference")?.as_array()?.first()?.as_str()?;
    Some(first.to_ascii_uppercase())
}
