-- OAuth sign-ins to external MCP servers, sealed with AES-256-GCM under a key derived from
-- ORCA_SECRET (HKDF-SHA256), so that every replica uses the same sign-in and the table alone
-- reveals no token. `subject` is '' for a sign-in shared by every caller.
CREATE TABLE orca.upstream_tokens (
    upstream text NOT NULL,
    subject text NOT NULL DEFAULT '',
    nonce bytea NOT NULL,
    sealed bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (upstream, subject)
);
