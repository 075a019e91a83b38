-- How long the model providers took within a call (all requests of the call, waits between
-- retried attempts included), next to the provider, model and token counts.

ALTER TABLE orca.mcp_executions ADD COLUMN IF NOT EXISTS llm_latency_ms INTEGER;
