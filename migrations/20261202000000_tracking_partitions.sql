-- The tracking tables become partitioned by day (declarative partitioning, no extension), so
-- that old days are dropped whole (`tracking.retention_days`) and a year of calls costs each new
-- call and each day's export what a fresh table does. Every existing row is kept: each table
-- is renamed and attached as the one partition of everything before tomorrow (UTC); orca
-- creates the daily partitions from there on ahead of time, and drops that first partition
-- once all of it is past the retention.
--
-- A day is the executions of that day with their failures and feedback: failures and feedback
-- are partitioned by the time of their execution (`execution_created_at`), so that a day is
-- dropped whole, a join of a failure or a rating with its execution reads one partition, and a
-- second rating still replaces the first. A partitioned table's unique keys include its
-- partition key: executions are keyed by (id, created_at) and (feedback_token, created_at),
-- failures by (id, execution_created_at), feedback by (id, execution_created_at) and
-- (feedback_token, execution_created_at). The foreign keys from failures and feedback to
-- executions go: a partition of executions can then be dropped in one statement, and every
-- row pointing at it is in the partitions of the same day.
--
-- `orca.tracking_exports` records each `orca export-feedback` run's range: a day whose
-- failures and feedback some export has not covered yet is kept past the retention.

ALTER TABLE orca.mcp_failures DROP CONSTRAINT IF EXISTS mcp_failures_execution_id_fkey;
ALTER TABLE orca.mcp_feedback DROP CONSTRAINT IF EXISTS mcp_feedback_execution_id_fkey;

ALTER TABLE orca.mcp_failures ADD COLUMN execution_created_at TIMESTAMPTZ;
UPDATE orca.mcp_failures f SET execution_created_at = e.created_at
    FROM orca.mcp_executions e WHERE e.id = f.execution_id;
UPDATE orca.mcp_failures SET execution_created_at = created_at WHERE execution_created_at IS NULL;
ALTER TABLE orca.mcp_failures ALTER COLUMN execution_created_at SET NOT NULL;

ALTER TABLE orca.mcp_feedback ADD COLUMN execution_created_at TIMESTAMPTZ;
UPDATE orca.mcp_feedback f SET execution_created_at = e.created_at
    FROM orca.mcp_executions e WHERE e.id = f.execution_id;
-- A rating whose execution is gone (none, with the cascading key that stood until now) keeps
-- its own time.
UPDATE orca.mcp_feedback SET execution_created_at = created_at WHERE execution_created_at IS NULL;
ALTER TABLE orca.mcp_feedback ALTER COLUMN execution_created_at SET NOT NULL;

DO $$
DECLARE
    -- The first daily partition starts tomorrow, UTC; everything before is the earlier table.
    bound TIMESTAMPTZ := (date_trunc('day', now() AT TIME ZONE 'UTC') + INTERVAL '1 day') AT TIME ZONE 'UTC';
    suffix TEXT := to_char(date_trunc('day', now() AT TIME ZONE 'UTC') + INTERVAL '1 day', 'YYYYMMDD');
BEGIN
    -- Executions.
    ALTER TABLE orca.mcp_executions RENAME TO mcp_executions_before;
    -- Its keys become the partitioned table's (which include the partition key).
    ALTER TABLE orca.mcp_executions_before DROP CONSTRAINT mcp_executions_pkey;
    ALTER TABLE orca.mcp_executions_before DROP CONSTRAINT mcp_executions_feedback_token_key;
    ALTER INDEX orca.mcp_executions_created_at RENAME TO mcp_executions_before_created_at;
    CREATE TABLE orca.mcp_executions (LIKE orca.mcp_executions_before
        INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)
        PARTITION BY RANGE (created_at);
    ALTER TABLE orca.mcp_executions ADD CONSTRAINT mcp_executions_pkey PRIMARY KEY (id, created_at);
    ALTER TABLE orca.mcp_executions ADD CONSTRAINT mcp_executions_feedback_token_key UNIQUE (feedback_token, created_at);
    CREATE INDEX mcp_executions_created_at ON orca.mcp_executions (created_at);
    CREATE INDEX mcp_executions_by_feedback_token ON orca.mcp_executions (feedback_token);
    EXECUTE format('ALTER TABLE orca.mcp_executions_before RENAME TO %I', 'mcp_executions_until_' || suffix);
    EXECUTE format('ALTER TABLE orca.mcp_executions ATTACH PARTITION orca.%I FOR VALUES FROM (MINVALUE) TO (%L)',
                   'mcp_executions_until_' || suffix, bound);

    -- Failures.
    ALTER TABLE orca.mcp_failures RENAME TO mcp_failures_before;
    ALTER TABLE orca.mcp_failures_before DROP CONSTRAINT mcp_failures_pkey;
    ALTER INDEX orca.mcp_failures_created_at RENAME TO mcp_failures_before_created_at;
    ALTER INDEX orca.mcp_failures_execution RENAME TO mcp_failures_before_execution;
    CREATE TABLE orca.mcp_failures (LIKE orca.mcp_failures_before
        INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)
        PARTITION BY RANGE (execution_created_at);
    ALTER TABLE orca.mcp_failures ADD CONSTRAINT mcp_failures_pkey PRIMARY KEY (id, execution_created_at);
    CREATE INDEX mcp_failures_created_at ON orca.mcp_failures (created_at);
    CREATE INDEX mcp_failures_execution ON orca.mcp_failures (execution_id);
    EXECUTE format('ALTER TABLE orca.mcp_failures_before RENAME TO %I', 'mcp_failures_until_' || suffix);
    EXECUTE format('ALTER TABLE orca.mcp_failures ATTACH PARTITION orca.%I FOR VALUES FROM (MINVALUE) TO (%L)',
                   'mcp_failures_until_' || suffix, bound);

    -- Feedback.
    ALTER TABLE orca.mcp_feedback RENAME TO mcp_feedback_before;
    ALTER TABLE orca.mcp_feedback_before DROP CONSTRAINT mcp_feedback_pkey;
    ALTER TABLE orca.mcp_feedback_before DROP CONSTRAINT mcp_feedback_feedback_token_key;
    ALTER INDEX orca.mcp_feedback_changed_at RENAME TO mcp_feedback_before_changed_at;
    CREATE TABLE orca.mcp_feedback (LIKE orca.mcp_feedback_before
        INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)
        PARTITION BY RANGE (execution_created_at);
    ALTER TABLE orca.mcp_feedback ADD CONSTRAINT mcp_feedback_pkey PRIMARY KEY (id, execution_created_at);
    ALTER TABLE orca.mcp_feedback ADD CONSTRAINT mcp_feedback_feedback_token_key UNIQUE (feedback_token, execution_created_at);
    CREATE INDEX mcp_feedback_changed_at ON orca.mcp_feedback ((coalesce(updated_at, created_at)));
    CREATE INDEX mcp_feedback_execution ON orca.mcp_feedback (execution_id);
    EXECUTE format('ALTER TABLE orca.mcp_feedback_before RENAME TO %I', 'mcp_feedback_until_' || suffix);
    EXECUTE format('ALTER TABLE orca.mcp_feedback ATTACH PARTITION orca.%I FOR VALUES FROM (MINVALUE) TO (%L)',
                   'mcp_feedback_until_' || suffix, bound);
END
$$;

CREATE TABLE IF NOT EXISTS orca.tracking_exports (
    id          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    range_from  TIMESTAMPTZ NOT NULL,
    range_until TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tracking_exports_range ON orca.tracking_exports (range_from, range_until);
