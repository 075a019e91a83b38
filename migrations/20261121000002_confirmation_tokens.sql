-- Confirmation tokens for writes: minted by a dry run, redeemed at most once. With
-- `write_confirmation: human` a row is an approval request that a person approves before the
-- write may run. Single use is enforced here so that two replicas cannot both redeem one token.

CREATE TABLE IF NOT EXISTS orca.confirmation_tokens (
    id                UUID PRIMARY KEY,
    statement_sha256  BYTEA NOT NULL,
    statement         TEXT NOT NULL,
    statement_kind    TEXT NOT NULL,
    required_verbs    TEXT[] NOT NULL,
    principal         TEXT NOT NULL,
    database          TEXT NOT NULL,
    estimated_rows    DOUBLE PRECISION,
    approval_required BOOLEAN NOT NULL,
    approved_at       TIMESTAMPTZ,
    approved_by       TEXT,
    redeemed_at       TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at        TIMESTAMPTZ NOT NULL
);

CREATE INDEX IF NOT EXISTS confirmation_tokens_pending
    ON orca.confirmation_tokens (statement_sha256, principal, database)
    WHERE redeemed_at IS NULL;
