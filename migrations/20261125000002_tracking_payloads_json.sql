-- Payloads are stored as the JSON text orca sends (`json`), not parsed into `jsonb`: nothing
-- indexes or rewrites them, and parsing every call's arguments and response was most of the
-- database's work per stored call. Queries read them exactly as before (`->`, `->>`, `::text`).
-- Existing rows are converted in place; their text is jsonb's normalized form of the same value.
-- `mcp_failures.error_details` stays `jsonb`: failures are few, and the export writes its text.

ALTER TABLE orca.mcp_executions
    ALTER COLUMN request_data TYPE json USING request_data::json,
    ALTER COLUMN response_data TYPE json USING response_data::json;

-- Payloads large enough to be compressed (about 2 kB) are compressed with lz4, several times
-- cheaper than the default pglz, where the server was built with it.
DO $$
BEGIN
    ALTER TABLE orca.mcp_executions
        ALTER COLUMN request_data SET COMPRESSION lz4,
        ALTER COLUMN response_data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available: tracking payloads keep the default compression';
END
$$;
