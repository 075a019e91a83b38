//! `query_sql` and `explain_sql`: one read-only statement, paged with signed keyset tokens, or
//! planned without running.

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{DIALECTS, DataServer};
use crate::servers::sql_common::{Reader, sql_error};
use crate::servers::{CallContext, ToolSpec};
use crate::sql::page::{PageToken, fingerprint};
use crate::sql::{self, PageRequest, Paging, ReadLimits, ReadOnlyQuery, TimeFilter};
use crate::tool::{ToolError, ToolOutput, Verb, parse_arguments};

/// The tools of this file.
pub(super) const NAMES: &[&str] = &["query_sql", "query_plan", "explain_sql"];

pub(super) fn tools() -> Vec<ToolSpec> {
    let read = || ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
    vec![
        ToolSpec::new::<QuerySqlParams>(
            "query_sql",
            "Run one read-only SQL query and get a TabularResult page. dialect: postgres (default) or ansi. max_rows: rows per page (default 1000, at most the configured maximum). When has_more is true, call again with the same sql and arguments plus page_token to get the next page; tokens are signed, expire after a day (sql.page_token_lifetime_seconds), and every page costs about the same. time_range {from, to, default_window, column} keeps rows whose time column (named, or the first timestamp/date column) is in [from, to); from/to take ISO-8601 instants or dates, now-1h, -7d, P30D. dry_run=true validates and plans without running anything.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<QueryPlanParams>(
            "query_plan",
            "Run a Substrait plan (JSON form) as one read-only query and get a TabularResult page, paged like query_sql. Supported relations: read (named tables), filter, project, aggregate, sort, fetch; any other relation is refused by name. The SQL it ran is in _meta.sql; dry_run=true translates and plans only.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<ExplainSqlParams>(
            "explain_sql",
            "Show PostgreSQL's plan for one read-only query without running it: format text or json, with the estimated rows and cost. analyze=true runs the query inside a read-only transaction that is rolled back and reports actual rows and times.",
            Verb::Read,
            read(),
        ),
    ]
}

pub(super) async fn call(
    server: &DataServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    context: &CallContext,
) -> Result<ToolOutput, ToolError> {
    match tool {
        "query_sql" => server.query_sql(arguments, context).await,
        "query_plan" => server.query_plan(arguments, context).await,
        _ => server.explain_sql(arguments, context).await,
    }
}

/// A time window on the result (spec 002 TimeRange), plus the column to apply it to.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimeRangeParams {
    /// Start (inclusive): ISO-8601 instant or date, `now`, `now-1h`, `-7d`, `P30D` (now minus).
    from: Option<String>,
    /// End (exclusive), in the same forms.
    to: Option<String>,
    /// When from and to are both absent: a duration back from now, such as `P30D`.
    default_window: Option<String>,
    /// The output column to filter on; the first timestamp or date column when absent.
    column: Option<String>,
}

/// Arguments of `query_sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuerySqlParams {
    /// One read-only SQL statement.
    sql: String,
    /// `postgres` (default) or `ansi`.
    dialect: Option<String>,
    /// Rows per page.
    #[schemars(range(min = 1))]
    max_rows: Option<u64>,
    /// The page_token of the previous page, to get the next one.
    page_token: Option<String>,
    /// Keep only rows in this time window.
    time_range: Option<TimeRangeParams>,
    /// Validate and plan, run nothing.
    #[serde(default)]
    dry_run: bool,
}

/// Arguments of `query_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryPlanParams {
    /// A Substrait plan in its JSON form (relations read, filter, project, aggregate, sort, fetch).
    substrait: Value,
    /// Rows per page.
    #[schemars(range(min = 1))]
    max_rows: Option<u64>,
    /// The page_token of the previous page, to get the next one.
    page_token: Option<String>,
    /// Translate and plan, run nothing.
    #[serde(default)]
    dry_run: bool,
}

/// Arguments of `explain_sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplainSqlParams {
    /// One read-only SQL statement.
    sql: String,
    /// `postgres` (default) or `ansi`.
    dialect: Option<String>,
    /// `text` (default) or `json`.
    #[serde(default)]
    format: ExplainFormat,
    /// Run the query (read-only, rolled back) and report actual rows and times.
    #[serde(default)]
    analyze: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ExplainFormat {
    #[default]
    Text,
    Json,
}

/// Refuse a dialect orca does not run.
pub(super) fn check_dialect(dialect: Option<&str>) -> Result<&'static str, ToolError> {
    match dialect.map(str::to_ascii_lowercase).as_deref() {
        None | Some("postgres" | "postgresql") => Ok("postgres"),
        Some("ansi") => Ok("ansi"),
        Some(other) => Err(ToolError::invalid_input(format!(
            "dialect `{other}` is not supported; supported dialects: {}",
            DIALECTS.join(", ")
        ))
        .with_hint("write the query for PostgreSQL (ANSI SQL runs as written)")),
    }
}

/// Classify `sql` as one read, or say why it is not one.
pub(super) fn read_only_query(sql_text: &str, tool: &str) -> Result<ReadOnlyQuery, ToolError> {
    let statement = sql::single_statement(sql_text).map_err(sql_error)?;
    ReadOnlyQuery::from_statement(statement).map_err(|error| match error {
        sql::Error::NotARead { statement } => ToolError::invalid_input(format!(
            "{tool} runs reads only; this is a {} statement",
            statement.kind
        ))
        .with_hint("use execute_sql (dry run, then a confirmed write) to change data"),
        other => sql_error(other),
    })
}

/// `query` as it runs for the caller `reader` reads for (its masked relations, when masked).
fn as_run(reader: &Reader, query: ReadOnlyQuery) -> Result<ReadOnlyQuery, ToolError> {
    if !reader.masked() {
        return Ok(query);
    }
    let statement = reader.statement(query.statement().clone()).map_err(sql_error)?;
    ReadOnlyQuery::from_statement(statement).map_err(sql_error)
}

impl DataServer {
    pub(super) async fn query_sql(
        &self,
        arguments: Option<serde_json::Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: QuerySqlParams = parse_arguments(arguments)?;
        let dialect = check_dialect(params.dialect.as_deref())?;
        self.run_query(params, dialect, "query_sql", context).await
    }

    pub(super) async fn query_plan(
        &self,
        arguments: Option<serde_json::Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: QueryPlanParams = parse_arguments(arguments)?;
        let translated = sql::substrait::plan_to_sql(&params.substrait).map_err(|error| {
            let hint = match &error {
                sql::substrait::PlanError::Unsupported { .. } => {
                    "query_plan runs read, filter, project, aggregate, sort and fetch relations; express the rest in SQL with query_sql"
                }
                sql::substrait::PlanError::UnknownFunction(_) => {
                    "use the standard Substrait function names, or write the query in SQL with query_sql"
                }
                sql::substrait::PlanError::Invalid(_) => "check the plan against Substrait's JSON form",
            };
            ToolError::invalid_input(error.to_string()).with_hint(hint)
        })?;
        let request = QuerySqlParams {
            sql: translated.sql.clone(),
            dialect: None,
            max_rows: params.max_rows,
            page_token: params.page_token,
            time_range: None,
            dry_run: params.dry_run,
        };
        let mut output = self.run_query(request, "substrait", "query_plan", context).await?;
        output.meta.insert("sql".into(), Value::from(translated.sql));
        Ok(output)
    }

    /// One page of `params.sql` (already in PostgreSQL's dialect).
    async fn run_query(
        &self,
        params: QuerySqlParams,
        dialect: &'static str,
        tool: &str,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let query = read_only_query(&params.sql, tool)?;
        crate::servers::sql_common::refuse_masked_sql(
            &query.statement().text,
            &context.principal,
            self.config.refuse_masked_sql,
        )?;
        let reader = self.target.reader(&context.principal).await?;
        let query = as_run(&reader, query)?;
        let max_rows = self.max_rows(params.max_rows)?;
        let time_range = params.time_range.clone();
        let time_text = time_range
            .as_ref()
            .map(|range| serde_json::to_string(range).unwrap_or_default())
            .unwrap_or_default();
        let key = fingerprint(&[
            params.sql.trim(),
            dialect,
            &max_rows.to_string(),
            &time_text,
            &context.principal.identity(),
            &self.target.label,
        ]);
        let now = chrono::Utc::now();
        let token = match &params.page_token {
            None => None,
            Some(text) => Some(
                PageToken::decode(text, &self.secret, &key, now.timestamp()).map_err(|error| {
                    ToolError::invalid_input(error.to_string()).with_hint(
                        "send the same sql, dialect, max_rows and time_range as the first page, with its page_token",
                    )
                })?,
            ),
        };
        let window = resolve_window(token.as_ref(), time_range.as_ref(), now)?;
        if params.dry_run {
            return self.dry_run(&reader, &query, max_rows, window.as_ref()).await;
        }
        let limits = ReadLimits {
            max_rows,
            max_bytes: self.config.max_result_bytes,
            timeout: self.config.default_timeout,
        };
        let request = PageRequest {
            after: token.as_ref().map(|token| (token.boundary.clone(), token.equal_returned)),
            window: window.clone(),
        };
        let paged = match sql::run_paged_read(&reader.pool, &query, limits, &request).await {
            Ok(paged) => paged,
            Err(error) => match reader.refreshed_after(&error).await {
                Some(fresh) => sql::run_paged_read(&fresh.pool, &query, limits, &request)
                    .await
                    .map_err(|error| fresh.error(error))?,
                None => return Err(reader.error(error)),
            },
        };
        let page = token.as_ref().map_or(1, |token| token.page);
        let returned_before = token.as_ref().map_or(0, |token| token.returned);
        let returned = returned_before + paged.result.rows.len() as u64;
        let next_token = paged.next.as_ref().map(|(boundary, equal_returned)| {
            PageToken {
                fingerprint: key.clone(),
                page: page + 1,
                boundary: boundary.clone(),
                equal_returned: *equal_returned,
                window: window.as_ref().map(|window| {
                    (
                        window.from.map(|instant| instant.timestamp_micros()),
                        window.to.map(|instant| instant.timestamp_micros()),
                    )
                }),
                returned,
                expires: now.timestamp()
                    + i64::try_from(self.config.page_token_lifetime.as_secs())
                        .unwrap_or(i64::MAX / 2),
            }
            .encode(&self.secret)
        });
        let has_more = paged.result.truncated.is_some();
        let row_count = if has_more { Value::Null } else { Value::from(returned) };
        let columns: Vec<String> =
            paged.result.columns.iter().map(|column| column.name.clone()).collect();
        let mut value =
            crate::servers::sql_common::tabular_result(paged.result, &self.target.source);
        value["row_count"] = row_count;
        value["has_more"] = Value::from(has_more);
        value["page_token"] = next_token.map_or(Value::Null, Value::from);
        let mut output = ToolOutput::new(value);
        let paging = match &paged.paging {
            Paging::Keyset { tie_breaker } => {
                json!({"strategy": "keyset", "page": page, "tie_breaker": tie_breaker})
            }
            Paging::Unavailable(reason) => json!({"strategy": "none", "page": 1, "reason": reason}),
        };
        output.meta.insert("paging".into(), paging);
        let advice = self.advice(query.statement(), &columns, time_range.is_some()).await;
        if !advice.is_empty() {
            output.meta.insert("prompts".into(), Value::Array(advice));
        }
        if let (Some(window), Some(column)) = (&window, &paged.time_column) {
            output.meta.insert(
                "time_range".into(),
                json!({
                    "column": column,
                    "from": window.from.map(|instant| instant.to_rfc3339()),
                    "to": window.to.map(|instant| instant.to_rfc3339()),
                }),
            );
        }
        Ok(output)
    }

    /// The rows per page: the default, or the caller's within `1..=hard_max_rows`.
    fn max_rows(&self, requested: Option<u64>) -> Result<usize, ToolError> {
        Ok(match requested {
            None => self.config.default_max_rows,
            Some(rows) => {
                let rows = usize::try_from(rows).unwrap_or(usize::MAX);
                if rows == 0 || rows > self.config.hard_max_rows {
                    return Err(ToolError::invalid_input(format!(
                        "max_rows must be between 1 and {}",
                        self.config.hard_max_rows
                    ))
                    .with_hint("page through larger results with page_token"));
                }
                rows
            }
        })
    }

    /// The prompts a person may need to see about this query (spec 002 "Prompts"): a large
    /// table read without a time window, sensitive columns, tables joined without a key.
    async fn advice(
        &self,
        statement: &sql::Statement,
        columns: &[String],
        has_time_range: bool,
    ) -> Vec<Value> {
        let mut advice = Vec::new();
        let sensitive: Vec<&str> = columns
            .iter()
            .filter(|column| sql::pii::name_signal(column).is_some())
            .map(String::as_str)
            .collect();
        if !sensitive.is_empty() {
            advice.push(json!({
                "name": "ask_for_sensitive_columns_ack",
                "arguments": {"cols": sensitive.join(", ")},
            }));
        }
        if statement.tables.is_empty() {
            return advice;
        }
        let Ok(schema) = self.database_schema().await else { return advice };
        let relations: Vec<&sql::introspect::Relation> = statement
            .tables
            .iter()
            .filter_map(|table| {
                schema.relations.iter().find(|relation| {
                    relation.name.eq_ignore_ascii_case(&table.name)
                        && table
                            .schema
                            .as_deref()
                            .is_none_or(|name| relation.schema.eq_ignore_ascii_case(name))
                })
            })
            .collect();
        if !has_time_range {
            for relation in &relations {
                let large = relation.row_estimate.is_some_and(|rows| {
                    u64::try_from(rows).unwrap_or(0) >= self.data.exact_count_max_rows
                });
                if large {
                    advice.push(json!({
                        "name": "ask_for_time_window",
                        "arguments": {"table": format!("{}.{}", relation.schema, relation.name)},
                    }));
                }
            }
        }
        let linked = |left: &sql::introspect::Relation, right: &sql::introspect::Relation| {
            let refers = |from: &sql::introspect::Relation, to: &sql::introspect::Relation| {
                from.foreign_keys.iter().any(|key| {
                    key.referenced_schema == to.schema && key.referenced_table == to.name
                })
            };
            refers(left, right) || refers(right, left)
        };
        if relations.len() >= 2 {
            for (index, relation) in relations.iter().enumerate() {
                let others = relations.iter().enumerate().filter(|(other, _)| *other != index);
                if !others.clone().any(|(_, other)| linked(relation, other)) {
                    let right = others.map(|(_, other)| other).next();
                    if let Some(right) = right {
                        advice.push(json!({
                            "name": "ask_for_missing_keys_or_joins",
                            "arguments": {
                                "left": format!("{}.{}", relation.schema, relation.name),
                                "right": format!("{}.{}", right.schema, right.name),
                            },
                        }));
                        break;
                    }
                }
            }
        }
        advice
    }

    async fn dry_run(
        &self,
        reader: &Reader,
        query: &ReadOnlyQuery,
        max_rows: usize,
        window: Option<&TimeFilter>,
    ) -> Result<ToolOutput, ToolError> {
        sql::check_read(&reader.pool, query, self.config.default_timeout)
            .await
            .map_err(|error| reader.error(error))?;
        let statement = query.statement();
        let plan = if sql::explainable(statement) {
            Some(
                sql::explain(
                    &reader.pool,
                    statement,
                    self.config.default_timeout,
                    self.database.plan_format(),
                )
                .await
                .map_err(|error| reader.error(error))?,
            )
        } else {
            None
        };
        Ok(ToolOutput::new(json!({
            "dry_run": true,
            "valid": true,
            "statement_type": statement.kind.as_str(),
            "tables": statement.tables.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "max_rows": max_rows,
            "time_range": window.map(|window| json!({
                "column": window.column,
                "from": window.from.map(|instant| instant.to_rfc3339()),
                "to": window.to.map(|instant| instant.to_rfc3339()),
            })),
            "estimated_rows": plan.as_ref().and_then(|plan| plan.estimated_rows),
            "estimated_cost": plan.as_ref().and_then(|plan| plan.total_cost),
            "plan": plan.map(|plan| plan.plan),
        })))
    }

    pub(super) async fn explain_sql(
        &self,
        arguments: Option<serde_json::Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: ExplainSqlParams = parse_arguments(arguments)?;
        check_dialect(params.dialect.as_deref())?;
        let query = read_only_query(&params.sql, "explain_sql")?;
        // A plan shows no values, but `analyze` counts the rows a condition keeps: it runs in
        // the caller's masked session like a read (and meets the same courtesy refusals).
        crate::servers::sql_common::refuse_masked_sql(
            &query.statement().text,
            &context.principal,
            self.config.refuse_masked_sql,
        )?;
        if !sql::explainable(query.statement()) {
            return Err(ToolError::invalid_input("only a SELECT or VALUES query can be explained"));
        }
        let reader = self.target.reader(&context.principal).await?;
        let query = as_run(&reader, query)?;
        sql::check_read(&reader.pool, &query, self.config.default_timeout)
            .await
            .map_err(|error| reader.error(error))?;
        let explained = sql::explain_read(
            &reader.pool,
            &query,
            params.format == ExplainFormat::Json,
            params.analyze,
            self.config.default_timeout,
            self.database.plan_format(),
        )
        .await
        .map_err(|error| reader.error(error))?;
        Ok(ToolOutput::new(json!({
            "format": if params.format == ExplainFormat::Json { "json" } else { "text" },
            "explain": explained.explain,
            "estimated_rows": explained.estimated_rows,
            "estimated_cost": explained.estimated_cost,
            "analyzed": params.analyze,
        })))
    }
}

/// The time window of a paged read: resolved once, on the first page, and carried by the tokens
/// of the pages after it.
fn resolve_window(
    token: Option<&PageToken>,
    time_range: Option<&TimeRangeParams>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<TimeFilter>, ToolError> {
    Ok(match (token, time_range) {
        (_, None) => None,
        (Some(token), Some(range)) => {
            let (from, to) = token.window.unwrap_or((None, None));
            Some(TimeFilter {
                column: range.column.clone(),
                from: from.and_then(chrono::DateTime::from_timestamp_micros),
                to: to.and_then(chrono::DateTime::from_timestamp_micros),
            })
        }
        (None, Some(range)) => {
            let resolved = sql::time_range::parse_window(
                range.from.as_deref(),
                range.to.as_deref(),
                range.default_window.as_deref(),
                now,
            )
            .map_err(|message| ToolError::invalid_input(format!("time_range: {message}")))?;
            Some(TimeFilter { column: range.column.clone(), from: resolved.from, to: resolved.to })
        }
    })
}
