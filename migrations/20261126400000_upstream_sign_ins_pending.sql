-- People's sign-ins to OAuth upstreams started from the console and waiting for the browser to
-- come back, so that the way back (`/oauth/upstream/callback`) finishes on any replica. Keyed by
-- the SHA-256 of the request's `state`; `subject` is the vault row the sign-in lands in (the
-- orca user's, or '' for a shared sign-in); `binding` is the SHA-256 of the browser's cookie;
-- the PKCE verifier, client and DPoP key are sealed (AES-256-GCM under a key derived from
-- ORCA_SECRET, bound to the upstream and the state's digest). Each row is taken once.
CREATE TABLE orca.upstream_sign_ins_pending (
    state_sha256 bytea PRIMARY KEY,
    upstream text NOT NULL,
    subject text NOT NULL,
    binding_sha256 bytea NOT NULL,
    nonce bytea NOT NULL,
    sealed bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX upstream_sign_ins_pending_expires_at ON orca.upstream_sign_ins_pending (expires_at);
