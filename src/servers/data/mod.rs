//! The built-in `data` server: the data-provider toolset of specification 002 on the target
//! PostgreSQL database (`catalog` is the database name). Tools are thin adapters over
//! [`crate::sql`]; `query_sql` pages with stateless signed tokens (`sql::page`).

mod query;

use std::sync::Arc;

use rmcp::model::ToolAnnotations;
use serde_json::{Map, Value};

use super::postgres::Target;
use super::{CallContext, ToolSpec};
use crate::config::SqlConfig;
use crate::sql;
use crate::tool::{ToolError, ToolOutput, Verb};

/// The SQL dialects `query_sql` accepts: PostgreSQL's own, and ANSI SQL (which PostgreSQL
/// runs as written).
pub(crate) const DIALECTS: [&str; 2] = ["postgres", "ansi"];

#[derive(Debug, Clone)]
pub(crate) struct DataServer {
    target: Target,
    secret: sql::Secret,
    config: SqlConfig,
    tools: Arc<[ToolSpec]>,
}

impl DataServer {
    pub(crate) const DESCRIPTION: &str =
        "the data-provider toolset on the target PostgreSQL database: paged reads, plans, metadata";

    pub(crate) fn new(target: Target, secret: sql::Secret, config: SqlConfig) -> DataServer {
        let read = || ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
        let tools = vec![
            ToolSpec::new::<query::QuerySqlParams>(
                "query_sql",
                "Run one read-only SQL query and get a TabularResult page. dialect: postgres (default) or ansi. max_rows: rows per page (default and maximum in capabilities). When has_more is true, call again with the same sql and arguments plus page_token to get the next page; tokens are signed, expire after 24 hours, and every page costs about the same. time_range {from, to, default_window, column} keeps rows whose time column (named, or the first timestamp/date column) is in [from, to); from/to take ISO-8601 instants or dates, now-1h, -7d, P30D. dry_run=true validates and plans without running anything.",
                Verb::Read,
                read(),
            ),
            ToolSpec::new::<query::ExplainSqlParams>(
                "explain_sql",
                "Show PostgreSQL's plan for one read-only query without running it: format text or json, with the estimated rows and cost. analyze=true runs the query inside a read-only transaction that is rolled back and reports actual rows and times.",
                Verb::Read,
                read(),
            ),
        ];
        DataServer { target, secret, config, tools: tools.into() }
    }

    pub(crate) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match tool {
            "query_sql" => self.query_sql(arguments, context).await,
            "explain_sql" => self.explain_sql(arguments).await,
            other => Err(ToolError::not_found(format!("the data server has no tool `{other}`"))),
        }
    }
}
