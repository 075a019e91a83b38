//! orca's own tables in PostgreSQL: the connection pool, migrations, and the batched insert of
//! execution records. Values are always bound, never spliced into SQL text.

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, QueryBuilder};

use super::record::Execution;

/// A pool for orca's state database. Connections are made lazily, so orca starts (and spills
/// its records) even while the database is down.
///
/// # Errors
///
/// When the URL cannot be parsed.
pub(crate) fn connect(url: &str) -> anyhow::Result<PgPool> {
    let options: PgConnectOptions = url.parse().context("invalid state database URL")?;
    let options = options.application_name("orca");
    Ok(PgPoolOptions::new()
        .max_connections(8)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(3))
        .idle_timeout(Duration::from_secs(300))
        .connect_lazy_with(options))
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

/// Insert executions and their failures in one transaction. Records already stored (same id)
/// are skipped, which makes replays idempotent.
pub(super) async fn insert_batch(
    pool: &PgPool,
    executions: &[Execution],
) -> Result<(), sqlx::Error> {
    if executions.is_empty() {
        return Ok(());
    }
    let mut transaction = pool.begin().await?;
    // PostgreSQL binds at most 65535 parameters per statement: 24 per row keeps a chunk well
    // below that.
    for chunk in executions.chunks(1000) {
        let mut insert: QueryBuilder<Postgres> = QueryBuilder::new(
            "INSERT INTO orca.mcp_executions (id, mcp_name, tool_name, upstream_tool_name, principal, user_id, agent_id, \
             session_id, transport, trace_id, request_data, response_data, response_bytes, llm_provider, llm_model, \
             llm_prompt_tokens, llm_completion_tokens, execution_time_ms, status, error_code, error_message, \
             feedback_token, created_at) ",
        );
        insert.push_values(chunk, |mut row, execution| {
            row.push_bind(execution.id)
                .push_bind(&execution.server)
                .push_bind(&execution.tool)
                .push_bind(&execution.upstream_tool)
                .push_bind(&execution.principal)
                .push_bind(&execution.user_id)
                .push_bind(&execution.agent_id)
                .push_bind(&execution.session_id)
                .push_bind(&execution.transport)
                .push_bind(&execution.trace_id)
                .push_bind(&execution.request_data)
                .push_bind(&execution.response_data)
                .push_bind(execution.response_bytes)
                .push_bind(&execution.llm_provider)
                .push_bind(&execution.llm_model)
                .push_bind(execution.llm_prompt_tokens)
                .push_bind(execution.llm_completion_tokens)
                .push_bind(execution.execution_time_ms)
                .push_bind(execution.status.as_str())
                .push_bind(&execution.error_code)
                .push_bind(&execution.error_message)
                .push_bind(execution.feedback_token)
                .push_bind(execution.created_at);
        });
        insert.push(" ON CONFLICT DO NOTHING");
        insert.build().execute(&mut *transaction).await?;
    }
    let failures: Vec<_> = executions
        .iter()
        .flat_map(|execution| execution.failures.iter().map(move |failure| (execution.id, failure)))
        .collect();
    for chunk in failures.chunks(5000) {
        let mut insert: QueryBuilder<Postgres> = QueryBuilder::new(
            "INSERT INTO orca.mcp_failures (id, execution_id, error_type, error_code, error_details, retry_attempt, created_at) ",
        );
        insert.push_values(chunk, |mut row, (execution_id, failure)| {
            row.push_bind(failure.id)
                .push_bind(*execution_id)
                .push_bind(&failure.error_type)
                .push_bind(&failure.error_code)
                .push_bind(&failure.error_details)
                .push_bind(failure.retry_attempt)
                .push_bind(failure.created_at);
        });
        insert.push(" ON CONFLICT DO NOTHING");
        insert.build().execute(&mut *transaction).await?;
    }
    transaction.commit().await
}
