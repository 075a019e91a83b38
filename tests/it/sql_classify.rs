//! The SQL classifier against every pitfall of the research notes (db-servers-and-sql-safety.md,
//! section d) that classification can see, as tables of cases; property tests that case,
//! whitespace, comments and statement splitting never turn a write into a read; and arbitrary
//! text never makes `classify` panic. No database: volatility checks live elsewhere.

use std::collections::BTreeSet;

use orca::sql::{Classification, Statement, classify};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// What one text must classify to. Effects, denied entries, calls, tables and `plain_explain`
/// are checked on the only statement; a batch checks kinds (and texts) of every statement.
#[derive(Debug, Clone)]
struct Expect {
    kinds: Vec<&'static str>,
    texts: Option<Vec<&'static str>>,
    effects: Vec<&'static str>,
    /// Words that must each appear in some denied reason; empty means nothing is denied.
    denied: Vec<&'static str>,
    /// Names that must be among the functions or attribute-notation names.
    calls: Vec<&'static str>,
    tables: Option<Vec<&'static str>>,
    plain_explain: bool,
}

/// One pure read: no effects, nothing denied.
fn read() -> Expect {
    is("read")
}

/// One statement of this kind with no effects (add them with `.effects`).
fn is(kind: &'static str) -> Expect {
    batch(&[kind])
}

/// Statements of these kinds, in order.
fn batch(kinds: &[&'static str]) -> Expect {
    Expect {
        kinds: kinds.to_vec(),
        texts: None,
        effects: Vec::new(),
        denied: Vec::new(),
        calls: Vec::new(),
        tables: None,
        plain_explain: false,
    }
}

impl Expect {
    fn effects(mut self, effects: &[&'static str]) -> Expect {
        self.effects = effects.to_vec();
        self
    }

    fn denying(mut self, words: &[&'static str]) -> Expect {
        self.denied = words.to_vec();
        self
    }

    fn calling(mut self, names: &[&'static str]) -> Expect {
        self.calls = names.to_vec();
        self
    }

    fn tables(mut self, tables: &[&'static str]) -> Expect {
        self.tables = Some(tables.to_vec());
        self
    }

    fn texts(mut self, texts: &[&'static str]) -> Expect {
        self.texts = Some(texts.to_vec());
        self
    }

    fn plain_explain(mut self) -> Expect {
        self.plain_explain = true;
        self
    }
}

/// Compare one classification with what is expected; the first difference, described.
fn check(sql: &str, expect: &Expect) -> Result<(), String> {
    let classification = classify(sql).map_err(|error| format!("does not parse: {error}"))?;
    let kinds: Vec<&str> = classification.statements.iter().map(|s| s.kind.as_str()).collect();
    if kinds != expect.kinds {
        return Err(format!("kinds {kinds:?}, expected {:?}", expect.kinds));
    }
    for statement in &classification.statements {
        if statement.kind.as_str() != "read" && (!statement.writes() || statement.is_read()) {
            return Err(format!("a {} statement must write and not be a read", statement.kind));
        }
    }
    if let Some(texts) = &expect.texts {
        let actual: Vec<&str> = classification.statements.iter().map(|s| s.text.as_str()).collect();
        if &actual != texts {
            return Err(format!("texts {actual:?}, expected {texts:?}"));
        }
    }
    let [statement] = classification.statements.as_slice() else { return Ok(()) };
    let effects: BTreeSet<&str> = statement.effects.iter().map(|e| e.as_str()).collect();
    let expected_effects: BTreeSet<&str> = expect.effects.iter().copied().collect();
    if effects != expected_effects {
        return Err(format!("effects {effects:?}, expected {expected_effects:?}"));
    }
    if expect.denied.is_empty() && !statement.denied.is_empty() {
        return Err(format!("denied {:?}, expected nothing denied", statement.denied));
    }
    for word in &expect.denied {
        if !statement.denied.iter().any(|reason| reason.contains(word)) {
            return Err(format!("denied {:?} does not mention {word}", statement.denied));
        }
    }
    let functions: Vec<String> = statement.functions.iter().map(ToString::to_string).collect();
    for name in &expect.calls {
        if !functions.iter().chain(&statement.attribute_names).any(|f| f == name) {
            return Err(format!(
                "{name} is not among functions {functions:?} / attributes {:?}",
                statement.attribute_names
            ));
        }
    }
    if let Some(tables) = &expect.tables {
        let actual: Vec<String> = statement.tables.iter().map(ToString::to_string).collect();
        if &actual != tables {
            return Err(format!("tables {actual:?}, expected {tables:?}"));
        }
    }
    if statement.plain_explain != expect.plain_explain {
        return Err(format!("plain_explain is {}", statement.plain_explain));
    }
    let should_read =
        expect.kinds == ["read"] && expect.effects.is_empty() && expect.denied.is_empty();
    if statement.is_read() != should_read {
        return Err(format!("is_read() is {}", statement.is_read()));
    }
    Ok(())
}

/// Check every case and report all that fail at once.
fn check_all(cases: Vec<(&str, Expect)>) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(sql, expect)| check(sql, expect).err().map(|why| format!("{sql:?}: {why}")))
        .collect();
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_statement_of_a_batch_is_split_out_and_classified() {
    check_all(vec![
        (
            "SELECT 1; COMMIT; DROP TABLE t",
            batch(&["read", "transaction", "drop"]).texts(&["SELECT 1", "COMMIT", "DROP TABLE t"]),
        ),
        ("COMMIT; DROP SCHEMA public CASCADE", batch(&["transaction", "drop"])),
        ("SELECT 1; DELETE FROM t", batch(&["read", "delete"])),
        (
            "COMMIT; SET default_transaction_read_only = off; DROP TABLE orders;",
            batch(&["transaction", "session", "drop"]),
        ),
        (
            "COMMIT; BEGIN READ WRITE; DELETE FROM t",
            batch(&["transaction", "transaction", "delete"]),
        ),
        ("SELECT 1;;SELECT 2", batch(&["read", "read"]).texts(&["SELECT 1", "SELECT 2"])),
        ("SELECT 1 -- x\n; TRUNCATE t", batch(&["read", "truncate"])),
        ("SELECT 1;", read().texts(&["SELECT 1"])),
        (";", batch(&[])),
        ("", batch(&[])),
        ("-- only a comment", batch(&[])),
    ]);
}

#[test]
fn transaction_and_session_changes_are_never_reads() {
    check_all(vec![
        ("SET TRANSACTION READ WRITE", is("transaction")),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", is("transaction")),
        ("BEGIN READ WRITE", is("transaction")),
        ("START TRANSACTION READ WRITE", is("transaction")),
        ("COMMIT", is("transaction")),
        ("ROLLBACK", is("transaction")),
        ("SAVEPOINT s", is("transaction")),
        ("RELEASE SAVEPOINT s", is("transaction")),
        ("ROLLBACK TO SAVEPOINT s", is("transaction")),
        ("PREPARE TRANSACTION 'x'", is("transaction")),
        ("COMMIT PREPARED 'x'", is("transaction")),
        ("SET CONSTRAINTS ALL DEFERRED", is("transaction")),
        ("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", is("session")),
        ("SET default_transaction_read_only = off", is("session")),
        ("SET LOCAL transaction_read_only = off", is("session")),
        ("SET statement_timeout = 0", is("session")),
        ("RESET ALL", is("session")),
        ("RESET default_transaction_read_only", is("session")),
        ("DISCARD ALL", is("session")),
        ("SET ROLE postgres", is("session")),
        ("RESET ROLE", is("session")),
        ("SET SESSION AUTHORIZATION postgres", is("session")),
        ("RESET SESSION AUTHORIZATION", is("session")),
    ]);
}

#[test]
fn leading_comments_do_not_hide_a_write() {
    check_all(vec![
        ("/* x */ DROP TABLE users", is("drop").effects(&["drop"])),
        ("-- x\nDELETE FROM users", is("delete").effects(&["delete"]).tables(&["users"])),
        ("/* a /* nested */ b */ DELETE FROM users", is("delete").effects(&["delete"])),
        ("--\n/**/ TRUNCATE users", is("truncate").effects(&["truncate"])),
        ("/* SELECT */ UPDATE users SET a = 1", is("update").effects(&["update"])),
        ("\n\t  insert into users values (1)", is("insert").effects(&["insert"])),
    ]);
}

#[test]
fn writable_ctes_make_any_statement_a_write() {
    check_all(vec![
        (
            "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            read().effects(&["delete"]).tables(&["t"]),
        ),
        ("WITH u AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM u", read().effects(&["update"])),
        (
            "WITH i AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM i",
            read().effects(&["insert"]),
        ),
        (
            "WITH u AS (INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET b = 2 RETURNING *) \
             SELECT * FROM u",
            read().effects(&["insert", "update"]),
        ),
        (
            "WITH m AS (MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE RETURNING *) \
             SELECT * FROM m",
            read().effects(&["delete"]),
        ),
        (
            "WITH a AS (WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d) SELECT * FROM a",
            read().effects(&["delete"]),
        ),
        (
            "SELECT * FROM (WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d) s",
            read().effects(&["delete"]),
        ),
        (
            "SELECT (WITH d AS (DELETE FROM t RETURNING 1) SELECT 1 FROM d)",
            read().effects(&["delete"]),
        ),
        (
            "SELECT * FROM u WHERE a IN (WITH d AS (DELETE FROM t RETURNING a) SELECT a FROM d)",
            read().effects(&["delete"]),
        ),
        (
            "WITH d AS (DELETE FROM t RETURNING a) SELECT 1 UNION SELECT a FROM d",
            read().effects(&["delete"]),
        ),
        // The target of a change is the real table even where a CTE has the same name.
        ("WITH t AS (SELECT 1) DELETE FROM t", is("delete").effects(&["delete"]).tables(&["t"])),
    ]);
}

#[test]
fn select_into_create_table_as_and_row_locks_are_writes() {
    check_all(vec![
        ("SELECT * INTO new_table FROM t", is("create").effects(&["create"])),
        ("SELECT * INTO TEMP new_table FROM t", is("create").effects(&["create"])),
        ("CREATE TABLE x AS SELECT * FROM t", is("create").effects(&["create"])),
        ("CREATE TABLE x AS SELECT 1 WITH NO DATA", is("create").effects(&["create"])),
        ("CREATE MATERIALIZED VIEW v AS SELECT 1", is("create").effects(&["create"])),
        ("SELECT * FROM t FOR UPDATE", read().effects(&["lock rows"])),
        ("SELECT * FROM t FOR SHARE", read().effects(&["lock rows"])),
        ("SELECT * FROM t FOR NO KEY UPDATE", read().effects(&["lock rows"])),
        ("SELECT * FROM t FOR KEY SHARE", read().effects(&["lock rows"])),
        ("SELECT * FROM t FOR UPDATE OF t NOWAIT", read().effects(&["lock rows"])),
        ("SELECT * FROM t FOR UPDATE SKIP LOCKED", read().effects(&["lock rows"])),
        ("select * from T for update", read().effects(&["lock rows"])),
        ("SELECT * FROM (SELECT * FROM t FOR UPDATE) s", read().effects(&["lock rows"])),
        ("WITH x AS (SELECT * FROM t FOR UPDATE) SELECT * FROM x", read().effects(&["lock rows"])),
        ("SELECT * FROM t WHERE a IN (SELECT a FROM u FOR SHARE)", read().effects(&["lock rows"])),
    ]);
}

#[test]
fn a_denied_function_is_found_in_every_position() {
    let denied = || read().denying(&["pg_read_file"]);
    check_all(vec![
        ("SELECT pg_read_file('/etc/passwd')", denied()),
        ("SELECT * FROM pg_read_file('/etc/passwd')", denied()),
        (
            "SELECT pg_catalog.pg_read_file('/etc/passwd')",
            denied().denying(&["pg_catalog.pg_read_file"]),
        ),
        ("SELECT \"pg_read_file\"('/etc/passwd')", denied()),
        ("SELECT PG_READ_FILE('/etc/passwd')", denied()),
        ("SELECT * FROM t WHERE pg_read_file('x') IS NOT NULL", denied()),
        ("SELECT * FROM t ORDER BY pg_read_file('x')", denied()),
        ("SELECT * FROM t GROUP BY pg_read_file('x')", denied()),
        ("SELECT * FROM t GROUP BY a HAVING pg_read_file('x') = ''", denied()),
        ("SELECT * FROM t LIMIT length(pg_read_file('x'))", denied()),
        ("SELECT * FROM t OFFSET length(pg_read_file('x'))", denied()),
        ("SELECT * FROM t FETCH FIRST (length(pg_read_file('x'))) ROWS ONLY", denied()),
        ("SELECT DISTINCT ON (pg_read_file('x')) a FROM t", denied()),
        ("SELECT count(*) FILTER (WHERE pg_read_file('x') <> '') FROM t", denied()),
        ("SELECT count(*) FILTER (WHERE pg_read_file('x') <> '') OVER () FROM t", denied()),
        ("SELECT sum(a) OVER (ORDER BY pg_read_file('x')) FROM t", denied()),
        ("SELECT sum(a) OVER w FROM t WINDOW w AS (PARTITION BY pg_read_file('x'))", denied()),
        ("SELECT string_agg(a, ',' ORDER BY pg_read_file('x')) FROM t", denied()),
        (
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY length(pg_read_file('x'))) FROM t",
            denied(),
        ),
        ("SELECT (array[1])[length(pg_read_file('x'))]", denied()),
        ("SELECT (array[1])[pg_backend_pid()]", read().calling(&["pg_backend_pid"])),
        ("VALUES (pg_read_file('x'))", denied()),
        ("SELECT * FROM t, LATERAL pg_read_file(t.a) f", denied()),
        ("SELECT * FROM t, LATERAL (SELECT pg_read_file(t.a)) f", denied()),
        ("SELECT * FROM t CROSS JOIN LATERAL ROWS FROM (pg_read_file(t.a)) f", denied()),
        ("SELECT CASE WHEN true THEN pg_read_file('x') END", denied()),
        ("SELECT CASE pg_read_file('x') WHEN '' THEN 1 END", denied()),
        ("SELECT COALESCE(NULL, pg_read_file('x'))", denied()),
        ("SELECT (x).pg_read_file FROM t x", denied().calling(&["pg_read_file"])),
        ("SELECT (t.x).pg_read_file FROM t", denied()),
        ("SELECT t.pg_read_file FROM t", denied()),
        ("SELECT * FROM ROWS FROM (generate_series(1, 2), pg_read_file('x'))", denied()),
        (
            "SELECT * FROM JSON_TABLE(pg_read_file('x')::jsonb, '$[*]' COLUMNS (a text PATH '$'))",
            denied(),
        ),
        (
            "SELECT * FROM JSON_TABLE('[]', '$' \
             COLUMNS (a text PATH '$' DEFAULT pg_read_file('x') ON EMPTY))",
            denied(),
        ),
        ("SELECT * FROM XMLTABLE('/r' PASSING (pg_read_file('x')::xml) COLUMNS a text)", denied()),
        (
            "SELECT * FROM XMLTABLE('/r' PASSING '<r/>' COLUMNS a text DEFAULT pg_read_file('x'))",
            denied(),
        ),
        ("SELECT xmlelement(name a, pg_read_file('x'))", denied()),
        ("SELECT JSON_OBJECT('a': pg_read_file('x'))", denied()),
        ("SELECT * FROM t TABLESAMPLE SYSTEM (length(pg_read_file('x')))", denied()),
        ("SELECT ARRAY(SELECT pg_read_file('x'))", denied()),
        ("SELECT EXISTS (SELECT pg_read_file('x'))", denied()),
        ("SELECT * FROM t WHERE a = ANY (SELECT pg_read_file('x'))", denied()),
        ("SELECT 1 UNION SELECT length(pg_read_file('x'))", denied()),
        ("WITH c AS (SELECT pg_read_file('x')) SELECT * FROM c", denied()),
        (
            "INSERT INTO t SELECT pg_read_file('x')",
            is("insert").effects(&["insert"]).denying(&["pg_read_file"]),
        ),
        (
            "DELETE FROM t RETURNING pg_read_file('x')",
            is("delete").effects(&["delete"]).denying(&["pg_read_file"]),
        ),
    ]);
}

#[test]
fn dangerous_functions_are_denied_by_family() {
    let denies = |name| read().denying(&[name]);
    check_all(vec![
        ("SELECT lo_export(1, '/tmp/x')", denies("lo_export")),
        ("SELECT lo_import('/etc/passwd')", denies("lo_import")),
        ("SELECT lo_get(1)", denies("lo_get")),
        ("SELECT pg_ls_dir('.')", denies("pg_ls_dir")),
        ("SELECT pg_read_binary_file('x')", denies("pg_read_binary_file")),
        ("SELECT pg_stat_file('x')", denies("pg_stat_file")),
        ("SELECT * FROM dblink('host=x', 'SELECT 1') AS t(a int)", denies("dblink")),
        ("SELECT dblink_exec('host=x', 'DROP TABLE t')", denies("dblink_exec")),
        ("SELECT dblink_connect('host=169.254.169.254')", denies("dblink_connect")),
        ("SELECT postgres_fdw_disconnect_all()", denies("postgres_fdw_disconnect_all")),
        ("SELECT pg_terminate_backend(1)", denies("pg_terminate_backend")),
        ("SELECT pg_cancel_backend(1)", denies("pg_cancel_backend")),
        ("SELECT pg_reload_conf()", denies("pg_reload_conf")),
        ("SELECT set_config('default_transaction_read_only', 'off', false)", denies("set_config")),
        ("SELECT pg_catalog.set_config('a', 'b', false)", denies("set_config")),
        ("SELECT nextval('s')", denies("nextval")),
        ("SELECT setval('s', 1)", denies("setval")),
        ("SELECT txid_current()", denies("txid_current")),
        ("SELECT pg_advisory_lock(1)", denies("pg_advisory_lock")),
        ("SELECT pg_try_advisory_xact_lock(1)", denies("pg_try_advisory_xact_lock")),
        ("SELECT pg_advisory_unlock_all()", denies("pg_advisory_unlock_all")),
        ("SELECT gin_clean_pending_list('i'::regclass)", denies("gin_clean_pending_list")),
        ("SELECT pg_backup_start('x')", denies("pg_backup_start")),
        ("SELECT pg_import_system_collations('pg_catalog')", denies("pg_import_system_collations")),
        (
            "SELECT cron.schedule('nightly', '0 0 * * *', 'DROP TABLE users')",
            denies("cron.schedule"),
        ),
        ("SELECT \"cron\".\"schedule\"('a', 'b', 'c')", denies("cron.schedule")),
        ("SELECT cron.unschedule(1)", denies("cron.unschedule")),
        ("SELECT pg_stat_reset()", denies("pg_stat_reset")),
        ("SELECT pg_notify('c', 'x')", denies("pg_notify")),
        ("SELECT * FROM heap_page_items(get_raw_page('t', 0))", denies("get_raw_page")),
        // SQL text run inside a call, and relations read by name, escape every other check.
        ("SELECT query_to_xml('SELECT * FROM pg_authid', true, false, '')", denies("query_to_xml")),
        ("SELECT table_to_xml('pg_authid', true, false, '')", denies("table_to_xml")),
        ("SELECT database_to_xml(true, false, '')", denies("database_to_xml")),
        ("SELECT * FROM ts_stat('SELECT pg_advisory_lock(1)::text::tsvector')", denies("ts_stat")),
        ("SELECT ts_rewrite('a'::tsquery, 'SELECT pg_advisory_lock(1)')", denies("ts_rewrite")),
        // The functions behind denied views.
        ("SELECT * FROM pg_stat_get_activity(NULL)", denies("pg_stat_get_activity")),
        ("SELECT * FROM pg_show_all_file_settings()", denies("pg_show_all_file_settings")),
    ]);
}

#[test]
fn sleeping_is_denied_in_every_position_and_spelling() {
    let denies = |name| read().denying(&[name]);
    check_all(vec![
        ("SELECT pg_sleep(1)", denies("pg_sleep")),
        ("SELECT pg_catalog.pg_sleep(1)", denies("pg_catalog.pg_sleep")),
        ("SELECT PG_CATALOG.PG_SLEEP(1)", denies("pg_catalog.pg_sleep")),
        ("SELECT \"pg_sleep\"(1)", denies("pg_sleep")),
        ("SELECT public.pg_sleep(1)", denies("public.pg_sleep")),
        ("SELECT pg_sleep_for('1 second')", denies("pg_sleep_for")),
        ("SELECT pg_catalog.pg_sleep_for(interval '1 second')", denies("pg_sleep_for")),
        ("SELECT pg_sleep_until(now() + interval '1 second')", denies("pg_sleep_until")),
        ("SELECT * FROM pg_sleep(1)", denies("pg_sleep")),
        ("SELECT * FROM t, LATERAL pg_sleep(t.a) s", denies("pg_sleep")),
        ("SELECT CASE WHEN (SELECT count(*) FROM t) > 0 THEN pg_sleep(1) END", denies("pg_sleep")),
        ("SELECT a FROM t WHERE pg_sleep(1) IS NULL", denies("pg_sleep")),
        ("SELECT a FROM t ORDER BY pg_sleep(0.1)::text", denies("pg_sleep")),
        ("SELECT count(*) FILTER (WHERE pg_sleep(1) IS NULL) FROM t", denies("pg_sleep")),
        ("WITH s AS (SELECT pg_sleep(1)) SELECT * FROM s", denies("pg_sleep")),
        ("SELECT 1 UNION ALL SELECT 2 FROM pg_sleep(1)", denies("pg_sleep")),
        ("SELECT (1::float8).pg_sleep", denies("pg_sleep")),
        ("EXPLAIN ANALYZE SELECT pg_sleep(1)", denies("pg_sleep")),
        ("EXPLAIN SELECT pg_sleep(1)", read().plain_explain().denying(&["pg_sleep"])),
        (
            "UPDATE t SET a = 1 WHERE pg_sleep(1) IS NULL",
            is("update").effects(&["update"]).denying(&["pg_sleep"]),
        ),
    ]);
}

#[test]
fn relations_that_leak_around_masking_are_denied() {
    check_all(vec![
        ("SELECT * FROM pg_stats", read().denying(&["pg_stats"])),
        ("SELECT * FROM pg_catalog.pg_authid", read().denying(&["pg_catalog.pg_authid"])),
        ("SELECT * FROM pg_shadow", read().denying(&["pg_shadow"])),
        ("SELECT * FROM pg_largeobject", read().denying(&["pg_largeobject"])),
        (
            "SELECT * FROM pg_catalog.pg_largeobject_metadata",
            read().denying(&["pg_largeobject_metadata"]),
        ),
        ("SELECT * FROM pg_statistic", read().denying(&["pg_statistic"])),
        ("SELECT * FROM pg_stat_activity", read().denying(&["pg_stat_activity"])),
        ("SELECT * FROM pg_user_mappings", read().denying(&["pg_user_mappings"])),
        ("SELECT * FROM pg_hba_file_rules", read().denying(&["pg_hba_file_rules"])),
        ("SELECT * FROM pg_file_settings", read().denying(&["pg_file_settings"])),
        ("SELECT query FROM public.pg_stat_statements", read().denying(&["pg_stat_statements"])),
        ("SELECT command FROM cron.job", read().denying(&["cron.job"])),
        ("SELECT * FROM \"pg_stats\"", read().denying(&["pg_stats"])),
        ("SELECT * FROM PG_CATALOG.PG_STATS", read().denying(&["pg_catalog.pg_stats"])),
        ("SELECT pg_stats.* FROM pg_stats", read().denying(&["pg_stats"])),
        (
            "SELECT 1 FROM pg_class c JOIN pg_catalog.pg_stats s ON true",
            read().denying(&["pg_stats"]),
        ),
        ("SELECT (SELECT count(*) FROM pg_authid)", read().denying(&["pg_authid"])),
        ("WITH s AS (SELECT * FROM pg_stats) SELECT * FROM s", read().denying(&["pg_stats"])),
        // A CTE hides a relation of its name only inside its own scope.
        (
            "WITH pg_stats AS (SELECT * FROM pg_stats) SELECT * FROM pg_stats",
            read().denying(&["pg_stats"]),
        ),
        (
            "WITH x AS (SELECT * FROM pg_authid), pg_authid AS (SELECT 1) SELECT * FROM x",
            read().denying(&["pg_authid"]),
        ),
        (
            "SELECT * FROM (WITH pg_stats AS (SELECT 1) SELECT * FROM pg_stats) a, pg_stats b",
            read().denying(&["pg_stats"]),
        ),
        // Relations of the same name elsewhere, and CTEs, are not the catalog's.
        ("SELECT * FROM public.pg_stats", read().tables(&["public.pg_stats"])),
        ("WITH pg_stats AS (SELECT 1) SELECT * FROM pg_stats", read().tables(&[])),
        (
            "WITH RECURSIVE pg_stats(n) AS \
             (SELECT 1 UNION ALL SELECT n + 1 FROM pg_stats WHERE n < 3) \
             SELECT * FROM pg_stats",
            read().tables(&[]),
        ),
        ("SELECT * FROM (SELECT 1) AS pg_stats", read()),
        ("SELECT * FROM t AS pg_stats", read().tables(&["t"])),
        ("WITH t AS (SELECT 1) SELECT * FROM t, (SELECT * FROM t) s, u", read().tables(&["u"])),
    ]);
}

#[test]
fn copy_is_a_utility_and_copy_program_is_denied() {
    check_all(vec![
        ("COPY t TO PROGRAM 'x'", is("copy").denying(&["PROGRAM"])),
        ("COPY t FROM PROGRAM 'curl http://169.254.169.254'", is("copy").denying(&["PROGRAM"])),
        ("COPY t FROM '/etc/passwd'", is("copy")),
        ("COPY t TO '/tmp/x'", is("copy")),
        ("COPY t TO STDOUT", is("copy")),
        ("COPY (SELECT 1) TO STDOUT", is("copy")),
        ("COPY (SELECT pg_read_file('x')) TO STDOUT", is("copy").denying(&["pg_read_file"])),
    ]);
}

#[test]
fn explain_analyze_is_the_statement_it_runs_and_plain_explain_is_a_read() {
    check_all(vec![
        ("EXPLAIN ANALYZE DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN ANALYZE INSERT INTO t VALUES (1)", is("insert").effects(&["insert"])),
        ("EXPLAIN (ANALYZE, FORMAT JSON) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN (ANALYZE true) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN (ANALYZE on) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN (ANALYZE 1) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN ANALYSE DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN (ANALYSE) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN ANALYZE VERBOSE UPDATE t SET a = 1", is("update").effects(&["update"])),
        // Any ANALYZE that is not false counts, whatever follows it.
        ("EXPLAIN (ANALYZE false, ANALYZE) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN (ANALYZE, ANALYZE false) DELETE FROM t", is("delete").effects(&["delete"])),
        ("EXPLAIN ANALYZE CREATE TABLE x AS SELECT 1", is("create").effects(&["create"])),
        ("EXPLAIN ANALYZE SELECT * INTO x FROM t", is("create").effects(&["create"])),
        ("EXPLAIN ANALYZE EXECUTE p", is("execute")),
        (
            "EXPLAIN ANALYZE WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            read().effects(&["delete"]),
        ),
        ("EXPLAIN ANALYZE SELECT * FROM t FOR UPDATE", read().effects(&["lock rows"])),
        ("EXPLAIN ANALYZE SELECT * FROM t", read()),
        ("EXPLAIN ANALYZE SELECT pg_read_file('x')", read().denying(&["pg_read_file"])),
        ("EXPLAIN (ANALYZE false) DELETE FROM t", read().plain_explain().tables(&["t"])),
        ("EXPLAIN (ANALYZE off) DELETE FROM t", read().plain_explain()),
        ("EXPLAIN (ANALYZE 0) DELETE FROM t", read().plain_explain()),
        ("EXPLAIN (ANALYZE 'false') DELETE FROM t", read().plain_explain()),
        ("EXPLAIN DELETE FROM t", read().plain_explain()),
        ("EXPLAIN SELECT * FROM t", read().plain_explain()),
        ("EXPLAIN (FORMAT JSON, COSTS off) SELECT * FROM t", read().plain_explain()),
        ("EXPLAIN SELECT pg_read_file('x')", read().plain_explain().denying(&["pg_read_file"])),
    ]);
}

#[test]
fn utility_statements_are_never_reads() {
    check_all(vec![
        ("PREPARE p AS SELECT 1", is("prepare")),
        ("PREPARE p AS DELETE FROM t", is("prepare").effects(&["delete"])),
        ("EXECUTE p", is("execute")),
        ("DEALLOCATE p", is("deallocate")),
        ("DEALLOCATE ALL", is("deallocate")),
        ("LISTEN c", is("listen")),
        ("NOTIFY c, 'x'", is("notify")),
        ("UNLISTEN *", is("unlisten")),
        ("DO $$ BEGIN DELETE FROM t; END $$", is("do")),
        ("CALL p()", is("call")),
        ("LOCK TABLE t", is("lock")),
        ("LOCK t IN ACCESS EXCLUSIVE MODE", is("lock")),
        ("VACUUM t", is("vacuum")),
        ("VACUUM FULL t", is("vacuum")),
        ("VACUUM ANALYZE t", is("vacuum")),
        ("ANALYZE t", is("analyze")),
        ("ANALYZE", is("analyze")),
        ("CHECKPOINT", is("checkpoint")),
        ("LOAD 'x'", is("load")),
        ("DECLARE c CURSOR FOR SELECT 1", is("declare cursor")),
        (
            "DECLARE c CURSOR FOR SELECT * FROM t FOR UPDATE",
            is("declare cursor").effects(&["lock rows"]),
        ),
        ("FETCH 10 FROM c", is("fetch")),
        ("CLOSE c", is("close")),
        ("REFRESH MATERIALIZED VIEW v", is("refresh materialized view")),
        ("ALTER SYSTEM SET max_connections = 1", is("alter system")),
        ("CLUSTER t", is("cluster")),
        ("REINDEX TABLE t", is("reindex")),
        ("CREATE DATABASE d", is("database")),
        ("DROP DATABASE d", is("database")),
    ]);
}

#[test]
fn ddl_and_dml_are_classified_by_kind_with_their_effects() {
    check_all(vec![
        ("GRANT SELECT ON t TO u", is("alter").effects(&["alter"])),
        ("REVOKE SELECT ON t FROM u", is("alter").effects(&["alter"])),
        ("GRANT r TO u", is("alter").effects(&["alter"])),
        ("ALTER TABLE t ADD COLUMN c int", is("alter").effects(&["alter"])),
        ("ALTER ROLE u SUPERUSER", is("alter").effects(&["alter"])),
        ("COMMENT ON TABLE t IS 'x'", is("alter").effects(&["alter"])),
        ("CREATE EXTENSION dblink", is("create").effects(&["create"])),
        (
            "CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '169.254.169.254')",
            is("create").effects(&["create"]),
        ),
        (
            "CREATE USER MAPPING FOR u SERVER s OPTIONS (user 'x')",
            is("create").effects(&["create"]),
        ),
        (
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            is("create").effects(&["create"]),
        ),
        ("CREATE ROLE r", is("create").effects(&["create"])),
        ("CREATE TABLE t (a int)", is("create").effects(&["create"])),
        ("CREATE INDEX i ON t (a)", is("create").effects(&["create"])),
        ("CREATE VIEW v AS SELECT 1", is("create").effects(&["create"])),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN UPDATE SET b = 1",
            is("merge").effects(&["update"]),
        ),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE",
            is("merge").effects(&["delete"]),
        ),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED THEN INSERT VALUES (1)",
            is("merge").effects(&["insert"]),
        ),
        ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DO NOTHING", is("merge")),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED BY SOURCE THEN DELETE",
            is("merge").effects(&["delete"]),
        ),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN MATCHED AND s.b THEN UPDATE SET b = 1 \
             WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (1)",
            is("merge").effects(&["insert", "update", "delete"]).tables(&["s", "t"]),
        ),
        (
            "INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET b = 1",
            is("insert").effects(&["insert", "update"]),
        ),
        ("INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", is("insert").effects(&["insert"])),
        ("INSERT INTO t SELECT * FROM u", is("insert").effects(&["insert"]).tables(&["t", "u"])),
        ("UPDATE t SET a = 1", is("update").effects(&["update"])),
        ("DELETE FROM t", is("delete").effects(&["delete"])),
        ("TRUNCATE t", is("truncate").effects(&["truncate"])),
        ("TRUNCATE t CASCADE", is("truncate").effects(&["truncate"])),
        ("DROP TABLE t", is("drop").effects(&["drop"])),
        ("DROP SCHEMA public CASCADE", is("drop").effects(&["drop"])),
        ("DROP ROLE r", is("drop").effects(&["drop"])),
        ("DROP OWNED BY r", is("drop").effects(&["drop"])),
        ("DROP FUNCTION f()", is("drop").effects(&["drop"])),
    ]);
}

#[test]
fn analytics_reads_stay_reads_with_nothing_denied() {
    check_all(vec![
        (
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t",
            read().calling(&["percentile_cont"]),
        ),
        ("SELECT mode() WITHIN GROUP (ORDER BY x) FROM t", read().calling(&["mode"])),
        (
            "SELECT sum(x) OVER (PARTITION BY g ORDER BY d \
             ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t",
            read(),
        ),
        (
            "SELECT rank() OVER w, lag(x) OVER w FROM t WINDOW w AS (PARTITION BY g ORDER BY d)",
            read(),
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) \
             SELECT * FROM r",
            read().tables(&[]),
        ),
        (
            "SELECT * FROM a CROSS JOIN LATERAL (SELECT * FROM b WHERE b.a = a.id LIMIT 3) l",
            read().tables(&["a", "b"]),
        ),
        ("SELECT d -> 'a', d ->> 'b', d #>> '{c,d}', d @> '{\"a\":1}' FROM t", read()),
        ("SELECT jsonb_path_query(d, '$.a') FROM t", read().calling(&["jsonb_path_query"])),
        ("SELECT count(*) FILTER (WHERE x > 1) FROM t", read()),
        ("SELECT a, b, sum(c) FROM t GROUP BY GROUPING SETS ((a), (b), ())", read()),
        ("SELECT a, b, sum(c) FROM t GROUP BY CUBE (a, b)", read()),
        ("SELECT a, b, sum(c), GROUPING(a) FROM t GROUP BY ROLLUP (a, b)", read()),
        ("SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b", read()),
        ("SELECT a FROM t UNION SELECT a FROM u", read().tables(&["t", "u"])),
        ("SELECT a FROM t INTERSECT SELECT a FROM u", read()),
        ("SELECT a FROM t EXCEPT ALL SELECT a FROM u", read()),
        ("SELECT * FROM t TABLESAMPLE SYSTEM (10) REPEATABLE (1)", read()),
        ("SELECT * FROM generate_series(1, 10)", read().calling(&["generate_series"])),
        ("SELECT string_agg(a, ',' ORDER BY a) FROM t", read()),
        ("SELECT date_trunc('month', d), count(*) FROM t GROUP BY 1", read()),
        ("SELECT * FROM JSON_TABLE('[1]'::jsonb, '$[*]' COLUMNS (a int PATH '$'))", read()),
        ("SELECT a || ',' || b || ',' || c || ',' || d || ',' || e FROM t", read()),
        ("SELECT now(), current_user, random()", read()),
        ("SHOW search_path", read()),
        ("SHOW ALL", read()),
        ("TABLE t", read()),
        ("VALUES (1), (2)", read()),
    ]);
}

#[test]
fn text_that_only_looks_like_a_second_statement_is_one_read() {
    check_all(vec![
        ("SELECT 1 -- ; DROP TABLE x", read()),
        ("SELECT 1 -- ; DROP TABLE x\n", read()),
        ("SELECT '; DROP TABLE x'", read()),
        ("SELECT $$; DROP$$", read()),
        ("SELECT $tag$; DROP TABLE x; $tag$", read()),
        ("SELECT E'\\'; DROP TABLE x; --'", read()),
        ("SELECT \"; DROP TABLE x\" FROM t", read()),
        ("/* ; DROP TABLE t */ SELECT 1", read()),
        ("SELECT 1 /* ; */ ; ", read()),
    ]);
}

#[test]
fn text_the_grammar_rejects_is_an_error_with_a_short_message() {
    let deep = format!("SELECT 1{}", " + 1".repeat(200));
    let very_deep = format!("SELECT {}1{}", "(SELECT ".repeat(2000), ")".repeat(2000));
    let long_tail = format!("SELECT 1 /* {}", "é tail ".repeat(2000));
    let cases: [(&str, &str); 8] = [
        ("SELECT 1 /* unterminated", "unterminated"),
        ("SELECT 'unterminated", "unterminated"),
        ("DROP", "syntax error"),
        ("SELEKT 1", "syntax error"),
        ("SELECT 1\0; DROP TABLE t", "NUL"),
        (&deep, "nested too deeply"),
        (&very_deep, "stack depth"),
        (&long_tail, "unterminated"),
    ];
    for (sql, message) in cases {
        let error = classify(sql).expect_err(sql);
        assert!(error.message.contains(message), "{sql:.60}: {error}");
        assert!(
            error.message.len() < 320,
            "{sql:.60}: the message is {} bytes",
            error.message.len()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Property tests.

/// Writing (or denied) statements, one token per space-separated word, so that separators can
/// go between any two tokens.
const WRITES: &[&str] = &[
    "DELETE FROM users WHERE id = 1",
    "UPDATE users SET name = 'x' WHERE id = 1",
    "INSERT INTO users ( id ) VALUES ( 1 )",
    "INSERT INTO users VALUES ( 1 ) ON CONFLICT ( id ) DO UPDATE SET id = 2",
    "DROP TABLE users",
    "DROP SCHEMA public CASCADE",
    "TRUNCATE users",
    "WITH d AS ( DELETE FROM users RETURNING * ) SELECT * FROM d",
    "WITH a AS ( WITH u AS ( UPDATE users SET id = 2 RETURNING id ) SELECT id FROM u ) \
     SELECT * FROM a",
    "SELECT * INTO copy FROM users",
    "SELECT * FROM users FOR UPDATE",
    "SELECT * FROM users FOR KEY SHARE",
    "SELECT pg_read_file ( '/etc/passwd' )",
    "SELECT * FROM pg_catalog . pg_read_file ( '/etc/passwd' )",
    "SELECT * FROM pg_stats",
    "SET TRANSACTION READ WRITE",
    "COMMIT",
    "EXPLAIN ANALYZE DELETE FROM users",
    "EXPLAIN ( ANALYZE , FORMAT JSON ) DELETE FROM users",
    "MERGE INTO users u USING src s ON u.id = s.id WHEN MATCHED THEN DELETE",
];

/// Comment text: fragments that look like SQL, statement ends or comment ends (block comments
/// nest, so `/* */` inside one is fine; a lone `*/` is not).
fn comment_words() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec![
        ";",
        "SELECT",
        "SELECT 1;",
        "DROP TABLE users;",
        "'",
        "\"",
        "$$",
        "--",
        "/* ; */",
        "/* SELECT */",
        "*",
        "/",
        "x",
        "é",
        "🦀",
    ]);
    prop::collection::vec(word, 0..5).prop_map(|words| words.join(" "))
}

/// What may go between two tokens: whitespace and comments, never nothing.
fn separator() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just(" ".to_owned()),
        Just("\t".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        comment_words().prop_map(|text| format!("/* {text} */")),
        comment_words().prop_map(|text| format!("/*/* {text} */*/")),
        comment_words().prop_map(|text| format!("-- {text}\n")),
    ];
    prop::collection::vec(piece, 1..4).prop_map(|pieces| pieces.concat())
}

/// A token with the letter case changed at random; quoted tokens are left alone (unquoted
/// keywords and identifiers are folded by the grammar, so the statement means the same).
fn recase(token: &str, upper: &[bool]) -> String {
    if token.starts_with(['\'', '"', '$']) {
        return token.to_owned();
    }
    token
        .chars()
        .zip(upper.iter().cycle())
        .map(|(c, &up)| if up { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
        .collect()
}

/// One corpus statement rewritten with random case and random separators (before, between and
/// after its tokens), with the index of the statement it came from.
fn disguised_write() -> impl Strategy<Value = (usize, String)> {
    (0..WRITES.len()).prop_flat_map(|index| {
        let tokens: Vec<&'static str> = WRITES[index].split(' ').collect();
        let count = tokens.len();
        (
            Just(index),
            prop::collection::vec(separator(), count + 1),
            prop::collection::vec(prop::collection::vec(any::<bool>(), 1..8), count),
        )
            .prop_map(move |(index, separators, cases)| {
                let mut sql = separators[0].clone();
                for ((token, upper), separator) in tokens.iter().zip(&cases).zip(&separators[1..]) {
                    sql.push_str(&recase(token, upper));
                    sql.push_str(separator);
                }
                (index, sql)
            })
    })
}

/// The statement kind of a corpus write, undisguised.
fn kind_of(index: usize) -> &'static str {
    let classification = classify(WRITES[index]).expect("the corpus parses");
    assert_eq!(classification.statements.len(), 1, "{}", WRITES[index]);
    assert!(!classification.statements[0].is_read(), "{} must not be a read", WRITES[index]);
    classification.statements[0].kind.as_str()
}

fn config(cases: u32) -> Config {
    Config { cases, failure_persistence: None, ..Config::default() }
}

/// A classification, or a test failure naming the text the grammar rejected.
fn classified(sql: &str) -> Result<Classification, TestCaseError> {
    classify(sql).map_err(|error| TestCaseError::fail(format!("{sql:?}: {error}")))
}

fn describe(classification: &Classification) -> Vec<String> {
    classification
        .statements
        .iter()
        .map(|s: &Statement| format!("{} {:?}", s.kind, s.text))
        .collect()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn case_whitespace_and_comments_never_turn_a_write_into_a_read(
        (index, sql) in disguised_write(),
    ) {
        let classification = classified(&sql)?;
        let statements = describe(&classification);
        prop_assert_eq!(classification.statements.len(), 1, "{:?}: {:?}", sql, statements);
        let statement = &classification.statements[0];
        prop_assert!(!statement.is_read(), "{:?} became a read", sql);
        prop_assert_eq!(statement.kind.as_str(), kind_of(index), "{:?}", sql);
    }

    #[test]
    fn a_write_batched_with_reads_or_empty_statements_stays_a_write(
        (index, sql) in disguised_write(),
        prefix in prop::sample::select(vec!["", ";", "SELECT 1;", "SELECT 1 ; ;", "/* x */ ;"]),
        suffix in prop::sample::select(vec!["", ";", "; SELECT 1", ";;", "; -- x"]),
    ) {
        let batch = format!("{prefix}{sql}{suffix}");
        let classification = classified(&batch)?;
        let statements = &classification.statements;
        prop_assert!(!statements.is_empty());
        if statements.len() == 1 {
            prop_assert!(!statements[0].is_read(), "{:?} became a read", batch);
        }
        let kind = kind_of(index);
        prop_assert!(
            statements.iter().any(|s| s.kind.as_str() == kind && !s.is_read()),
            "{:?}: {:?}", batch, describe(&classification)
        );
    }

    #[test]
    fn arbitrary_text_never_panics(text in prop::collection::vec(any::<char>(), 0..400)) {
        let text: String = text.into_iter().collect();
        let _ = classify(&text);
    }

    #[test]
    fn sql_shaped_text_never_panics(
        tokens in prop::collection::vec(prop::sample::select(vec![
            "SELECT", "FROM", "WHERE", "WITH", "AS", "DELETE", "INSERT", "INTO", "UPDATE", "SET",
            "EXPLAIN", "ANALYZE", "(", ")", "[", "]", ",", ";", "*", "+", "-", "::", "'", "\"",
            "$$", "$a$", "/*", "*/", "--", "\n", "\0", "1", "t", "pg_read_file", "e'\\'",
            "U&'\\0000'", "ARRAY", "LATERAL", "ROWS", "FOR", "VALUES", "é", "\u{feff}",
        ]), 0..200),
        separators in prop::collection::vec(prop::sample::select(vec!["", " ", "\t", "\n"]), 200),
    ) {
        let text: String = tokens.iter().zip(&separators).map(|(t, s)| format!("{t}{s}")).collect();
        let _ = classify(&text);
    }
}

proptest! {
    #![proptest_config(config(12))]

    #[test]
    fn very_long_text_never_panics(
        unit in prop::sample::select(vec![
            "(", "SELECT 1;", "1 + ", "ARRAY[", "/* ", "'x", "-", "\u{10ffff}", "(SELECT ",
        ]),
        repeats in 1_000usize..10_000,
    ) {
        let _ = classify(&unit.repeat(repeats));
    }
}

#[test]
fn placeholders_are_found_wherever_they_sit_except_in_a_body_of_their_own() {
    let cases: &[(&str, &[u32])] = &[
        ("SELECT name FROM artist WHERE artist_id = $1", &[1]),
        ("SELECT $2, $1, $2", &[1, 2]),
        ("SELECT * FROM t LIMIT $1 OFFSET $3", &[1, 3]),
        ("WITH a AS (SELECT $1::int AS id) SELECT * FROM a", &[1]),
        ("SELECT (SELECT max(x) FROM t WHERE y = ANY($4))", &[4]),
        ("UPDATE t SET a = $2 WHERE id = $1", &[1, 2]),
        ("EXPLAIN ANALYZE SELECT $5::int", &[5]),
        ("EXPLAIN SELECT $1::int", &[1]),
        ("SELECT '$1', $$ $2 $$, 3 AS \"$3\"", &[]),
        ("CREATE FUNCTION f(int) RETURNS int LANGUAGE sql RETURN $1 + 1", &[]),
        ("CREATE FUNCTION g(int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT $1; END", &[]),
        ("PREPARE p(int) AS SELECT $1", &[]),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(sql, expected)| {
            let classification = classify(sql).unwrap_or_else(|error| panic!("{sql}: {error}"));
            let found = &classification.statements[0].parameters;
            (found.as_slice() != *expected).then(|| format!("{sql:?}: {found:?}, not {expected:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
