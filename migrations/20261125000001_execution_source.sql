-- Where a call came from: `mcp` for the gateway's clients, `eval` for the calls `orca eval`
-- makes while measuring a question set. Exports and `orca context suggest` leave `eval` rows
-- out unless asked to include them.

ALTER TABLE orca.mcp_executions ADD COLUMN IF NOT EXISTS source TEXT NOT NULL DEFAULT 'mcp';
