//! The built-in `postgres` server: SQL on the target database (`DATABASE_URL`, the embedded
//! Chinook database by default). Tools are thin adapters over [`crate::sql`], [`crate::llm`]
//! and [`crate::context`]: `generate_sql` (a question to validated SQL), `execute_sql` (dry
//! run, reads, confirmed writes), `add_records`, `generate_schema` (with a model's analysis)
//! and `format_results` (with a model's summary).
//!
//! # Design notes
//!
//! `servers/postgres` holds the SQL tools as thin adapters over `sql`, `llm` and `context`:
//! `generate.rs` (`generate_sql`: the attempt loop, SQL extraction, `sql::validate`, failure
//! records and the `EXCEEDED_RETRIES` fallback), `prompt.rs` (the system prompt and the user turn:
//! the compact schema cut to a budget by BM25 relevance, the context selection, the question),
//! `models.rs` (`Intelligence`: which provider and model a call uses, asking it, provider errors in
//! the taxonomy, token usage), `execute.rs` (`execute_sql`: the verb per kind of write, the choice
//! between token and human approval), `add_records`, `generate_schema` (with the per-replica
//! `SchemaCache`, cleared by DDL run through orca, and a model's analysis cached by the schema's
//! DDL fingerprint and model), `schema_doc.rs` (the schema as Markdown, JSON and DDL) and `format/`
//! (`format_results`: `mod.rs` the dataset, the output formats and `FormatError`; `parse.rs` reads
//! the data in each shape a client sends; `tables.rs` Markdown, RFC 4180 CSV and JSON; `summary.rs`
//! the statistics; `chart.rs` the chart choice and its Vega-Lite spec; `figure.rs` the figure model
//! both draw from (`Figure`, its `Series`: line, bars, bars grouped by category with one bar per
//! run, scatter, histogram `Bin`s); `drawing.rs` the PNG drawn with plotters and an embedded font;
//! `text.rs` the text helpers they share (cutting to a length, instants as ISO 8601); `cells.rs`
//! how a value reads as a number, text, boolean or date; imports run one way: `chart` uses
//! `figure`, `drawing`, `summary` and `text`, `drawing` uses `figure` and `text`, `summary` uses
//! `text`).

mod choose;
pub(crate) mod execute;
pub(crate) mod format;
mod generate;
pub(crate) mod models;
pub(crate) mod prompt;
pub(crate) mod schema_doc;

use std::sync::Arc;

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sqlx::PgPool;

use super::sql_common::{
    Databases, SchemaCache, Target, sql_error, take_database, with_database_parameter,
};
use super::{CallContext, ToolSpec};
use crate::config::{LlmTool, SqlConfig};
use crate::llm::{Message, Role};
use crate::sql;
use crate::tool::{ToolError, ToolOutput, Verb, parse_arguments};

pub(crate) use execute::ExecuteSqlParams;
use generate::GenerateSqlParams;
pub(crate) use models::Intelligence;

/// (the schema's DDL fingerprint, provider, model).
type AnalysisKey = (String, String, String);

#[derive(Debug, Clone)]
pub(crate) struct PostgresServer {
    /// Every database served.
    databases: Databases,
    /// The database of the call being served (the first one until a call chooses), and its
    /// target.
    database: Arc<super::sql_common::Database>,
    target: Target,
    state_pool: PgPool,
    secret: sql::Secret,
    config: SqlConfig,
    read_only: bool,
    schema_cache: SchemaCache,
    intelligence: Intelligence,
    /// Schema analyses: a schema is analysed once per model.
    analyses: Arc<std::sync::Mutex<std::collections::HashMap<AnalysisKey, String>>>,
    tools: Arc<[ToolSpec]>,
}

impl PostgresServer {
    pub(crate) const DESCRIPTION: &str =
        "SQL on the target PostgreSQL database: safe reads, confirmed writes, schema, formatting";

    /// The server over `databases` (at least one).
    pub(crate) fn new(
        databases: Databases,
        state_pool: PgPool,
        secret: sql::Secret,
        intelligence: Intelligence,
    ) -> PostgresServer {
        let first = databases.iter().next().expect("the registry gives at least one database");
        let names = if databases.len() > 1 { databases.names() } else { Vec::new() };
        let tools = PostgresServer::listed_tools(!databases.any_writable(), &names);
        PostgresServer {
            database: Arc::clone(first),
            target: first.target.clone(),
            config: first.sql.clone(),
            read_only: first.read_only,
            schema_cache: first.schema_cache.clone(),
            databases,
            state_pool,
            secret,
            intelligence,
            analyses: Arc::default(),
            tools: tools.into(),
        }
    }

    /// This server bound to `database`: its pool, limits, schema cache and context file.
    fn on(&self, database: &Arc<super::sql_common::Database>) -> PostgresServer {
        let mut bound = self.clone();
        bound.database = Arc::clone(database);
        bound.target = database.target.clone();
        bound.config = database.sql.clone();
        bound.read_only = database.read_only;
        bound.schema_cache = database.schema_cache.clone();
        bound.intelligence.context = database.context.clone();
        bound
    }

    /// The databases this server serves.
    pub(crate) fn databases(&self) -> &Databases {
        &self.databases
    }

    /// The tools as listed over `names` (empty: one database): each takes the `database`
    /// argument but `format_results`, which formats rows the client sends.
    pub(crate) fn listed_tools(read_only: bool, names: &[String]) -> Vec<ToolSpec> {
        let mut tools = PostgresServer::declared_tools(read_only);
        for tool in tools.iter_mut().filter(|tool| tool.name() != "format_results") {
            with_database_parameter(tool, names);
        }
        tools
    }

    /// The tools this server declares.
    pub(crate) fn declared_tools(read_only: bool) -> Vec<ToolSpec> {
        let mut tools = vec![ToolSpec::new::<GenerateSqlParams>(
            "generate_sql",
            "Write one PostgreSQL statement for a question in plain language. A model gets the live schema and the learned context entries relevant to the question; its SQL is checked (grammar, exactly one statement, EXPLAIN against the database, so unknown tables and columns are caught) and, if wrong, sent back with the database's error for another try (max_retries attempts in all). Returns the SQL (nothing is run), whether it writes, and _meta with provider_used, model_used, attempt and validation. After the last failed attempt the error is EXCEEDED_RETRIES with the last SQL and error in details, to fix by hand and run with execute_sql.",
            Verb::Read,
            ToolAnnotations::new().read_only(true).idempotent(false).open_world(true),
        )];
        tools.push(ToolSpec::new::<ExecuteSqlParams>(
            "execute_sql",
            "Run one SQL statement on the PostgreSQL database. By default this is a dry run: it classifies the statement and returns its plan without running it. Reads run with dry_run=false and return a table (capped; `truncated` says when rows were left out). Writes need dry_run=true first, which returns a warning, the estimated rows affected and a confirmation_token; then the same sql with dry_run=false, read_only=false and that token. Transaction control, session settings and utility statements are refused.",
            Verb::Read,
            ToolAnnotations::new().read_only(read_only).destructive(!read_only).open_world(false),
        ));
        if !read_only {
            tools.push(ToolSpec::new::<AddRecordsParams>(
                "add_records",
                "Insert records into a table. data is one object or an array of objects; fields are matched to columns exactly, ignoring case, or from camelCase to snake_case. Unknown fields are refused with the table's columns and the closest names (validate_fields=false ignores them). Values are converted only where unambiguous; defaults and NOT NULL are respected; all records go in one transaction (bulk_insert=true uses COPY). Returns the count and the primary keys.",
                Verb::Create,
                ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false),
            ));
        }
        tools.push(ToolSpec::new::<GenerateSchemaParams>(
            "generate_schema",
            "Describe the database schema: schemas, tables, views, materialized views, partitions, columns (type, nullable, default, comment), primary, unique and foreign keys, indexes, enums and domains, row estimates. format=markdown (for people), json (structured) or sql (DDL). Cached for a few minutes; refresh_cache=true rereads the catalog. When a model provider is configured, `analysis` holds a model's written analysis of the schema (made once per schema and model).",
            Verb::Read,
            ToolAnnotations::new().read_only(true).idempotent(true).open_world(false),
        ));
        tools.push(ToolSpec::new::<FormatResultsParams>(
            "format_results",
            "Format a query result for people: data is a TabularResult (as execute_sql returns), an array of objects, or CSV text. format=table (Markdown), csv (RFC 4180), json (array of objects), summary (per-column statistics, plus a model's written summary in `text` when a provider is configured; `summary_source` says which) or chart (a Vega-Lite spec chosen from the column types, plus the chart as a PNG image).",
            Verb::Read,
            ToolAnnotations::new().read_only(true).idempotent(true).open_world(false),
        ));
        tools
    }

    pub(crate) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        mut arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        if tool == "format_results" {
            return self.format_results(arguments, context).await;
        }
        let requested = take_database(&mut arguments)?;
        if tool == "generate_sql" && requested.is_none() && self.databases.len() > 1 {
            return self.generate_sql_choosing(arguments, context).await;
        }
        let database = self.databases.resolve(requested.as_deref())?;
        context.chose_database(&database.name);
        let server = self.on(database);
        match tool {
            "generate_sql" => server.generate_sql(arguments, context).await,
            "execute_sql" => server.execute_sql(arguments, context).await,
            "generate_schema" => server.generate_schema(arguments, context).await,
            "add_records" if self.databases.any_writable() => {
                database.check_writable()?;
                server.add_records(arguments).await
            }
            other => {
                Err(ToolError::not_found(format!("the postgres server has no tool `{other}`")))
            }
        }
    }
}

/// The providers of the specification's tool definitions, for the input schemas. The value is
/// read as text so that an unknown or unsupported provider gets an error listing the ones the
/// tool supports.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code, reason = "documents the schema; the value is parsed by models::Intelligence")]
pub(crate) enum ProviderName {
    Anthropic,
    Openai,
    Google,
    Client,
}

fn markdown_default() -> SchemaFormat {
    SchemaFormat::Markdown
}

/// How `generate_schema` renders the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum SchemaFormat {
    Markdown,
    Json,
    Sql,
}

/// Arguments of `generate_schema`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenerateSchemaParams {
    /// Reread the catalog instead of using the cached schema.
    #[serde(default)]
    refresh_cache: bool,
    /// markdown (default), json or sql.
    #[serde(default = "markdown_default")]
    format: SchemaFormat,
    /// Include foreign-key relationships (default true).
    #[serde(default = "execute_yes")]
    include_relationships: bool,
    /// LLM provider for a written analysis of the schema (anthropic, openai, google, or client: the calling client's model).
    #[schemars(with = "Option<ProviderName>")]
    llm_provider: Option<String>,
    /// LLM model for the analysis.
    llm_model: Option<String>,
}

fn execute_yes() -> bool {
    true
}

/// Arguments of `format_results`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FormatResultsParams {
    /// A TabularResult object, an array of objects, or CSV text with a header row.
    data: Value,
    /// table, chart, summary, csv or json.
    #[schemars(with = "FormatName")]
    format: format::OutputFormat,
    /// LLM provider for a written summary (anthropic, openai, google, or client: the calling client's model).
    #[schemars(with = "Option<ProviderName>")]
    llm_provider: Option<String>,
    /// LLM model for the written summary.
    llm_model: Option<String>,
}

/// The formats of `format_results`, for the input schema.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code, reason = "documents the schema; the value is read as format::OutputFormat")]
enum FormatName {
    Table,
    Chart,
    Summary,
    Csv,
    Json,
}

const SCHEMA_SYSTEM_PROMPT: &str =
    "You are a database schema expert. Provide clear, structured analysis.";
const SUMMARY_SYSTEM_PROMPT: &str = "You summarize query results for business readers. Write a short, \
factual summary in plain prose or a few bullet points: what the rows show, notable highs, lows and \
patterns, and anything missing or odd. Use only the numbers given; do not invent values.";
/// How many rows of a result a summary prompt shows the model, at most.
const SUMMARY_SAMPLE_ROWS: usize = 50;
/// How many characters of rows a summary prompt holds, at most.
const SUMMARY_SAMPLE_CHARS: usize = 12_000;

impl PostgresServer {
    async fn generate_schema(
        &self,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: GenerateSchemaParams = parse_arguments(arguments)?;
        let choice = self.intelligence.choose_optional(
            LlmTool::GenerateSchema,
            params.llm_provider.as_deref(),
            params.llm_model.as_deref(),
            context.client_model.as_ref(),
        )?;
        let (schema, generated_at, cached) = self
            .schema_cache
            .get(&self.target.pool, self.config.schema_cache_ttl, params.refresh_cache)
            .await
            .map_err(sql_error)?;
        let relationships = params.include_relationships;
        let mut value = match params.format {
            SchemaFormat::Markdown => json!({
                "format": "markdown",
                "content": schema_doc::markdown(&schema, relationships),
            }),
            SchemaFormat::Sql => json!({
                "format": "sql",
                "content": schema_doc::sql(&schema, relationships),
            }),
            SchemaFormat::Json => json!({
                "format": "json",
                "schema": schema_doc::json(&schema, relationships),
            }),
        };
        let mut output = ToolOutput::new(Value::Null);
        output.meta.insert("tables_found".into(), Value::from(schema.table_count()));
        output.meta.insert("cached".into(), Value::Bool(cached));
        output.meta.insert(
            "catalog_queries".into(),
            Value::from(if cached { 0 } else { sql::introspect::CATALOG_QUERIES.len() }),
        );
        output.meta.insert("generated_at".into(), Value::from(generated_at.to_rfc3339()));
        let analysis = match choice {
            Err(reason) => json!({ "ran": false, "reason": reason }),
            Ok(choice) => {
                let meta = json!({
                    "ran": true,
                    "llm_provider": choice.provider.as_str(),
                    "llm_model": choice.model,
                });
                output
                    .meta
                    .insert("analysis_provider".into(), Value::from(choice.provider.as_str()));
                output.meta.insert("analysis_model".into(), Value::from(choice.model.clone()));
                match self.schema_analysis(&schema, &choice).await {
                    Ok((text, usage)) => {
                        value["analysis"] = Value::from(text);
                        let mut meta = meta;
                        meta["cached"] = Value::Bool(usage.is_none());
                        if let Some(usage) = usage {
                            meta["usage"] = usage.to_json();
                            output.llm = Some(usage.record(&choice));
                        }
                        meta
                    }
                    // The schema is worth having without the analysis: report why it is missing.
                    Err(error) => json!({
                        "ran": false,
                        "llm_provider": choice.provider.as_str(),
                        "llm_model": choice.model,
                        "error": {"code": error.code.as_str(), "message": error.message},
                    }),
                }
            }
        };
        output.meta.insert("analysis".into(), analysis);
        output.value = value;
        Ok(output)
    }

    /// A model's analysis of `schema`, from the cache when this schema (by its DDL) was already
    /// analysed by this model; with the usage when the model was asked.
    async fn schema_analysis(
        &self,
        schema: &sql::DatabaseSchema,
        choice: &models::ModelChoice,
    ) -> Result<(String, Option<models::Usage>), ToolError> {
        use sha2::Digest;
        let fingerprint = hex::encode(sha2::Sha256::digest(schema_doc::sql(schema, true)));
        let key = (fingerprint, choice.provider.as_str().to_owned(), choice.model.clone());
        let cached = self
            .analyses
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
            .cloned();
        if let Some(text) = cached {
            return Ok((text, None));
        }
        let (compact, _, _) =
            prompt::compact_schema(schema, "", self.intelligence.config.schema_budget_tokens);
        let request = format!("Analyze this database schema and provide insights:\n\n{compact}");
        let completion = self
            .intelligence
            .ask_optional(
                choice,
                SCHEMA_SYSTEM_PROMPT.to_owned(),
                vec![Message { role: Role::User, content: request }],
                0.1,
                2_048,
            )
            .await?;
        let mut usage = models::Usage::default();
        usage.add(&completion);
        let text = completion.text.trim().to_owned();
        let mut analyses = self.analyses.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if analyses.len() >= 32 {
            analyses.clear();
        }
        analyses.insert(key, text.clone());
        Ok((text, Some(usage)))
    }

    async fn format_results(
        &self,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: FormatResultsParams = parse_arguments(arguments)?;
        let format = params.format;
        let invalid = |error: format::FormatError| {
            ToolError::invalid_input(error.to_string()).with_hint(
                "pass a TabularResult (schema and rows), an array of objects, or CSV text with a header row",
            )
        };
        let dataset = format::parse_dataset(&params.data).map_err(invalid)?;
        let rows = dataset.rows.len();
        let mut output = match format {
            format::OutputFormat::Table => ToolOutput::new(json!({
                "format": "table",
                "markdown": format::markdown_table(&dataset),
            })),
            format::OutputFormat::Csv => ToolOutput::new(json!({
                "format": "csv",
                "csv": format::csv_text(&dataset),
            })),
            format::OutputFormat::Json => ToolOutput::new(json!({
                "format": "json",
                "rows": format::json_objects(&dataset),
            })),
            format::OutputFormat::Summary => self.summary(&params, &dataset, context).await?,
            format::OutputFormat::Chart => {
                let chart = format::chart(&dataset).map_err(invalid)?;
                let mut output = ToolOutput::new(json!({
                    "format": "chart",
                    "chart_type": chart.kind.as_str(),
                    "vega_lite": chart.vega_lite,
                }));
                output.png_images.push(chart.png);
                output
            }
        };
        output.meta.insert("rows".into(), Value::from(rows));
        Ok(output)
    }

    /// `format=summary`: the statistics, and a model's written summary of them and of the first
    /// rows when a provider is configured. `summary_source` says which one the reader gets.
    async fn summary(
        &self,
        params: &FormatResultsParams,
        dataset: &format::Dataset,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let statistics = format::summary(dataset);
        let choice = self.intelligence.choose_optional(
            LlmTool::FormatResults,
            params.llm_provider.as_deref(),
            params.llm_model.as_deref(),
            context.client_model.as_ref(),
        )?;
        let choice = match choice {
            Ok(choice) => choice,
            Err(reason) => {
                let mut output = ToolOutput::new(json!({
                    "format": "summary",
                    "summary_source": "statistics",
                    "summary": statistics,
                }));
                output.meta.insert("llm_summary".into(), json!({ "ran": false, "reason": reason }));
                return Ok(output);
            }
        };
        let csv = format::csv_text(&format::Dataset {
            columns: dataset.columns.clone(),
            rows: dataset.rows.iter().take(SUMMARY_SAMPLE_ROWS).cloned().collect(),
        });
        let mut sample: String = csv.chars().take(SUMMARY_SAMPLE_CHARS).collect();
        if sample.len() < csv.len() {
            sample.push_str("\n[rows cut]");
        }
        let request = format!(
            "Summarize this query result of {} rows.\n\nPer-column statistics (JSON):\n{}\n\nThe first {} rows (CSV):\n{}",
            dataset.rows.len(),
            statistics,
            dataset.rows.len().min(SUMMARY_SAMPLE_ROWS),
            sample
        );
        let completion = self
            .intelligence
            .ask_optional(
                &choice,
                SUMMARY_SYSTEM_PROMPT.to_owned(),
                vec![Message { role: Role::User, content: request }],
                0.3,
                1_024,
            )
            .await;
        let completion = match completion {
            Ok(completion) => completion,
            Err(error) => {
                // The statistics still answer the call; the meta says why there is no text.
                let mut output = ToolOutput::new(json!({
                    "format": "summary",
                    "summary_source": "statistics",
                    "summary": statistics,
                }));
                output.meta.insert(
                    "llm_summary".into(),
                    json!({
                        "ran": false,
                        "llm_provider": choice.provider.as_str(),
                        "llm_model": choice.model,
                        "error": {"code": error.code.as_str(), "message": error.message},
                    }),
                );
                return Ok(output);
            }
        };
        let mut usage = models::Usage::default();
        usage.add(&completion);
        let mut output = ToolOutput::new(json!({
            "format": "summary",
            "summary_source": "llm",
            "text": completion.text.trim(),
            "summary": statistics,
        }));
        output.meta.insert(
            "llm_summary".into(),
            json!({
                "ran": true,
                "llm_provider": choice.provider.as_str(),
                "llm_model": choice.model,
                "usage": usage.to_json(),
            }),
        );
        output.llm = Some(usage.record(&choice));
        Ok(output)
    }
}

/// Arguments of `add_records`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddRecordsParams {
    /// The table: `name` or `schema.name` (case-insensitive unless double-quoted).
    table: String,
    /// One record (an object) or several (an array of objects).
    #[schemars(with = "RecordsShape")]
    data: Value,
    /// Refuse fields that match no column (default true); false ignores them.
    #[serde(default = "execute_yes")]
    validate_fields: bool,
    /// Load through COPY (fast for large batches whose records share the same fields).
    #[serde(default)]
    bulk_insert: bool,
}

/// One record or an array of records, for the input schema.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "documents the schema; data is parsed by sql::records")]
enum RecordsShape {
    One(Map<String, Value>),
    Many(Vec<Map<String, Value>>),
}

impl PostgresServer {
    async fn add_records(
        &self,
        arguments: Option<Map<String, Value>>,
    ) -> Result<ToolOutput, ToolError> {
        let params: AddRecordsParams = parse_arguments(arguments)?;
        let relation = self.find_relation(&params.table).await?;
        let mapped = sql::records::map_records(&relation, &params.data, params.validate_fields)
            .map_err(records_error)?;
        let inserted = sql::records::insert(
            &self.target.pool,
            mapped,
            params.bulk_insert,
            self.config.default_timeout,
        )
        .await
        .map_err(sql_error)?;
        let mut output = ToolOutput::new(json!({
            "table": relation.qualified_name().to_string(),
            "inserted": inserted.count,
            "primary_keys": inserted.primary_keys,
            "ignored_fields": inserted.ignored_fields,
        }));
        output.meta.insert("method".into(), Value::from(inserted.method));
        Ok(output)
    }

    /// The relation a user-given name means, rereading the catalog once if it is not cached.
    async fn find_relation(&self, name: &str) -> Result<sql::introspect::Relation, ToolError> {
        for refresh in [false, true] {
            let (schema, _, cached) = self
                .schema_cache
                .get(&self.target.pool, self.config.schema_cache_ttl, refresh)
                .await
                .map_err(sql_error)?;
            match schema.find_relation(name) {
                Ok(relation) => return Ok(relation.clone()),
                Err(sql::introspect::LookupError::NotFound { .. }) if cached => continue,
                Err(error) => {
                    return Err(ToolError::not_found(error.to_string())
                        .with_hint("generate_schema lists the tables"));
                }
            }
        }
        Err(ToolError::not_found(format!("no table named {name:?}")))
    }
}

fn records_error(error: sql::records::RecordsError) -> ToolError {
    let message = error.to_string();
    match error {
        sql::records::RecordsError::UnknownFields { unknown, columns, suggestions } => {
            let mut tool_error = ToolError::invalid_input(message).with_hint(
                "rename the fields to the table's columns, or pass validate_fields=false to ignore them",
            );
            tool_error.details = Some(Box::new(json!({
                "unknown_fields": unknown,
                "columns": columns,
                "closest": suggestions,
            })));
            tool_error
        }
        _ => ToolError::invalid_input(message)
            .with_hint("generate_schema shows each column's type, nullability and default"),
    }
}
