-- Who owns a confirmation token or an approval request, and who made a call, by identity
-- (`Principal::identity`): `key:<name>` for an API key, `token:<issuer>#<sub>` for an OAuth
-- token, `stdio:<name>`, `anonymous:<name>`. `principal` keeps the name that is shown; an API
-- key and a token user of one name share it, but not their identity, which every comparison of
-- who owns what uses. Rows stored before this migration have no owner: a confirmation token or
-- approval among them can no longer be redeemed, and a call among them is listed only to a
-- console that sees everyone's.

ALTER TABLE orca.confirmation_tokens
    ADD COLUMN IF NOT EXISTS owner TEXT;

DROP INDEX IF EXISTS orca.confirmation_tokens_pending;
CREATE INDEX IF NOT EXISTS confirmation_tokens_pending
    ON orca.confirmation_tokens (statement_sha256, owner, database)
    WHERE redeemed_at IS NULL;

ALTER TABLE orca.mcp_executions
    ADD COLUMN IF NOT EXISTS principal_id TEXT;
