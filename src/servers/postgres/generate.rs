//! `generate_sql`: a question in plain language becomes one PostgreSQL statement. The model
//! gets the schema and the context entries that matter for the question; its answer is
//! extracted, validated (grammar, one statement, kind, `EXPLAIN` against the live database) and,
//! when it fails, sent back with the database's error for another attempt. Every failed attempt
//! becomes a failure row of the execution; after `max_retries` attempts the last SQL and error
//! come back as `EXCEEDED_RETRIES` for a person to fix by hand.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::PostgresServer;
use super::models::{ModelChoice, Usage};
use super::prompt::{self, SQL_SYSTEM_PROMPT};
use crate::config::LlmTool;
use crate::llm::{Message, Role};
use crate::servers::sql_common::{Reader, sql_error};
use crate::sql;
use crate::tool::{Attempts, ErrorCode, ToolError, ToolOutput, parse_arguments};

fn yes() -> bool {
    true
}

fn three() -> u32 {
    3
}

/// Arguments of `generate_sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenerateSqlParams {
    /// The question or request in plain language ("top 5 customers by revenue in 2024").
    prompt: String,
    /// anthropic, openai, google or client (the calling client's model; default: the configured default for generate_sql, else the client's model when no key is set).
    #[schemars(with = "Option<super::ProviderName>")]
    llm_provider: Option<String>,
    /// The model (default: the configured model of the provider).
    llm_model: Option<String>,
    /// Add the learned context file's patterns, fixes and model notes to the prompt (default true).
    #[serde(default = "yes")]
    use_context: bool,
    /// How many answers to try before giving up (1 to 10, default 3).
    #[serde(default = "three")]
    #[schemars(range(min = 1, max = 10))]
    max_retries: u32,
}

/// Longest question accepted, in characters.
const MAX_PROMPT_CHARS: usize = 8_000;
const SQL_TEMPERATURE: f32 = 0.2;
const SQL_MAX_TOKENS: u32 = 2_048;

impl GenerateSqlParams {
    /// The question, trimmed, once it and `max_retries` are within bounds.
    fn question(&self) -> Result<&str, ToolError> {
        let question = self.prompt.trim();
        if question.is_empty() {
            return Err(ToolError::invalid_input("prompt is empty")
                .with_hint("say in plain language what the query should return"));
        }
        if question.chars().count() > MAX_PROMPT_CHARS {
            return Err(ToolError::invalid_input(format!(
                "prompt is longer than {MAX_PROMPT_CHARS} characters"
            )));
        }
        if !(1..=10).contains(&self.max_retries) {
            return Err(ToolError::invalid_input("max_retries must be between 1 and 10"));
        }
        Ok(question)
    }
}

/// What became of the SQL of one answer.
enum Checked {
    Valid(sql::Validated),
    /// Refused at `stage` for `reason`, which the model is told for another attempt.
    Refused {
        stage: &'static str,
        reason: String,
    },
    /// The database, not the statement, is at fault: asking again cannot help.
    DatabaseFailed(sql::Error),
}

/// One failed attempt, as recorded and as told to the model.
struct FailedAttempt {
    error: ToolError,
    feedback: String,
}

impl PostgresServer {
    pub(super) async fn generate_sql(
        &self,
        arguments: Option<Map<String, Value>>,
        context: &crate::servers::CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let params: GenerateSqlParams = parse_arguments(arguments)?;
        let question = params.question()?;
        let intelligence = &self.intelligence;
        let choice = intelligence.choose(
            LlmTool::GenerateSql,
            params.llm_provider.as_deref(),
            params.llm_model.as_deref(),
            context.client_model.as_ref(),
        )?;
        let (schema, _, _) = self
            .schema_cache
            .get(&self.target.pool, self.config.schema_cache_ttl, false)
            .await
            .map_err(sql_error)?;
        // The model's SQL is checked where the caller's own statements would run.
        let reader = self.target.reader(&context.principal).await?;
        let loaded = intelligence.context.current();
        let context_doc = params.use_context.then_some(&loaded.doc);
        let built = prompt::build(
            &schema,
            context_doc,
            question,
            &choice.model,
            intelligence.config.schema_budget_tokens,
            intelligence.config.context_budget_tokens,
        );
        let context_meta = json!({
            "applied": params.use_context,
            "version": params.use_context.then_some(loaded.version),
            "entries": built.context_entries,
            "tokens": built.context_tokens,
        });
        let schema_meta =
            json!({"tables_shown": built.tables_shown, "tables_total": built.tables_total});

        let mut messages = vec![Message { role: Role::User, content: built.user }];
        let mut usage = Usage::default();
        let mut failures: Vec<FailedAttempt> = Vec::new();
        // The last SQL any attempt produced, with its attempt (a later answer may hold none).
        let mut last_sql: Option<(u32, String)> = None;
        let base_meta = |usage: &Usage, attempts: u32| {
            let mut meta = Map::new();
            meta.insert("provider_used".into(), Value::from(choice.provider.as_str()));
            meta.insert("model_used".into(), Value::from(choice.model.clone()));
            meta.insert("attempts".into(), Value::from(attempts));
            meta.insert("context_applied".into(), Value::Bool(params.use_context));
            meta.insert("context".into(), context_meta.clone());
            meta.insert("schema".into(), schema_meta.clone());
            meta.insert("usage".into(), usage.to_json());
            meta
        };

        for attempt in 1..=params.max_retries {
            let completion = match intelligence
                .ask(
                    &choice,
                    SQL_SYSTEM_PROMPT.to_owned(),
                    messages.clone(),
                    SQL_TEMPERATURE,
                    SQL_MAX_TOKENS,
                )
                .await
            {
                Ok(completion) => completion,
                Err(mut error) => {
                    // The provider failed (after its own retries): no point asking again.
                    attach(&mut error, failures, &usage, &choice, base_meta(&usage, attempt));
                    return Err(error);
                }
            };
            usage.add(&completion);
            let answer = completion.text;
            let sql_text = extract_sql(&answer);
            let checked = match &sql_text {
                None => Checked::Refused {
                    stage: "no_sql",
                    reason: "the answer held no SQL statement; answer with one statement in a ```sql block"
                        .to_owned(),
                },
                Some(sql_text) => {
                    last_sql = Some((attempt, sql_text.clone()));
                    self.check_generated(&reader, sql_text).await
                }
            };
            match checked {
                Checked::Valid(validated) => {
                    return Ok(self.generated(
                        validated,
                        &choice,
                        attempt,
                        &usage,
                        base_meta(&usage, attempt),
                        failures,
                    ));
                }
                Checked::DatabaseFailed(error) => {
                    let mut error = sql_error(error);
                    attach(&mut error, failures, &usage, &choice, base_meta(&usage, attempt));
                    return Err(error);
                }
                Checked::Refused { stage, reason } => {
                    let failure = failed(attempt, &choice, sql_text.as_deref(), stage, reason);
                    messages.push(Message { role: Role::Assistant, content: answer });
                    messages.push(Message {
                        role: Role::User,
                        content: prompt::retry_message(&failure.feedback),
                    });
                    failures.push(failure);
                }
            }
        }

        // Every attempt failed: the manual fallback. The last failure becomes the final error.
        let mut error = exceeded_retries(&mut failures, last_sql, &choice, params.max_retries);
        attach(&mut error, failures, &usage, &choice, base_meta(&usage, params.max_retries));
        Err(error)
    }

    /// Validate the SQL of an answer where the caller's own statements would run.
    async fn check_generated(&self, reader: &Reader, sql_text: &str) -> Checked {
        let as_run = reader.masked().then(|| reader.text(sql_text));
        match sql::validate(
            &reader.pool,
            sql_text,
            as_run.as_deref(),
            self.config.default_timeout,
            self.database.plan_format(),
        )
        .await
        {
            // The database, not the statement, is at fault: asking again cannot help.
            Err(invalid)
                if matches!(
                    invalid.error,
                    sql::Error::Unavailable(_) | sql::Error::Timeout { .. }
                ) =>
            {
                Checked::DatabaseFailed(invalid.error)
            }
            Err(invalid) => Checked::Refused {
                stage: invalid.stage.as_str(),
                reason: invalid.error.to_string(),
            },
            Ok(validated) if self.read_only && validated.is_write() => Checked::Refused {
                stage: "read_only",
                reason: format!(
                    "database `{}` is read-only here and will not run a {} statement; write one SELECT",
                    self.target.catalog, validated.statement.kind
                ),
            },
            Ok(validated) => Checked::Valid(validated),
        }
    }

    fn generated(
        &self,
        validated: sql::Validated,
        choice: &ModelChoice,
        attempt: u32,
        usage: &Usage,
        mut meta: Map<String, Value>,
        failures: Vec<FailedAttempt>,
    ) -> ToolOutput {
        let statement = &validated.statement;
        let is_write = validated.is_write();
        let tables: Vec<String> = statement.tables.iter().map(ToString::to_string).collect();
        let sql_text = statement.text.trim().to_owned();
        let next_step = if is_write {
            "this statement changes data: run it with execute_sql (a dry run first, then the confirmation it returns)"
        } else {
            "run it with execute_sql and dry_run=false to get the rows"
        };
        let mut value = json!({
            "sql": sql_text,
            "markdown": format!("```sql\n{sql_text}\n```"),
            "statement_kind": statement.kind.as_str(),
            "is_write": is_write,
            "tables": tables,
            "next_step": next_step,
        });
        if is_write {
            value["warning"] = Value::from(
                "generated SQL that changes data; nothing has run. execute_sql asks for confirmation before any write",
            );
        }
        meta.insert("attempt".into(), Value::from(attempt));
        meta.insert(
            "validation".into(),
            json!({
                "valid": true,
                "kind": statement.kind.as_str(),
                "is_write": is_write,
                "tables": tables,
                "explained": validated.explained,
                "estimated_rows": validated.estimated_rows,
            }),
        );
        let mut output = ToolOutput::new(value);
        output.meta = meta;
        output.llm = Some(usage.record(choice));
        output.failed_attempts = failures.into_iter().map(|failure| failure.error).collect();
        output
    }
}

/// The error of a call whose every attempt failed: the last attempt's error (taken off
/// `failures`), with the last SQL any attempt produced, for a person to fix by hand.
fn exceeded_retries(
    failures: &mut Vec<FailedAttempt>,
    last_sql: Option<(u32, String)>,
    choice: &ModelChoice,
    max_retries: u32,
) -> ToolError {
    let last = failures.pop().map(|failure| failure.error);
    let last_error = last
        .as_ref()
        .and_then(|error| error.details.as_deref())
        .and_then(|details| details["error"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut error = ToolError::new(
        ErrorCode::ExceededRetries,
        format!("no valid SQL after {max_retries} attempts; the last error: {last_error}"),
    )
    .with_hint(
        "edit the last SQL and run it with execute_sql, or rephrase the question and try again",
    );
    error.retryable = false;
    let last_failure = last.as_ref().and_then(|error| error.details.as_deref());
    error.details = Some(Box::new(json!({
        "last_sql": last_sql.as_ref().map(|(_, sql)| sql),
        "last_sql_attempt": last_sql.as_ref().map(|(attempt, _)| attempt),
        "last_error": last_error,
        "last_stage": last_failure.map(|details| details["stage"].clone()),
        "attempts": max_retries,
        "provider_used": choice.provider.as_str(),
        "model_used": choice.model,
    })));
    error
}

/// Give a final error what the call tried before it: the failed attempts (failure rows), the
/// model usage and the `_meta`.
fn attach(
    error: &mut ToolError,
    failures: Vec<FailedAttempt>,
    usage: &Usage,
    choice: &ModelChoice,
    meta: Map<String, Value>,
) {
    error.attempts = Some(Box::new(Attempts {
        earlier: failures.into_iter().map(|failure| failure.error).collect(),
        llm: Some(usage.record(choice)),
        meta,
    }));
}

fn failed(
    attempt: u32,
    choice: &ModelChoice,
    sql_text: Option<&str>,
    stage: &str,
    reason: String,
) -> FailedAttempt {
    let code = if stage == "database" { ErrorCode::QueryFailed } else { ErrorCode::InvalidInput };
    let mut error = ToolError::new(code, format!("attempt {attempt}: {reason}")).not_retryable();
    error.details = Some(Box::new(json!({
        "attempt": attempt,
        "stage": stage,
        "sql": sql_text,
        "error": reason,
        "provider": choice.provider.as_str(),
        "model": choice.model,
    })));
    FailedAttempt { error, feedback: reason }
}

/// The SQL in a model's answer: the first ```sql block, else the first fenced block, else the
/// whole answer when it starts like SQL. Without a trailing semicolon.
pub(crate) fn extract_sql(answer: &str) -> Option<String> {
    let blocks = fenced_blocks(answer);
    let chosen = blocks
        .iter()
        .find(|(language, _)| is_sql_language(language))
        .or_else(|| blocks.first())
        .map(|(_, body)| body.as_str());
    let text = match chosen {
        Some(body) => body,
        None => {
            let trimmed = answer.trim();
            let first = trimmed
                .split(|c: char| !c.is_ascii_alphabetic())
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            const STARTS: [&str; 14] = [
                "select", "with", "insert", "update", "delete", "merge", "create", "alter", "drop",
                "truncate", "values", "table", "explain", "show",
            ];
            if !STARTS.contains(&first.as_str()) {
                return None;
            }
            trimmed
        }
    };
    let text = text.trim().trim_end_matches(|c: char| c == ';' || c.is_whitespace()).trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Whether a fenced block's info string names SQL.
fn is_sql_language(language: &str) -> bool {
    matches!(
        language.to_ascii_lowercase().as_str(),
        "sql" | "postgresql" | "postgres" | "pgsql" | "psql"
    )
}

/// Every fenced code block (``` or ~~~) with its info string's first word.
fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String, String)> = None; // (fence, language, body)
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                let fence: String =
                    trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect();
                if fence.len() >= 3
                    && fence.chars().all(|c| c == fence.chars().next().unwrap_or('`'))
                {
                    let rest = &trimmed[fence.len()..];
                    let language = rest.split_whitespace().next().unwrap_or("");
                    // A block on one line: ```sql SELECT 1```.
                    if let Some(inner) = rest.trim_end().strip_suffix(fence.as_str()) {
                        let (language, body) = match inner.trim_start().strip_prefix(language) {
                            Some(body) if is_sql_language(language) => (language, body),
                            _ => ("", inner),
                        };
                        blocks.push((language.to_owned(), format!("{}\n", body.trim())));
                        continue;
                    }
                    open = Some((fence, language.to_owned(), String::new()));
                }
            }
            Some((fence, _, body)) => {
                if trimmed.starts_with(fence.as_str())
                    && trimmed.trim_end().chars().all(|c| c == fence.chars().next().unwrap_or('`'))
                {
                    if let Some((_, language, body)) = open.take() {
                        blocks.push((language, body));
                    }
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    // An unclosed block still holds the answer (a model cut off at its token limit).
    if let Some((_, language, body)) = open {
        blocks.push((language, body));
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_is_taken_from_the_answer_in_the_order_a_person_would_read_it() {
        let cases: [(&str, Option<&str>); 12] = [
            ("```sql\nSELECT 1;\n```", Some("SELECT 1")),
            (
                "Here you go:\n\n```SQL\nselect *\nfrom t\n```\nThis lists t.",
                Some("select *\nfrom t"),
            ),
            ("```\nSELECT 2\n```", Some("SELECT 2")),
            ("```text\nnote\n```\n```sql\nSELECT 3\n```", Some("SELECT 3")),
            ("SELECT 4;", Some("SELECT 4")),
            (
                "  with x as (select 1) select * from x",
                Some("with x as (select 1) select * from x"),
            ),
            ("I cannot answer that.", None),
            ("```sql\nSELECT 5\n", Some("SELECT 5")),
            ("~~~sql\nSELECT 6\n~~~", Some("SELECT 6")),
            ("```sql SELECT 7;```", Some("SELECT 7")),
            ("Use this: ```SELECT 8```", None),
            ("```SELECT 9```", Some("SELECT 9")),
        ];
        for (answer, expected) in cases {
            assert_eq!(extract_sql(answer).as_deref(), expected, "{answer:?}");
        }
    }
}
