-- The target database (catalog) a call of an SQL tool worked on, by its name in orca.yaml's
-- `databases` (or the single database's name). NULL for calls of other tools and for rows
-- stored before this migration. `export-feedback`, `context suggest` and `orca eval` select by it.

ALTER TABLE orca.mcp_executions
    ADD COLUMN IF NOT EXISTS database_name TEXT;
