-- orca's own tracking tables: one row per tool call, its failures, and the feedback on it.
-- No foreign keys point at tables orca does not own.

CREATE TABLE IF NOT EXISTS orca.mcp_executions (
    id                    UUID PRIMARY KEY,
    mcp_name              TEXT NOT NULL,
    tool_name             TEXT NOT NULL,
    upstream_tool_name    TEXT,
    principal             TEXT NOT NULL,
    user_id               TEXT,
    agent_id              TEXT,
    session_id            TEXT,
    transport             TEXT NOT NULL,
    trace_id              TEXT NOT NULL,
    request_data          JSONB,
    response_data         JSONB,
    response_bytes        BIGINT,
    llm_provider          TEXT,
    llm_model             TEXT,
    llm_prompt_tokens     BIGINT,
    llm_completion_tokens BIGINT,
    execution_time_ms     INTEGER,
    status                TEXT NOT NULL CHECK (status IN ('success', 'error', 'timeout')),
    error_code            TEXT,
    error_message         TEXT,
    feedback_token        UUID NOT NULL UNIQUE,
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS mcp_executions_created_at ON orca.mcp_executions (created_at);

CREATE TABLE IF NOT EXISTS orca.mcp_failures (
    id            UUID PRIMARY KEY,
    execution_id  UUID NOT NULL REFERENCES orca.mcp_executions (id) ON DELETE CASCADE,
    error_type    TEXT NOT NULL,
    error_code    TEXT,
    error_details JSONB,
    retry_attempt INTEGER NOT NULL DEFAULT 1,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS mcp_failures_created_at ON orca.mcp_failures (created_at);
CREATE INDEX IF NOT EXISTS mcp_failures_execution ON orca.mcp_failures (execution_id);

CREATE TABLE IF NOT EXISTS orca.mcp_feedback (
    id             UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    feedback_token UUID NOT NULL UNIQUE,
    execution_id   UUID NOT NULL REFERENCES orca.mcp_executions (id) ON DELETE CASCADE,
    user_id        TEXT,
    rating         TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    rating_score   INTEGER CHECK (rating_score >= 1 AND rating_score <= 5),
    comment        TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ
);

CREATE INDEX IF NOT EXISTS mcp_feedback_changed_at ON orca.mcp_feedback ((coalesce(updated_at, created_at)));
