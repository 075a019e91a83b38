//! orca's own tables in PostgreSQL: the connection pool, migrations, and the batched insert of
//! execution records. Values are always bound, never spliced into SQL text.

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use crate::config::PoolConfig;

use super::copy;
use super::partitions;
use super::record::{Execution, Failure};

/// A pool for orca's state database. Connections are made lazily, so orca starts (and spills
/// its records) even while the database is down.
///
/// # Errors
///
/// When the URL cannot be parsed.
pub(crate) fn connect(url: &str, size: &PoolConfig) -> anyhow::Result<PgPool> {
    let options: PgConnectOptions = url.parse().context("invalid state database URL")?;
    let options = options.application_name("orca");
    Ok(crate::sql::pool_options(size.size(), Duration::from_secs(3)).connect_lazy_with(options))
}

/// Create schema `orca` and bring its tables up to date. The migration history lives in
/// `orca._sqlx_migrations`, so nothing is written to the `public` schema.
///
/// # Errors
///
/// When the database is unreachable or a migration fails.
pub(crate) async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.create_schema("orca");
    migrator.dangerous_set_table_name("orca._sqlx_migrations");
    migrator.run(pool).await.context("cannot migrate orca's tables")?;
    Ok(())
}

/// Store a batch of new executions and their failures in one transaction with binary `COPY`,
/// the cheapest way in. `COPY` cannot skip rows already stored, so should a batch meet one (a
/// unique violation: the ids are minted fresh, so this is not expected), the whole batch is
/// stored again with [`insert_batch`], which skips them.
///
/// A record of a day that has no partition yet (a replayed spill, a clock far off) gets one,
/// and the batch is tried again.
pub(super) async fn store_batch(
    pool: &PgPool,
    executions: &[Execution],
) -> Result<(), sqlx::Error> {
    let outcome = match copy_batch(pool, executions).await {
        Err(error) if partitions::is_missing_partition(&error) => {
            partitions::ensure_days(pool, days(executions)).await?;
            copy_batch(pool, executions).await
        }
        other => other,
    };
    match outcome {
        Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some(UNIQUE_VIOLATION) => {
            insert_batch(pool, executions).await
        }
        other => other,
    }
}

/// The days a batch's rows fall on: its executions' (their failures are stored with them).
fn days(executions: &[Execution]) -> Vec<chrono::NaiveDate> {
    partitions::days_of(executions.iter().map(|execution| execution.created_at))
}

const UNIQUE_VIOLATION: &str = "23505";

async fn copy_batch(pool: &PgPool, executions: &[Execution]) -> Result<(), sqlx::Error> {
    if executions.is_empty() {
        return Ok(());
    }
    let rows = copy::executions(executions);
    let failures = copy::failures(executions);
    let mut transaction = pool.begin().await?;
    copy_into(&mut transaction, "orca.mcp_executions", copy::EXECUTION_COLUMNS, rows).await?;
    if let Some(failures) = failures {
        copy_into(&mut transaction, "orca.mcp_failures", copy::FAILURE_COLUMNS, failures).await?;
    }
    transaction.commit().await
}

/// One binary `COPY` of encoded `rows` into `table`.
async fn copy_into(
    transaction: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    table: &str,
    columns: &str,
    rows: Vec<u8>,
) -> Result<(), sqlx::Error> {
    let mut copy_in = transaction
        .copy_in_raw(&format!("COPY {table} ({columns}) FROM STDIN (FORMAT binary)"))
        .await?;
    copy_in.send(rows).await?;
    copy_in.finish().await?;
    Ok(())
}

/// Insert executions and their failures in one transaction. Records already stored (same id)
/// are skipped, which makes replays idempotent. The payloads go in as the JSON text they
/// serialize to, like [`store_batch`] writes them.
///
/// Each table gets one statement whose parameters are arrays, unnested server-side: the SQL text
/// is the same for every batch size, so it is prepared once per connection and then reused.
pub(super) async fn insert_batch(
    pool: &PgPool,
    executions: &[Execution],
) -> Result<(), sqlx::Error> {
    match insert_rows(pool, executions).await {
        Err(error) if partitions::is_missing_partition(&error) => {
            partitions::ensure_days(pool, days(executions)).await?;
            insert_rows(pool, executions).await
        }
        other => other,
    }
}

async fn insert_rows(pool: &PgPool, executions: &[Execution]) -> Result<(), sqlx::Error> {
    if executions.is_empty() {
        return Ok(());
    }
    let column =
        |field: fn(&Execution) -> Option<String>| executions.iter().map(field).collect::<Vec<_>>();
    let mut transaction = pool.begin().await?;
    sqlx::query(
        "INSERT INTO orca.mcp_executions (id, mcp_name, tool_name, upstream_tool_name, principal, user_id, agent_id, \
         session_id, transport, trace_id, request_data, response_data, response_bytes, llm_provider, llm_model, \
         llm_prompt_tokens, llm_completion_tokens, execution_time_ms, status, error_code, error_message, \
         feedback_token, created_at, llm_latency_ms, source, client_id, role, database_name, principal_id) \
         SELECT id, mcp_name, tool_name, upstream_tool_name, principal, user_id, agent_id, session_id, transport, \
         trace_id, request_data::json, response_data::json, response_bytes, llm_provider, llm_model, \
         llm_prompt_tokens, llm_completion_tokens, execution_time_ms, status, error_code, error_message, \
         feedback_token, created_at, llm_latency_ms, source, client_id, role, database_name, principal_id \
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], \
         $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::int8[], $14::text[], $15::text[], \
         $16::int8[], $17::int8[], $18::int4[], $19::text[], $20::text[], $21::text[], $22::uuid[], $23::timestamptz[], $24::int4[], $25::text[], \
         $26::text[], $27::text[], $28::text[], $29::text[]) \
         AS batch (id, mcp_name, tool_name, upstream_tool_name, principal, user_id, agent_id, session_id, transport, \
         trace_id, request_data, response_data, response_bytes, llm_provider, llm_model, llm_prompt_tokens, \
         llm_completion_tokens, execution_time_ms, status, error_code, error_message, feedback_token, created_at, \
         llm_latency_ms, source, client_id, role, database_name, principal_id) \
         ON CONFLICT DO NOTHING",
    )
    .bind(executions.iter().map(|execution| execution.id).collect::<Vec<_>>())
    .bind(column(|execution| Some(execution.server.clone())))
    .bind(column(|execution| Some(execution.tool.clone())))
    .bind(column(|execution| execution.upstream_tool.clone()))
    .bind(column(|execution| Some(execution.principal.clone())))
    .bind(column(|execution| execution.user_id.clone()))
    .bind(column(|execution| execution.agent_id.clone()))
    .bind(column(|execution| execution.session_id.clone()))
    .bind(column(|execution| Some(execution.transport.clone())))
    .bind(column(|execution| Some(execution.trace_id.clone())))
    .bind(column(|execution| Some(execution.request_data.to_string())))
    .bind(column(|execution| execution.response_data.as_ref().map(|payload| payload.as_str().to_owned())))
    .bind(executions.iter().map(|execution| execution.response_bytes).collect::<Vec<_>>())
    .bind(column(|execution| execution.llm_provider.clone()))
    .bind(column(|execution| execution.llm_model.clone()))
    .bind(executions.iter().map(|execution| execution.llm_prompt_tokens).collect::<Vec<_>>())
    .bind(executions.iter().map(|execution| execution.llm_completion_tokens).collect::<Vec<_>>())
    .bind(executions.iter().map(|execution| execution.execution_time_ms).collect::<Vec<_>>())
    .bind(column(|execution| Some(execution.status.as_str().to_owned())))
    .bind(column(|execution| execution.error_code.clone()))
    .bind(column(|execution| execution.error_message.clone()))
    .bind(executions.iter().map(|execution| execution.feedback_token).collect::<Vec<_>>())
    .bind(executions.iter().map(|execution| execution.created_at).collect::<Vec<_>>())
    .bind(executions.iter().map(|execution| execution.llm_latency_ms).collect::<Vec<_>>())
    .bind(column(|execution| Some(execution.source.as_str().to_owned())))
    .bind(column(|execution| execution.client_id.clone()))
    .bind(column(|execution| execution.role.clone()))
    .bind(column(|execution| execution.database.clone()))
    .bind(column(|execution| execution.principal_id.clone()))
    .execute(&mut *transaction)
    .await?;

    let failures: Vec<(&Execution, &Failure)> = executions
        .iter()
        .flat_map(|execution| execution.failures.iter().map(move |failure| (execution, failure)))
        .collect();
    if !failures.is_empty() {
        sqlx::query(
            "INSERT INTO orca.mcp_failures (id, execution_id, error_type, error_code, error_details, retry_attempt, created_at, execution_created_at) \
             SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::int4[], $7::timestamptz[], $8::timestamptz[]) \
             ON CONFLICT DO NOTHING",
        )
        .bind(failures.iter().map(|(_, failure)| failure.id).collect::<Vec<_>>())
        .bind(failures.iter().map(|(execution, _)| execution.id).collect::<Vec<_>>())
        .bind(failures.iter().map(|(_, failure)| failure.error_type.clone()).collect::<Vec<_>>())
        .bind(failures.iter().map(|(_, failure)| failure.error_code.clone()).collect::<Vec<_>>())
        .bind(failures.iter().map(|(_, failure)| failure.error_details.clone()).collect::<Vec<_>>())
        .bind(failures.iter().map(|(_, failure)| failure.retry_attempt).collect::<Vec<_>>())
        .bind(failures.iter().map(|(_, failure)| failure.created_at).collect::<Vec<_>>())
        .bind(failures.iter().map(|(execution, _)| execution.created_at).collect::<Vec<_>>())
        .execute(&mut *transaction)
        .await?;
    }
    transaction.commit().await
}
