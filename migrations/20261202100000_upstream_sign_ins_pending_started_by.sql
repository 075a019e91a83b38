-- Who started each waiting sign-in (the orca user's identity, whatever vault row it lands in),
-- so that each user holds at most a small share of the sign-ins that may wait at once.
ALTER TABLE orca.upstream_sign_ins_pending ADD COLUMN started_by text NOT NULL DEFAULT '';
CREATE INDEX upstream_sign_ins_pending_started_by ON orca.upstream_sign_ins_pending (started_by);
