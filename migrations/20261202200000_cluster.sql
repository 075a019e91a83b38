-- Replicas as one system on this database (src/cluster/): the directory of replicas, where
-- what a client continues lives, the limits they count together, and the DPoP proofs seen.

-- Each replica with cluster.advertise_url, seen every few seconds; gone when not seen.
CREATE TABLE IF NOT EXISTS orca.replicas (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    status     JSONB,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A task or a --stateful session, the replica whose memory holds it, whose it is
-- (Principal::identity) and, for a task, the tool it calls.
CREATE TABLE IF NOT EXISTS orca.replica_items (
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    replica    TEXT NOT NULL,
    owner      TEXT NOT NULL,
    tool       TEXT,
    -- Found lost with its replica (and recorded so) by a request on another.
    lost       BOOLEAN NOT NULL DEFAULT false,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);

-- Calls (and failed authentications) of one key in one minute of the clock, leased by the
-- replicas a few at a time. Unlogged: after a crash of the database the minute starts again.
CREATE UNLOGGED TABLE IF NOT EXISTS orca.rate_windows (
    key          TEXT NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    used         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key, window_start)
);

-- The DPoP proofs seen (a hash of the token's key and the proof's jti), until they expire.
CREATE TABLE IF NOT EXISTS orca.dpop_proofs (
    proof      BYTEA PRIMARY KEY,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS dpop_proofs_expires_at ON orca.dpop_proofs (expires_at);
