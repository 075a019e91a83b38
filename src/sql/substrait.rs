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

use std::cell::Cell;
use std::collections::HashMap;

use serde_json::{Map, Value};

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

// ---------------------------------------------------------------------------------------------
// SQL fragments.

const P_OR: u8 = 1;
const P_AND: u8 = 2;
const P_NOT: u8 = 3;
const P_IS: u8 = 4;
const P_CMP: u8 = 5;
/// `BETWEEN`, `IN`, `LIKE`, `ILIKE`.
const P_IN: u8 = 6;
/// Any other operator (`||`).
const P_OP: u8 = 7;
const P_ADD: u8 = 8;
const P_MUL: u8 = 9;
const P_NEG: u8 = 10;
const P_ATOM: u8 = 11;

/// An SQL expression with its PostgreSQL precedence, so that operands get parentheses exactly
/// where they need them.
#[derive(Debug, Clone)]
struct Sql {
    text: String,
    prec: u8,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A column of the FROM item, with the name it has when selected without an alias.
    Column(String),
    /// A constant. A bare literal carries the type to cast it to in `GROUP BY`, where
    /// PostgreSQL would read it as a position (or reject it).
    Constant(Option<&'static str>),
    Computed,
}

impl Sql {
    fn new(text: String, prec: u8) -> Sql {
        Sql { text, prec, kind: Kind::Computed }
    }

    fn atom(text: String) -> Sql {
        Sql::new(text, P_ATOM)
    }

    fn column(text: String, name: String) -> Sql {
        Sql { text, prec: P_ATOM, kind: Kind::Column(name) }
    }

    fn constant(text: String, bare: Option<&'static str>) -> Sql {
        let prec = if text.starts_with('-') { P_NEG } else { P_ATOM };
        Sql { text, prec, kind: Kind::Constant(bare) }
    }

    /// The text, in parentheses when its precedence is below `min`.
    fn wrap(&self, min: u8) -> String {
        if self.prec < min { format!("({})", self.text) } else { self.text.clone() }
    }
}

/// A left-associative infix operator.
fn binary(op: &str, prec: u8, left: &Sql, right: &Sql) -> Sql {
    Sql::new(format!("{} {op} {}", left.wrap(prec), right.wrap(prec + 1)), prec)
}

/// A non-associative infix operator (comparisons). Under `IS` (`IS DISTINCT FROM`), lower
/// operators get parentheses too, for the reader.
fn compare(op: &str, prec: u8, left: &Sql, right: &Sql) -> Sql {
    let min = if prec == P_IS { P_OP } else { prec + 1 };
    Sql::new(format!("{} {op} {}", left.wrap(min), right.wrap(min)), prec)
}

/// An associative operator over one or more operands.
fn chain(op: &str, prec: u8, items: &[Sql]) -> Sql {
    match items {
        [one] => one.clone(),
        _ => Sql::new(
            items.iter().map(|item| item.wrap(prec)).collect::<Vec<_>>().join(&format!(" {op} ")),
            prec,
        ),
    }
}

fn call(name: &str, args: &[Sql]) -> Sql {
    Sql::atom(format!("{name}({})", texts(args)))
}

fn texts(items: &[Sql]) -> String {
    items.iter().map(|item| item.text.as_str()).collect::<Vec<_>>().join(", ")
}

/// A double-quoted identifier (validated by [`check_ident`] where it enters).
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn check_ident(name: &str, path: &str) -> Result<()> {
    if name.is_empty() {
        return Err(invalid(path, "an identifier may not be empty"));
    }
    if name.contains('\0') {
        return Err(invalid(path, "an identifier may not contain a NUL character"));
    }
    Ok(())
}

/// A string literal: quotes doubled, and backslashes doubled inside `E'...'` so that the text
/// means the same whatever `standard_conforming_strings` is.
fn string_literal(value: &str, path: &str) -> Result<String> {
    if value.contains('\0') {
        return Err(invalid(path, "a string may not contain a NUL character"));
    }
    let quoted = value.replace('\'', "''");
    Ok(if value.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    })
}

// ---------------------------------------------------------------------------------------------
// Relations.

/// One `SELECT` level. Its expressions are over the columns of its FROM item.
struct Level {
    select: Vec<Sql>,
    from: From,
    filter: Vec<Sql>,
    /// `Some` once aggregated (empty for an aggregate without grouping keys).
    group_by: Option<Vec<Sql>>,
    having: Vec<Sql>,
    order_by: Vec<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

enum From {
    Table { name: String, alias: String },
    Subquery { level: Box<Level>, alias: String },
}

impl Level {
    fn new(select: Vec<Sql>, from: From) -> Level {
        Level {
            select,
            from,
            filter: Vec::new(),
            group_by: None,
            having: Vec::new(),
            order_by: Vec::new(),
            limit: None,
            offset: None,
        }
    }

    fn limited(&self) -> bool {
        self.limit.is_some() || self.offset.is_some()
    }
}

/// A translated relation: its `SELECT` and the names of its output columns.
struct Built {
    level: Level,
    names: Vec<String>,
}

/// The input columns an expression is rendered against, counting how often each is used.
struct Scope<'a> {
    columns: &'a [Sql],
    uses: Vec<usize>,
}

/// Longest computed column text that is inlined more than once rather than wrapped.
const INLINE_REPEAT_MAX: usize = 64;

impl<'a> Scope<'a> {
    fn new(columns: &'a [Sql]) -> Scope<'a> {
        Scope { columns, uses: vec![0; columns.len()] }
    }

    fn column(&mut self, field: usize, path: &str) -> Result<Sql> {
        let (Some(column), Some(uses)) = (self.columns.get(field), self.uses.get_mut(field)) else {
            return Err(invalid(
                path,
                format!(
                    "field {field} is out of range: the input has {}",
                    count(self.columns.len(), "column")
                ),
            ));
        };
        *uses += 1;
        Ok(column.clone())
    }

    /// Whether inlining would repeat a long computed expression.
    fn repeats_long(&self) -> bool {
        self.columns.iter().zip(&self.uses).any(|(column, uses)| {
            *uses > 1 && column.kind == Kind::Computed && column.text.len() > INLINE_REPEAT_MAX
        })
    }
}

struct Context {
    /// Extension function names by anchor.
    functions: HashMap<u64, String>,
    /// The next `rN` alias.
    aliases: Cell<usize>,
}

impl Context {
    fn alias(&self) -> String {
        let n = self.aliases.get();
        self.aliases.set(n + 1);
        format!("r{n}")
    }

    fn build(&self, rel: &Value, path: &str) -> Result<Built> {
        let (kind, body) = oneof(object(rel, path)?, path, &[], "a relation")?;
        let path = format!("{path}.{kind}");
        let body = object(body, &path)?;
        let built = match kind.as_str() {
            "read" => self.read(body, &path)?,
            "filter" => self.filter(body, &path)?,
            "project" => self.project(body, &path)?,
            "aggregate" => self.aggregate(body, &path)?,
            "sort" => self.sort(body, &path)?,
            "fetch" => self.fetch(body, &path)?,
            _ => return Err(PlanError::Unsupported { relations: vec![kind] }),
        };
        emit(body, built, &path)
    }

    /// Renders a relation's expressions over its input: inlined into the input's level when
    /// `mergeable` (and that repeats no long expression), else over the input as a subquery.
    fn apply<T>(
        &self,
        level: Level,
        mergeable: bool,
        render: impl Fn(&mut Scope<'_>) -> Result<T>,
    ) -> Result<(Level, T)> {
        if mergeable {
            let mut scope = Scope::new(&level.select);
            let out = render(&mut scope)?;
            if !scope.repeats_long() {
                return Ok((level, out));
            }
        }
        let level = self.wrap(level);
        let mut scope = Scope::new(&level.select);
        let out = render(&mut scope)?;
        Ok((level, out))
    }

    fn wrap(&self, inner: Level) -> Level {
        let alias = self.alias();
        let select = (0..inner.select.len())
            .map(|i| Sql::column(format!("{alias}.c{i}"), format!("c{i}")))
            .collect();
        Level::new(select, From::Subquery { level: Box::new(inner), alias })
    }

    fn read(&self, read: &Map<String, Value>, path: &str) -> Result<Built> {
        let table_path = format!("{path}.namedTable");
        let table = object(required(read, "namedTable", path)?, &table_path)?;
        let names_path = format!("{table_path}.names");
        let parts = strings(array(table, "names", &table_path)?, &names_path)?;
        let skip = match parts.len() {
            1 | 2 => 0,
            3 => 1,
            n => {
                return Err(invalid(
                    &names_path,
                    format!(
                        "expected 1 to 3 names ([table], [schema, table] or [catalog, schema, table]), found {n}"
                    ),
                ));
            }
        };
        for (i, part) in parts.iter().enumerate().skip(skip) {
            check_ident(part, &format!("{names_path}[{i}]"))?;
        }
        let name = parts.iter().skip(skip).map(|part| ident(part)).collect::<Vec<_>>().join(".");

        let schema_path = format!("{path}.baseSchema");
        let columns =
            base_columns(object(required(read, "baseSchema", path)?, &schema_path)?, &schema_path)?;
        let alias = self.alias();
        let base: Vec<Sql> = columns
            .iter()
            .map(|column| Sql::column(format!("{alias}.{}", ident(column)), column.clone()))
            .collect();
        let mut level = Level::new(Vec::new(), From::Table { name, alias });
        if let Some(filter) = get(read, "filter") {
            let mut scope = Scope::new(&base);
            level.filter.push(self.expr(filter, &format!("{path}.filter"), &mut scope)?);
        }
        let names = match get(read, "projection") {
            None => {
                level.select = base;
                columns
            }
            Some(mask) => {
                let fields = mask_fields(mask, &format!("{path}.projection"), base.len())?;
                level.select = fields.iter().filter_map(|&i| base.get(i).cloned()).collect();
                fields.iter().filter_map(|&i| columns.get(i).cloned()).collect()
            }
        };
        Ok(Built { level, names })
    }

    fn filter(&self, filter: &Map<String, Value>, path: &str) -> Result<Built> {
        let Built { level, names } =
            self.build(required(filter, "input", path)?, &format!("{path}.input"))?;
        let condition = required(filter, "condition", path)?;
        let condition_path = format!("{path}.condition");
        let mergeable = !level.limited();
        let (mut level, condition) =
            self.apply(level, mergeable, |scope| self.expr(condition, &condition_path, scope))?;
        if level.group_by.is_some() {
            level.having.push(condition);
        } else {
            level.filter.push(condition);
        }
        Ok(Built { level, names })
    }

    fn project(&self, project: &Map<String, Value>, path: &str) -> Result<Built> {
        let Built { level, mut names } =
            self.build(required(project, "input", path)?, &format!("{path}.input"))?;
        let expressions = array(project, "expressions", path)?;
        let (mut level, rendered) = self.apply(level, true, |scope| {
            expressions
                .iter()
                .enumerate()
                .map(|(i, e)| self.expr(e, &format!("{path}.expressions[{i}]"), scope))
                .collect::<Result<Vec<_>>>()
        })?;
        let inputs = names.len();
        for (i, e) in expressions.iter().enumerate() {
            let name = field_index(e).and_then(|field| names.get(field).cloned());
            names.push(name.unwrap_or_else(|| format!("c{}", inputs + i)));
        }
        level.select.extend(rendered);
        Ok(Built { level, names })
    }

    fn aggregate(&self, aggregate: &Map<String, Value>, path: &str) -> Result<Built> {
        let Built { level, names: input_names } =
            self.build(required(aggregate, "input", path)?, &format!("{path}.input"))?;
        let keys = grouping_keys(aggregate, path)?;
        let measures = array(aggregate, "measures", path)?;
        if keys.is_empty() && measures.is_empty() {
            return Err(invalid(path, "an aggregate without grouping keys needs a measure"));
        }
        let mergeable = level.group_by.is_none() && !level.limited();
        let (mut level, (keys_sql, measures_sql)) = self.apply(level, mergeable, |scope| {
            let keys = keys
                .iter()
                .map(|(e, key_path)| self.expr(e, key_path, scope))
                .collect::<Result<Vec<_>>>()?;
            let measures = measures
                .iter()
                .enumerate()
                .map(|(i, m)| self.measure(m, &format!("{path}.measures[{i}]"), scope))
                .collect::<Result<Vec<_>>>()?;
            Ok((keys, measures))
        })?;
        let mut names: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, (e, _))| {
                field_index(e)
                    .and_then(|field| input_names.get(field).cloned())
                    .unwrap_or_else(|| format!("c{i}"))
            })
            .collect();
        level.order_by.clear();
        level.group_by = Some(keys_sql.clone());
        level.select = keys_sql;
        for (measure, name) in measures_sql {
            level.select.push(measure);
            names.push(name);
        }
        Ok(Built { level, names })
    }

    fn sort(&self, sort: &Map<String, Value>, path: &str) -> Result<Built> {
        let Built { level, names } =
            self.build(required(sort, "input", path)?, &format!("{path}.input"))?;
        let sorts = array(sort, "sorts", path)?;
        let mergeable = !level.limited();
        let (mut level, keys) = self.apply(level, mergeable, |scope| {
            sorts
                .iter()
                .enumerate()
                .map(|(i, s)| self.sort_key(s, &format!("{path}.sorts[{i}]"), scope))
                .collect::<Result<Vec<_>>>()
        })?;
        level.order_by = keys.into_iter().flatten().collect();
        Ok(Built { level, names })
    }

    fn fetch(&self, fetch: &Map<String, Value>, path: &str) -> Result<Built> {
        let Built { level, names } =
            self.build(required(fetch, "input", path)?, &format!("{path}.input"))?;
        let offset = fetch_value(fetch, "offset", "offsetExpr", path)?;
        let count = fetch_value(fetch, "count", "countExpr", path)?;
        let count = match count {
            // The deprecated `count` field says "all" with -1.
            Some((-1, true)) | None => None,
            Some((n, _)) if n < 0 => {
                return Err(invalid(path, format!("negative count {n}")));
            }
            Some((n, _)) => Some(n),
        };
        let offset = match offset {
            None | Some((0, _)) => None,
            Some((n, _)) if n < 0 => {
                return Err(invalid(path, format!("negative offset {n}")));
            }
            Some((n, _)) => Some(n),
        };
        let mergeable = !level.limited();
        let (mut level, ()) = self.apply(level, mergeable, |_| Ok(()))?;
        level.limit = count;
        level.offset = offset;
        Ok(Built { level, names })
    }

    fn measure(&self, measure: &Value, path: &str, scope: &mut Scope<'_>) -> Result<(Sql, String)> {
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
    fn sort_key(&self, sort: &Value, path: &str, scope: &mut Scope<'_>) -> Result<Option<String>> {
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

    fn expr(&self, e: &Value, path: &str, scope: &mut Scope<'_>) -> Result<Sql> {
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
    fn function(&self, function: &Map<String, Value>, path: &str) -> Result<String> {
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
    fn values(
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

    fn scalar(
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
    fn extract(
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

/// A relation's `common.emit.outputMapping`, applied to its output.
fn emit(rel: &Map<String, Value>, built: Built, path: &str) -> Result<Built> {
    let Some(common) = get(rel, "common") else { return Ok(built) };
    let common_path = format!("{path}.common");
    let Some(emit) = get(object(common, &common_path)?, "emit") else { return Ok(built) };
    let emit_path = format!("{common_path}.emit");
    let mapping = array(object(emit, &emit_path)?, "outputMapping", &emit_path)?;
    let Built { mut level, names } = built;
    let mut select = Vec::with_capacity(mapping.len());
    let mut emitted = Vec::with_capacity(mapping.len());
    for (i, index) in mapping.iter().enumerate() {
        let index_path = format!("{emit_path}.outputMapping[{i}]");
        let index = int(index, &index_path)?;
        let column = usize::try_from(index).ok().and_then(|i| Some((level.select.get(i)?, i)));
        let Some((column, i)) = column else {
            return Err(invalid(
                &index_path,
                format!(
                    "column {index} is out of range: the relation has {}",
                    count(level.select.len(), "column")
                ),
            ));
        };
        select.push(column.clone());
        emitted.push(names.get(i).cloned().unwrap_or_else(|| format!("c{i}")));
    }
    level.select = select;
    Ok(Built { level, names: emitted })
}

/// The top-level column names of a `NamedStruct` (whose names also hold nested struct fields,
/// depth first).
fn base_columns(schema: &Map<String, Value>, path: &str) -> Result<Vec<String>> {
    let names_path = format!("{path}.names");
    let names = strings(array(schema, "names", path)?, &names_path)?;
    let mut columns = Vec::new();
    match get(schema, "struct") {
        None => {
            for (i, name) in names.iter().enumerate() {
                check_ident(name, &format!("{names_path}[{i}]"))?;
                columns.push((*name).to_owned());
            }
        }
        Some(fields) => {
            let struct_path = format!("{path}.struct");
            let types = array(object(fields, &struct_path)?, "types", &struct_path)?;
            let needed: usize = types.iter().map(|ty| 1 + nested_names(ty)).sum();
            if needed != names.len() {
                return Err(invalid(
                    &names_path,
                    format!(
                        "{} for a struct of {}",
                        count(names.len(), "name"),
                        count(types.len(), "field")
                    ),
                ));
            }
            let mut next = 0;
            for ty in types {
                let Some(name) = names.get(next) else { break };
                check_ident(name, &format!("{names_path}[{next}]"))?;
                columns.push((*name).to_owned());
                next += 1 + nested_names(ty);
            }
        }
    }
    Ok(columns)
}

/// How many names the nested struct fields of a type take.
fn nested_names(ty: &Value) -> usize {
    ty.get("struct")
        .and_then(|fields| fields.get("types"))
        .and_then(Value::as_array)
        .map_or(0, |types| types.iter().map(|ty| 1 + nested_names(ty)).sum())
}

/// The fields a read's projection mask selects.
fn mask_fields(mask: &Value, path: &str, columns: usize) -> Result<Vec<usize>> {
    let mask = object(mask, path)?;
    let Some(select) = get(mask, "select") else {
        return Ok((0..columns).collect());
    };
    let select_path = format!("{path}.select");
    let mut fields = Vec::new();
    for (i, item) in
        array(object(select, &select_path)?, "structItems", &select_path)?.iter().enumerate()
    {
        let item_path = format!("{select_path}.structItems[{i}]");
        let item = object(item, &item_path)?;
        if get(item, "child").is_some() {
            return Err(invalid(
                &format!("{item_path}.child"),
                "masks into nested fields are not supported",
            ));
        }
        let field = index(item, "field", &item_path)?;
        if field >= columns {
            return Err(invalid(
                &format!("{item_path}.field"),
                format!(
                    "field {field} is out of range: the table has {}",
                    count(columns, "column")
                ),
            ));
        }
        fields.push(field);
    }
    Ok(fields)
}

/// The grouping expressions of an aggregate's single grouping set, without repeats, in order:
/// inline (`groupings[0].groupingExpressions`) or shared (`groupingExpressions` referenced by
/// `groupings[0].expressionReferences`).
fn grouping_keys<'a>(
    aggregate: &'a Map<String, Value>,
    path: &str,
) -> Result<Vec<(&'a Value, String)>> {
    let groupings = array(aggregate, "groupings", path)?;
    let shared = array(aggregate, "groupingExpressions", path)?;
    let mut keys: Vec<(&Value, String)> = Vec::new();
    match groupings {
        [] => {}
        [grouping] => {
            let grouping_path = format!("{path}.groupings[0]");
            let grouping = object(grouping, &grouping_path)?;
            let references = array(grouping, "expressionReferences", &grouping_path)?;
            for (i, reference) in references.iter().enumerate() {
                let reference_path = format!("{grouping_path}.expressionReferences[{i}]");
                let n = int(reference, &reference_path)?;
                let Some(e) = usize::try_from(n).ok().and_then(|n| shared.get(n)) else {
                    return Err(invalid(
                        &reference_path,
                        format!(
                            "grouping expression {n} does not exist: the aggregate has {}",
                            count(shared.len(), "grouping expression")
                        ),
                    ));
                };
                keys.push((e, format!("{path}.groupingExpressions[{n}]")));
            }
            let inline = array(grouping, "groupingExpressions", &grouping_path)?;
            for (i, e) in inline.iter().enumerate() {
                keys.push((e, format!("{grouping_path}.groupingExpressions[{i}]")));
            }
        }
        _ => {
            return Err(invalid(
                &format!("{path}.groupings"),
                format!("{} grouping sets; only one is supported", groupings.len()),
            ));
        }
    }
    let mut unique: Vec<(&Value, String)> = Vec::with_capacity(keys.len());
    for key in keys {
        if !unique.iter().any(|(e, _)| *e == key.0) {
            unique.push(key);
        }
    }
    Ok(unique)
}

/// A fetch's offset or count: the deprecated integer field (flagged `true`) or a literal
/// expression; `None` when absent or a null literal.
fn fetch_value(
    fetch: &Map<String, Value>,
    key: &str,
    expr_key: &str,
    path: &str,
) -> Result<Option<(i64, bool)>> {
    if let Some(value) = get(fetch, key) {
        return Ok(Some((int(value, &format!("{path}.{key}"))?, true)));
    }
    let Some(e) = get(fetch, expr_key) else { return Ok(None) };
    let expr_path = format!("{path}.{expr_key}");
    let Some(literal) = get(object(e, &expr_path)?, "literal") else {
        return Err(invalid(&expr_path, "only a literal is supported"));
    };
    let literal_path = format!("{expr_path}.literal");
    let (kind, value) =
        oneof(object(literal, &literal_path)?, &literal_path, &LITERAL_FLAGS, "a literal")?;
    match kind.as_str() {
        "i8" | "i16" | "i32" | "i64" => {
            Ok(Some((int(value, &format!("{literal_path}.{kind}"))?, false)))
        }
        "null" => Ok(None),
        _ => Err(invalid(&literal_path, "expected an integer literal")),
    }
}

/// The field of a plain root field reference (to carry a column's name through).
fn field_index(e: &Value) -> Option<usize> {
    let selection = e.get("selection")?;
    let field = selection.get("directReference")?.get("structField")?;
    if field.get("child").is_some() {
        return None;
    }
    match field.get("field") {
        None => Some(0),
        Some(value) => int(value, "").ok().and_then(|n| usize::try_from(n).ok()),
    }
}

fn selection(selection: &Map<String, Value>, path: &str, scope: &mut Scope<'_>) -> Result<Sql> {
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
enum Arg<'a> {
    Value(&'a Value),
    Enum(String),
    Type,
}

/// A function's arguments (`arguments`, or the deprecated `args`), each with its path.
fn arguments<'a>(function: &'a Map<String, Value>, path: &str) -> Result<Vec<(Arg<'a>, String)>> {
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

// ---------------------------------------------------------------------------------------------
// Literals and types.

/// The keys of a literal besides its value.
const LITERAL_FLAGS: [&str; 2] = ["nullable", "typeVariationReference"];

fn literal(lit: &Map<String, Value>, path: &str) -> Result<Sql> {
    let (kind, value) = oneof(lit, path, &LITERAL_FLAGS, "a literal")?;
    let path = format!("{path}.{kind}");
    let path = path.as_str();
    Ok(match kind.as_str() {
        "boolean" => match value {
            Value::Bool(b) => {
                Sql::constant(if *b { "TRUE" } else { "FALSE" }.to_owned(), Some("boolean"))
            }
            other => {
                return Err(invalid(
                    path,
                    format!("expected a boolean, found {}", describe(other)),
                ));
            }
        },
        "i8" | "i16" => Sql::constant(int(value, path)?.to_string(), Some("smallint")),
        "i32" => Sql::constant(int(value, path)?.to_string(), Some("integer")),
        "i64" => Sql::constant(int(value, path)?.to_string(), Some("bigint")),
        "fp32" | "fp64" => {
            let ty = if kind == "fp32" { "real" } else { "double precision" };
            float_literal(value, ty, path)?
        }
        "string" | "fixedChar" => {
            Sql::constant(string_literal(text(value, path)?, path)?, Some("text"))
        }
        "varChar" => {
            let var_char = object(value, path)?;
            let value_path = format!("{path}.value");
            let value = match get(var_char, "value") {
                Some(value) => text(value, &value_path)?,
                None => "",
            };
            Sql::constant(string_literal(value, &value_path)?, Some("text"))
        }
        "binary" | "fixedBinary" => {
            let bytes = base64(text(value, path)?, path)?;
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Sql::constant(format!("decode('{hex}', 'hex')"), None)
        }
        "uuid" => {
            let bytes = base64(text(value, path)?, path)?;
            if bytes.len() != 16 {
                return Err(invalid(path, format!("a uuid has 16 bytes, found {}", bytes.len())));
            }
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let (a, rest) = hex.split_at(8);
            let (b, rest) = rest.split_at(4);
            let (c, rest) = rest.split_at(4);
            let (d, e) = rest.split_at(4);
            Sql::constant(format!("UUID '{a}-{b}-{c}-{d}-{e}'"), None)
        }
        "date" => {
            let days = int(value, path)?;
            if i32::try_from(days).is_err() {
                return Err(invalid(path, format!("date {days} is out of range")));
            }
            Sql::constant(format!("DATE '{}'", date_text(days)), None)
        }
        "time" => Sql::constant(format!("TIME '{}'", time_of_day(int(value, path)?, path)?), None),
        "precisionTime" => {
            let micros = precision_value(value, path)?;
            Sql::constant(format!("TIME '{}'", time_of_day(micros, path)?), None)
        }
        "timestamp" => {
            Sql::constant(format!("TIMESTAMP '{}'", timestamp_text(int(value, path)?)), None)
        }
        "precisionTimestamp" => {
            let micros = precision_value(value, path)?;
            Sql::constant(format!("TIMESTAMP '{}'", timestamp_text(micros)), None)
        }
        "timestampTz" => {
            Sql::constant(format!("TIMESTAMPTZ '{}'", timestamp_tz_text(int(value, path)?)), None)
        }
        "precisionTimestampTz" => {
            let micros = precision_value(value, path)?;
            Sql::constant(format!("TIMESTAMPTZ '{}'", timestamp_tz_text(micros)), None)
        }
        "intervalYearToMonth" => {
            let interval = object(value, path)?;
            let years = opt_int(interval, "years", path)?.unwrap_or(0);
            let months = opt_int(interval, "months", path)?.unwrap_or(0);
            interval_literal(&[(years, "years"), (months, "months")])
        }
        "intervalDayToSecond" => {
            let interval = object(value, path)?;
            let days = opt_int(interval, "days", path)?.unwrap_or(0);
            let seconds = opt_int(interval, "seconds", path)?.unwrap_or(0);
            let micros = match opt_int(interval, "precision", path)? {
                Some(precision) => {
                    let subseconds = opt_int(interval, "subseconds", path)?.unwrap_or(0);
                    to_micros(subseconds, precision, &format!("{path}.precision"))?
                }
                None => opt_int(interval, "microseconds", path)?.unwrap_or(0),
            };
            interval_literal(&[(days, "days"), (seconds, "seconds"), (micros, "microseconds")])
        }
        "decimal" => {
            let decimal = object(value, path)?;
            let value_path = format!("{path}.value");
            let bytes = base64(text(required(decimal, "value", path)?, &value_path)?, &value_path)?;
            if bytes.is_empty() || bytes.len() > 16 {
                return Err(invalid(
                    &value_path,
                    format!("a decimal has 16 bytes, found {}", bytes.len()),
                ));
            }
            let scale = opt_int(decimal, "scale", path)?.unwrap_or(0);
            let Ok(scale @ 0..=38) = u32::try_from(scale) else {
                return Err(invalid(
                    &format!("{path}.scale"),
                    format!("scale {scale} is out of range (0 to 38)"),
                ));
            };
            Sql::constant(decimal_text(le_i128(&bytes), scale), Some("numeric"))
        }
        "null" => Sql::constant(format!("CAST(NULL AS {})", pg_type(value, path)?), None),
        _ => return Err(invalid(path, "unsupported literal")),
    })
}

fn float_literal(value: &Value, ty: &'static str, path: &str) -> Result<Sql> {
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            other => other.trim().parse::<f64>().ok(),
        },
        _ => None,
    };
    let Some(number) = number else {
        return Err(invalid(path, format!("expected a number, found {}", describe(value))));
    };
    Ok(if number.is_nan() {
        Sql::constant(format!("CAST('NaN' AS {ty})"), None)
    } else if number.is_infinite() {
        let sign = if number < 0.0 { "-" } else { "" };
        Sql::constant(format!("CAST('{sign}Infinity' AS {ty})"), None)
    } else {
        Sql::constant(format!("{number:?}"), Some(ty))
    })
}

fn interval_literal(parts: &[(i64, &str)]) -> Sql {
    let text: Vec<String> =
        parts.iter().filter(|(n, _)| *n != 0).map(|(n, unit)| format!("{n} {unit}")).collect();
    let text = if text.is_empty() { "0 seconds".to_owned() } else { text.join(" ") };
    Sql::constant(format!("INTERVAL '{text}'"), None)
}

/// A `{precision, value}` time or timestamp, in microseconds.
fn precision_value(value: &Value, path: &str) -> Result<i64> {
    let value = object(value, path)?;
    let precision = opt_int(value, "precision", path)?.unwrap_or(0);
    let amount = opt_int(value, "value", path)?.unwrap_or(0);
    to_micros(amount, precision, &format!("{path}.precision"))
}

/// An amount in units of 10^-precision seconds, in microseconds (finer units truncated, as
/// PostgreSQL keeps microseconds).
fn to_micros(amount: i64, precision: i64, path: &str) -> Result<i64> {
    match precision {
        0..=6 => {
            let factor = 10_i64.pow(u32::try_from(6 - precision).unwrap_or(0));
            amount.checked_mul(factor).ok_or_else(|| invalid(path, "the value is out of range"))
        }
        7..=12 => Ok(amount.div_euclid(10_i64.pow(u32::try_from(precision - 6).unwrap_or(0)))),
        _ => Err(invalid(path, format!("precision {precision} is out of range (0 to 12)"))),
    }
}

/// Days since 1970-01-01 as a (proleptic Gregorian) year, month and day.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A date as PostgreSQL reads it (`BC` for years before 1).
fn date_text(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    if year <= 0 {
        format!("{:04}-{month:02}-{day:02} BC", 1 - year)
    } else {
        format!("{year:04}-{month:02}-{day:02}")
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

fn clock_text(micros: i64) -> String {
    let seconds = micros / 1_000_000;
    let fraction = micros % 1_000_000;
    let clock = format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    if fraction == 0 {
        clock
    } else {
        format!("{clock}.{}", format!("{fraction:06}").trim_end_matches('0'))
    }
}

fn time_of_day(micros: i64, path: &str) -> Result<String> {
    if !(0..=MICROS_PER_DAY).contains(&micros) {
        return Err(invalid(path, format!("time {micros} is not within a day")));
    }
    Ok(clock_text(micros))
}

fn timestamp_text(micros: i64) -> String {
    let clock = clock_text(micros.rem_euclid(MICROS_PER_DAY));
    let date = date_text(micros.div_euclid(MICROS_PER_DAY));
    match date.strip_suffix(" BC") {
        Some(date) => format!("{date} {clock} BC"),
        None => format!("{date} {clock}"),
    }
}

fn timestamp_tz_text(micros: i64) -> String {
    let clock = clock_text(micros.rem_euclid(MICROS_PER_DAY));
    let date = date_text(micros.div_euclid(MICROS_PER_DAY));
    match date.strip_suffix(" BC") {
        Some(date) => format!("{date} {clock}+00 BC"),
        None => format!("{date} {clock}+00"),
    }
}

/// A little-endian two's-complement integer of up to 16 bytes.
fn le_i128(bytes: &[u8]) -> i128 {
    let negative = bytes.last().is_some_and(|b| b & 0x80 != 0);
    let mut buffer = [if negative { 0xff } else { 0 }; 16];
    for (slot, byte) in buffer.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    i128::from_le_bytes(buffer)
}

fn decimal_text(value: i128, scale: u32) -> String {
    let digits = value.unsigned_abs().to_string();
    let sign = if value < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let digits = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (whole, fraction) = digits.split_at(digits.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

/// Standard or URL-safe base64, padded or not (as proto3 JSON writes bytes).
fn base64(text: &str, path: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for c in text.trim_end_matches('=').bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(invalid(path, "not valid base64")),
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((buffer >> bits) & 0xff) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// A Substrait type as a PostgreSQL type name.
fn pg_type(ty: &Value, path: &str) -> Result<String> {
    let (kind, body) = oneof(object(ty, path)?, path, &[], "a type")?;
    let path = format!("{path}.{kind}");
    let parameter = |key: &str| -> Result<Option<i64>> {
        match body.as_object() {
            Some(body) => opt_int(body, key, &path),
            None => Ok(None),
        }
    };
    Ok(match kind.as_str() {
        "bool" => "boolean".to_owned(),
        "i8" | "i16" => "smallint".to_owned(),
        "i32" => "integer".to_owned(),
        "i64" => "bigint".to_owned(),
        "fp32" => "real".to_owned(),
        "fp64" => "double precision".to_owned(),
        "string" => "text".to_owned(),
        "binary" | "fixedBinary" => "bytea".to_owned(),
        "date" => "date".to_owned(),
        "time" => "time".to_owned(),
        "timestamp" => "timestamp".to_owned(),
        "timestampTz" => "timestamptz".to_owned(),
        "intervalYear" | "intervalDay" | "intervalCompound" => "interval".to_owned(),
        "uuid" => "uuid".to_owned(),
        "varchar" | "fixedChar" => {
            let name = if kind == "varchar" { "varchar" } else { "char" };
            match parameter("length")? {
                Some(length) if length > 0 => format!("{name}({length})"),
                _ => name.to_owned(),
            }
        }
        "decimal" => match (parameter("precision")?, parameter("scale")?.unwrap_or(0)) {
            (Some(precision @ 1..=1000), scale @ 0..=1000) => {
                format!("numeric({precision},{scale})")
            }
            _ => "numeric".to_owned(),
        },
        "precisionTime" | "precisionTimestamp" | "precisionTimestampTz" => {
            let name = match kind.as_str() {
                "precisionTime" => "time",
                "precisionTimestamp" => "timestamp",
                _ => "timestamptz",
            };
            let precision = parameter("precision")?.unwrap_or(6).clamp(0, 6);
            format!("{name}({precision})")
        }
        "list" => {
            let element_path = format!("{path}.type");
            let element = body
                .as_object()
                .and_then(|list| get(list, "type"))
                .ok_or_else(|| invalid(&element_path, "missing"))?;
            format!("{}[]", pg_type(element, &element_path)?)
        }
        _ => return Err(invalid(&path, "unsupported type")),
    })
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// Appends a level as SQL: with the given output names (quoted) at the top, `c0`, `c1` ...
/// inside.
fn render(level: &Level, names: Option<&[String]>, indent: &str, out: &mut String) {
    out.push_str(indent);
    out.push_str("SELECT");
    for (i, item) in level.select.iter().enumerate() {
        out.push_str(if i == 0 { " " } else { ", " });
        out.push_str(&item.text);
        let name = names.and_then(|names| names.get(i)).cloned().unwrap_or_else(|| format!("c{i}"));
        if item.kind != Kind::Column(name.clone()) {
            out.push_str(" AS ");
            out.push_str(&if names.is_some() { ident(&name) } else { name });
        }
    }
    out.push('\n');
    out.push_str(indent);
    match &level.from {
        From::Table { name, alias } => out.push_str(&format!("FROM {name} AS {alias}")),
        From::Subquery { level: inner, alias } => {
            out.push_str("FROM (\n");
            render(inner, None, &format!("{indent}  "), out);
            out.push_str(&format!("\n{indent}) AS {alias}"));
        }
    }
    if !level.filter.is_empty() {
        out.push_str(&format!("\n{indent}WHERE {}", conjunction(&level.filter)));
    }
    if let Some(keys) = &level.group_by
        && !keys.is_empty()
    {
        let keys: Vec<String> = keys
            .iter()
            .map(|key| match key.kind {
                Kind::Constant(Some(ty)) => format!("CAST({} AS {ty})", key.text),
                _ => key.text.clone(),
            })
            .collect();
        out.push_str(&format!("\n{indent}GROUP BY {}", keys.join(", ")));
    }
    if !level.having.is_empty() {
        out.push_str(&format!("\n{indent}HAVING {}", conjunction(&level.having)));
    }
    if !level.order_by.is_empty() {
        out.push_str(&format!("\n{indent}ORDER BY {}", level.order_by.join(", ")));
    }
    match (level.limit, level.offset) {
        (Some(limit), Some(offset)) => {
            out.push_str(&format!("\n{indent}LIMIT {limit} OFFSET {offset}"))
        }
        (Some(limit), None) => out.push_str(&format!("\n{indent}LIMIT {limit}")),
        (None, Some(offset)) => out.push_str(&format!("\n{indent}OFFSET {offset}")),
        (None, None) => {}
    }
}

fn conjunction(conditions: &[Sql]) -> String {
    if let [condition] = conditions {
        return condition.text.clone();
    }
    conditions.iter().map(|c| c.wrap(P_AND)).collect::<Vec<_>>().join(" AND ")
}

// ---------------------------------------------------------------------------------------------
// JSON access, with the proto3 JSON mapping's leniencies.

fn invalid(path: &str, message: impl std::fmt::Display) -> PlanError {
    PlanError::Invalid(format!("{path}: {message}"))
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// A short description of a JSON value for messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => {
            format!("\"{}…\"", s.chars().take(40).collect::<String>())
        }
        Value::String(s) => format!("\"{s}\""),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| invalid(path, format!("expected an object, found {}", describe(value))))
}

/// A field by its camelCase name (or the snake_case one); `null` counts as absent.
fn get<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).or_else(|| object.get(&snake(key))).filter(|value| !value.is_null())
}

fn required<'a>(object: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a Value> {
    get(object, key).ok_or_else(|| invalid(&format!("{path}.{key}"), "missing"))
}

/// A repeated field; absent is empty.
fn array<'a>(object: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a [Value]> {
    match get(object, key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(invalid(
            &format!("{path}.{key}"),
            format!("expected an array, found {}", describe(other)),
        )),
    }
}

/// The one set field of a oneof message, by its camelCase name.
fn oneof<'a>(
    object: &'a Map<String, Value>,
    path: &str,
    skip: &[&str],
    what: &str,
) -> Result<(String, &'a Value)> {
    let mut found: Option<(String, &Value)> = None;
    for (key, value) in object {
        let key = camel(key);
        if value.is_null() || skip.contains(&key.as_str()) {
            continue;
        }
        if let Some((first, _)) = &found {
            return Err(invalid(path, format!("expected {what}, found both {first} and {key}")));
        }
        found = Some((key, value));
    }
    found.ok_or_else(|| invalid(path, format!("expected {what}, found an empty object")))
}

fn text<'a>(value: &'a Value, path: &str) -> Result<&'a str> {
    value
        .as_str()
        .ok_or_else(|| invalid(path, format!("expected a string, found {}", describe(value))))
}

fn strings<'a>(values: &'a [Value], path: &str) -> Result<Vec<&'a str>> {
    values.iter().enumerate().map(|(i, value)| text(value, &format!("{path}[{i}]"))).collect()
}

/// An integer: a JSON number or a string holding one (as proto3 JSON writes 64-bit integers).
fn int(value: &Value, path: &str) -> Result<i64> {
    let parsed = match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18).map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| invalid(path, format!("expected an integer, found {}", describe(value))))
}

fn opt_int(object: &Map<String, Value>, key: &str, path: &str) -> Result<Option<i64>> {
    get(object, key).map(|value| int(value, &format!("{path}.{key}"))).transpose()
}

/// A non-negative index; absent is 0.
fn index(object: &Map<String, Value>, key: &str, path: &str) -> Result<usize> {
    let n = opt_int(object, key, path)?.unwrap_or(0);
    usize::try_from(n).map_err(|_| invalid(&format!("{path}.{key}"), format!("negative index {n}")))
}

/// An unsigned 32-bit anchor or reference; absent is 0.
fn unsigned(object: &Map<String, Value>, key: &str, path: &str) -> Result<u64> {
    let n = opt_int(object, key, path)?.unwrap_or(0);
    u32::try_from(n).map(u64::from).map_err(|_| {
        invalid(&format!("{path}.{key}"), format!("{n} is not an unsigned 32-bit integer"))
    })
}

/// An enum given by name or number, as its number.
fn enum_value(value: &Value, path: &str, names: &[&str]) -> Result<usize> {
    let number = match value {
        Value::String(name) => names.iter().position(|n| n == name),
        _ => {
            int(value, path).ok().and_then(|n| usize::try_from(n).ok()).filter(|n| *n < names.len())
        }
    };
    number.ok_or_else(|| invalid(path, format!("unknown value {}", describe(value))))
}
#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

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
