//! `execute_sql` against hostile and demanding SQL through a real MCP client: every pitfall of
//! the safety research refused in each way it can be sent, with the database left exactly as it
//! was; the analytics that over-strict guards block; timeouts that cancel and leave clean
//! connections; result caps that say so; and the JSON of every common column type.

use std::time::{Duration, Instant};

use futures::future::join_all;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value, json};
use sqlx::Connection;

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, samples};

type Client = RunningService<RoleClient, ()>;

/// One `execute_sql` answer.
#[derive(Debug)]
struct Answer {
    is_error: bool,
    /// The structured content: a result, a dry run, or `{"error": {...}}`.
    value: Value,
    meta: Map<String, Value>,
}

impl Answer {
    fn error_code(&self) -> Option<&str> {
        self.value["error"]["code"].as_str()
    }

    fn error_message(&self) -> &str {
        self.value["error"]["message"].as_str().unwrap_or_default()
    }

    /// The rows of a successful read.
    fn rows(&self) -> &[Value] {
        assert!(!self.is_error, "expected a result, got {}", self.value);
        self.value["rows"].as_array().map_or(&[], Vec::as_slice)
    }
}

async fn execute(client: &Client, arguments: Value) -> Answer {
    let result = call(client, "execute_sql", arguments, None).await.expect("execute_sql call");
    Answer {
        is_error: result.is_error == Some(true),
        value: result.structured_content.clone().unwrap_or(Value::Null),
        meta: meta_of(&result),
    }
}

/// Run `sql` as a read and return the answer, which must be a success.
async fn read(client: &Client, sql: &str) -> Answer {
    let answer = execute(client, json!({"sql": sql, "dry_run": false})).await;
    assert!(!answer.is_error, "{sql}: {}", answer.value);
    answer
}

/// Run DDL and fixtures on the test's own connection (the simple protocol: several statements).
async fn setup_sql(database: &TestDatabase, sql: &str) {
    let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut connection)
        .await
        .unwrap_or_else(|error| panic!("fixture failed: {error}\n{sql}"));
    connection.close().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// The pitfall corpus.
// ---------------------------------------------------------------------------------------------

/// What one way of sending a statement must give.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// A tool error with this code whose message contains `because`.
    Refused { code: &'static str, because: &'static str },
    /// A dry run of a read: a plan and no confirmation token.
    ReadPlan,
    /// A dry run of a write: a warning and a confirmation token (never redeemed here).
    WritePlan,
    /// A read that runs and returns rows (what it must not leave behind is checked after the
    /// corpus).
    Ran,
}

impl Expect {
    fn check(self, answer: &Answer) -> Result<(), String> {
        let value = &answer.value;
        match self {
            Expect::Refused { code, because } => {
                if !answer.is_error || answer.error_code() != Some(code) {
                    return Err(format!("expected {code}"));
                }
                if !answer.error_message().contains(because) {
                    return Err(format!("expected {code} saying `{because}`"));
                }
            }
            Expect::ReadPlan => {
                if answer.is_error
                    || value["dry_run"] != true
                    || value["statement"]["writes"] != false
                    || value.get("confirmation_token").is_some()
                {
                    return Err("expected the dry run of a read (no token)".to_owned());
                }
            }
            Expect::WritePlan => {
                let token = value["confirmation_token"].as_str().unwrap_or_default();
                if answer.is_error
                    || value["dry_run"] != true
                    || value["statement"]["writes"] != true
                    || token.is_empty()
                    || !value["warning"].is_string()
                {
                    return Err("expected the dry run of a write with a token".to_owned());
                }
            }
            Expect::Ran => {
                if answer.is_error || !value["rows"].is_array() {
                    return Err("expected the read to run".to_owned());
                }
            }
        }
        Ok(())
    }
}

/// A hostile statement and what each of the three ways of sending it must give.
#[derive(Debug, Clone, Copy)]
struct Hostile {
    sql: &'static str,
    /// `dry_run=false, read_only=true`.
    run: Expect,
    /// `dry_run=true`.
    dry_run: Expect,
    /// `dry_run=false, read_only=false`, without a confirmation token.
    run_writable: Expect,
}

const fn invalid(because: &'static str) -> Expect {
    Expect::Refused { code: "INVALID_INPUT", because }
}

/// Refused as invalid input however it is sent.
const fn refused(sql: &'static str, because: &'static str) -> Hostile {
    Hostile {
        sql,
        run: invalid(because),
        dry_run: invalid(because),
        run_writable: invalid(because),
    }
}

/// A write orca allows behind a confirmation: never run as a read, planned (with a token) by a
/// dry run, and refused without the token.
const fn confirmable_write(sql: &'static str) -> Hostile {
    Hostile {
        sql,
        run: invalid("read_only is true"),
        dry_run: Expect::WritePlan,
        run_writable: Expect::Refused {
            code: "CONFIRMATION_REQUIRED",
            because: "needs a confirmation token",
        },
    }
}

/// A read that passes orca's own checks (the write hides where no parser can see it) and is
/// stopped by the database: the read-only transaction fails it, and a dry run only plans it.
const fn stopped_by_the_database(sql: &'static str) -> Hostile {
    let because = invalid(READ_ONLY_TRANSACTION);
    Hostile { sql, run: because, dry_run: Expect::ReadPlan, run_writable: because }
}

/// A read that takes a session-level advisory lock where no parser sees it (a view, a function
/// folded while planning): it runs, and the lock must not outlive the call.
const fn leaves_a_lock(sql: &'static str) -> Hostile {
    Hostile { sql, run: Expect::Ran, dry_run: Expect::ReadPlan, run_writable: Expect::Ran }
}

const ONE_STATEMENT: &str = "send exactly one";
const UNSUPPORTED: &str = "statements are not allowed through execute_sql";
const VOLATILE: &str = "a read may not call volatile";
const READ_ONLY_TRANSACTION: &str = "inside a read-only transaction";

/// Every pitfall of section (d) of the safety research that one `execute_sql` call can express,
/// by item number. Items 13-19 and 21 are about other tools, transports or releases.
const HOSTILE: &[Hostile] = &[
    // 1 and 20: batches, whatever their first statement.
    refused("SELECT 1; COMMIT; DROP TABLE track CASCADE", "3 statements"),
    refused("COMMIT; DROP SCHEMA public CASCADE", "2 statements"),
    refused("SELECT 1; DROP TABLE artist", ONE_STATEMENT),
    refused("SELECT count(*) FROM artist;\nDELETE FROM artist", ONE_STATEMENT),
    refused("BEGIN; DELETE FROM artist; COMMIT", ONE_STATEMENT),
    // 2: flipping the transaction or the session to read-write.
    refused("SET TRANSACTION READ WRITE", UNSUPPORTED),
    refused("SET default_transaction_read_only = off", UNSUPPORTED),
    refused("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", UNSUPPORTED),
    refused("SET LOCAL statement_timeout = 0", UNSUPPORTED),
    refused("BEGIN READ WRITE", UNSUPPORTED),
    refused("START TRANSACTION READ WRITE", UNSUPPORTED),
    refused("COMMIT", UNSUPPORTED),
    refused("SAVEPOINT s", UNSUPPORTED),
    refused("RESET ALL", UNSUPPORTED),
    refused("RESET default_transaction_read_only", UNSUPPORTED),
    refused("DISCARD ALL", UNSUPPORTED),
    refused("SET ROLE postgres", UNSUPPORTED),
    refused("SET SESSION AUTHORIZATION postgres", UNSUPPORTED),
    refused("ALTER SYSTEM SET default_transaction_read_only = off", UNSUPPORTED),
    refused("ALTER DATABASE postgres SET default_transaction_read_only = off", UNSUPPORTED),
    confirmable_write("ALTER ROLE postgres SET default_transaction_read_only = off"),
    // 3: what a prefix check reads as something else.
    confirmable_write("/* x */ DROP TABLE artist"),
    confirmable_write("-- SELECT\nDELETE FROM artist"),
    confirmable_write("/* SELECT */ TRUNCATE artist CASCADE"),
    // 4: writes that start like reads.
    confirmable_write("WITH d AS (DELETE FROM invoice_line RETURNING *) SELECT count(*) FROM d"),
    confirmable_write(
        "WITH u AS (UPDATE track SET unit_price = 0 RETURNING 1) SELECT count(*) FROM u",
    ),
    confirmable_write(
        "WITH a AS (SELECT 1), i AS (INSERT INTO genre VALUES (999, 'x') RETURNING *) SELECT * FROM i",
    ),
    confirmable_write("SELECT * INTO stolen FROM customer"),
    confirmable_write("CREATE TABLE stolen AS SELECT * FROM customer"),
    confirmable_write("SELECT * FROM employee FOR UPDATE"),
    confirmable_write("SELECT * FROM employee FOR SHARE SKIP LOCKED"),
    // 5: a SELECT that writes through a function, in every place a function can be called.
    refused("SELECT purge()", VOLATILE),
    refused("SELECT * FROM purge()", VOLATILE),
    refused("SELECT public.purge()", VOLATILE),
    refused("SELECT count(*) FROM artist WHERE artist_id = purge()", VOLATILE),
    refused("SELECT l.purge_line FROM invoice_line AS l", VOLATILE),
    refused("SELECT (l).purge_line FROM invoice_line AS l", VOLATILE),
    refused("SELECT 1 === 2", VOLATILE),
    refused("SELECT nextval('probe_seq')", "nextval"),
    refused("SELECT setval('probe_seq', 1000)", "setval"),
    // ... and where no parser can see the function: a view, a cast, a function that claims to
    // be stable or immutable. The read-only transaction stops them; an immutable function is
    // folded (so run) while planning, which the dry run also does read-only.
    stopped_by_the_database("SELECT * FROM sneaky"),
    stopped_by_the_database("SELECT 'calm'::mood::integer"),
    stopped_by_the_database("SELECT stable_liar()"),
    refused("SELECT immutable_liar()", READ_ONLY_TRANSACTION),
    Hostile {
        sql: "DELETE FROM artist WHERE artist_id = immutable_liar()",
        run: invalid("read_only is true"),
        dry_run: invalid(READ_ONLY_TRANSACTION),
        run_writable: Expect::Refused {
            code: "CONFIRMATION_REQUIRED",
            because: "needs a confirmation token",
        },
    },
    // 6: functions outside the select list.
    refused("SELECT * FROM pg_read_file('/etc/passwd')", "pg_read_file"),
    refused("SELECT * FROM ROWS FROM (pg_ls_dir('.')) AS f", "pg_ls_dir"),
    refused(
        "SELECT name FROM artist WHERE name = (SELECT pg_read_file('/etc/passwd'))",
        "pg_read_file",
    ),
    refused("SELECT 1 LIMIT (SELECT count(*) FROM pg_ls_dir('.'))", "pg_ls_dir"),
    refused("SELECT (ARRAY[pg_read_file('/etc/passwd')])[1]", "pg_read_file"),
    refused(
        "SELECT count(*) FILTER (WHERE pg_read_file('/etc/passwd') IS NULL) FROM artist",
        "pg_read_file",
    ),
    refused("SELECT row_number() OVER (ORDER BY pg_ls_dir('.'))", "pg_ls_dir"),
    refused("SELECT (artist).pg_read_file FROM artist", "pg_read_file"),
    refused("SELECT ('/etc/passwd'::text).pg_read_file", "pg_read_file"),
    refused("SELECT (SELECT '/etc/passwd'::text).pg_read_file", "pg_read_file"),
    refused(
        "SELECT a.pg_terminate_backend FROM (SELECT pg_backend_pid()) AS a",
        "pg_terminate_backend",
    ),
    refused("SELECT PG_CATALOG.PG_READ_FILE('/etc/passwd')", "pg_read_file"),
    refused("SELECT \"pg_read_file\"('/etc/passwd')", "pg_read_file"),
    // 7: files, programs, the network, configuration and other sessions.
    refused("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
    refused("SELECT pg_read_binary_file('/etc/passwd')", "pg_read_binary_file"),
    refused("SELECT pg_ls_dir('.')", "pg_ls_dir"),
    refused("SELECT pg_stat_file('/etc/passwd')", "pg_stat_file"),
    refused("SELECT lo_import('/etc/passwd')", "lo_import"),
    refused("SELECT lo_export(1, '/tmp/orca-lo')", "lo_export"),
    refused("COPY artist TO PROGRAM 'id'", "PROGRAM"),
    refused("COPY (SELECT 1) TO PROGRAM 'id'", "PROGRAM"),
    refused("COPY artist TO '/tmp/orca-artist.csv'", UNSUPPORTED),
    refused("COPY artist FROM '/etc/passwd'", UNSUPPORTED),
    refused("SELECT dblink_exec('host=169.254.169.254', 'DROP TABLE artist')", "dblink_exec"),
    refused("SELECT * FROM dblink('host=169.254.169.254', 'SELECT 1') AS t(x int)", "dblink"),
    refused("SELECT set_config('default_transaction_read_only', 'off', false)", "set_config"),
    refused("SELECT pg_terminate_backend(pg_backend_pid())", "pg_terminate_backend"),
    refused("SELECT pg_cancel_backend(pg_backend_pid())", "pg_cancel_backend"),
    refused("SELECT pg_reload_conf()", "pg_reload_conf"),
    refused(
        "SELECT query_to_xml('DELETE FROM artist RETURNING 1', true, true, '')",
        "query_to_xml",
    ),
    confirmable_write("CREATE EXTENSION IF NOT EXISTS dblink"),
    confirmable_write(
        "CREATE SERVER evil FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '169.254.169.254')",
    ),
    // 8: work that survives a rollback, and extension schemas.
    refused("SELECT gin_clean_pending_list('x'::regclass)", "gin_clean_pending_list"),
    refused("SELECT pg_backup_start('orca')", "pg_backup_start"),
    refused("SELECT pg_import_system_collations('pg_catalog')", "pg_import_system_collations"),
    refused("SELECT cron.schedule('nightly', '0 0 * * *', 'DROP TABLE artist')", "cron.schedule"),
    // 9: data that leaks around column masks.
    refused("SELECT * FROM pg_stats", "pg_stats"),
    refused("SELECT * FROM pg_catalog.pg_statistic", "pg_statistic"),
    refused("SELECT * FROM pg_authid", "pg_authid"),
    refused("SELECT rolpassword FROM pg_catalog.pg_authid", "pg_authid"),
    refused("SELECT * FROM pg_shadow", "pg_shadow"),
    refused("TABLE pg_shadow", "pg_shadow"),
    refused("WITH s AS (SELECT * FROM pg_stats) SELECT * FROM s", "pg_stats"),
    refused("SELECT * FROM pg_largeobject", "pg_largeobject"),
    refused("SELECT get_raw_page('artist', 0)", "get_raw_page"),
    refused("SELECT query FROM pg_stat_activity", "pg_stat_activity"),
    refused("SELECT * FROM pg_file_settings", "pg_file_settings"),
    // 10: locks a read-only transaction does not stop.
    refused("SELECT pg_advisory_lock(1)", "pg_advisory_lock"),
    refused("SELECT pg_try_advisory_lock(1)", "pg_try_advisory_lock"),
    refused("SELECT pg_advisory_xact_lock(1)", "pg_advisory_xact_lock"),
    leaves_a_lock("SELECT * FROM locker"),
    leaves_a_lock("SELECT immutable_locker()"),
    refused("LOCK TABLE artist IN ACCESS EXCLUSIVE MODE", UNSUPPORTED),
    // 10 (continued): sleeping, which holds a pooled connection and is the timing oracle of
    // blind extraction, in any position and spelling.
    refused("SELECT pg_sleep(1)", "pg_sleep"),
    refused("SELECT pg_catalog.pg_sleep(1)", "pg_sleep"),
    refused("SELECT \"pg_sleep\"(1)", "pg_sleep"),
    refused("SELECT * FROM pg_sleep(1)", "pg_sleep"),
    refused("SELECT pg_sleep_for('1 second')", "pg_sleep_for"),
    refused("SELECT pg_sleep_until(now() + interval '1 second')", "pg_sleep_until"),
    refused(
        "SELECT CASE WHEN (SELECT count(*) FROM employee) > 0 THEN pg_sleep(1) END",
        "pg_sleep",
    ),
    refused("SELECT name FROM artist WHERE pg_sleep(1) IS NULL", "pg_sleep"),
    refused("SELECT (1::float8).pg_sleep", "pg_sleep"),
    refused("EXPLAIN ANALYZE SELECT pg_sleep(1)", "pg_sleep"),
    // 11: EXPLAIN ANALYZE runs what it explains.
    confirmable_write("EXPLAIN ANALYZE DELETE FROM invoice_line"),
    confirmable_write("EXPLAIN (ANALYZE, FORMAT JSON) DELETE FROM invoice_line"),
    confirmable_write(
        "EXPLAIN (ANALYZE true) WITH d AS (DELETE FROM artist RETURNING 1) SELECT * FROM d",
    ),
    refused("EXPLAIN ANALYZE SELECT purge()", VOLATILE),
    confirmable_write("EXPLAIN ANALYZE SELECT * FROM employee FOR UPDATE"),
    stopped_by_the_database("EXPLAIN ANALYZE SELECT * FROM sneaky"),
    // 12: session state that would outlive the call on a pooled connection.
    refused("PREPARE p AS DELETE FROM artist", UNSUPPORTED),
    refused("EXECUTE p", UNSUPPORTED),
    refused("DEALLOCATE ALL", UNSUPPORTED),
    refused("DECLARE c CURSOR WITH HOLD FOR SELECT * FROM artist", UNSUPPORTED),
    refused("DO $$ BEGIN DELETE FROM artist; END $$", UNSUPPORTED),
    refused("CALL purge_procedure()", UNSUPPORTED),
    refused("LISTEN x", UNSUPPORTED),
    refused("NOTIFY x", UNSUPPORTED),
    refused("SELECT pg_notify('x', 'y')", "pg_notify"),
    refused("VACUUM artist", UNSUPPORTED),
    refused("LOAD 'dblink'", UNSUPPORTED),
    refused("REFRESH MATERIALIZED VIEW sneaky_totals", UNSUPPORTED),
];

/// Objects a hostile database might already hold: functions that write, hidden behind every
/// kind of call, and a sequence.
const HOSTILE_FIXTURES: &str = r#"
CREATE FUNCTION purge() RETURNS int LANGUAGE sql AS 'DELETE FROM invoice_line RETURNING 1';
CREATE FUNCTION purge_line(invoice_line) RETURNS int LANGUAGE sql
    AS 'DELETE FROM invoice_line WHERE invoice_line_id = $1.invoice_line_id RETURNING 1';
CREATE FUNCTION purge_operator(int, int) RETURNS boolean LANGUAGE sql
    AS 'DELETE FROM invoice_line RETURNING true';
CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = purge_operator);
CREATE PROCEDURE purge_procedure() LANGUAGE sql AS 'DELETE FROM invoice_line';
CREATE VIEW sneaky AS SELECT purge() AS purged;
CREATE MATERIALIZED VIEW sneaky_totals AS SELECT count(*) AS lines FROM invoice_line;
CREATE TYPE mood AS ENUM ('calm');
CREATE FUNCTION mood_to_int(mood) RETURNS int LANGUAGE sql AS 'DELETE FROM invoice_line RETURNING 1';
CREATE CAST (mood AS integer) WITH FUNCTION mood_to_int(mood);
CREATE FUNCTION stable_liar() RETURNS int LANGUAGE plpgsql STABLE
    AS $$ BEGIN PERFORM purge(); RETURN 1; END $$;
CREATE FUNCTION immutable_liar() RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN PERFORM purge(); RETURN 1; END $$;
CREATE VIEW locker AS SELECT pg_try_advisory_lock(42) AS locked;
CREATE FUNCTION immutable_locker() RETURNS boolean LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN RETURN pg_try_advisory_lock(43); END $$;
CREATE SEQUENCE probe_seq;
SELECT nextval('probe_seq');
"#;

/// Send each hostile statement the three ways; a description of every mismatch.
async fn check_hostile(client: &Client, cases: &[Hostile]) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let ways = [
            (
                "run read-only",
                json!({"sql": case.sql, "dry_run": false, "read_only": true}),
                case.run,
            ),
            ("dry run", json!({"sql": case.sql, "dry_run": true}), case.dry_run),
            (
                "run writable without a token",
                json!({"sql": case.sql, "dry_run": false, "read_only": false}),
                case.run_writable,
            ),
        ];
        for (way, arguments, expect) in ways {
            let answer = execute(client, arguments).await;
            if let Err(problem) = expect.check(&answer) {
                failures.push(format!("{:?} ({way}): {problem}; got {}", case.sql, answer.value));
            }
        }
    }
    failures
}

/// Everything a hostile statement could have changed, as seen by a new superuser connection.
#[derive(Debug, PartialEq, Eq)]
struct DatabaseState {
    /// Every table outside the catalogs: name, row count and a digest of its rows.
    tables: Vec<(String, i64, String)>,
    relations: Vec<String>,
    functions: Vec<String>,
    schemas: Vec<String>,
    extensions: Vec<String>,
    foreign_servers: Vec<String>,
    /// `last_value` and `is_called` of the probe sequence.
    sequence: (i64, bool),
    role_settings: i64,
    large_objects: i64,
    auto_conf_settings: i64,
}

async fn strings(connection: &mut sqlx::PgConnection, query: &'static str) -> Vec<String> {
    sqlx::query_scalar(query).fetch_all(connection).await.unwrap_or_else(|e| panic!("{query}: {e}"))
}

async fn number(connection: &mut sqlx::PgConnection, query: &'static str) -> i64 {
    sqlx::query_scalar(query).fetch_one(connection).await.unwrap_or_else(|e| panic!("{query}: {e}"))
}

const USER_SCHEMAS: &str = "n.nspname NOT IN ('pg_catalog', 'information_schema', 'orca') \
                            AND n.nspname NOT LIKE 'pg\\_t%'";

async fn database_state(database: &TestDatabase) -> DatabaseState {
    let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
    let names: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT n.nspname::text, c.relname::text FROM pg_class c \
           JOIN pg_namespace n ON n.oid = c.relnamespace \
          WHERE c.relkind IN ('r', 'p') AND {USER_SCHEMAS} ORDER BY 1, 2"
    )))
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let mut tables = Vec::new();
    for (schema, name) in names {
        let (rows, digest): (i64, String) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT count(*), coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') \
               FROM \"{schema}\".\"{name}\" AS t"
        )))
        .fetch_one(&mut connection)
        .await
        .unwrap();
        tables.push((format!("{schema}.{name}"), rows, digest));
    }
    let relations = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT n.nspname || '.' || c.relname || ':' || c.relkind::text FROM pg_class c \
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_SCHEMAS} ORDER BY 1"
    )))
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let functions = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT n.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) \
                || ')' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
          WHERE {USER_SCHEMAS} ORDER BY 1"
    )))
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let sequence: (i64, bool) = sqlx::query_as("SELECT last_value, is_called FROM probe_seq")
        .fetch_optional(&mut connection)
        .await
        .unwrap()
        .unwrap_or((0, false));
    let state = DatabaseState {
        tables,
        relations,
        functions,
        schemas: strings(&mut connection, "SELECT nspname::text FROM pg_namespace ORDER BY 1")
            .await,
        extensions: strings(&mut connection, "SELECT extname::text FROM pg_extension ORDER BY 1")
            .await,
        foreign_servers: strings(
            &mut connection,
            "SELECT srvname::text FROM pg_foreign_server ORDER BY 1",
        )
        .await,
        sequence,
        role_settings: number(&mut connection, "SELECT count(*) FROM pg_db_role_setting").await,
        large_objects: number(&mut connection, "SELECT count(*) FROM pg_largeobject_metadata")
            .await,
        auto_conf_settings: number(
            &mut connection,
            "SELECT count(*) FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf'",
        )
        .await,
    };
    connection.close().await.unwrap();
    state
}

/// What a session of this database sees after the corpus: no advisory locks, no session of
/// orca's left inside a transaction, read-only off by default.
async fn assert_no_session_residue(database: &TestDatabase) {
    let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
    let advisory = number(
        &mut connection,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                                  AND database = (SELECT oid FROM pg_database \
                                                   WHERE datname = current_database())",
    )
    .await;
    assert_eq!(advisory, 0, "advisory locks are held");
    let in_transaction = number(
        &mut connection,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
            AND state LIKE 'idle in transaction%'",
    )
    .await;
    assert_eq!(in_transaction, 0, "a session was left inside a transaction");
    let read_only: String = sqlx::query_scalar("SHOW default_transaction_read_only")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    assert_eq!(read_only, "off");
    connection.close().await.unwrap();
}

#[tokio::test]
async fn the_pitfall_corpus_is_refused_and_the_database_is_unchanged() {
    let database = samples::chinook().await;
    setup_sql(&database, HOSTILE_FIXTURES).await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    // The first call settles orca's own state (migrations, tracking) before the snapshot.
    assert_eq!(read(&client, "SELECT count(*) FROM artist").await.rows()[0], json!([275]));
    let before = database_state(&database).await;
    assert!(
        before.tables.iter().any(|(name, rows, _)| name == "public.invoice_line" && *rows == 2240)
    );

    let failures = check_hostile(&client, HOSTILE).await;
    assert!(
        failures.is_empty(),
        "{} of {} hostile statements were not handled as expected:\n{}",
        failures.len(),
        HOSTILE.len(),
        failures.join("\n")
    );

    assert_eq!(database_state(&database).await, before);
    assert_no_session_residue(&database).await;
    let prepared = read(
        &client,
        // orca prepares each read itself, this one included: the pattern must not match its own text.
        "SELECT count(*) FROM pg_prepared_statements \
          WHERE name = 'p' OR statement ~* ('dele' || 'te from')",
    )
    .await;
    assert_eq!(prepared.rows()[0], json!([0]));
    let listening = read(&client, "SELECT count(*) FROM pg_listening_channels()").await;
    assert_eq!(listening.rows()[0], json!([0]));
    assert_eq!(read(&client, "SELECT count(*) FROM invoice_line").await.rows()[0], json!([2240]));
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Reads that strict guards wrongly block.
// ---------------------------------------------------------------------------------------------

/// What the first row of a read must be.
enum FirstRow {
    Is(Value),
    Satisfies(&'static str, fn(&Value) -> bool),
}

fn analytics() -> Vec<(&'static str, FirstRow)> {
    use FirstRow::{Is, Satisfies};
    vec![
        (
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY milliseconds) FROM track",
            Is(json!([255634.0])),
        ),
        ("SELECT mode() WITHIN GROUP (ORDER BY genre_id) FROM track", Is(json!([1]))),
        (
            "SELECT name, rank() OVER (PARTITION BY genre_id ORDER BY milliseconds DESC) AS r \
               FROM track WHERE genre_id = 1 ORDER BY r, name LIMIT 1",
            Is(json!(["Dazed And Confused", 1])),
        ),
        (
            "SELECT invoice_id, sum(total) OVER (ORDER BY invoice_id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) \
               FROM invoice ORDER BY invoice_id OFFSET 2 LIMIT 1",
            Is(json!([3, "11.88"])),
        ),
        (
            "WITH RECURSIVE chain AS ( \
                 SELECT employee_id, 1 AS depth FROM employee WHERE reports_to IS NULL \
                 UNION ALL \
                 SELECT e.employee_id, c.depth + 1 FROM employee e JOIN chain c ON e.reports_to = c.employee_id) \
             SELECT max(depth), count(*) FROM chain",
            Is(json!([3, 8])),
        ),
        (
            "SELECT a.name, first_album.title FROM artist a CROSS JOIN LATERAL \
               (SELECT title FROM album WHERE album.artist_id = a.artist_id ORDER BY album_id LIMIT 1) AS first_album \
              ORDER BY a.artist_id LIMIT 1",
            Is(json!(["AC/DC", "For Those About To Rock We Salute You"])),
        ),
        (
            "SELECT to_jsonb(artist) ->> 'name' FROM artist WHERE artist_id = 1",
            Is(json!(["AC/DC"])),
        ),
        (
            "SELECT count(*) FROM artist WHERE to_jsonb(artist) @> '{\"name\": \"AC/DC\"}'",
            Is(json!([1])),
        ),
        (
            "SELECT jsonb_path_query(to_jsonb(artist), '$.name') FROM artist WHERE artist_id = 1",
            Is(json!(["AC/DC"])),
        ),
        (
            "SELECT jsonb_build_object('artists', count(*)) FROM artist",
            Is(json!([{"artists": 275}])),
        ),
        (
            "SELECT count(*) FILTER (WHERE milliseconds > 300000), count(*) FROM track",
            Is(json!([1069, 3503])),
        ),
        (
            "SELECT media_type_id, genre_id, count(*) FROM track WHERE genre_id IN (1, 2) \
              GROUP BY GROUPING SETS ((media_type_id), (genre_id), ()) ORDER BY 1 NULLS LAST, 2 NULLS LAST",
            Is(json!([1, null, 1338])),
        ),
        (
            "SELECT genre_id, media_type_id, count(*) FROM track WHERE genre_id IN (1, 2) \
              GROUP BY ROLLUP (genre_id, media_type_id) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST",
            Is(json!([null, null, 1427])),
        ),
        ("SELECT 1 -- ; DROP TABLE artist", Is(json!([1]))),
        ("/* ; DROP TABLE artist */ SELECT count(*) FROM artist", Is(json!([275]))),
        ("SELECT '; DROP TABLE artist'", Is(json!(["; DROP TABLE artist"]))),
        ("SELECT $$; DROP TABLE artist; $$", Is(json!(["; DROP TABLE artist; "]))),
        ("SELECT count(*) FROM artist;", Is(json!([275]))),
        (
            "SELECT DISTINCT ON (genre_id) genre_id, name FROM track ORDER BY genre_id, milliseconds DESC, track_id",
            Is(json!([1, "Dazed And Confused"])),
        ),
        (
            "SELECT count(*) FROM (SELECT name FROM artist UNION SELECT name FROM genre) AS u",
            Is(json!([300])),
        ),
        (
            "SELECT count(*) FROM (SELECT artist_id FROM artist EXCEPT SELECT artist_id FROM album) AS e",
            Is(json!([71])),
        ),
        ("SELECT count(*) > 0 FROM track TABLESAMPLE SYSTEM (100)", Is(json!([true]))),
        (
            "SELECT count(*) BETWEEN 0 AND 3503 FROM track TABLESAMPLE SYSTEM (50)",
            Is(json!([true])),
        ),
        ("SELECT sum(x) FROM generate_series(1, 100) AS x", Is(json!([5050]))),
        ("SELECT * FROM unnest(ARRAY['a', 'b']) WITH ORDINALITY AS t(v, i)", Is(json!(["a", 1]))),
        (
            "SELECT string_agg(name, ', ' ORDER BY name) FROM genre WHERE genre_id <= 3",
            Is(json!(["Jazz, Metal, Rock"])),
        ),
        (
            "SELECT array_agg(genre_id ORDER BY genre_id) FROM genre WHERE genre_id <= 3",
            Is(json!([[1, 2, 3]])),
        ),
        (
            "SELECT date_trunc('month', invoice_date) AS month, count(*) FROM invoice GROUP BY 1 ORDER BY 1 LIMIT 1",
            Is(json!(["2021-01-01T00:00:00", 6])),
        ),
        ("SELECT random() >= 0 AND random() < 1", Is(json!([true]))),
        ("SELECT now() > '2020-01-01'::timestamptz, now() = now()", Is(json!([true, true]))),
        ("SELECT length(gen_random_uuid()::text)", Is(json!([36]))),
        (
            "SELECT count(*) FROM artist WHERE name ~* '^ac/?dc$' OR name ILIKE 'aero%'",
            Is(json!([3])),
        ),
        ("VALUES (1, 'one'), (2, 'two')", Is(json!([1, "one"]))),
        ("SELECT count(*) FROM (TABLE genre) AS g", Is(json!([25]))),
        ("EXPLAIN (COSTS OFF) SELECT * FROM artist", Is(json!(["Seq Scan on artist"]))),
        (
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM artist",
            Is(json!(["Aggregate (actual rows=1 loops=1)"])),
        ),
        (
            "EXPLAIN (FORMAT JSON) SELECT * FROM artist",
            Satisfies("a JSON plan", |row| row[0][0]["Plan"]["Node Type"] == "Seq Scan"),
        ),
        (
            "SHOW server_version",
            Satisfies("a version number", |row| {
                row[0].as_str().is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            }),
        ),
        (
            "/* the version */ SHOW server_version_num",
            Satisfies("a version number", |row| {
                row[0].as_str().is_some_and(|v| v.parse::<u32>().is_ok())
            }),
        ),
        ("SELECT current_setting('server_version_num')::int >= 150000", Is(json!([true]))),
    ]
}

#[tokio::test]
async fn analytics_reads_that_strict_guards_block_are_allowed() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let mut failures = Vec::new();
    for (sql, expected) in analytics() {
        let answer = execute(&client, json!({"sql": sql, "dry_run": false})).await;
        let first = answer.value["rows"][0].clone();
        let ok = !answer.is_error
            && match &expected {
                FirstRow::Is(row) => &first == row,
                FirstRow::Satisfies(_, check) => check(&first),
            };
        if !ok {
            let wanted = match &expected {
                FirstRow::Is(row) => row.to_string(),
                FirstRow::Satisfies(what, _) => (*what).to_owned(),
            };
            failures.push(format!("{sql}\n  wanted first row {wanted}\n  got {}", answer.value));
        }
        // Its dry run plans it (when PostgreSQL can) and asks for no confirmation.
        let dry_run = execute(&client, json!({"sql": sql, "dry_run": true})).await;
        if let Err(problem) = Expect::ReadPlan.check(&dry_run) {
            failures.push(format!("{sql} (dry run): {problem}; got {}", dry_run.value));
        }
    }
    assert!(failures.is_empty(), "{} reads failed:\n{}", failures.len(), failures.join("\n"));
    // Nothing was changed along the way.
    assert_eq!(read(&client, "SELECT count(*) FROM artist").await.rows()[0], json!([275]));
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Pagila: partitions, views, a materialized view, enums and domains.
// ---------------------------------------------------------------------------------------------

/// A few rows for the empty Pagila schema (foreign keys skipped: only what the reads need).
const PAGILA_ROWS: &str = r#"
SET session_replication_role = replica;
INSERT INTO language (language_id, name) VALUES (1, 'English');
INSERT INTO film (film_id, title, description, release_year, language_id, length, rating,
                  special_features, fulltext)
     VALUES (1, 'ACADEMY DINOSAUR', 'An epic drama', 2006, 1, 86, 'PG-13',
             '{Trailers,"Deleted Scenes"}', to_tsvector('english', 'ACADEMY DINOSAUR'));
INSERT INTO actor (actor_id, first_name, last_name) VALUES (1, 'PENELOPE', 'GUINESS');
INSERT INTO category (category_id, name) VALUES (1, 'Documentary');
INSERT INTO film_actor (actor_id, film_id) VALUES (1, 1);
INSERT INTO film_category (film_id, category_id) VALUES (1, 1);
INSERT INTO inventory (inventory_id, film_id, store_id) VALUES (1, 1, 1);
INSERT INTO rental (rental_id, rental_date, inventory_id, customer_id, staff_id)
     VALUES (1, '2022-01-15 09:00:00+00', 1, 1, 1);
INSERT INTO payment (payment_id, customer_id, staff_id, rental_id, amount, payment_date)
     VALUES (1, 1, 1, 1, 9.99, '2022-01-15 10:00:00+00');
RESET session_replication_role;
"#;

/// A Pagila read: its column types as `schema` reports them, and its first row.
struct PagilaRead {
    sql: &'static str,
    types: &'static [(&'static str, &'static str)],
    first_row: fn() -> Value,
}

const PAGILA_READS: &[PagilaRead] = &[
    PagilaRead {
        sql: "SELECT tableoid::regclass::text AS part, payment_id, amount, payment_date FROM payment",
        types: &[
            ("part", "TEXT"),
            ("payment_id", "INT4"),
            ("amount", "NUMERIC"),
            ("payment_date", "TIMESTAMPTZ"),
        ],
        first_row: || json!(["payment_p2022_01", 1, "9.99", "2022-01-15T10:00:00Z"]),
    },
    PagilaRead {
        sql: "SELECT payment_id, amount FROM payment_p2022_01",
        types: &[("payment_id", "INT4"), ("amount", "NUMERIC")],
        first_row: || json!([1, "9.99"]),
    },
    PagilaRead {
        sql: "SELECT * FROM actor_info",
        types: &[
            ("actor_id", "INT4"),
            ("first_name", "TEXT"),
            ("last_name", "TEXT"),
            ("film_info", "JSONB"),
        ],
        first_row: || json!([1, "PENELOPE", "GUINESS", {"Documentary": ["ACADEMY DINOSAUR"]}]),
    },
    PagilaRead {
        sql: "SELECT * FROM film_list",
        types: &[
            ("fid", "INT4"),
            ("title", "TEXT"),
            ("description", "TEXT"),
            ("category", "TEXT"),
            ("price", "NUMERIC"),
            ("length", "INT2"),
            ("rating", "mpaa_rating"),
            ("actors", "TEXT"),
        ],
        first_row: || {
            json!([
                1,
                "ACADEMY DINOSAUR",
                "An epic drama",
                "Documentary",
                "4.99",
                86,
                "PG-13",
                "PENELOPE GUINESS"
            ])
        },
    },
    PagilaRead {
        sql: "SELECT * FROM rental_by_category",
        types: &[("category", "TEXT"), ("total_sales", "NUMERIC")],
        first_row: || json!(["Documentary", "9.99"]),
    },
    PagilaRead {
        // A domain column is described by its base type (PostgreSQL sends the base type).
        sql: "SELECT title, rating, release_year, special_features, fulltext, length_hours FROM film",
        types: &[
            ("title", "TEXT"),
            ("rating", "mpaa_rating"),
            ("release_year", "INT4"),
            ("special_features", "TEXT[]"),
            ("fulltext", "tsvector"),
            ("length_hours", "NUMERIC"),
        ],
        first_row: || {
            json!([
                "ACADEMY DINOSAUR",
                "PG-13",
                2006,
                ["Trailers", "Deleted Scenes"],
                "'academi':1 'dinosaur':2",
                "1.43"
            ])
        },
    },
    PagilaRead {
        sql: "SELECT rating, count(*) FROM film WHERE rating > 'PG' GROUP BY rating",
        types: &[("rating", "mpaa_rating"), ("count", "INT8")],
        first_row: || json!(["PG-13", 1]),
    },
    PagilaRead {
        sql: "SELECT 'NC-17'::mpaa_rating, 1999::year, ARRAY['G', 'R']::mpaa_rating[]",
        types: &[("mpaa_rating", "mpaa_rating"), ("year", "INT4")],
        first_row: || json!(["NC-17", 1999, ["G", "R"]]),
    },
];

const PAGILA_HOSTILE: &[Hostile] = &[
    refused("SELECT * FROM pg_read_file('/etc/passwd')", "pg_read_file"),
    refused("SELECT nextval('film_film_id_seq')", "nextval"),
    refused("REFRESH MATERIALIZED VIEW rental_by_category", UNSUPPORTED),
    refused("SELECT 1; TRUNCATE payment", ONE_STATEMENT),
    confirmable_write("WITH d AS (DELETE FROM payment RETURNING *) SELECT count(*) FROM d"),
    confirmable_write("UPDATE film SET rating = 'NC-17'"),
];

#[tokio::test]
async fn pagila_partitions_views_enums_and_domains_read_with_their_types() {
    let database = samples::pagila().await;
    setup_sql(&database, PAGILA_ROWS).await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;

    // The materialized view is created WITH NO DATA: PostgreSQL's own error, not a crash.
    let unpopulated =
        execute(&client, json!({"sql": "SELECT * FROM rental_by_category", "dry_run": false}))
            .await;
    assert_eq!(unpopulated.error_code(), Some("QUERY_FAILED"), "{}", unpopulated.value);
    assert!(
        unpopulated.error_message().contains("has not been populated"),
        "{}",
        unpopulated.value
    );
    setup_sql(&database, "REFRESH MATERIALIZED VIEW rental_by_category").await;

    let mut failures = Vec::new();
    for case in PAGILA_READS {
        let answer = execute(&client, json!({"sql": case.sql, "dry_run": false})).await;
        let types: Vec<(String, String)> = answer.value["schema"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|column| {
                (
                    column["name"].as_str().unwrap_or_default().to_owned(),
                    column["type"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let types_match = case.types.iter().all(|(name, kind)| {
            types.iter().any(|(got_name, got_kind)| got_name == name && got_kind == kind)
        });
        if answer.is_error || !types_match || answer.value["rows"][0] != (case.first_row)() {
            failures.push(format!(
                "{}\n  wanted types {:?} and first row {}\n  got {}",
                case.sql,
                case.types,
                (case.first_row)(),
                answer.value
            ));
        }
    }
    assert!(failures.is_empty(), "{} reads failed:\n{}", failures.len(), failures.join("\n"));

    let failures = check_hostile(&client, PAGILA_HOSTILE).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let payments = read(&client, "SELECT count(*) FROM payment").await;
    assert_eq!(payments.rows()[0], json!([1]));
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Timeouts.
// ---------------------------------------------------------------------------------------------

const SLOW: &[&str] = &[
    "SELECT count(*) FROM track AS a, track AS b, track AS c",
    "SELECT count(*) FROM generate_series(1, 10000000000)",
];

fn assert_timed_out(sql: &str, answer: &Answer) {
    assert_eq!(answer.error_code(), Some("TIMEOUT"), "{sql}: {}", answer.value);
    assert_eq!(answer.value["error"]["retryable"], true, "{sql}: {}", answer.value);
    assert!(answer.error_message().contains("300 ms"), "{sql}: {}", answer.value);
}

#[tokio::test]
async fn a_query_past_the_timeout_is_cancelled_quickly_and_the_next_call_works() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    for sql in SLOW {
        let started = Instant::now();
        let answer = execute(&client, json!({"sql": sql, "dry_run": false, "timeout": 300})).await;
        assert_timed_out(sql, &answer);
        // An upper bound only, to catch a hang: the statement timeout, not the guard, stopped it.
        assert!(started.elapsed() < Duration::from_secs(10), "{sql} took {:?}", started.elapsed());
    }

    // More timeouts at once than the pool has connections (8): every connection is cancelled
    // in the middle of a statement at least once.
    let started = Instant::now();
    let answers = join_all((0..12).map(|index| {
        execute(&client, json!({"sql": SLOW[index % 2], "dry_run": false, "timeout": 300}))
    }))
    .await;
    for (index, answer) in answers.iter().enumerate() {
        assert_timed_out(SLOW[index % 2], answer);
    }
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());

    // Then as many reads at once, each on a clean connection with orca's default timeout (30 s,
    // not the 300 ms of the cancelled calls), and no transaction left open.
    let answers = join_all((0..12).map(|_| {
        execute(
            &client,
            json!({"sql": "SELECT (SELECT count(*) FROM generate_series(1, 1000000)), \
                          current_setting('statement_timeout'), (SELECT count(*) FROM artist)",
                   "dry_run": false}),
        )
    }))
    .await;
    for answer in &answers {
        assert_eq!(answer.rows()[0], json!([1000000, "30s", 275]), "{}", answer.value);
    }
    for _ in 0..10 {
        assert_eq!(read(&client, "SELECT 1").await.rows()[0], json!([1]));
    }
    let show = read(&client, "SHOW statement_timeout").await;
    assert_eq!(show.rows()[0], json!(["30s"]));
    let show = execute(
        &client,
        json!({"sql": "SHOW statement_timeout", "dry_run": false, "timeout": 12345}),
    )
    .await;
    assert_eq!(show.rows()[0], json!(["12345ms"]));
    // Outside orca's transactions the server default is untouched.
    let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
    let default: String =
        sqlx::query_scalar("SHOW statement_timeout").fetch_one(&mut connection).await.unwrap();
    assert_eq!(default, "0");
    connection.close().await.unwrap();
    assert_no_session_residue(&database).await;
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Result caps.
// ---------------------------------------------------------------------------------------------

/// What a capped read must give.
#[derive(Debug, Clone, Copy)]
enum Capped {
    /// Rows (`None`: any number, at least one), truncated by this cap or complete.
    Rows { rows: Option<usize>, truncated_by: Option<&'static str> },
    /// Refused as invalid input with this message fragment.
    Invalid(&'static str),
}

fn check_capped(
    arguments: &Value,
    expected: Capped,
    answer: &Answer,
    max_bytes: usize,
) -> Result<(), String> {
    let value = &answer.value;
    match expected {
        Capped::Invalid(because) => {
            if answer.error_code() != Some("INVALID_INPUT")
                || !answer.error_message().contains(because)
            {
                return Err(format!("{arguments}: expected INVALID_INPUT saying `{because}`"));
            }
        }
        Capped::Rows { rows, truncated_by } => {
            if answer.is_error {
                return Err(format!("{arguments}: expected rows"));
            }
            let got = value["rows"].as_array().map_or(0, Vec::len);
            let truncated = truncated_by.is_some();
            let row_count = if truncated { Value::Null } else { Value::from(got) };
            let size = serde_json::to_string(&value["rows"]).unwrap().len();
            if rows.is_some_and(|rows| rows != got)
                || (rows.is_none() && got == 0)
                || value["truncated"] != truncated
                || value["has_more"] != truncated
                || value["row_count"] != row_count
                || value["page_token"] != Value::Null
                || answer.meta.get("truncated_by").and_then(Value::as_str) != truncated_by
                || size > max_bytes
            {
                return Err(format!(
                    "{arguments}: expected {rows:?} rows truncated by {truncated_by:?} within {max_bytes} bytes; got {got} rows of {size} bytes, _meta {:?}",
                    answer.meta
                ));
            }
        }
    }
    Ok(())
}

async fn check_caps(client: &Client, cases: &[(Value, Capped)], max_bytes: usize) -> Vec<String> {
    let mut failures = Vec::new();
    for (arguments, expected) in cases {
        let mut arguments = arguments.clone();
        arguments["dry_run"] = json!(false);
        let answer = execute(client, arguments.clone()).await;
        if let Err(problem) = check_capped(&arguments, *expected, &answer, max_bytes) {
            failures.push(format!("{problem}\n  got {}", answer.value));
        }
    }
    failures
}

#[tokio::test]
async fn results_are_capped_by_rows_and_bytes_and_say_so() {
    let database = samples::chinook().await;
    let rows = |rows, truncated_by| Capped::Rows { rows: Some(rows), truncated_by };

    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let default_cases = [
        (json!({"sql": "SELECT * FROM track", "max_rows": 5}), rows(5, Some("max_rows"))),
        (json!({"sql": "SELECT * FROM track LIMIT 5", "max_rows": 5}), rows(5, None)),
        (json!({"sql": "SELECT * FROM track LIMIT 4", "max_rows": 5}), rows(4, None)),
        (json!({"sql": "SELECT * FROM track LIMIT 6", "max_rows": 5}), rows(5, Some("max_rows"))),
        (json!({"sql": "SELECT * FROM track WHERE false", "max_rows": 5}), rows(0, None)),
        (json!({"sql": "SELECT * FROM track"}), rows(1000, Some("max_rows"))),
        (json!({"sql": "SELECT * FROM genre"}), rows(25, None)),
        // Statements that cannot be wrapped are capped while streaming.
        (
            json!({"sql": "EXPLAIN SELECT * FROM track JOIN album USING (album_id)", "max_rows": 1}),
            rows(1, Some("max_rows")),
        ),
        // One value larger than the byte cap: no rows, and truncated says why.
        (json!({"sql": "SELECT repeat('x', 2000000)"}), rows(0, Some("max_bytes"))),
        (
            json!({"sql": "SELECT * FROM track", "max_rows": 50_001}),
            Capped::Invalid("max_rows must be between 1 and 50000"),
        ),
        (
            json!({"sql": "SELECT * FROM track", "max_rows": 0}),
            Capped::Invalid("max_rows must be between 1 and 50000"),
        ),
        (
            json!({"sql": "SELECT 1", "timeout": 0}),
            Capped::Invalid("timeout must be between 1 and 300000"),
        ),
        (
            json!({"sql": "SELECT 1", "timeout": 300_001}),
            Capped::Invalid("timeout must be between 1 and 300000"),
        ),
    ];
    let failures = check_caps(&client, &default_cases, 1024 * 1024).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    client.cancel().await.unwrap();

    let setup = OrcaSetup::new(&database.url).with_config(
        "sql:\n  max_result_bytes: 2000\n  default_max_rows: 10\n  hard_max_rows: 100\n  \
         default_timeout_ms: 5000\n  max_timeout_ms: 10000\n",
    );
    let client = setup.stdio_client().await;
    let configured_cases = [
        (
            json!({"sql": "SELECT * FROM track", "max_rows": 100}),
            Capped::Rows { rows: None, truncated_by: Some("max_bytes") },
        ),
        (json!({"sql": "SELECT genre_id FROM genre"}), rows(10, Some("max_rows"))),
        (json!({"sql": "SELECT genre_id FROM genre", "max_rows": 100}), rows(25, None)),
        (
            json!({"sql": "SELECT 1", "max_rows": 101}),
            Capped::Invalid("max_rows must be between 1 and 100"),
        ),
        (
            json!({"sql": "SELECT 1", "timeout": 10_001}),
            Capped::Invalid("timeout must be between 1 and 10000"),
        ),
        (json!({"sql": "SELECT 1", "timeout": 10_000}), rows(1, None)),
    ];
    let failures = check_caps(&client, &configured_cases, 2000).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let show = read(&client, "SHOW statement_timeout").await;
    assert_eq!(show.rows()[0], json!(["5s"]));
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Column types.
// ---------------------------------------------------------------------------------------------

const TYPE_FIXTURES: &str = r#"
CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
CREATE TYPE pair AS (a integer, b text);
"#;

/// One column per type: its SQL type, the literal stored, the JSON it must come back as, and
/// the type `schema` names.
fn every_type() -> Vec<(&'static str, &'static str, &'static str, Value, &'static str)> {
    vec![
        ("c_smallint", "smallint", "-7", json!(-7), "INT2"),
        ("c_integer", "integer", "2147483647", json!(2_147_483_647), "INT4"),
        ("c_bigint", "bigint", "9007199254740993", json!(9_007_199_254_740_993_i64), "INT8"),
        (
            "c_numeric",
            "numeric(20,6)",
            "12345678901234.123456",
            json!("12345678901234.123456"),
            "NUMERIC",
        ),
        ("c_numeric_nan", "numeric", "'NaN'", json!("NaN"), "NUMERIC"),
        ("c_real", "real", "0.1", json!(0.1), "FLOAT4"),
        ("c_double", "double precision", "2.5e-10", json!(2.5e-10), "FLOAT8"),
        ("c_double_nan", "double precision", "'NaN'", json!("NaN"), "FLOAT8"),
        ("c_double_infinity", "double precision", "'-Infinity'", json!("-Infinity"), "FLOAT8"),
        ("c_boolean", "boolean", "true", json!(true), "BOOL"),
        (
            "c_text",
            "text",
            r#"E'h\u00e9llo "quoted"\n\ttab'"#,
            json!("héllo \"quoted\"\n\ttab"),
            "TEXT",
        ),
        ("c_varchar", "varchar(10)", "'abc'", json!("abc"), "VARCHAR"),
        ("c_char", "char(3)", "'ab'", json!("ab "), "CHAR"),
        (
            "c_uuid",
            "uuid",
            "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'",
            json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            "UUID",
        ),
        (
            "c_json",
            "json",
            r#"'{"b": [1, 2.5, null], "a": "x"}'"#,
            json!({"b": [1, 2.5, null], "a": "x"}),
            "JSON",
        ),
        (
            "c_jsonb",
            "jsonb",
            r#"'{"n": {"deep": true}, "big": 12345678901234567890}'"#,
            json!({"n": {"deep": true}, "big": 12_345_678_901_234_567_890_u64}),
            "JSONB",
        ),
        ("c_date", "date", "'2024-02-29'", json!("2024-02-29"), "DATE"),
        ("c_time", "time", "'13:45:30.5'", json!("13:45:30.5"), "TIME"),
        ("c_timetz", "timetz", "'13:45:30+02'", json!("13:45:30+02:00"), "TIMETZ"),
        (
            "c_timestamp",
            "timestamp",
            "'2024-02-29 13:45:30.123456'",
            json!("2024-02-29T13:45:30.123456"),
            "TIMESTAMP",
        ),
        (
            "c_timestamptz",
            "timestamptz",
            "'2024-02-29 13:45:30+02'",
            json!("2024-02-29T11:45:30Z"),
            "TIMESTAMPTZ",
        ),
        (
            "c_interval",
            "interval",
            "'1 year 2 months 3 days 04:05:06.5'",
            json!("P1Y2M3DT4H5M6.5S"),
            "INTERVAL",
        ),
        ("c_bytea", "bytea", r"'\xdeadbeef'", json!("3q2+7w=="), "BYTEA"),
        ("c_int_array", "integer[]", "'{1,NULL,3}'", json!([1, null, 3]), "INT4[]"),
        ("c_text_array", "text[]", r#"'{"a",NULL,"b c"}'"#, json!(["a", null, "b c"]), "TEXT[]"),
        ("c_int_matrix", "integer[][]", "'{{1,2},{3,4}}'", json!([[1, 2], [3, 4]]), "INT4[]"),
        ("c_empty_array", "integer[]", "'{}'", json!([]), "INT4[]"),
        ("c_enum", "mood", "'happy'", json!("happy"), "mood"),
        ("c_enum_array", "mood[]", "'{happy,sad}'", json!(["happy", "sad"]), "mood[]"),
        ("c_domain", "positive", "5", json!(5), "INT4"),
        ("c_inet", "inet", "'192.168.0.1'", json!("192.168.0.1"), "INET"),
        ("c_inet_net", "inet", "'10.0.0.1/8'", json!("10.0.0.1/8"), "INET"),
        ("c_inet6", "inet", "'2001:db8::1'", json!("2001:db8::1"), "INET"),
        ("c_cidr", "cidr", "'10.1.0.0/16'", json!("10.1.0.0/16"), "CIDR"),
        ("c_money", "money", "12.34", json!("12.34"), "MONEY"),
        ("c_macaddr", "macaddr", "'08:00:2B:01:02:03'", json!("08:00:2b:01:02:03"), "MACADDR"),
        ("c_bit", "bit varying(8)", "B'1011'", json!("1011"), "VARBIT"),
        ("c_xml", "xml", "'<a>1</a>'", json!("<a>1</a>"), "xml"),
        ("c_tsvector", "tsvector", "'a fat cat'", json!("'a' 'cat' 'fat'"), "tsvector"),
        ("c_point", "point", "'(1,2)'", json!("(1,2)"), "POINT"),
        ("c_int4range", "int4range", "'(1,5]'", json!("[2,6)"), "INT4RANGE"),
        ("c_pair", "pair", "ROW(1, 'x y')", json!("(1,\"x y\")"), "pair"),
    ]
}

#[tokio::test]
async fn every_common_type_maps_to_json() {
    let database = TestDatabase::create().await;
    let types = every_type();
    let columns: Vec<String> =
        types.iter().map(|(name, sql_type, ..)| format!("{name} {sql_type}")).collect();
    let literals: Vec<&str> = types.iter().map(|(_, _, literal, ..)| *literal).collect();
    setup_sql(
        &database,
        &format!(
            "{TYPE_FIXTURES}\nCREATE TABLE every_type (id integer PRIMARY KEY, {});\n\
             INSERT INTO every_type VALUES (1, {});\nINSERT INTO every_type (id) VALUES (2);",
            columns.join(", "),
            literals.join(", ")
        ),
    )
    .await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let answer = read(&client, "SELECT * FROM every_type ORDER BY id").await;
    let schema = answer.value["schema"].as_array().cloned().unwrap_or_default();
    let [values, nulls] = answer.rows() else { panic!("expected two rows: {}", answer.value) };
    let mut failures = Vec::new();
    for (index, (name, sql_type, literal, expected, type_name)) in types.iter().enumerate() {
        let column = index + 1;
        if schema[column]["name"] != *name || schema[column]["type"] != *type_name {
            failures.push(format!(
                "{name} {sql_type}: schema {}, wanted type {type_name}",
                schema[column]
            ));
        }
        if values[column] != *expected {
            failures.push(format!(
                "{name} {sql_type} = {literal}: got {}, wanted {expected}",
                values[column]
            ));
        }
        if nulls[column] != Value::Null {
            failures.push(format!("{name} {sql_type} NULL: got {}", nulls[column]));
        }
    }
    assert!(failures.is_empty(), "{} columns are wrong:\n{}", failures.len(), failures.join("\n"));
    client.cancel().await.unwrap();
}
