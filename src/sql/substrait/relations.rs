//! Relations to `SELECT` levels: each supported relation folds into the level of its input while
//! that keeps its meaning, or wraps it as a subquery; and the rendering of a level as SQL text.

use std::cell::Cell;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::fragments::{Kind, Sql, check_ident, conjunction, ident};
use super::json::{array, count, get, index, int, invalid, object, oneof, required, strings};
use super::literals::LITERAL_FLAGS;
use super::{PlanError, Result};

/// One `SELECT` level. Its expressions are over the columns of its FROM item.
pub(super) struct Level {
    pub(super) select: Vec<Sql>,
    pub(super) from: From,
    pub(super) filter: Vec<Sql>,
    /// `Some` once aggregated (empty for an aggregate without grouping keys).
    pub(super) group_by: Option<Vec<Sql>>,
    pub(super) having: Vec<Sql>,
    pub(super) order_by: Vec<String>,
    pub(super) limit: Option<i64>,
    pub(super) offset: Option<i64>,
}

pub(super) enum From {
    Table { name: String, alias: String },
    Subquery { level: Box<Level>, alias: String },
}

impl Level {
    pub(super) fn new(select: Vec<Sql>, from: From) -> Level {
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

    pub(super) fn limited(&self) -> bool {
        self.limit.is_some() || self.offset.is_some()
    }
}

/// A translated relation: its `SELECT` and the names of its output columns.
pub(super) struct Built {
    pub(super) level: Level,
    pub(super) names: Vec<String>,
}

/// The input columns an expression is rendered against, counting how often each is used.
pub(super) struct Scope<'a> {
    pub(super) columns: &'a [Sql],
    pub(super) uses: Vec<usize>,
}

/// Longest computed column text that is inlined more than once rather than wrapped.
const INLINE_REPEAT_MAX: usize = 64;

impl<'a> Scope<'a> {
    pub(super) fn new(columns: &'a [Sql]) -> Scope<'a> {
        Scope { columns, uses: vec![0; columns.len()] }
    }

    pub(super) fn column(&mut self, field: usize, path: &str) -> Result<Sql> {
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

pub(super) struct Context {
    /// Extension function names by anchor.
    pub(super) functions: HashMap<u64, String>,
    /// The next `rN` alias.
    pub(super) aliases: Cell<usize>,
}

impl Context {
    fn alias(&self) -> String {
        let n = self.aliases.get();
        self.aliases.set(n + 1);
        format!("r{n}")
    }

    pub(super) fn build(&self, rel: &Value, path: &str) -> Result<Built> {
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

    pub(super) fn wrap(&self, inner: Level) -> Level {
        let alias = self.alias();
        let select = (0..inner.select.len())
            .map(|i| Sql::column(format!("{alias}.c{i}"), format!("c{i}")))
            .collect();
        Level::new(select, From::Subquery { level: Box::new(inner), alias })
    }

    pub(super) fn read(&self, read: &Map<String, Value>, path: &str) -> Result<Built> {
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

    pub(super) fn filter(&self, filter: &Map<String, Value>, path: &str) -> Result<Built> {
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

    pub(super) fn project(&self, project: &Map<String, Value>, path: &str) -> Result<Built> {
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

    pub(super) fn aggregate(&self, aggregate: &Map<String, Value>, path: &str) -> Result<Built> {
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

    pub(super) fn sort(&self, sort: &Map<String, Value>, path: &str) -> Result<Built> {
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

    pub(super) fn fetch(&self, fetch: &Map<String, Value>, path: &str) -> Result<Built> {
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
}

/// A relation's `common.emit.outputMapping`, applied to its output.
pub(super) fn emit(rel: &Map<String, Value>, built: Built, path: &str) -> Result<Built> {
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

/// Appends a level as SQL: with the given output names (quoted) at the top, `c0`, `c1` ...
/// inside.
pub(super) fn render(level: &Level, names: Option<&[String]>, indent: &str, out: &mut String) {
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
