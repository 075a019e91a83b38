//! `query_sql` and `explain_sql`: one read-only statement, paged with signed keyset tokens, or
//! planned without running.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{DIALECTS, DataServer};
use crate::servers::CallContext;
use crate::servers::postgres::execute::sql_error;
use crate::sql::page::{PageToken, fingerprint};
use crate::sql::{self, PageRequest, Paging, ReadLimits, ReadOnlyQuery, TimeFilter};
use crate::tool::{ToolError, ToolOutput, parse_arguments};

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
fn check_dialect(dialect: Option<&str>) -> Result<&'static str, ToolError> {
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
fn read_only_query(sql_text: &str, tool: &str) -> Result<ReadOnlyQuery, ToolError> {
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

impl DataServer {
    pub(super) async fn query_sql(
        &self,
        arguments: Option<serde_json::Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: QuerySqlParams = parse_arguments(arguments)?;
        let dialect = check_dialect(params.dialect.as_deref())?;
        let query = read_only_query(&params.sql, "query_sql")?;
        let max_rows = match params.max_rows {
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
        };
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
            &context.principal.name,
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
        // The window is resolved once, on the first page, and carried by the tokens.
        let window = match (&token, &time_range) {
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
                Some(TimeFilter {
                    column: range.column.clone(),
                    from: resolved.from,
                    to: resolved.to,
                })
            }
        };
        if params.dry_run {
            return self.dry_run(&query, max_rows, window.as_ref()).await;
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
        let paged = sql::run_paged_read(&self.target.pool, &query, limits, &request)
            .await
            .map_err(sql_error)?;
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
        let mut value = crate::servers::postgres::tabular_result(paged.result, &self.target.source);
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

    async fn dry_run(
        &self,
        query: &ReadOnlyQuery,
        max_rows: usize,
        window: Option<&TimeFilter>,
    ) -> Result<ToolOutput, ToolError> {
        sql::check_read(&self.target.pool, query, self.config.default_timeout)
            .await
            .map_err(sql_error)?;
        let statement = query.statement();
        let plan = if sql::explainable(statement) {
            Some(
                sql::explain(&self.target.pool, statement, self.config.default_timeout)
                    .await
                    .map_err(sql_error)?,
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
    ) -> Result<ToolOutput, ToolError> {
        let params: ExplainSqlParams = parse_arguments(arguments)?;
        check_dialect(params.dialect.as_deref())?;
        let query = read_only_query(&params.sql, "explain_sql")?;
        if !sql::explainable(query.statement()) {
            return Err(ToolError::invalid_input("only a SELECT or VALUES query can be explained"));
        }
        sql::check_read(&self.target.pool, &query, self.config.default_timeout)
            .await
            .map_err(sql_error)?;
        let explained = sql::explain_read(
            &self.target.pool,
            &query,
            params.format == ExplainFormat::Json,
            params.analyze,
            self.config.default_timeout,
        )
        .await
        .map_err(sql_error)?;
        Ok(ToolOutput::new(json!({
            "format": if params.format == ExplainFormat::Json { "json" } else { "text" },
            "explain": explained.explain,
            "estimated_rows": explained.estimated_rows,
            "estimated_cost": explained.estimated_cost,
            "analyzed": params.analyze,
        })))
    }
}
