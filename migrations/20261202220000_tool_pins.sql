-- Pinned tool definitions of external servers, shared by replicas and kept across restarts.
-- `tool_pin_servers` names each server whose tools were listed once: its first listing pins
-- every definition that raises no finding; a tool that appears later is new. `tool_pins` holds
-- the approved definition of each tool (by the server's own name for it) and its SHA-256 (of
-- the definition's canonical JSON: name, title, description, input and output schema,
-- annotations). `tool_holds` holds the definition a server lists in place of its pin (changed),
-- a tool added after the first listing, or one whose text reads as poisoned, until a person
-- approves it (one row per tool: the latest listed). `tool_pin_events` records every pin, hold,
-- warning, release and approval: who, when, the pinned and the new hash. Who is an identity
-- (`Principal::identity`: `key:<name>`, `token:<issuer>#<sub>`, `stdio:<name>` for the person at
-- `orca tools approve`), or `orca` for what orca decided itself (a pin at first sight, a hold, a
-- warning, a release); `via` says where a person approved (`console`, `orca tools approve`).
-- Changes are told to every replica on the channel `orca_tool_pins` (the payload is the
-- server's key).
CREATE TABLE orca.tool_pin_servers (
    server          TEXT        PRIMARY KEY,
    first_listed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE orca.tool_pins (
    server     TEXT        NOT NULL,
    tool       TEXT        NOT NULL,
    sha256     TEXT        NOT NULL,
    definition JSONB       NOT NULL,
    pinned_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    pinned_by  TEXT        NOT NULL,
    PRIMARY KEY (server, tool)
);

CREATE TABLE orca.tool_holds (
    server          TEXT        NOT NULL,
    tool            TEXT        NOT NULL,
    sha256          TEXT        NOT NULL,
    definition      JSONB       NOT NULL,
    pinned_sha256   TEXT,
    reason          TEXT        NOT NULL CHECK (reason IN ('changed', 'added', 'findings')),
    findings        JSONB       NOT NULL DEFAULT '[]',
    held_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (server, tool)
);

CREATE TABLE orca.tool_pin_events (
    id            BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    server        TEXT        NOT NULL,
    tool          TEXT        NOT NULL,
    event         TEXT        NOT NULL CHECK (event IN ('pinned', 'held', 'warned', 'released', 'approved')),
    actor         TEXT        NOT NULL,
    via           TEXT,
    pinned_sha256 TEXT,
    sha256        TEXT        NOT NULL,
    reason        TEXT
);
CREATE INDEX tool_pin_events_server_tool ON orca.tool_pin_events (server, tool, at);
