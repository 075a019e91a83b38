//! Substrait plans to PostgreSQL. The `query_plan` tool accepts a plan in Substrait's canonical
//! protobuf-JSON form (as `substrait-java`/Isthmus, DuckDB's `get_substrait_json` or
//! `substrait-python` write it) and orca runs it as one ordinary `SELECT`, so that a plan goes
//! through the same classification, read check and read-only execution as SQL text does.
//!
//! Only the relational core is translated: `read` of a named table (with its own filter and
//! projection mask), `filter`, `project`, `aggregate`, `sort` and `fetch`. A plan with anything
//! else (joins, set operations, writes, DDL, virtual tables, files ...) is refused as a whole, with
//! the names of the relations it cannot translate, rather than translated approximately.
//!
//! Substrait field references are positional, so every relation tracks its output columns. A
//! relation is folded into the `SELECT` of its input while that keeps its meaning (a filter
//! becomes `WHERE` or `HAVING`, a sort `ORDER BY`, a fetch `LIMIT`/`OFFSET`, an aggregate
//! `GROUP BY`); otherwise the input becomes a subquery `FROM (...) AS rN` whose columns are named
//! positionally `c0`, `c1` ... The root's names become the final column aliases. Every identifier
//! from the plan is double-quoted and every string literal escaped: no plan text reaches the SQL
//! unquoted. Pure: no database, no I/O.

mod expressions;
mod fragments;
mod json;
mod literals;
mod relations;

use std::cell::Cell;
use std::collections::HashMap;

use serde_json::{Map, Value};

use fragments::check_ident;
use json::{
    array, camel, count, describe, get, invalid, object, required, strings, text, unsigned,
};
use relations::{Context, render};

/// A plan translated to SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanSql {
    /// One PostgreSQL `SELECT` statement, without a trailing semicolon, laid out on several lines
    /// for reading.
    pub sql: String,
    /// The statement's output column names, in order: the root relation's `names`, or, when the
    /// root has none, the names the plan's relations give their columns.
    pub columns: Vec<String>,
}

/// Why a plan could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The plan uses relations that have no translation, named as in the plan (`join`, `set`,
    /// `cross`, `read.virtualTable`, `read.localFiles` ...), each once, in the order met.
    #[error(
        "unsupported {}: {}",
        if relations.len() == 1 { "relation" } else { "relations" },
        relations.join(", ")
    )]
    Unsupported { relations: Vec<String> },
    /// The plan calls a function that has no translation; the name is the extension's declared
    /// name without its signature suffix (`foo` for `foo:i64_i64`).
    #[error("unknown function: {0}")]
    UnknownFunction(String),
    /// The plan is not a well-formed Substrait plan, or uses an expression, literal or type that
    /// is not supported; the message starts with the JSON path of the problem.
    #[error("invalid plan: {0}")]
    Invalid(String),
}

type Result<T, E = PlanError> = std::result::Result<T, E>;

/// Translates a Substrait plan in protobuf-JSON form into one PostgreSQL `SELECT`.
///
/// The plan is a JSON object (or a string holding one) whose `relations` hold exactly one root
/// relation (or, without a root, exactly one plain relation). As in the proto3 JSON mapping,
/// field names may be camelCase or snake_case, 64-bit integers numbers or strings, enums names or
/// numbers, and absent fields take their default (field `0`, anchor `0` ...).
///
/// # Errors
///
/// [`PlanError::Unsupported`] when the plan uses relations other than `read` (of a named table),
/// `filter`, `project`, `aggregate`, `sort` and `fetch`; [`PlanError::UnknownFunction`] when it
/// calls a function with no PostgreSQL translation; [`PlanError::Invalid`] when it is malformed
/// or uses an unsupported expression, literal or type.
pub fn plan_to_sql(plan: &Value) -> Result<PlanSql> {
    if let Value::String(text) = plan {
        let parsed: Value = serde_json::from_str(text)
            .map_err(|error| invalid("$", format!("the string is not JSON: {error}")))?;
        if parsed.is_string() {
            return Err(invalid("$", "expected a plan object, found a string"));
        }
        return plan_to_sql(&parsed);
    }
    let plan = object(plan, "$")?;
    let root = pick_root(plan)?;

    let mut unsupported = Vec::new();
    find_unsupported(root.input, &mut unsupported);
    if !unsupported.is_empty() {
        return Err(PlanError::Unsupported { relations: unsupported });
    }

    let context = Context { functions: functions(plan)?, aliases: Cell::new(0) };
    let built = context.build(root.input, &root.input_path)?;
    let columns = match root.names {
        Some((names, path)) if !names.is_empty() => {
            let names = strings(names, &path)?;
            for (i, name) in names.iter().enumerate() {
                check_ident(name, &format!("{path}[{i}]"))?;
            }
            if names.len() != built.level.select.len() {
                return Err(invalid(
                    &path,
                    format!(
                        "{} for {}",
                        count(names.len(), "name"),
                        count(built.level.select.len(), "output column")
                    ),
                ));
            }
            names.into_iter().map(str::to_owned).collect()
        }
        _ => built.names,
    };
    let mut sql = String::new();
    render(&built.level, Some(&columns), "", &mut sql);
    Ok(PlanSql { sql, columns })
}

// ---------------------------------------------------------------------------------------------
// The plan: root, extensions, unsupported relations.

/// The relation tree to translate, with the root's names if it has any.
struct Root<'a> {
    input: &'a Value,
    input_path: String,
    names: Option<(&'a [Value], String)>,
}

fn pick_root(plan: &Map<String, Value>) -> Result<Root<'_>> {
    let relations = array(plan, "relations", "$")?;
    let mut roots = Vec::new();
    let mut plain = Vec::new();
    for (i, relation) in relations.iter().enumerate() {
        let path = format!("$.relations[{i}]");
        let relation = object(relation, &path)?;
        if let Some(root) = get(relation, "root") {
            roots.push((root, format!("{path}.root")));
        } else if let Some(rel) = get(relation, "rel") {
            plain.push((rel, format!("{path}.rel")));
        } else {
            return Err(invalid(&path, "expected a root or a rel"));
        }
    }
    match (roots.as_slice(), plain.as_slice()) {
        ([(root, path)], _) => {
            let root = object(root, path)?;
            let names = match get(root, "names") {
                None => None,
                Some(Value::Array(names)) => Some((names.as_slice(), format!("{path}.names"))),
                Some(other) => {
                    return Err(invalid(
                        &format!("{path}.names"),
                        format!("expected an array, found {}", describe(other)),
                    ));
                }
            };
            Ok(Root {
                input: required(root, "input", path)?,
                input_path: format!("{path}.input"),
                names,
            })
        }
        ([], [(rel, path)]) => Ok(Root { input: rel, input_path: path.clone(), names: None }),
        ([], _) => Err(invalid("$.relations", "the plan has no root relation")),
        (roots, _) => Err(invalid(
            "$.relations",
            format!("the plan has {} root relations; one is expected", roots.len()),
        )),
    }
}

/// The extension functions by anchor, with their names lowercased and without signatures.
fn functions(plan: &Map<String, Value>) -> Result<HashMap<u64, String>> {
    let mut functions = HashMap::new();
    for (i, extension) in array(plan, "extensions", "$")?.iter().enumerate() {
        let path = format!("$.extensions[{i}]");
        let Some(function) = get(object(extension, &path)?, "extensionFunction") else {
            continue;
        };
        let path = format!("{path}.extensionFunction");
        let function = object(function, &path)?;
        let anchor = unsigned(function, "functionAnchor", &path)?;
        let name_path = format!("{path}.name");
        let name = text(required(function, "name", &path)?, &name_path)?;
        let base = name.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if base.is_empty() {
            return Err(invalid(&name_path, "empty function name"));
        }
        if functions.insert(anchor, base).is_some() {
            return Err(invalid(
                &format!("{path}.functionAnchor"),
                format!("anchor {anchor} is declared twice"),
            ));
        }
    }
    Ok(functions)
}

const SUPPORTED: [&str; 6] = ["read", "filter", "project", "aggregate", "sort", "fetch"];
const READ_TYPES: [&str; 5] =
    ["namedTable", "virtualTable", "localFiles", "extensionTable", "icebergTable"];

/// Collects the kinds of unsupported relations anywhere in the tree, each once.
fn find_unsupported(rel: &Value, found: &mut Vec<String>) {
    let Some(rel) = rel.as_object() else { return };
    for (key, body) in rel {
        if body.is_null() {
            continue;
        }
        let kind = camel(key);
        let name = if kind == "read" {
            body.as_object()
                .and_then(|read| READ_TYPES.iter().find(|t| get(read, t).is_some()))
                .filter(|t| **t != "namedTable")
                .map(|t| format!("read.{t}"))
        } else if SUPPORTED.contains(&kind.as_str()) {
            None
        } else {
            Some(kind)
        };
        if let Some(name) = name
            && !found.contains(&name)
        {
            found.push(name);
        }
        let Some(body) = body.as_object() else { continue };
        for child in ["input", "left", "right"] {
            if let Some(child) = get(body, child) {
                find_unsupported(child, found);
            }
        }
        if let Some(Value::Array(inputs)) = get(body, "inputs") {
            for child in inputs {
                find_unsupported(child, found);
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::fragments::{ident, string_literal};
    use super::json::snake;
    use super::literals::{base64, date_text, decimal_text, le_i128, timestamp_text};
    use super::*;
    use crate::sql::{StatementKind, classify};

    const ADD: u32 = 1;
    const SUBTRACT: u32 = 2;
    const MULTIPLY: u32 = 3;
    const DIVIDE: u32 = 4;
    const GT: u32 = 5;
    const EQUAL: u32 = 6;
    const AND: u32 = 7;
    const SUM: u32 = 8;
    const COUNT: u32 = 9;
    const AVG: u32 = 10;
    const COUNT_STAR: u32 = 11;
    const LT: u32 = 12;
    const OR: u32 = 13;
    const NOT: u32 = 14;
    const IS_NULL: u32 = 15;
    const NEGATE: u32 = 16;
    const LIKE: u32 = 17;
    const CONCAT: u32 = 18;
    const EXTRACT: u32 = 19;
    const ROUND: u32 = 20;
    const SUBSTRING: u32 = 21;
    const COALESCE: u32 = 22;
    const BETWEEN: u32 = 23;
    const MAX: u32 = 25;
    const LOWER: u32 = 26;
    const UPPER: u32 = 27;
    const MODULUS: u32 = 29;
    const LTE: u32 = 32;
    const FROBNICATE: u32 = 99;

    /// Extension declarations as producers write them, signatures included.
    const FUNCTIONS: &[(u32, &str)] = &[
        (ADD, "add:i64_i64"),
        (SUBTRACT, "subtract:i64_i64"),
        (MULTIPLY, "multiply:dec_fp64"),
        (DIVIDE, "divide"),
        (GT, "gt:any_any"),
        (EQUAL, "equal:any_any"),
        (AND, "and:bool"),
        (SUM, "sum:dec"),
        (COUNT, "count:any"),
        (AVG, "avg:dec"),
        (COUNT_STAR, "count:"),
        (LT, "lt:any_any"),
        (OR, "or:bool"),
        (NOT, "not:bool"),
        (IS_NULL, "is_null:any"),
        (NEGATE, "negate:i32"),
        (LIKE, "like:str_str"),
        (CONCAT, "concat:str"),
        (EXTRACT, "extract:req_date"),
        (ROUND, "round:dec_i32"),
        (SUBSTRING, "substring:str_i32_i32"),
        (COALESCE, "coalesce:any"),
        (BETWEEN, "between:any_any_any"),
        (24, "min:any"),
        (MAX, "max:any"),
        (LOWER, "lower:str"),
        (UPPER, "upper:str"),
        (28, "abs:i64"),
        (MODULUS, "modulus:i64_i64"),
        (LTE, "lte:any_any"),
        (FROBNICATE, "frobnicate:i64"),
    ];

    fn extensions() -> Vec<Value> {
        FUNCTIONS
            .iter()
            .map(|(anchor, name)| {
                json!({"extensionFunction": {
                    "extensionUriReference": 1, "functionAnchor": anchor, "name": name
                }})
            })
            .collect()
    }

    fn plan(input: Value, names: &[&str]) -> Value {
        json!({
            "version": {"minorNumber": 54, "producer": "hand-written"},
            "extensionUris": [{"extensionUriAnchor": 1, "uri": "https://github.com/substrait-io/substrait/blob/main/extensions/functions.yaml"}],
            "extensions": extensions(),
            "relations": [{"root": {"input": input, "names": names}}],
        })
    }

    /// A plan whose only relation is a plain `rel`, without root names.
    fn plan_without_names(input: Value) -> Value {
        json!({"extensions": extensions(), "relations": [{"rel": input}]})
    }

    fn read(table: &[&str]) -> Value {
        json!({"read": {
            "common": {"direct": {}},
            "baseSchema": {
                "names": ["id", "amount", "country", "created_at"],
                "struct": {
                    "types": [
                        {"i64": {"nullability": "NULLABILITY_REQUIRED"}},
                        {"decimal": {"precision": 10, "scale": 2, "nullability": "NULLABILITY_NULLABLE"}},
                        {"string": {"nullability": "NULLABILITY_NULLABLE"}},
                        {"date": {"nullability": "NULLABILITY_NULLABLE"}}
                    ],
                    "nullability": "NULLABILITY_REQUIRED"
                }
            },
            "namedTable": {"names": table}
        }})
    }

    fn orders() -> Value {
        read(&["public", "orders"])
    }

    fn field(i: usize) -> Value {
        json!({"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}})
    }

    fn lit(literal: Value) -> Value {
        json!({ "literal": literal })
    }

    fn int32(n: i64) -> Value {
        lit(json!({ "i32": n }))
    }

    fn string(s: &str) -> Value {
        lit(json!({ "string": s }))
    }

    fn call(anchor: u32, args: Vec<Value>) -> Value {
        let arguments: Vec<Value> = args.into_iter().map(|a| json!({ "value": a })).collect();
        json!({"scalarFunction": {
            "functionReference": anchor, "arguments": arguments, "outputType": {"bool": {}}
        }})
    }

    fn measure(anchor: u32, args: Vec<Value>) -> Value {
        let arguments: Vec<Value> = args.into_iter().map(|a| json!({ "value": a })).collect();
        json!({"measure": {
            "functionReference": anchor,
            "arguments": arguments,
            "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
            "invocation": "AGGREGATION_INVOCATION_ALL",
            "outputType": {"i64": {}}
        }})
    }

    fn filter(input: Value, condition: Value) -> Value {
        json!({"filter": {"input": input, "condition": condition}})
    }

    fn project(input: Value, expressions: Vec<Value>, emit: &[usize]) -> Value {
        json!({"project": {
            "common": {"emit": {"outputMapping": emit}},
            "input": input,
            "expressions": expressions
        }})
    }

    fn aggregate(input: Value, keys: Vec<Value>, measures: Vec<Value>) -> Value {
        json!({"aggregate": {
            "input": input, "groupings": [{"groupingExpressions": keys}], "measures": measures
        }})
    }

    fn sort(input: Value, keys: Vec<(Value, &str)>) -> Value {
        let sorts: Vec<Value> =
            keys.into_iter().map(|(e, d)| json!({"expr": e, "direction": d})).collect();
        json!({"sort": {"input": input, "sorts": sorts}})
    }

    fn fetch(input: Value, offset: Option<Value>, count: Option<Value>) -> Value {
        let mut body = json!({ "input": input });
        if let Some(offset) = offset {
            body["offset"] = offset;
        }
        if let Some(count) = count {
            body["count"] = count;
        }
        json!({ "fetch": body })
    }

    /// Translates, and checks that PostgreSQL's grammar reads the SQL as one read statement.
    fn translate(plan: &Value) -> PlanSql {
        let translated = plan_to_sql(plan).unwrap_or_else(|e| panic!("{e}\nplan: {plan:#}"));
        assert_one_select(&translated.sql);
        translated
    }

    fn assert_one_select(sql: &str) {
        let classification = classify(sql).unwrap_or_else(|e| panic!("{e}\n{sql}"));
        assert_eq!(classification.statements.len(), 1, "{sql}");
        assert_eq!(classification.statements[0].kind, StatementKind::Read, "{sql}");
    }

    struct Case {
        name: &'static str,
        plan: Value,
        sql: &'static str,
        columns: &'static [&'static str],
    }

    const ORDERS_COLUMNS: &[&str] = &["id", "amount", "country", "created_at"];

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "plain read with the baseSchema names",
                plan: plan(orders(), ORDERS_COLUMNS),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"public\".\"orders\" AS r0",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "plain read renamed by the root",
                plan: plan(read(&["orders"]), &["a", "b", "c", "d"]),
                sql: "SELECT r0.\"id\" AS \"a\", r0.\"amount\" AS \"b\", r0.\"country\" AS \"c\", r0.\"created_at\" AS \"d\"\n\
                      FROM \"orders\" AS r0",
                columns: &["a", "b", "c", "d"],
            },
            Case {
                name: "a rel without root takes the schema names; the catalog is dropped",
                plan: plan_without_names(read(&["warehouse", "sales", "orders"])),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"sales\".\"orders\" AS r0",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "read and filter",
                plan: plan(
                    filter(
                        orders(),
                        call(
                            AND,
                            vec![
                                call(GT, vec![field(1), int32(100)]),
                                call(EQUAL, vec![field(2), string("DE")]),
                            ],
                        ),
                    ),
                    ORDERS_COLUMNS,
                ),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      WHERE r0.\"amount\" > 100 AND r0.\"country\" = 'DE'",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "a read's own filter (over the base schema) and projection mask",
                plan: plan(
                    json!({"read": {
                        "baseSchema": read(&[])["read"]["baseSchema"].clone(),
                        "filter": call(GT, vec![field(1), int32(100)]),
                        "projection": {"select": {"structItems": [{"field": 2}, {}]}, "maintainSingularStruct": true},
                        "namedTable": {"names": ["public", "orders"]}
                    }}),
                    &["country", "id"],
                ),
                sql: "SELECT r0.\"country\", r0.\"id\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      WHERE r0.\"amount\" > 100",
                columns: &["country", "id"],
            },
            Case {
                name: "project with arithmetic, appended then emitted",
                plan: plan(
                    project(
                        orders(),
                        vec![
                            call(
                                MULTIPLY,
                                vec![
                                    call(ADD, vec![field(1), int32(5)]),
                                    lit(json!({"fp64": 1.19})),
                                ],
                            ),
                            call(
                                SUBTRACT,
                                vec![
                                    field(0),
                                    call(SUBTRACT, vec![field(0), lit(json!({"i64": "-1"}))]),
                                ],
                            ),
                            call(NEGATE, vec![int32(-3)]),
                            call(DIVIDE, vec![call(MODULUS, vec![field(0), int32(7)]), field(1)]),
                        ],
                        &[0, 4, 5, 6, 7],
                    ),
                    &["id", "gross", "x", "y", "z"],
                ),
                sql: "SELECT r0.\"id\", (r0.\"amount\" + 5) * 1.19 AS \"gross\", r0.\"id\" - (r0.\"id\" - -1) AS \"x\", -(-3) AS \"y\", r0.\"id\" % 7 / r0.\"amount\" AS \"z\"\n\
                      FROM \"public\".\"orders\" AS r0",
                columns: &["id", "gross", "x", "y", "z"],
            },
            Case {
                name: "aggregate with a grouping and sum, count, avg",
                plan: plan(
                    aggregate(
                        orders(),
                        vec![field(2)],
                        vec![
                            measure(SUM, vec![field(1)]),
                            measure(COUNT, vec![field(0)]),
                            measure(AVG, vec![field(1)]),
                        ],
                    ),
                    &["country", "total", "orders", "average"],
                ),
                sql: "SELECT r0.\"country\", sum(r0.\"amount\") AS \"total\", count(r0.\"id\") AS \"orders\", avg(r0.\"amount\") AS \"average\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      GROUP BY r0.\"country\"",
                columns: &["country", "total", "orders", "average"],
            },
            Case {
                name: "count(*), count distinct, a measure filter, shared grouping expressions",
                plan: plan_without_names(json!({"aggregate": {
                    "input": orders(),
                    "groupingExpressions": [field(2)],
                    "groupings": [{"expressionReferences": [0]}],
                    "measures": [
                        measure(COUNT_STAR, vec![]),
                        {"measure": {
                            "functionReference": COUNT,
                            "arguments": [{"value": field(0)}],
                            "invocation": "AGGREGATION_INVOCATION_DISTINCT"
                        }},
                        {
                            "measure": {"functionReference": SUM, "arguments": [{"value": field(1)}]},
                            "filter": call(GT, vec![field(1), int32(100)])
                        }
                    ]
                }})),
                sql: "SELECT r0.\"country\", count(*) AS \"count\", count(DISTINCT r0.\"id\") AS \"count\", sum(r0.\"amount\") FILTER (WHERE r0.\"amount\" > 100) AS \"sum\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      GROUP BY r0.\"country\"",
                columns: &["country", "count", "count", "sum"],
            },
            Case {
                name: "aggregate without grouping keys",
                plan: plan(aggregate(orders(), vec![], vec![measure(COUNT_STAR, vec![])]), &["n"]),
                sql: "SELECT count(*) AS \"n\"\nFROM \"public\".\"orders\" AS r0",
                columns: &["n"],
            },
            Case {
                name: "a constant grouping key is cast (a bare literal would be a position)",
                plan: plan(
                    aggregate(
                        orders(),
                        vec![int32(1), field(2), field(2)],
                        vec![measure(COUNT_STAR, vec![])],
                    ),
                    &["one", "country", "n"],
                ),
                sql: "SELECT 1 AS \"one\", r0.\"country\", count(*) AS \"n\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      GROUP BY CAST(1 AS integer), r0.\"country\"",
                columns: &["one", "country", "n"],
            },
            Case {
                name: "a filter over an aggregate is HAVING",
                plan: plan(
                    filter(
                        aggregate(orders(), vec![field(2)], vec![measure(SUM, vec![field(1)])]),
                        call(GT, vec![field(1), int32(1000)]),
                    ),
                    &["country", "total"],
                ),
                sql: "SELECT r0.\"country\", sum(r0.\"amount\") AS \"total\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      GROUP BY r0.\"country\"\n\
                      HAVING sum(r0.\"amount\") > 1000",
                columns: &["country", "total"],
            },
            Case {
                name: "fetch with offset and count as 64-bit strings",
                plan: plan(fetch(orders(), Some(json!("20")), Some(json!("10"))), ORDERS_COLUMNS),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      LIMIT 10 OFFSET 20",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "fetch with offsetExpr and countExpr literals",
                plan: plan(
                    json!({"fetch": {
                        "input": orders(),
                        "offsetExpr": {"literal": {"i64": "5"}},
                        "countExpr": {"literal": {"i32": 3}}
                    }}),
                    ORDERS_COLUMNS,
                ),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      LIMIT 3 OFFSET 5",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "fetch of all rows (count -1) after an offset",
                plan: plan(fetch(orders(), Some(json!(20)), Some(json!("-1"))), ORDERS_COLUMNS),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      OFFSET 20",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "read, filter, aggregate, sort, fetch in one SELECT",
                plan: plan(
                    fetch(
                        sort(
                            aggregate(
                                filter(orders(), call(GT, vec![field(1), int32(100)])),
                                vec![field(2)],
                                vec![measure(SUM, vec![field(1)]), measure(COUNT_STAR, vec![])],
                            ),
                            vec![(field(1), "SORT_DIRECTION_DESC_NULLS_LAST")],
                        ),
                        Some(json!("5")),
                        Some(json!("10")),
                    ),
                    &["country", "total", "orders"],
                ),
                sql: "SELECT r0.\"country\", sum(r0.\"amount\") AS \"total\", count(*) AS \"orders\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      WHERE r0.\"amount\" > 100\n\
                      GROUP BY r0.\"country\"\n\
                      ORDER BY sum(r0.\"amount\") DESC NULLS LAST\n\
                      LIMIT 10 OFFSET 5",
                columns: &["country", "total", "orders"],
            },
            Case {
                name: "a filter after a limit wraps the limited rows",
                plan: plan(
                    project(
                        filter(
                            fetch(orders(), None, Some(json!(10))),
                            call(GT, vec![field(1), int32(100)]),
                        ),
                        vec![call(MULTIPLY, vec![field(1), int32(2)])],
                        &[2, 4],
                    ),
                    &["country", "double"],
                ),
                sql: "SELECT r1.c2 AS \"country\", r1.c1 * 2 AS \"double\"\n\
                      FROM (\n  \
                        SELECT r0.\"id\" AS c0, r0.\"amount\" AS c1, r0.\"country\" AS c2, r0.\"created_at\" AS c3\n  \
                        FROM \"public\".\"orders\" AS r0\n  \
                        LIMIT 10\n\
                      ) AS r1\n\
                      WHERE r1.c1 > 100",
                columns: &["country", "double"],
            },
            Case {
                name: "an aggregate over an aggregate wraps it",
                plan: plan(
                    aggregate(
                        aggregate(orders(), vec![field(2)], vec![measure(COUNT_STAR, vec![])]),
                        vec![],
                        vec![measure(MAX, vec![field(1)])],
                    ),
                    &["busiest"],
                ),
                sql: "SELECT max(r1.c1) AS \"busiest\"\n\
                      FROM (\n  \
                        SELECT r0.\"country\" AS c0, count(*) AS c1\n  \
                        FROM \"public\".\"orders\" AS r0\n  \
                        GROUP BY r0.\"country\"\n\
                      ) AS r1",
                columns: &["busiest"],
            },
            Case {
                name: "a long computed column used twice is not repeated",
                plan: plan(
                    json!({"filter": {
                        "common": {"emit": {"outputMapping": [4]}},
                        "input": project(
                            orders(),
                            vec![call(CONCAT, vec![
                                call(LOWER, vec![field(2)]),
                                string(" / "),
                                call(UPPER, vec![field(2)]),
                                string(" / "),
                                call(LOWER, vec![field(2)]),
                            ])],
                            &[0, 1, 2, 3, 4],
                        ),
                        "condition": call(OR, vec![
                            call(EQUAL, vec![field(4), string("a")]),
                            call(EQUAL, vec![field(4), string("b")]),
                        ])
                    }}),
                    &["label"],
                ),
                sql: "SELECT r1.c4 AS \"label\"\n\
                      FROM (\n  \
                        SELECT r0.\"id\" AS c0, r0.\"amount\" AS c1, r0.\"country\" AS c2, r0.\"created_at\" AS c3, lower(r0.\"country\") || ' / ' || upper(r0.\"country\") || ' / ' || lower(r0.\"country\") AS c4\n  \
                        FROM \"public\".\"orders\" AS r0\n\
                      ) AS r1\n\
                      WHERE r1.c4 = 'a' OR r1.c4 = 'b'",
                columns: &["label"],
            },
            Case {
                name: "a project after a sort keeps the order on the same level",
                plan: plan(
                    project(
                        sort(orders(), vec![(field(1), "SORT_DIRECTION_DESC_NULLS_FIRST")]),
                        vec![call(UPPER, vec![field(2)])],
                        &[4],
                    ),
                    &["country"],
                ),
                sql: "SELECT upper(r0.\"country\") AS \"country\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      ORDER BY r0.\"amount\" DESC NULLS FIRST",
                columns: &["country"],
            },
            Case {
                name: "sort keys: several, a constant one dropped",
                plan: plan(
                    sort(
                        orders(),
                        vec![
                            (int32(1), "SORT_DIRECTION_ASC_NULLS_LAST"),
                            (field(2), "SORT_DIRECTION_DESC_NULLS_LAST"),
                            (call(IS_NULL, vec![field(1)]), "SORT_DIRECTION_ASC_NULLS_FIRST"),
                        ],
                    ),
                    ORDERS_COLUMNS,
                ),
                sql: "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                      FROM \"public\".\"orders\" AS r0\n\
                      ORDER BY r0.\"country\" DESC NULLS LAST, (r0.\"amount\" IS NULL) ASC NULLS FIRST",
                columns: ORDERS_COLUMNS,
            },
            Case {
                name: "quotes in identifiers and string literals are escaped",
                plan: plan(
                    filter(
                        filter(
                            json!({"read": {
                                "baseSchema": {"names": ["na\"me", "it's"], "struct": {"types": [{"string": {}}, {"string": {}}]}},
                                "namedTable": {"names": ["sch\"ema", "we\"ird"]}
                            }}),
                            call(EQUAL, vec![field(0), string("O'Brien")]),
                        ),
                        call(LIKE, vec![field(1), string("a\\b'; DROP TABLE x; --")]),
                    ),
                    &["Na\"me", "x"],
                ),
                sql: "SELECT r0.\"na\"\"me\" AS \"Na\"\"me\", r0.\"it's\" AS \"x\"\n\
                      FROM \"sch\"\"ema\".\"we\"\"ird\" AS r0\n\
                      WHERE r0.\"na\"\"me\" = 'O''Brien' AND r0.\"it's\" LIKE E'a\\\\b''; DROP TABLE x; --'",
                columns: &["Na\"me", "x"],
            },
            Case {
                name: "snake_case keys, 64-bit integers and anchors as strings, field 0 omitted",
                plan: json!({
                    "extension_uris": [{"extension_uri_anchor": 1, "uri": "functions_comparison.yaml"}],
                    "extensions": [{"extension_function": {"extension_uri_reference": 1, "function_anchor": "5", "name": "gt:any_any"}}],
                    "relations": [{"root": {
                        "input": {"filter": {
                            "input": {"read": {
                                "base_schema": {"names": ["id"], "struct": {"types": [{"i64": {}}]}},
                                "named_table": {"names": ["t"]}
                            }},
                            "condition": {"scalar_function": {
                                "function_reference": "5",
                                "arguments": [
                                    {"value": {"selection": {"direct_reference": {"struct_field": {}}, "root_reference": {}}}},
                                    {"value": {"literal": {"i64": "9007199254740993"}}}
                                ]
                            }}
                        }},
                        "names": ["id"]
                    }}]
                }),
                sql: "SELECT r0.\"id\"\nFROM \"t\" AS r0\nWHERE r0.\"id\" > 9007199254740993",
                columns: &["id"],
            },
            Case {
                name: "a DuckDB-style plan: read filter and mask, projects, emit",
                plan: json!({
                    "extensionUris": [{"extensionUriAnchor": 1, "uri": "https://github.com/substrait-io/substrait/blob/main/extensions/"}],
                    "extensions": [
                        {"extensionFunction": {"extensionUriReference": 1, "functionAnchor": 1, "name": "lte"}},
                        {"extensionFunction": {"extensionUriReference": 1, "functionAnchor": 2, "name": "is_not_null"}},
                        {"extensionFunction": {"extensionUriReference": 1, "functionAnchor": 3, "name": "and"}},
                        {"extensionFunction": {"extensionUriReference": 1, "functionAnchor": 4, "name": "count"}}
                    ],
                    "relations": [{"root": {
                        "input": {"project": {
                            "common": {"emit": {"outputMapping": [1]}},
                            "input": {"aggregate": {
                                "input": {"project": {
                                    "input": {"read": {
                                        "baseSchema": {
                                            "names": ["exercise", "dificulty_level"],
                                            "struct": {"types": [
                                                {"varchar": {"length": 13, "nullability": "NULLABILITY_NULLABLE"}},
                                                {"i32": {"nullability": "NULLABILITY_NULLABLE"}}
                                            ], "nullability": "NULLABILITY_REQUIRED"}
                                        },
                                        "filter": {"scalarFunction": {
                                            "functionReference": 3,
                                            "outputType": {"bool": {"nullability": "NULLABILITY_NULLABLE"}},
                                            "arguments": [
                                                {"value": {"scalarFunction": {
                                                    "functionReference": 1,
                                                    "arguments": [
                                                        {"value": {"selection": {"directReference": {"structField": {"field": 1}}, "rootReference": {}}}},
                                                        {"value": {"literal": {"i32": 5}}}
                                                    ]
                                                }}},
                                                {"value": {"scalarFunction": {
                                                    "functionReference": 2,
                                                    "arguments": [
                                                        {"value": {"selection": {"directReference": {"structField": {"field": 1}}, "rootReference": {}}}}
                                                    ]
                                                }}}
                                            ]
                                        }},
                                        "projection": {"select": {"structItems": [{}, {"field": 1}]}, "maintainSingularStruct": true},
                                        "namedTable": {"names": ["crossfit"]}
                                    }},
                                    "expressions": [{"selection": {"directReference": {"structField": {}}, "rootReference": {}}}]
                                }},
                                "groupings": [{}],
                                "measures": [{"measure": {
                                    "functionReference": 4,
                                    "arguments": [{"value": {"selection": {"directReference": {"structField": {"field": 2}}, "rootReference": {}}}}],
                                    "phase": "AGGREGATION_PHASE_INITIAL_TO_RESULT",
                                    "outputType": {"i64": {"nullability": "NULLABILITY_REQUIRED"}},
                                    "invocation": "AGGREGATION_INVOCATION_ALL"
                                }}]
                            }},
                            "expressions": [{"selection": {"directReference": {"structField": {}}, "rootReference": {}}}]
                        }},
                        "names": ["exercise"]
                    }}],
                    "version": {"minorNumber": 39, "producer": "DuckDB"}
                }),
                sql: "SELECT count(r0.\"exercise\") AS \"exercise\"\n\
                      FROM \"crossfit\" AS r0\n\
                      WHERE r0.\"dificulty_level\" <= 5 AND r0.\"dificulty_level\" IS NOT NULL",
                columns: &["exercise"],
            },
        ]
    }

    #[test]
    fn plans_translate_to_the_expected_select() {
        for case in cases() {
            let translated =
                plan_to_sql(&case.plan).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert_eq!(translated.sql, case.sql, "{}", case.name);
            assert_eq!(translated.columns, case.columns, "{}", case.name);
            assert_one_select(&translated.sql);
        }
    }

    /// `SELECT <expression> AS "x" FROM orders`, from a project emitting only the expression.
    fn select_one(expression: Value) -> Value {
        plan(project(orders(), vec![expression], &[4]), &["x"])
    }

    #[test]
    fn expressions_translate_with_minimal_parentheses() {
        let extract = |component: &str| {
            json!({"scalarFunction": {
                "functionReference": EXTRACT,
                "arguments": [{"enum": component}, {"value": field(3)}]
            }})
        };
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"ifThen": {
                    "ifs": [{"if": call(GT, vec![field(1), int32(1000)]), "then": string("big")}],
                    "else": string("small")
                }}),
                "CASE WHEN r0.\"amount\" > 1000 THEN 'big' ELSE 'small' END",
            ),
            (
                json!({"switchExpression": {
                    "match": field(2),
                    "ifs": [{"if": {"string": "DE"}, "then": string("Germany")}],
                    "else": lit(json!({"null": {"string": {}}}))
                }}),
                "CASE r0.\"country\" WHEN 'DE' THEN 'Germany' ELSE CAST(NULL AS text) END",
            ),
            (
                json!({"singularOrList": {"value": field(2), "options": [string("DE"), string("FR")]}}),
                "r0.\"country\" IN ('DE', 'FR')",
            ),
            (
                json!({"multiOrList": {
                    "value": [field(2), field(0)],
                    "options": [{"fields": [string("DE"), int32(1)]}, {"fields": [string("FR"), int32(2)]}]
                }}),
                "(r0.\"country\", r0.\"id\") IN (('DE', 1), ('FR', 2))",
            ),
            (
                json!({"cast": {"type": {"varchar": {"length": 10}}, "input": field(0), "failureBehavior": "FAILURE_BEHAVIOR_THROW_EXCEPTION"}}),
                "CAST(r0.\"id\" AS varchar(10))",
            ),
            (
                json!({"cast": {"type": {"decimal": {"precision": 12, "scale": 3}}, "input": field(1)}}),
                "CAST(r0.\"amount\" AS numeric(12,3))",
            ),
            (extract("YEAR"), "EXTRACT(YEAR FROM r0.\"created_at\")"),
            (extract("MONTH"), "EXTRACT(MONTH FROM r0.\"created_at\")"),
            (extract("DAY"), "EXTRACT(DAY FROM r0.\"created_at\")"),
            (
                json!({"scalarFunction": {
                    "functionReference": EXTRACT,
                    "args": [{"enum": {"specified": "QUARTER"}}, field(3)]
                }}),
                "EXTRACT(QUARTER FROM r0.\"created_at\")",
            ),
            (call(ROUND, vec![field(1), int32(1)]), "round(CAST(r0.\"amount\" AS numeric), 1)"),
            (
                call(SUBSTRING, vec![field(2), int32(1), int32(2)]),
                "substring(r0.\"country\", 1, 2)",
            ),
            (call(COALESCE, vec![field(2), string("??")]), "coalesce(r0.\"country\", '??')"),
            (
                call(
                    NOT,
                    vec![call(
                        OR,
                        vec![
                            call(IS_NULL, vec![field(2)]),
                            call(BETWEEN, vec![field(1), int32(1), int32(10)]),
                        ],
                    )],
                ),
                "NOT (r0.\"country\" IS NULL OR r0.\"amount\" BETWEEN 1 AND 10)",
            ),
            (
                call(
                    AND,
                    vec![
                        call(
                            OR,
                            vec![
                                call(LT, vec![field(0), int32(5)]),
                                call(GT, vec![field(0), int32(9)]),
                            ],
                        ),
                        call(LIKE, vec![field(2), string("D%")]),
                    ],
                ),
                "(r0.\"id\" < 5 OR r0.\"id\" > 9) AND r0.\"country\" LIKE 'D%'",
            ),
            (
                call(
                    EQUAL,
                    vec![call(GT, vec![field(0), int32(1)]), lit(json!({"boolean": true}))],
                ),
                "(r0.\"id\" > 1) = TRUE",
            ),
            (call(IS_NULL, vec![call(EQUAL, vec![field(0), int32(1)])]), "(r0.\"id\" = 1) IS NULL"),
            (
                call(
                    SUBTRACT,
                    vec![
                        call(SUBTRACT, vec![field(0), int32(1)]),
                        call(ADD, vec![field(0), int32(2)]),
                    ],
                ),
                "r0.\"id\" - 1 - (r0.\"id\" + 2)",
            ),
            (call(NEGATE, vec![call(ADD, vec![field(0), int32(2)])]), "-(r0.\"id\" + 2)"),
            (call(NEGATE, vec![field(0)]), "-r0.\"id\""),
            (
                call(BETWEEN, vec![field(1), call(ADD, vec![field(0), int32(1)]), int32(-1)]),
                "r0.\"amount\" BETWEEN r0.\"id\" + 1 AND -1",
            ),
        ];
        for (expression, text) in cases {
            let translated = translate(&select_one(expression));
            let expected = format!("SELECT {text} AS \"x\"\nFROM \"public\".\"orders\" AS r0");
            assert_eq!(translated.sql, expected);
        }
    }

    #[test]
    fn literals_translate() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"boolean": false}), "FALSE"),
            (json!({"i8": 7, "nullable": false}), "7"),
            (json!({"i16": -7}), "-7"),
            (json!({"i32": 2_147_483_647}), "2147483647"),
            (json!({"i64": "9007199254740993"}), "9007199254740993"),
            (json!({"i64": -9_007_199_254_740_993_i64}), "-9007199254740993"),
            (json!({"fp32": 1.5}), "1.5"),
            (json!({"fp64": 100}), "100.0"),
            (json!({"fp64": 1e-7}), "1e-7"),
            (json!({"fp64": "NaN"}), "CAST('NaN' AS double precision)"),
            (json!({"fp32": "-Infinity"}), "CAST('-Infinity' AS real)"),
            (json!({"string": "O'Brien"}), "'O''Brien'"),
            (json!({"string": "a\\b"}), "E'a\\\\b'"),
            (json!({"string": ""}), "''"),
            (json!({"varChar": {"value": "x", "length": 5}}), "'x'"),
            (json!({"fixedChar": "ab"}), "'ab'"),
            (json!({"date": 19723}), "DATE '2024-01-01'"),
            (json!({"date": -719_162}), "DATE '0001-01-01'"),
            (json!({"date": -719_163}), "DATE '0001-12-31 BC'"),
            (json!({"timestamp": "1709214330123400"}), "TIMESTAMP '2024-02-29 13:45:30.1234'"),
            (json!({"timestamp": -1}), "TIMESTAMP '1969-12-31 23:59:59.999999'"),
            (json!({"timestampTz": 0}), "TIMESTAMPTZ '1970-01-01 00:00:00+00'"),
            (
                json!({"precisionTimestamp": {"precision": 3, "value": "1709214330123"}}),
                "TIMESTAMP '2024-02-29 13:45:30.123'",
            ),
            (
                json!({"precisionTimestampTz": {"precision": 9, "value": "1709214330123456789"}}),
                "TIMESTAMPTZ '2024-02-29 13:45:30.123456+00'",
            ),
            (json!({"time": 3_723_000_001_i64}), "TIME '01:02:03.000001'"),
            (json!({"precisionTime": {"precision": 0, "value": 45296}}), "TIME '12:34:56'"),
            (
                json!({"decimal": {"value": "OTAAAAAAAAAAAAAAAAAAAA==", "precision": 10, "scale": 2}}),
                "123.45",
            ),
            (
                json!({"decimal": {"value": "+////////////////////w==", "precision": 5, "scale": 3}}),
                "-0.005",
            ),
            (
                json!({"null": {"i32": {"nullability": "NULLABILITY_NULLABLE"}}}),
                "CAST(NULL AS integer)",
            ),
            (
                json!({"null": {"precisionTimestamp": {"precision": 3}}}),
                "CAST(NULL AS timestamp(3))",
            ),
            (json!({"null": {"list": {"type": {"string": {}}}}}), "CAST(NULL AS text[])"),
            (
                json!({"uuid": "AAECAwQFBgcICQoLDA0ODw"}),
                "UUID '00010203-0405-0607-0809-0a0b0c0d0e0f'",
            ),
            (json!({"binary": "AP9oaQ=="}), "decode('00ff6869', 'hex')"),
            (
                json!({"intervalYearToMonth": {"years": 1, "months": 2}}),
                "INTERVAL '1 years 2 months'",
            ),
            (
                json!({"intervalDayToSecond": {"days": 3, "seconds": 4, "precision": 6, "subseconds": "5"}}),
                "INTERVAL '3 days 4 seconds 5 microseconds'",
            ),
            (json!({"intervalDayToSecond": {}}), "INTERVAL '0 seconds'"),
        ];
        for (literal, text) in cases {
            let translated = translate(&select_one(lit(literal)));
            let expected = format!("SELECT {text} AS \"x\"\nFROM \"public\".\"orders\" AS r0");
            assert_eq!(translated.sql, expected);
        }
    }

    #[test]
    fn every_sort_direction_translates() {
        let cases: Vec<(Option<Value>, &str)> = vec![
            (Some(json!("SORT_DIRECTION_ASC_NULLS_FIRST")), " ASC NULLS FIRST"),
            (Some(json!("SORT_DIRECTION_ASC_NULLS_LAST")), " ASC NULLS LAST"),
            (Some(json!("SORT_DIRECTION_DESC_NULLS_FIRST")), " DESC NULLS FIRST"),
            (Some(json!("SORT_DIRECTION_DESC_NULLS_LAST")), " DESC NULLS LAST"),
            (Some(json!(3)), " DESC NULLS FIRST"),
            (Some(json!("SORT_DIRECTION_CLUSTERED")), ""),
            (None, ""),
        ];
        for (direction, suffix) in cases {
            let mut key = json!({ "expr": field(1) });
            if let Some(direction) = direction {
                key["direction"] = direction;
            }
            let plan = plan(json!({"sort": {"input": orders(), "sorts": [key]}}), ORDERS_COLUMNS);
            let expected = format!(
                "SELECT r0.\"id\", r0.\"amount\", r0.\"country\", r0.\"created_at\"\n\
                 FROM \"public\".\"orders\" AS r0\n\
                 ORDER BY r0.\"amount\"{suffix}"
            );
            assert_eq!(translate(&plan).sql, expected);
        }
    }

    #[test]
    fn a_plan_may_come_as_a_json_string() {
        let object = plan(filter(orders(), call(GT, vec![field(1), int32(100)])), ORDERS_COLUMNS);
        let text = Value::String(object.to_string());
        assert_eq!(plan_to_sql(&text), plan_to_sql(&object));
        assert!(matches!(plan_to_sql(&json!("{not json")), Err(PlanError::Invalid(_))));
    }

    fn unsupported(relations: &[&str]) -> PlanError {
        PlanError::Unsupported { relations: relations.iter().map(|r| (*r).to_owned()).collect() }
    }

    fn invalid_at(message: &str) -> PlanError {
        PlanError::Invalid(message.to_owned())
    }

    #[test]
    fn bad_plans_are_refused_with_a_reason() {
        let root = "$.relations[0].root.input";
        let condition = format!("{root}.filter.condition");
        let cases: Vec<(&str, Value, PlanError)> = vec![
            (
                "a join",
                plan(
                    json!({"join": {"left": orders(), "right": orders(), "type": "JOIN_TYPE_INNER"}}),
                    &[],
                ),
                unsupported(&["join"]),
            ),
            (
                "every unsupported relation, once, in plan order",
                plan(
                    filter(
                        json!({"join": {
                            "left": {"set": {"inputs": [
                                {"read": {"baseSchema": {"names": ["a"]}, "virtualTable": {"expressions": []}}},
                                orders()
                            ], "op": "SET_OP_UNION_ALL"}},
                            "right": {"cross": {"left": orders(), "right": {"join": {"left": orders(), "right": orders()}}}}
                        }}),
                        lit(json!({"boolean": true})),
                    ),
                    &[],
                ),
                unsupported(&["join", "set", "read.virtualTable", "cross"]),
            ),
            (
                "a read of local files",
                plan(
                    fetch(
                        json!({"read": {"baseSchema": {"names": ["a"]}, "localFiles": {"items": []}}}),
                        None,
                        Some(json!(1)),
                    ),
                    &[],
                ),
                unsupported(&["read.localFiles"]),
            ),
            (
                "an extension leaf",
                plan(json!({"extensionLeaf": {"detail": {}}}), &[]),
                unsupported(&["extensionLeaf"]),
            ),
            (
                "an unknown scalar function",
                plan(filter(orders(), call(FROBNICATE, vec![field(0)])), &[]),
                PlanError::UnknownFunction("frobnicate".to_owned()),
            ),
            (
                "an unknown aggregate function",
                plan(aggregate(orders(), vec![], vec![measure(FROBNICATE, vec![field(0)])]), &[]),
                PlanError::UnknownFunction("frobnicate".to_owned()),
            ),
            (
                "an aggregate function as a scalar",
                plan(filter(orders(), call(SUM, vec![field(1)])), &[]),
                invalid_at(&format!(
                    "{condition}.scalarFunction: sum is an aggregate function; it can only be a measure of an aggregate relation"
                )),
            ),
            (
                "a scalar function as a measure",
                plan(
                    aggregate(orders(), vec![], vec![measure(ADD, vec![field(0), field(0)])]),
                    &[],
                ),
                invalid_at(&format!(
                    "{root}.aggregate.measures[0].measure: add is a scalar function, not an aggregate"
                )),
            ),
            (
                "a missing condition",
                plan(json!({"filter": {"input": orders()}}), &[]),
                invalid_at(&format!("{condition}: missing")),
            ),
            (
                "a field out of range",
                plan(filter(orders(), call(GT, vec![field(9), int32(1)])), &[]),
                invalid_at(&format!(
                    "{condition}.scalarFunction.arguments[0].value.selection.directReference.structField.field: field 9 is out of range: the input has 4 columns"
                )),
            ),
            (
                "a negative field",
                plan(
                    filter(
                        orders(),
                        call(
                            GT,
                            vec![
                                json!({"selection": {"directReference": {"structField": {"field": -1}}}}),
                                int32(1),
                            ],
                        ),
                    ),
                    &[],
                ),
                invalid_at(&format!(
                    "{condition}.scalarFunction.arguments[0].value.selection.directReference.structField.field: negative index -1"
                )),
            ),
            (
                "a function anchor nobody declared",
                plan(filter(orders(), call(77, vec![])), &[]),
                invalid_at(&format!(
                    "{condition}.scalarFunction.functionReference: no extension function has anchor 77"
                )),
            ),
            (
                "the wrong number of arguments",
                plan(filter(orders(), call(GT, vec![field(0)])), &[]),
                invalid_at(&format!(
                    "{condition}.scalarFunction.arguments: gt takes 2 arguments, found 1"
                )),
            ),
            (
                "an empty expression",
                plan(filter(orders(), json!({})), &[]),
                invalid_at(&format!("{condition}: expected an expression, found an empty object")),
            ),
            (
                "an unsupported expression",
                plan(filter(orders(), json!({"subquery": {"scalar": {"input": orders()}}})), &[]),
                invalid_at(&format!("{condition}.subquery: unsupported expression")),
            ),
            (
                "an unsupported literal",
                plan(filter(orders(), lit(json!({"list": {"values": []}}))), &[]),
                invalid_at(&format!("{condition}.literal.list: unsupported literal")),
            ),
            (
                "a count that is not an integer",
                plan(fetch(orders(), None, Some(json!("ten"))), &[]),
                invalid_at(&format!("{root}.fetch.count: expected an integer, found \"ten\"")),
            ),
            (
                "a negative offset",
                plan(fetch(orders(), Some(json!(-2)), None), &[]),
                invalid_at(&format!("{root}.fetch: negative offset -2")),
            ),
            (
                "a read without a table",
                plan(json!({"read": {"baseSchema": {"names": ["a"]}}}), &[]),
                invalid_at(&format!("{root}.read.namedTable: missing")),
            ),
            (
                "a table with four names",
                plan(read(&["a", "b", "c", "d"]), &[]),
                invalid_at(&format!(
                    "{root}.read.namedTable.names: expected 1 to 3 names ([table], [schema, table] or [catalog, schema, table]), found 4"
                )),
            ),
            (
                "schema names that do not fit the struct",
                plan(
                    json!({"read": {
                        "baseSchema": {"names": ["a"], "struct": {"types": [{"i32": {}}, {"i32": {}}]}},
                        "namedTable": {"names": ["t"]}
                    }}),
                    &[],
                ),
                invalid_at(&format!(
                    "{root}.read.baseSchema.names: 1 name for a struct of 2 fields"
                )),
            ),
            (
                "an emit out of range",
                plan(project(orders(), vec![], &[7]), &[]),
                invalid_at(&format!(
                    "{root}.project.common.emit.outputMapping[0]: column 7 is out of range: the relation has 4 columns"
                )),
            ),
            (
                "two grouping sets",
                plan(
                    json!({"aggregate": {
                        "input": orders(),
                        "groupings": [{"groupingExpressions": [field(0)]}, {"groupingExpressions": [field(1)]}],
                        "measures": [measure(COUNT_STAR, vec![])]
                    }}),
                    &[],
                ),
                invalid_at(&format!(
                    "{root}.aggregate.groupings: 2 grouping sets; only one is supported"
                )),
            ),
            (
                "a partial aggregation",
                plan(
                    json!({"aggregate": {
                        "input": orders(),
                        "measures": [{"measure": {"functionReference": SUM, "arguments": [{"value": field(1)}], "phase": "AGGREGATION_PHASE_INITIAL_TO_INTERMEDIATE"}}]
                    }}),
                    &[],
                ),
                invalid_at(&format!(
                    "{root}.aggregate.measures[0].measure.phase: partial (intermediate) aggregation is not supported"
                )),
            ),
            (
                "a decimal that is not base64",
                plan(filter(orders(), lit(json!({"decimal": {"value": "12.5", "scale": 1}}))), &[]),
                invalid_at(&format!("{condition}.literal.decimal.value: not valid base64")),
            ),
            (
                "a string with a NUL character",
                plan(filter(orders(), call(EQUAL, vec![field(2), string("a\0b")])), &[]),
                invalid_at(&format!(
                    "{condition}.scalarFunction.arguments[1].value.literal.string: a string may not contain a NUL character"
                )),
            ),
            (
                "root names that do not fit the columns",
                plan(orders(), &["a"]),
                invalid_at("$.relations[0].root.names: 1 name for 4 output columns"),
            ),
            (
                "an empty root name",
                plan(orders(), &["a", "", "c", "d"]),
                invalid_at("$.relations[0].root.names[1]: an identifier may not be empty"),
            ),
            (
                "no relations",
                json!({"relations": []}),
                invalid_at("$.relations: the plan has no root relation"),
            ),
            (
                "two roots",
                json!({"relations": [{"root": {"input": orders()}}, {"root": {"input": orders()}}]}),
                invalid_at("$.relations: the plan has 2 root relations; one is expected"),
            ),
            ("not an object", json!([]), invalid_at("$: expected an object, found an array")),
            (
                "a relation with two kinds",
                plan(json!({"filter": {}, "sort": {}}), &[]),
                invalid_at(&format!("{root}: expected a relation, found both filter and sort")),
            ),
        ];
        for (name, plan, expected) in cases {
            assert_eq!(plan_to_sql(&plan), Err(expected), "{name}");
        }
    }

    #[test]
    fn errors_read_as_sentences_naming_the_problem() {
        assert_eq!(unsupported(&["join"]).to_string(), "unsupported relation: join");
        assert_eq!(unsupported(&["join", "set"]).to_string(), "unsupported relations: join, set");
        assert_eq!(
            PlanError::UnknownFunction("frobnicate".to_owned()).to_string(),
            "unknown function: frobnicate"
        );
        assert_eq!(
            plan_to_sql(&json!({})).map_err(|e| e.to_string()),
            Err("invalid plan: $.relations: the plan has no root relation".to_owned())
        );
    }

    /// Every node of some plans replaced by junk: never a panic, and any SQL still one SELECT.
    #[test]
    fn mangled_plans_never_panic() {
        fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
            match value {
                Value::Object(object) => {
                    for (key, child) in object {
                        pointers(child, format!("{at}/{key}"), out);
                    }
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate() {
                        pointers(child, format!("{at}/{i}"), out);
                    }
                }
                _ => {}
            }
            out.push(at);
        }
        let junk = [
            json!(null),
            json!(-1),
            json!(4_294_967_296_u64),
            json!("-9223372036854775808"),
            json!([]),
            json!({}),
        ];
        let plans: Vec<Value> = cases().into_iter().map(|case| case.plan).collect();
        let mut checked = std::collections::HashSet::new();
        for plan in plans {
            let mut all = Vec::new();
            pointers(&plan, String::new(), &mut all);
            // The extension declarations are alike: mangling the first one is enough.
            all.retain(|p| !p.starts_with("/extensions/") || p.starts_with("/extensions/0"));
            for pointer in all {
                for junk in &junk {
                    let mut mangled = plan.clone();
                    if let Some(slot) = mangled.pointer_mut(&pointer) {
                        *slot = junk.clone();
                    }
                    if let Ok(translated) = plan_to_sql(&mangled)
                        && checked.insert(translated.sql.clone())
                    {
                        assert_one_select(&translated.sql);
                    }
                }
            }
        }
    }

    #[test]
    fn helpers_convert_exactly() {
        assert_eq!(date_text(0), "1970-01-01");
        assert_eq!(date_text(-1), "1969-12-31");
        assert_eq!(date_text(11_016), "2000-02-29");
        assert_eq!(date_text(2_932_896), "9999-12-31");
        assert_eq!(date_text(-719_528), "0001-01-01 BC");
        assert_eq!(timestamp_text(-62_135_596_800_000_001), "0001-12-31 23:59:59.999999 BC");
        assert_eq!(decimal_text(0, 2), "0.00");
        assert_eq!(decimal_text(-12_345, 0), "-12345");
        assert_eq!(decimal_text(i128::MIN, 38), "-1.70141183460469231731687303715884105728");
        assert_eq!(le_i128(&[0xff]), -1);
        assert_eq!(le_i128(&[0x01, 0x01]), 257);
        assert_eq!(base64("AP9oaQ", ""), Ok(vec![0, 255, b'h', b'i']));
        assert_eq!(base64("_-8", ""), Ok(vec![0xff, 0xef]));
        assert_eq!(string_literal("it's", ""), Ok("'it''s'".to_owned()));
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(snake("baseSchema"), "base_schema");
        assert_eq!(camel("precision_timestamp_tz"), "precisionTimestampTz");
    }
}
