//! `execute_sql`: a dry run by default (classification and plan, and for a write a warning and a
//! confirmation), a read when asked, a write only with `read_only=false`, a confirmation for
//! exactly this statement and the principal's verb for that kind of write.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::PostgresServer;
use crate::config::WriteConfirmation;
use crate::servers::CallContext;
use crate::servers::sql_common::{Reader, sql_error, tabular_encoded};
use crate::sql::{self, Effect, Statement, StatementKind};
use crate::tool::{ErrorCode, Spliced, ToolError, ToolOutput, Verb, parse_arguments};

fn yes() -> bool {
    true
}

/// Arguments of `execute_sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteSqlParams {
    /// Exactly one SQL statement.
    sql: String,
    /// Plan the statement and report what it would do, without running it (default true).
    #[serde(default = "yes")]
    dry_run: bool,
    /// Refuse anything that changes data (default true). Set false, with a confirmation token,
    /// to run a write.
    #[serde(default = "yes")]
    read_only: bool,
    /// The token a dry run of this exact statement returned; required to run a write.
    confirmation_token: Option<String>,
    /// Statement timeout in milliseconds (default 30000).
    #[schemars(range(min = 1))]
    timeout: Option<u64>,
    /// Maximum rows returned by a read (default and hard maximum are configured).
    #[schemars(range(min = 1))]
    max_rows: Option<u64>,
}

/// The verbs a principal needs for what a statement changes.
pub(crate) fn required_verbs(statement: &Statement) -> Vec<Verb> {
    let mut verbs: Vec<Verb> = statement
        .effects
        .iter()
        .map(|effect| match effect {
            Effect::Insert => Verb::Create,
            Effect::Update | Effect::LockRows | Effect::Create | Effect::Alter => Verb::Update,
            Effect::Delete | Effect::Drop | Effect::Truncate => Verb::Delete,
        })
        .collect();
    verbs.sort();
    verbs.dedup();
    verbs
}

fn describe_statement(statement: &Statement) -> Value {
    json!({
        "kind": statement.kind.as_str(),
        "writes": statement.writes(),
        "effects": statement.effects.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
        "tables": statement.tables.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "functions": statement.functions.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

impl PostgresServer {
    pub(crate) async fn execute_sql(
        &self,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: ExecuteSqlParams = parse_arguments(arguments)?;
        let timeout = self.timeout(params.timeout)?;
        let statement = classify_for_execution(&params.sql)?;
        if statement.writes() {
            let what = format!("this {} statement", statement.kind);
            crate::servers::sql_common::refuse_masked_write(&context.principal, &what)?;
        }
        if !statement.writes() {
            crate::servers::sql_common::refuse_masked_sql(
                &statement.text,
                &context.principal,
                self.config.refuse_masked_sql,
            )?;
            let reader = self.target.reader(&context.principal).await?;
            let statement = reader.statement(statement).map_err(sql_error)?;
            let query = sql::ReadOnlyQuery::from_statement(statement).map_err(sql_error)?;
            return if params.dry_run {
                self.dry_run_read(&reader, &query, timeout).await
            } else {
                let max_rows = self.max_rows(params.max_rows)?;
                self.run_read(&reader, &query, timeout, max_rows).await
            };
        }
        if self.read_only {
            return Err(ToolError::invalid_input(format!(
                "database `{}` is read-only here; this {} statement changes data",
                self.target.catalog, statement.kind
            ))
            .with_hint("only reads are allowed on this database"));
        }
        let verbs = required_verbs(&statement);
        let missing: Vec<&str> = verbs
            .iter()
            .filter(|verb| !context.principal.verbs.contains(verb))
            .map(|verb| verb.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(ToolError::new(
                ErrorCode::Unauthorized,
                format!(
                    "principal `{}` may not run this {} statement: it needs the verb(s) {}",
                    context.principal.name,
                    statement.kind,
                    missing.join(", ")
                ),
            )
            .with_hint("ask an administrator for an API key with these verbs"));
        }
        if params.dry_run {
            return self.dry_run_write(&statement, &verbs, timeout, context).await;
        }
        if params.read_only {
            return Err(ToolError::invalid_input(format!(
                "this {} statement changes data, and read_only is true",
                statement.kind
            ))
            .with_hint(
                "run it with dry_run=true first; then call again with dry_run=false, read_only=false and the confirmation_token it returned",
            ));
        }
        let owner = context.principal.identity();
        let binding =
            sql::Binding::new(&statement, (&owner, &context.principal.name), &self.target.label);
        let approved = match (self.config.write_confirmation, params.confirmation_token) {
            (WriteConfirmation::Model, None) => {
                return Err(ToolError::new(
                    ErrorCode::ConfirmationRequired,
                    format!("running this {} statement needs a confirmation token", statement.kind),
                )
                .with_hint(
                    "call execute_sql with dry_run=true and this exact sql; it returns a confirmation_token to pass back with dry_run=false and read_only=false",
                ));
            }
            (WriteConfirmation::Model, Some(token)) => {
                sql::redeem_token(&self.state_pool, &self.secret, &token, &binding).await
            }
            // An answer from the calling client (elicitation included) is never a person's
            // approval: another principal approves in the console, over HTTP or with
            // `orca approve`.
            (WriteConfirmation::Human, _) => sql::redeem_approval(&self.state_pool, &binding).await,
        }
        .map_err(confirm_error)?;
        let result =
            sql::run_write(&self.target.pool, approved, timeout).await.map_err(sql_error)?;
        if matches!(
            statement.kind,
            StatementKind::Create | StatementKind::Alter | StatementKind::Drop
        ) {
            self.database.schema_changed().await;
        }
        let mut output = ToolOutput::new(json!({
            "statement": describe_statement(&statement),
            "rows_affected": result.rows_affected,
        }));
        output.meta.insert("write".into(), Value::Bool(true));
        Ok(output)
    }

    /// Run `sql_text` as `execute_sql` runs a read with `dry_run=false` (the same
    /// classification, then `sql::run_read` in a read-only transaction within `limits`), and
    /// return the rows themselves. `orca eval` runs the generated and the gold SQL this way.
    ///
    /// # Errors
    ///
    /// As `execute_sql`: `INVALID_INPUT` for what is not a read orca runs, `TIMEOUT`,
    /// `QUERY_FAILED`, `UPSTREAM_UNAVAILABLE`.
    pub(crate) async fn read_rows(
        &self,
        sql_text: &str,
        limits: sql::ReadLimits,
        principal: &crate::config::Principal,
    ) -> Result<sql::ReadResult, ToolError> {
        let statement = classify_for_execution(sql_text)?;
        let reader = self.target.reader(principal).await?;
        let statement = reader.statement(statement).map_err(sql_error)?;
        let query = sql::ReadOnlyQuery::from_statement(statement).map_err(sql_error)?;
        match sql::run_read(&reader.pool, &query, limits).await {
            Ok(result) => Ok(result),
            Err(error) => match reader.refreshed_after(&error).await {
                Some(fresh) => {
                    sql::run_read(&fresh.pool, &query, limits).await.map_err(|e| fresh.error(e))
                }
                None => Err(reader.error(error)),
            },
        }
    }

    /// The configured statement timeout of reads.
    pub(crate) fn default_timeout(&self) -> Duration {
        self.config.default_timeout
    }

    async fn dry_run_read(
        &self,
        reader: &Reader,
        query: &sql::ReadOnlyQuery,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        sql::check_read(&reader.pool, query, timeout).await.map_err(|e| reader.error(e))?;
        let statement = query.statement();
        let mut value = json!({
            "dry_run": true,
            "statement": describe_statement(statement),
            "next_step": "call execute_sql again with the same sql and dry_run=false to run it",
        });
        if sql::explainable(statement) {
            let plan = sql::explain(&reader.pool, statement, timeout, self.database.plan_format())
                .await
                .map_err(|e| reader.error(e))?;
            value["estimated_rows"] = json!(plan.estimated_rows);
            value["estimated_cost"] = json!(plan.total_cost);
            value["plan"] = plan.plan;
        }
        Ok(ToolOutput::new(value))
    }

    async fn run_read(
        &self,
        reader: &Reader,
        query: &sql::ReadOnlyQuery,
        timeout: Duration,
        max_rows: usize,
    ) -> Result<ToolOutput, ToolError> {
        let limits = sql::ReadLimits { max_rows, max_bytes: self.config.max_result_bytes, timeout };
        // Rows are encoded as they stream in and reach the wire without a `Value` tree.
        let result = match sql::run_read_into::<sql::EncodedRows>(&reader.pool, query, limits).await
        {
            Ok(result) => result,
            Err(error) => match reader.refreshed_after(&error).await {
                Some(fresh) => sql::run_read_into::<sql::EncodedRows>(&fresh.pool, query, limits)
                    .await
                    .map_err(|e| fresh.error(e))?,
                None => return Err(reader.error(error)),
            },
        };
        let truncated = result.truncated;
        let bytes = result.bytes;
        let (value, rows) = tabular_encoded(result, &self.target.source);
        let mut output = ToolOutput::new(value);
        output.spliced = Some(Spliced { key: "rows", json: rows });
        output.meta.insert("result_bytes".into(), Value::from(bytes));
        if let Some(truncation) = truncated {
            output.meta.insert("truncated_by".into(), Value::from(truncation.as_str()));
            output.meta.insert("max_rows".into(), Value::from(max_rows));
            output.meta.insert("max_bytes".into(), Value::from(self.config.max_result_bytes));
        }
        Ok(output)
    }

    async fn dry_run_write(
        &self,
        statement: &Statement,
        verbs: &[Verb],
        timeout: Duration,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let plan = if sql::explainable(statement) {
            Some(
                sql::explain(&self.target.pool, statement, timeout, self.database.plan_format())
                    .await
                    .map_err(sql_error)?,
            )
        } else {
            None
        };
        let estimated = plan.as_ref().and_then(|plan| plan.estimated_rows);
        let owner = context.principal.identity();
        let binding =
            sql::Binding::new(statement, (&owner, &context.principal.name), &self.target.label);
        let verb_names: Vec<&str> = verbs.iter().map(|verb| verb.as_str()).collect();
        let human = self.config.write_confirmation == WriteConfirmation::Human;
        let minted = sql::mint(
            &self.state_pool,
            &self.secret,
            &binding,
            &verb_names,
            estimated,
            self.config.token_lifetime,
            human,
        )
        .await
        .map_err(confirm_error)?;
        let effects: Vec<&str> = statement.effects.iter().map(|e| e.as_str()).collect();
        let tables: Vec<String> = statement.tables.iter().map(ToString::to_string).collect();
        let mut warning = format!(
            "this {} statement changes data ({}){}",
            statement.kind,
            effects.join(", "),
            if tables.is_empty() { String::new() } else { format!(" in {}", tables.join(", ")) }
        );
        if let Some(rows) = estimated {
            warning.push_str(&format!("; the planner estimates {rows} row(s) affected"));
        }
        let mut value = json!({
            "dry_run": true,
            "statement": describe_statement(statement),
            "required_verbs": verb_names,
            "warning": warning,
            "estimated_rows_affected": estimated,
        });
        if let Some(plan) = plan {
            value["plan"] = plan.plan;
        }
        match minted {
            sql::Minted::Token { token, expires_at } => {
                value["confirmation_token"] = Value::from(token);
                value["expires_at"] = Value::from(expires_at.to_rfc3339());
                value["next_step"] = Value::from(
                    "to run it, call execute_sql with the same sql, dry_run=false, read_only=false and this confirmation_token",
                );
            }
            sql::Minted::Approval { id, expires_at } => {
                value["approval_id"] = Value::from(id.to_string());
                value["approval_status"] = Value::from("pending");
                value["expires_at"] = Value::from(expires_at.to_rfc3339());
                value["next_step"] = Value::from(format!(
                    "a person must approve it (`orca approve {id}` or POST /approvals/{id}); then call execute_sql with the same sql, dry_run=false and read_only=false"
                ));
            }
        }
        Ok(ToolOutput::new(value))
    }

    fn timeout(&self, requested: Option<u64>) -> Result<Duration, ToolError> {
        let timeout = requested.map_or(self.config.default_timeout, Duration::from_millis);
        if timeout.is_zero() || timeout > self.config.max_timeout {
            return Err(ToolError::invalid_input(format!(
                "timeout must be between 1 and {} milliseconds",
                self.config.max_timeout.as_millis()
            )));
        }
        Ok(timeout)
    }

    pub(crate) fn max_rows(&self, requested: Option<u64>) -> Result<usize, ToolError> {
        let max_rows = requested
            .map_or(self.config.default_max_rows, |rows| usize::try_from(rows).unwrap_or(0));
        if max_rows == 0 || max_rows > self.config.hard_max_rows {
            return Err(ToolError::invalid_input(format!(
                "max_rows must be between 1 and {}",
                self.config.hard_max_rows
            )));
        }
        Ok(max_rows)
    }
}

/// The one statement of `sql_text`, if orca would run it at all: it parses, holds exactly one
/// statement, uses nothing denied, and is not transaction control, a session setting or a
/// utility statement.
fn classify_for_execution(sql_text: &str) -> Result<Statement, ToolError> {
    let statement = sql::single_statement(sql_text).map_err(sql_error)?;
    if !statement.denied.is_empty() {
        return Err(sql_error(sql::Error::Denied { reasons: statement.denied.clone() }));
    }
    refuse_unsupported_kind(&statement)?;
    Ok(statement)
}

/// Transaction control, session settings and utility statements never run through orca.
fn refuse_unsupported_kind(statement: &Statement) -> Result<(), ToolError> {
    let hint = match statement.kind {
        StatementKind::Transaction => {
            "orca runs each statement in its own transaction; send the statement alone, without BEGIN, COMMIT or SET TRANSACTION"
        }
        StatementKind::Session => {
            "session settings would leak into other callers' connections; orca sets timeouts itself (use the timeout argument)"
        }
        StatementKind::Utility(_) => {
            "utility statements (COPY, VACUUM, LOCK, DO, CALL, PREPARE, LISTEN ...) are not run through execute_sql; use a database client"
        }
        _ => return Ok(()),
    };
    Err(ToolError::invalid_input(format!(
        "{} statements are not allowed through execute_sql",
        statement.kind
    ))
    .with_hint(hint))
}

fn confirm_error(error: sql::ConfirmError) -> ToolError {
    let message = error.to_string();
    match error {
        sql::ConfirmError::Unavailable => ToolError::upstream_unavailable(message)
            .with_hint("the confirmation store is unreachable; try again shortly"),
        sql::ConfirmError::Pending { id } => ToolError::new(ErrorCode::ConfirmationRequired, message)
            .with_hint(format!(
                "a person must approve it first: `orca approve {id}` or POST /approvals/{id}; then repeat this call"
            )),
        _ => ToolError::new(ErrorCode::ConfirmationRequired, message).with_hint(
            "run this exact statement with dry_run=true to get a new confirmation token, then pass it with dry_run=false and read_only=false",
        ),
    }
}
