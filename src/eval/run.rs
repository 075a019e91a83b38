//! Running a question set: the gold SQL of every question runs once, read-only; then each
//! question goes through `generate_sql` itself (the postgres server's own code: prompt, context
//! selection, validation, retries, failure rows), its SQL runs through `execute_sql`'s read
//! path, and the two results are compared. Every `generate_sql` call is recorded in tracking
//! like a gateway call, marked with the source `eval`.
//!
//! # Design notes
//!
//! `run.rs` is the `Runner`: every gold SQL runs once through `PostgresServer::read_rows` (the
//! classification and `sql::run_read` of `execute_sql`, at most 10,000 rows); each question goes
//! through `PostgresServer::call("generate_sql", ..)` itself, so prompt, context selection,
//! validation, retries and failure rows are the tool's own; the generated read runs the same way
//! and `compare` judges it; each call is handed to `tracking` as an `Execution` with `source:
//! Eval`.

use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::compare::{ResultTable, Verdict, compare, has_top_level_order_by};
use super::questions::Question;
use super::report::{Item, Outcome, Tokens};
use crate::config::Principal;
use crate::servers::CallContext;
use crate::servers::postgres::PostgresServer;
use crate::sql;
use crate::tool::{ErrorCode, LlmUsage, ToolError, ToolOutput};
use crate::tracking::{
    Execution, ExecutionStatus, Failure, Origin, Source, Tracker, cut_response, redact_object,
    redact_response,
};

/// The most rows a gold or generated result may have.
pub(crate) const MAX_ROWS: usize = 10_000;
/// The most bytes a result may hold (10,000 wide rows fit).
const MAX_BYTES: usize = 256 * 1024 * 1024;

/// A gold result, ready to compare against: the rows and whether their order counts. Or why
/// the gold SQL cannot be used.
pub(crate) type Gold = Result<(ResultTable, bool), String>;

/// Everything a run needs.
#[derive(Debug, Clone)]
pub(crate) struct Runner {
    pub(crate) server: PostgresServer,
    pub(crate) tracker: Tracker,
    pub(crate) principal: Principal,
    pub(crate) provider: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) max_retries: u32,
    pub(crate) concurrency: usize,
    /// How much of a response a tracking row keeps.
    pub(crate) max_response_bytes: usize,
    /// One id for every call of this `orca eval`, stored with each.
    pub(crate) run_id: Uuid,
}

/// What `generate_sql` came back with, for the outcome.
struct Generated {
    sql: Option<String>,
    attempts: u32,
    llm: Option<LlmUsage>,
    /// Decided already (the call failed, or it wrote); `None` when the SQL is to be run.
    outcome: Option<(Outcome, String)>,
}

impl Runner {
    fn limits(&self) -> sql::ReadLimits {
        sql::ReadLimits {
            max_rows: MAX_ROWS,
            max_bytes: MAX_BYTES,
            timeout: self.server.default_timeout(),
        }
    }

    /// Run every gold SQL once (read-only), `concurrency` at a time.
    pub(crate) async fn gold_results(&self, questions: &[Question]) -> Vec<Gold> {
        futures::stream::iter(questions)
            .map(|question| self.gold(question))
            .buffered(self.concurrency.max(1))
            .collect()
            .await
    }

    async fn gold(&self, question: &Question) -> Gold {
        let result = self
            .server
            .read_rows(&question.gold_sql, self.limits(), &self.principal)
            .await
            .map_err(|error| format!("the gold SQL failed: {}", error.message))?;
        if result.truncated.is_some() {
            return Err(format!(
                "the gold SQL returns more than {MAX_ROWS} rows (or too many bytes)"
            ));
        }
        let ordered = question.order_matters || has_top_level_order_by(&question.gold_sql);
        Ok((table(result), ordered))
    }

    /// Ask for every question (`concurrency` at a time) and judge the answers; `on_item` hears
    /// of each as it finishes. Items come back in the order of the questions.
    pub(crate) async fn run(
        &self,
        questions: &[Question],
        golds: &[Gold],
        use_context: bool,
        on_item: &(dyn Fn(&Item) + Sync),
    ) -> Vec<Item> {
        let mut items: Vec<(usize, Item)> =
            futures::stream::iter(questions.iter().zip(golds).enumerate())
                .map(|(index, (question, gold))| async move {
                    (index, self.question(question, gold, use_context).await)
                })
                .buffer_unordered(self.concurrency.max(1))
                .inspect(|(_, item)| on_item(item))
                .collect()
                .await;
        items.sort_by_key(|(index, _)| *index);
        items.into_iter().map(|(_, item)| item).collect()
    }

    async fn question(&self, question: &Question, gold: &Gold, use_context: bool) -> Item {
        let item = |outcome: Outcome, error: Option<String>| Item {
            id: question.id.clone(),
            outcome,
            attempts: 0,
            sql: None,
            error,
            tokens: Tokens::default(),
            latency_ms: 0,
            tags: question.tags.clone(),
        };
        let (gold, ordered) = match gold {
            Ok(gold) => gold,
            // Not the model's failure: it is not even asked.
            Err(reason) => return item(Outcome::GoldError, Some(reason.clone())),
        };
        let mut arguments = Map::new();
        arguments.insert("prompt".into(), Value::from(question.question.clone()));
        arguments.insert("use_context".into(), Value::Bool(use_context));
        arguments.insert("max_retries".into(), Value::from(self.max_retries));
        if let Some(provider) = &self.provider {
            arguments.insert("llm_provider".into(), Value::from(provider.clone()));
        }
        if let Some(model) = &self.model {
            arguments.insert("llm_model".into(), Value::from(model.clone()));
        }
        let context = CallContext::new(self.principal.clone());
        let started = Instant::now();
        let called = self.server.call("generate_sql", Some(arguments.clone()), &context).await;
        let elapsed = started.elapsed();
        let generated = generated(&called);
        let (outcome, error) = match (&generated.outcome, &generated.sql) {
            (Some((outcome, error)), _) => (*outcome, Some(error.clone())),
            (None, None) => (Outcome::WrongResult, Some("no SQL came back".to_owned())),
            (None, Some(sql_text)) => self.judge(sql_text, gold, *ordered).await,
        };
        self.record(question, arguments, &called, elapsed, outcome, context.database());
        let llm = generated.llm.unwrap_or_default();
        Item {
            id: question.id.clone(),
            outcome,
            attempts: generated.attempts,
            sql: generated.sql,
            error,
            tokens: Tokens {
                prompt: llm.prompt_tokens.unwrap_or(0),
                completion: llm.completion_tokens.unwrap_or(0),
            },
            latency_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            tags: question.tags.clone(),
        }
    }

    /// Run the generated read and compare it with the gold result.
    async fn judge(
        &self,
        sql_text: &str,
        gold: &ResultTable,
        ordered: bool,
    ) -> (Outcome, Option<String>) {
        match self.server.read_rows(sql_text, self.limits(), &self.principal).await {
            Err(error) if error.code == ErrorCode::Timeout => {
                (Outcome::Timeout, Some(error.message))
            }
            Err(error) => {
                (Outcome::WrongResult, Some(format!("the generated SQL failed: {}", error.message)))
            }
            Ok(result) if result.truncated.is_some() => (
                Outcome::WrongResult,
                Some(format!(
                    "the generated SQL returns more than {MAX_ROWS} rows (or too many bytes)"
                )),
            ),
            Ok(result) => match compare(gold, &table(result), ordered) {
                Verdict::Equal => (Outcome::Correct, None),
                Verdict::Different(reason) => (Outcome::WrongResult, Some(reason)),
            },
        }
    }

    /// Record the `generate_sql` call like the gateway records one, with the source `eval`.
    fn record(
        &self,
        question: &Question,
        arguments: Map<String, Value>,
        called: &Result<ToolOutput, ToolError>,
        elapsed: Duration,
        outcome: Outcome,
        database: Option<String>,
    ) {
        if !self.tracker.is_enabled() {
            return;
        }
        let now = Utc::now();
        let trace_id = Uuid::new_v4().simple().to_string();
        let mut request = redact_object(&arguments);
        if let Value::Object(map) = &mut request {
            map.insert(
                "eval".into(),
                json!({"run_id": self.run_id.to_string(), "question_id": question.id, "outcome": outcome.as_str()}),
            );
        }
        let (response, llm, retried, error) = match called {
            Ok(output) => (
                redact_response(output.value.clone()),
                output.llm.clone(),
                output.failed_attempts.clone(),
                None,
            ),
            Err(error) => {
                let attempts = error.attempts.as_deref();
                (
                    error.to_json(&trace_id),
                    attempts.and_then(|attempts| attempts.llm.clone()),
                    attempts.map(|attempts| attempts.earlier.clone()).unwrap_or_default(),
                    Some(error),
                )
            }
        };
        let failures = Failure::for_attempts(&retried, error, &trace_id, now);
        let (response_data, response_bytes) = cut_response(&response, self.max_response_bytes);
        let status = match error {
            None => ExecutionStatus::Success,
            Some(error) if error.code == ErrorCode::Timeout => ExecutionStatus::Timeout,
            Some(_) => ExecutionStatus::Error,
        };
        let origin = Origin {
            principal: self.principal.name.clone(),
            principal_id: Some(self.principal.identity()),
            client_id: self.principal.client.clone(),
            role: self.principal.role.clone(),
            transport: "cli".to_owned(),
            source: Source::Eval,
            ..Origin::default()
        };
        let (server, tool) = ("postgres".to_owned(), "generate_sql".to_owned());
        self.tracker.record(Execution {
            request_data: request,
            response_data: Some(response_data),
            response_bytes,
            execution_time_ms: i32::try_from(elapsed.as_millis()).unwrap_or(i32::MAX),
            status,
            error_code: error.map(|error| error.code.as_str().to_owned()),
            error_message: error.map(|error| error.message.clone()),
            created_at: now,
            failures,
            database,
            ..Execution::of(origin, server, tool, trace_id).with_llm(llm.as_ref())
        });
    }
}

fn table(result: sql::ReadResult) -> ResultTable {
    ResultTable {
        types: result.columns.into_iter().map(|column| column.type_name).collect(),
        rows: result.rows,
    }
}

/// Read `generate_sql`'s result: its SQL, its attempts and usage, and the outcome when the
/// call alone decides it.
fn generated(called: &Result<ToolOutput, ToolError>) -> Generated {
    match called {
        Ok(output) => {
            let sql_text = output.value["sql"].as_str().map(str::to_owned);
            let attempts = output.meta.get("attempt").and_then(Value::as_u64).unwrap_or(1);
            let outcome = (output.value["is_write"] == Value::Bool(true)).then(|| {
                let kind = output.value["statement_kind"].as_str().unwrap_or("write");
                (Outcome::NotARead, format!("the model wrote a {kind} statement; it was not run"))
            });
            Generated {
                sql: sql_text,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                llm: output.llm.clone(),
                outcome,
            }
        }
        Err(error) => {
            let attempts = error.attempts.as_deref();
            let attempt_count = attempts
                .and_then(|attempts| attempts.meta.get("attempts"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let details = error.details.as_deref();
            let sql_text = details
                .and_then(|details| details.get("last_sql"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    // A provider failure after failed attempts: the last SQL tried.
                    attempts
                        .and_then(|attempts| attempts.earlier.last())
                        .and_then(|earlier| earlier.details.as_deref())
                        .and_then(|details| details.get("sql"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
            let outcome = if error.code == ErrorCode::ExceededRetries {
                Outcome::ExceededRetries
            } else if error.code == ErrorCode::Timeout || error.error_type == Some("llm_timeout") {
                Outcome::Timeout
            } else {
                Outcome::ProviderError
            };
            Generated {
                sql: sql_text,
                attempts: u32::try_from(attempt_count).unwrap_or(u32::MAX),
                llm: attempts.and_then(|attempts| attempts.llm.clone()),
                outcome: Some((outcome, error.message.clone())),
            }
        }
    }
}
