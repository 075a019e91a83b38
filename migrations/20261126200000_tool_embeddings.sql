-- Tool search's semantic layer: each tool's text embedded once per model and kept by the
-- SHA-256 of that text, so that a restart, another replica or an unchanged tool after a list
-- change reuses it. Nothing here names a caller; rows are never updated, only added.

CREATE TABLE IF NOT EXISTS orca.tool_embeddings (
    model       TEXT        NOT NULL,
    text_sha256 BYTEA       NOT NULL,
    embedding   REAL[]      NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (model, text_sha256)
);
