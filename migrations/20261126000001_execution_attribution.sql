-- Who a call came through and what allowed it, next to `principal` (the user: an API key's
-- name, or an OAuth token's `sub`): the OAuth client (`client_id`, else `azp`) and the roles of
-- `auth.roles` the token holds, joined with `,`. Both are NULL for API keys, stdio, anonymous
-- callers, and rows stored before this migration. A failure is attributed through its
-- execution; a feedback row names its rater in `user_id` and joins its execution for the rest.

ALTER TABLE orca.mcp_executions
    ADD COLUMN IF NOT EXISTS client_id TEXT,
    ADD COLUMN IF NOT EXISTS role TEXT;
