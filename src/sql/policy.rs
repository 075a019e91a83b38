//! What orca refuses to run, and the read check that asks the database about the functions a
//! statement calls. The deny lists hold what a read-only transaction does not stop (files,
//! network, processes, server administration, large objects, advisory locks, sleeping) and
//! relations that leak data around masking (`pg_stats` most-common values, password hashes, raw
//! pages).
//!
//! # Design notes
//!
//! `policy.rs` holds the deny lists (functions, prefixes, schemas, relations) and the read check
//! against `pg_proc` (volatile functions and user operators).

use sqlx::PgConnection;

use super::statement::{QualifiedName, Statement};

/// Functions orca never calls, in any statement, whatever schema they live in.
const DENIED_FUNCTIONS: &[&str] = &[
    // Server files.
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "pg_ls_logdir",
    "pg_ls_waldir",
    "pg_ls_tmpdir",
    "pg_ls_archive_statusdir",
    "pg_ls_logicalsnapdir",
    "pg_ls_logicalmapdir",
    "pg_ls_replslotdir",
    "pg_current_logfile",
    "pg_file_write",
    "pg_file_rename",
    "pg_file_unlink",
    "pg_file_sync",
    "pg_logdir_ls",
    // Large objects (read and write server-side storage and files).
    "lo_import",
    "lo_export",
    "lo_open",
    "lo_close",
    "loread",
    "lowrite",
    "lo_creat",
    "lo_create",
    "lo_unlink",
    "lo_get",
    "lo_put",
    "lo_from_bytea",
    "lo_truncate",
    "lo_truncate64",
    "lo_lseek",
    "lo_lseek64",
    "lo_tell",
    "lo_tell64",
    // Processes and server administration.
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_backup_start",
    "pg_backup_stop",
    "pg_start_backup",
    "pg_stop_backup",
    "pg_wal_replay_pause",
    "pg_wal_replay_resume",
    "pg_log_backend_memory_contexts",
    "pg_import_system_collations",
    "gin_clean_pending_list",
    "brin_summarize_new_values",
    "brin_summarize_range",
    "brin_desummarize_range",
    "pg_prewarm",
    "pg_notify",
    "pg_drop_replication_slot",
    "pg_create_physical_replication_slot",
    "pg_create_logical_replication_slot",
    "pg_copy_physical_replication_slot",
    "pg_copy_logical_replication_slot",
    "pg_replication_slot_advance",
    "pg_logical_emit_message",
    "pg_logical_slot_get_changes",
    "pg_logical_slot_peek_changes",
    "pg_logical_slot_get_binary_changes",
    "pg_logical_slot_peek_binary_changes",
    // Configuration and sequences.
    "set_config",
    "nextval",
    "setval",
    // Transaction ids (assigning one writes).
    "txid_current",
    "pg_current_xact_id",
    // Sleeping: no analytics needs it, it holds a pooled connection for up to the statement
    // timeout, and it is the timing oracle of blind extraction.
    "pg_sleep",
    "pg_sleep_for",
    "pg_sleep_until",
    // SQL text run inside the call, and relations read by name: every check above would be
    // made on the outer statement only.
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "cursor_to_xml",
    "cursor_to_xmlschema",
    "table_to_xml",
    "table_to_xmlschema",
    "table_to_xml_and_xmlschema",
    "schema_to_xml",
    "schema_to_xmlschema",
    "schema_to_xml_and_xmlschema",
    "database_to_xml",
    "database_to_xmlschema",
    "database_to_xml_and_xmlschema",
    "ts_stat",
    "ts_rewrite",
    // The functions behind denied views.
    "pg_stat_get_activity",
    "pg_stat_get_backend_activity",
    "pg_show_all_file_settings",
    "pg_hba_file_rules",
    "pg_ident_file_mappings",
    // Raw pages and tuples (pageinspect): bypass every mask.
    "get_raw_page",
    "page_header",
    "heap_page_items",
    "heap_page_item_attrs",
    "tuple_data_split",
    "bt_page_items",
    "bt_page_stats",
    "bt_metap",
    "brin_page_items",
    "gin_page_opaque_info",
    "fsm_page_contents",
    "page_checksum",
    "hash_page_items",
];

/// Name prefixes orca never calls: the network (dblink, postgres_fdw), advisory locks, statistics
/// resets and replication origins.
const DENIED_FUNCTION_PREFIXES: &[&str] = &[
    "dblink",
    "postgres_fdw_",
    "pg_advisory_",
    "pg_try_advisory_",
    "pg_stat_reset",
    "pg_replication_origin_",
];

/// Schemas whose functions orca never calls (pg_cron runs SQL later, outside any check).
const DENIED_SCHEMAS: &[&str] = &["cron", "dblink", STATE_SCHEMA];

/// orca's own state (tracking, feedback, confirmation tokens and approvals): never reachable
/// through the SQL tools, even when it lives in the target database.
pub(crate) const STATE_SCHEMA: &str = "orca";

/// Relations orca never reads: statistics with sample values, password hashes, user mappings
/// and subscription connection strings (which hold passwords), server configuration files,
/// other sessions' query texts, and large-object storage.
const DENIED_RELATIONS: &[&str] = &[
    "pg_statistic",
    "pg_stats",
    "pg_stats_ext",
    "pg_stats_ext_exprs",
    "pg_statistic_ext_data",
    "pg_largeobject",
    "pg_largeobject_metadata",
    "pg_authid",
    "pg_shadow",
    "pg_user_mapping",
    "pg_user_mappings",
    "pg_hba_file_rules",
    "pg_ident_file_mappings",
    "pg_file_settings",
    "pg_stat_activity",
    "pg_subscription",
];

/// Volatile functions in `pg_catalog` that a read may call: they change nothing. (The
/// `pg_sleep` family is denied outright, above.)
const SAFE_VOLATILE: &[&str] = &[
    "random",
    "random_normal",
    "clock_timestamp",
    "timeofday",
    "gen_random_uuid",
    "uuidv4",
    "uuidv7",
];

/// Whether a function a read may call gives other values on every run (`random()`,
/// `clock_timestamp()` ...), so that an order by it cannot be followed from one page to the next.
pub(super) fn differs_every_run(name: &QualifiedName) -> bool {
    name.schema.as_deref().is_none_or(|schema| schema == "pg_catalog")
        && SAFE_VOLATILE.contains(&name.name.as_str())
}

fn function_is_denied(name: &QualifiedName) -> bool {
    let bare = name.name.as_str();
    DENIED_FUNCTIONS.contains(&bare)
        || DENIED_FUNCTION_PREFIXES.iter().any(|prefix| bare.starts_with(prefix))
        || name.schema.as_deref().is_some_and(|schema| DENIED_SCHEMAS.contains(&schema))
}

/// Relations of extensions that show other sessions' query texts or scheduled SQL, in whatever
/// schema the extension was installed.
const DENIED_EXTENSION_RELATIONS: &[&str] =
    &["pg_stat_statements", "pg_stat_statements_info", "pg_stat_monitor"];

/// Schemas none of whose relations orca reads: orca's own state, the salts of masked hashes
/// (`privacy::setup`), and pg_cron's jobs.
const DENIED_RELATION_SCHEMAS: &[&str] = &[STATE_SCHEMA, "orca_mask", "cron"];

fn relation_is_denied(name: &QualifiedName) -> bool {
    if name.schema.as_deref().is_some_and(|schema| DENIED_RELATION_SCHEMAS.contains(&schema))
        || DENIED_EXTENSION_RELATIONS.contains(&name.name.as_str())
    {
        return true;
    }
    let in_catalog = name.schema.as_deref().is_none_or(|schema| schema == "pg_catalog");
    in_catalog && DENIED_RELATIONS.contains(&name.name.as_str())
}

/// Why a classified statement may never run, one reason per denied function or relation.
pub(crate) fn denied(statement: &Statement) -> Vec<String> {
    let mut reasons = Vec::new();
    for function in &statement.functions {
        if function_is_denied(function) {
            reasons.push(format!("function {function} is not allowed"));
        }
    }
    for name in &statement.attribute_names {
        let as_function = QualifiedName { schema: None, name: name.clone() };
        if function_is_denied(&as_function) {
            reasons.push(format!("function {name} (called in attribute notation) is not allowed"));
        }
    }
    for table in &statement.tables {
        if relation_is_denied(table) {
            reasons.push(format!("relation {table} is not allowed"));
        }
    }
    reasons
}

/// A function or operator that a read may not call, as the database describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VolatileCall {
    pub(crate) what: &'static str,
    pub(crate) name: String,
}

#[derive(sqlx::FromRow)]
struct Callable {
    kind: String,
    name: String,
    schema: String,
    volatility: String,
    arguments: i16,
}

/// Ask `pg_proc` about every function, attribute-notation name and operator of a read. A read
/// may call a function only when no function of that name (in the named schema, if any) is
/// volatile, apart from the harmless volatile functions of `pg_catalog`; operators outside
/// `pg_catalog` are held to the same rule through the function that implements them.
///
/// # Errors
///
/// The database error when the catalog query fails.
pub(crate) async fn volatile_calls(
    connection: &mut PgConnection,
    statement: &Statement,
) -> Result<Vec<VolatileCall>, sqlx::Error> {
    let mut names: Vec<String> = statement.functions.iter().map(|f| f.name.clone()).collect();
    names.extend(statement.attribute_names.iter().cloned());
    let operators: Vec<String> = statement.operators.iter().map(|o| o.name.clone()).collect();
    if names.is_empty() && operators.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<Callable> = sqlx::query_as(
        "SELECT 'f' AS kind, p.proname::text AS name, n.nspname::text AS schema, \
                p.provolatile::text AS volatility, p.pronargs AS arguments \
           FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
          WHERE p.proname = ANY($1::text[]) AND p.provolatile = 'v' \
         UNION ALL \
         SELECT 'o', o.oprname::text, n.nspname::text, p.provolatile::text, 2::int2 \
           FROM pg_catalog.pg_operator o \
           JOIN pg_catalog.pg_proc p ON p.oid = o.oprcode \
           JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace \
          WHERE o.oprname = ANY($2::text[]) AND n.nspname <> 'pg_catalog' AND p.provolatile = 'v'",
    )
    .bind(&names)
    .bind(&operators)
    .persistent(false)
    .fetch_all(connection)
    .await?;
    let mut found = Vec::new();
    for row in rows {
        debug_assert_eq!(row.volatility, "v");
        if row.kind == "o" {
            push_unique(&mut found, "operator", &row.name);
            continue;
        }
        if row.schema == "pg_catalog" && SAFE_VOLATILE.contains(&row.name.as_str()) {
            continue;
        }
        let called = statement.functions.iter().any(|function| {
            function.name == row.name && function.schema.as_deref().is_none_or(|s| s == row.schema)
        });
        // In attribute notation only a one-argument function can be meant.
        let attribute = row.arguments == 1 && statement.attribute_names.contains(&row.name);
        if called || attribute {
            push_unique(&mut found, "function", &format!("{}.{}", row.schema, row.name));
        }
    }
    Ok(found)
}

fn push_unique(found: &mut Vec<VolatileCall>, what: &'static str, name: &str) {
    if !found.iter().any(|call| call.name == name) {
        found.push(VolatileCall { what, name: name.to_owned() });
    }
}
