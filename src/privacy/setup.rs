//! What a masked caller's database role reads, prepared in PostgreSQL so that the database, not
//! a parser, keeps raw values from it.
//!
//! Each masking policy gets a role of its own ([`MaskRole`]: a login role that holds nothing but
//! what this module grants) and, in each target database, one schema per schema of the
//! database, `<role>__<schema>`, holding a view of the same name for every relation there:
//!
//! - a table, partitioned table, foreign table or materialized view is read as it is, its
//!   columns in order, each column the policy names computed by the policy's rule from the
//!   original (`redact`, `null`, `keep_last:N`, `keep_email_domain`, and `hash`, whose salt sits
//!   in `orca_mask.salts`, a table the role cannot read: the view reads it with its owner's
//!   rights);
//! - a view is its own definition (as `pg_get_viewdef` writes it with every name qualified)
//!   over the masked relations instead of the originals, with the same by-name masking on top,
//!   so a view can never carry a raw value under another name;
//! - what cannot be shown safely is left out, with the reason: a materialized view built from a
//!   masked column (it stores raw values), a view or materialized view that calls a function of
//!   the database's own or one that runs SQL given as text (those run with the view owner's
//!   rights), and a view whose definition cannot be created over the masked relations.
//!
//! The role holds `USAGE` on these schemas and `SELECT` on their views, and nothing on any
//! original relation, so whatever a statement does (row comparisons, subqueries, `EXPLAIN
//! ANALYZE`, casts that quote a value, `pg_stats`, which shows only columns one may read) it
//! reads masked values or nothing. Its connections start with a search path that puts each
//! masked schema before its original, so ordinary SQL keeps working; a relation created after
//! the setup is unreadable until the setup runs again (fail closed), a column added later is
//! absent until then.
//!
//! [`plan`] is pure: the statements of one setup from the catalog as [`read_catalog`] reads
//! it; [`apply`] runs them in one transaction when what they would build differs from what was
//! built last, and [`verify`] asks PostgreSQL what the role can read of every masked column.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use sha2::{Digest, Sha256};
use sqlx::{PgConnection, Row};

use super::mask::{MaskRule, MaskingPolicy, REDACTED};
use crate::sql::quote_identifier as quote;

/// The schema of the salts and of what was last built, readable by orca's own role only.
pub(crate) const KEEP_SCHEMA: &str = "orca_mask";

/// Schemas that are never masked or read through masked views: PostgreSQL's own, orca's state
/// and orca's masking schemas.
pub(crate) fn is_system_schema(name: &str) -> bool {
    name == "information_schema"
        || name.starts_with("pg_")
        || name == crate::sql::STATE_SCHEMA
        || name.starts_with(KEEP_SCHEMA)
}

/// The database role of one masking policy: its name (a hash of the policy's salt and rules,
/// so that two policies, or two deployments with other secrets, never share one), the password
/// orca logs in with (derived the same way) and the salt of its hashes.
#[derive(Clone)]
pub(crate) struct MaskRole {
    pub(crate) name: String,
    password: String,
    salt: Vec<u8>,
}

impl std::fmt::Debug for MaskRole {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MaskRole").field("name", &self.name).finish_non_exhaustive()
    }
}

impl MaskRole {
    /// The role of `policy` (whose salt is already filled from the orca secret).
    #[must_use]
    pub(crate) fn of(policy: &MaskingPolicy) -> MaskRole {
        let mut rules = String::new();
        for (column, rule) in &policy.columns {
            let _ = write!(rules, "{}={rule};", column.to_lowercase());
        }
        let derive = |label: &str| {
            let mut hash = Sha256::new();
            hash.update(label.as_bytes());
            hash.update([0]);
            hash.update(policy.salt.as_bytes());
            hash.update([0]);
            hash.update(rules.as_bytes());
            hex::encode(hash.finalize())
        };
        let readable: String = policy
            .id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
            .take(24)
            .collect();
        MaskRole {
            name: format!("orca_mask_{readable}_{}", &derive("orca-mask-role-v1")[..8]),
            password: derive("orca-mask-login-v1"),
            salt: policy.salt.as_bytes().to_vec(),
        }
    }

    /// The password orca logs in as the role with.
    pub(crate) fn password(&self) -> &str {
        &self.password
    }

    /// The schema holding the masked views of the relations of `schema`.
    #[must_use]
    pub(crate) fn masked_schema(&self, schema: &str) -> String {
        let name = format!("{}__{schema}", self.name);
        if name.len() <= 63 {
            return name;
        }
        let digest = hex::encode(Sha256::digest(schema.as_bytes()));
        format!("{}__{}", self.name, &digest[..12])
    }

    /// The key of the advisory lock two setups of this role in one database share.
    fn lock_key(&self) -> i64 {
        let digest = Sha256::digest(format!("orca-mask-lock:{}", self.name).as_bytes());
        i64::from_be_bytes(digest[..8].try_into().expect("eight bytes"))
    }
}

/// What a relation is, as far as masking goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelationKind {
    /// A table, partitioned table or foreign table: read as it is.
    Table,
    View,
    MaterializedView,
}

/// One relation of a schema the setup covers.
#[derive(Debug, Clone)]
pub(crate) struct Relation {
    pub(crate) oid: i64,
    pub(crate) schema: String,
    pub(crate) name: String,
    pub(crate) kind: RelationKind,
    /// Its columns in order (dropped ones left out).
    pub(crate) columns: Vec<String>,
    /// A view's definition, every name in it qualified.
    pub(crate) definition: Option<String>,
}

/// What a view or materialized view reads: a relation's column (0: the whole row), or a
/// function, `unsafe` when it runs with the view owner's rights on anything (the database's own
/// functions, and PostgreSQL's that run SQL given as text).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dependency {
    Column { view: i64, relation: i64, column: i32 },
    UnsafeFunction { view: i64 },
}

/// The catalog of a database as a setup reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) relations: Vec<Relation>,
    pub(crate) dependencies: Vec<Dependency>,
    /// Each schema orca's role may use, whether or not it holds relations.
    pub(crate) schemas: Vec<String>,
}

/// Read the catalog of the database `connection` is on: the relations of every schema orca's
/// role may use (PostgreSQL's, orca's state and the masking schemas aside), and what its views
/// depend on. Runs in a read-only transaction of its own with an empty search path, so that view
/// definitions come back with every name qualified.
///
/// # Errors
///
/// The database's.
pub(crate) async fn read_catalog(connection: &mut PgConnection) -> Result<Catalog, sqlx::Error> {
    sqlx::raw_sql("BEGIN READ ONLY; SET LOCAL search_path = ''").execute(&mut *connection).await?;
    let result = read_catalog_in_transaction(connection).await;
    sqlx::query("ROLLBACK").execute(&mut *connection).await?;
    result
}

async fn read_catalog_in_transaction(
    connection: &mut PgConnection,
) -> Result<Catalog, sqlx::Error> {
    let schemas: Vec<String> = sqlx::query_scalar(
        "SELECT n.nspname::text FROM pg_catalog.pg_namespace n \
         WHERE pg_catalog.has_schema_privilege(n.oid, 'USAGE') ORDER BY 1",
    )
    .fetch_all(&mut *connection)
    .await?;
    let schemas: Vec<String> = schemas.into_iter().filter(|name| !is_system_schema(name)).collect();
    let rows = sqlx::query(
        "SELECT c.oid::int8 AS oid, n.nspname::text AS schema, c.relname::text AS name, \
                c.relkind::text AS kind, \
                coalesce(array_agg(a.attname::text ORDER BY a.attnum) \
                         FILTER (WHERE a.attnum > 0 AND NOT a.attisdropped), '{}') AS columns, \
                CASE WHEN c.relkind = 'v' THEN pg_catalog.pg_get_viewdef(c.oid, false) END \
                  AS definition \
         FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid \
         WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm') AND n.nspname = ANY($1) \
         GROUP BY c.oid, n.nspname, c.relname, c.relkind \
         ORDER BY n.nspname, c.relname",
    )
    .bind(&schemas)
    .fetch_all(&mut *connection)
    .await?;
    let mut relations = Vec::with_capacity(rows.len());
    for row in rows {
        let kind = match row.try_get::<String, _>("kind")?.as_str() {
            "v" => RelationKind::View,
            "m" => RelationKind::MaterializedView,
            _ => RelationKind::Table,
        };
        relations.push(Relation {
            oid: row.try_get("oid")?,
            schema: row.try_get("schema")?,
            name: row.try_get("name")?,
            kind,
            columns: row.try_get("columns")?,
            definition: row.try_get("definition")?,
        });
    }
    let rows = sqlx::query(
        "SELECT r.ev_class::int8 AS view, \
                (d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass) AS is_function, \
                d.refobjid::int8 AS object, d.refobjsubid::int4 AS column, \
                (d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND ( \
                   d.refobjid >= 16384 OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p \
                     WHERE p.oid = d.refobjid AND p.proname ~ '(^query_|^cursor_|^table_|^schema_|^database_).*xml'))) \
                  AS unsafe_function \
         FROM pg_catalog.pg_depend d \
         JOIN pg_catalog.pg_rewrite r \
           ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.objid = r.oid \
         WHERE r.ev_class <> d.refobjid \
           AND d.refclassid IN ('pg_catalog.pg_class'::pg_catalog.regclass, \
                                'pg_catalog.pg_proc'::pg_catalog.regclass)",
    )
    .fetch_all(&mut *connection)
    .await?;
    let mut dependencies = Vec::with_capacity(rows.len());
    for row in rows {
        let view: i64 = row.try_get("view")?;
        if row.try_get::<bool, _>("is_function")? {
            if row.try_get::<bool, _>("unsafe_function")? {
                dependencies.push(Dependency::UnsafeFunction { view });
            }
        } else {
            dependencies.push(Dependency::Column {
                view,
                relation: row.try_get("object")?,
                column: row.try_get("column")?,
            });
        }
    }
    Ok(Catalog { relations, dependencies, schemas })
}

/// One setup of a role in one database: its statements and what they leave out.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Statements that must all succeed, in order.
    pub(crate) statements: Vec<String>,
    /// Views created each on its own: one that fails is left out, with the database's reason.
    pub(crate) views: Vec<(QualifiedRelation, String)>,
    /// Relations left out, with why.
    pub(crate) hidden: BTreeMap<QualifiedRelation, String>,
    /// Original schema -> masked schema.
    pub(crate) schemas: BTreeMap<String, String>,
    /// Every relation of the catalog the plan was made from.
    pub(crate) relations: BTreeSet<QualifiedRelation>,
    /// A hash of everything the plan builds.
    pub(crate) fingerprint: String,
}

/// A relation by schema and name.
pub(crate) type QualifiedRelation = (String, String);

/// The statements that prepare `role` for `policy` over `catalog`. Everything the role can read
/// afterwards is created here; nothing that existed is granted to it.
#[must_use]
pub(crate) fn plan(role: &MaskRole, policy: &MaskingPolicy, catalog: &Catalog) -> Plan {
    let schemas: BTreeMap<String, String> =
        catalog.schemas.iter().map(|schema| (schema.clone(), role.masked_schema(schema))).collect();
    let hidden = hidden_relations(policy, catalog);
    let by_oid: HashMap<i64, &Relation> =
        catalog.relations.iter().map(|relation| (relation.oid, relation)).collect();
    let mut statements = Vec::new();
    for masked in schemas.values() {
        statements.push(format!("CREATE SCHEMA {}", quote(masked)));
        statements.push(format!(
            "GRANT USAGE ON SCHEMA {} TO {}",
            quote(masked),
            quote(&role.name)
        ));
    }
    let mut views = Vec::new();
    for relation in views_in_dependency_order(catalog, &by_oid) {
        let key = (relation.schema.clone(), relation.name.clone());
        if hidden.contains_key(&key) {
            continue;
        }
        let source = match (&relation.kind, &relation.definition) {
            (RelationKind::View, Some(definition)) => {
                let definition = definition.trim().trim_end_matches(';').trim_end();
                let redirected =
                    crate::sql::redirect_schemas(definition, |schema| schemas.get(schema).cloned());
                match redirected {
                    Ok(text) => format!("({text})"),
                    Err(_) => continue,
                }
            }
            (RelationKind::View, None) => continue,
            _ => format!("{}.{}", quote(&relation.schema), quote(&relation.name)),
        };
        let view = format!(
            "CREATE VIEW {}.{} AS SELECT {} FROM {source} AS source",
            quote(&schemas[&relation.schema]),
            quote(&relation.name),
            select_list(role, policy, &relation.columns),
        );
        if relation.kind == RelationKind::View {
            views.push((key, view));
        } else {
            statements.push(view);
        }
    }
    let mut fingerprint = Sha256::new();
    for statement in statements.iter().chain(views.iter().map(|(_, view)| view)) {
        fingerprint.update(statement.as_bytes());
        fingerprint.update([0]);
    }
    let relations = catalog
        .relations
        .iter()
        .map(|relation| (relation.schema.clone(), relation.name.clone()))
        .collect();
    let fingerprint = hex::encode(fingerprint.finalize());
    Plan { statements, views, hidden, schemas, relations, fingerprint }
}

/// Views after what they read (Kahn's order over their dependencies), tables first.
fn views_in_dependency_order<'a>(
    catalog: &'a Catalog,
    by_oid: &HashMap<i64, &'a Relation>,
) -> Vec<&'a Relation> {
    let mut waiting_on: HashMap<i64, BTreeSet<i64>> = HashMap::new();
    for dependency in &catalog.dependencies {
        if let Dependency::Column { view, relation, .. } = dependency
            && by_oid.get(relation).is_some_and(|r| r.kind == RelationKind::View)
            && view != relation
        {
            waiting_on.entry(*view).or_default().insert(*relation);
        }
    }
    let mut ordered: Vec<&Relation> =
        catalog.relations.iter().filter(|r| r.kind != RelationKind::View).collect();
    let mut pending: Vec<&Relation> =
        catalog.relations.iter().filter(|r| r.kind == RelationKind::View).collect();
    let mut done: BTreeSet<i64> = BTreeSet::new();
    while !pending.is_empty() {
        let before = pending.len();
        pending.retain(|view| {
            let ready = waiting_on
                .get(&view.oid)
                .is_none_or(|needed| needed.iter().all(|oid| done.contains(oid)));
            if ready {
                done.insert(view.oid);
                ordered.push(view);
            }
            !ready
        });
        if pending.len() == before {
            // A cycle cannot happen between views; whatever is left goes last as it is.
            ordered.append(&mut pending);
        }
    }
    ordered
}

/// The relations a masked role must not read at all, with why: materialized views that store a
/// masked column's values, and views or materialized views calling functions that run with
/// their owner's rights.
fn hidden_relations(
    policy: &MaskingPolicy,
    catalog: &Catalog,
) -> BTreeMap<QualifiedRelation, String> {
    let by_oid: HashMap<i64, &Relation> =
        catalog.relations.iter().map(|relation| (relation.oid, relation)).collect();
    let masked_column = |relation: &Relation, column: i32| -> bool {
        usize::try_from(column).ok().filter(|column| *column > 0).is_some_and(|column| {
            relation.columns.get(column - 1).is_some_and(|name| policy.rule_for(name).is_some())
        })
    };
    let has_masked_column =
        |relation: &Relation| relation.columns.iter().any(|name| policy.rule_for(name).is_some());
    let mut hidden: BTreeMap<QualifiedRelation, String> = BTreeMap::new();
    let mut stores_masked: BTreeSet<i64> = BTreeSet::new();
    for dependency in &catalog.dependencies {
        if let Dependency::UnsafeFunction { view } = dependency
            && let Some(relation) = by_oid.get(view)
        {
            hidden.insert(
                (relation.schema.clone(), relation.name.clone()),
                "it calls a function that runs with the view owner's rights, which could read masked columns unmasked".to_owned(),
            );
        }
    }
    // What materialized views store, through views too: a view that reads a masked column
    // carries it (masked or not, we cannot tell which output column), and so does anything
    // built on such a view.
    let mut carries: BTreeSet<i64> = BTreeSet::new();
    loop {
        let before = carries.len();
        for dependency in &catalog.dependencies {
            let Dependency::Column { view, relation, column } = *dependency else { continue };
            let Some(source) = by_oid.get(&relation) else { continue };
            let reads_masked = carries.contains(&relation)
                || masked_column(source, column)
                || (column == 0 && has_masked_column(source));
            if reads_masked {
                carries.insert(view);
            }
        }
        if carries.len() == before {
            break;
        }
    }
    for oid in &carries {
        if let Some(relation) = by_oid.get(oid)
            && relation.kind == RelationKind::MaterializedView
        {
            stores_masked.insert(*oid);
            hidden.entry((relation.schema.clone(), relation.name.clone())).or_insert_with(|| {
                "it is a materialized view built from masked columns, and stores their values unmasked".to_owned()
            });
        }
    }
    hidden
}

/// The select list of a masked view: every column in order, the policy's computed by its rule.
fn select_list(role: &MaskRole, policy: &MaskingPolicy, columns: &[String]) -> String {
    if columns.is_empty() {
        return String::new();
    }
    let mut list = String::new();
    for (index, column) in columns.iter().enumerate() {
        if index > 0 {
            list.push_str(", ");
        }
        let reference = format!("source.{}", quote(column));
        match policy.rule_for(column) {
            None => list.push_str(&reference),
            Some(rule) => {
                list.push_str(&masked_expression(role, *rule, &reference));
                list.push_str(" AS ");
                list.push_str(&quote(column));
            }
        }
    }
    list
}

/// The SQL of `rule` applied to `value` (a column reference): text, `NULL` for a `NULL`, the
/// same results as [`super::mask::mask_value`] gives the value's text.
fn masked_expression(role: &MaskRole, rule: MaskRule, value: &str) -> String {
    let text = format!("({value})::pg_catalog.text");
    let masked = match rule {
        MaskRule::Null => return "NULL::pg_catalog.text".to_owned(),
        MaskRule::Redact => format!("'{REDACTED}'"),
        MaskRule::Hash => format!(
            "'h:' OPERATOR(pg_catalog.||) pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(\
             (SELECT salts.salt FROM {keep}.salts WHERE salts.role = '{role}') \
             OPERATOR(pg_catalog.||) pg_catalog.convert_to({text}, 'UTF8')), 'hex'), 16)",
            keep = quote(KEEP_SCHEMA),
            role = role.name,
        ),
        MaskRule::KeepLast(count) => format!(
            "CASE WHEN pg_catalog.char_length({text}) OPERATOR(pg_catalog.<=) {count} \
             THEN pg_catalog.repeat('*', pg_catalog.char_length({text})) \
             ELSE pg_catalog.repeat('*', pg_catalog.char_length({text}) OPERATOR(pg_catalog.-) {count}) \
             OPERATOR(pg_catalog.||) pg_catalog.\"right\"({text}, {count}) END"
        ),
        MaskRule::KeepEmailDomain => format!(
            "CASE WHEN pg_catalog.btrim({text}) OPERATOR(pg_catalog.~) \
             '^.*[^[:space:]].*@[[:alnum:]]([[:alnum:].-]*[[:alnum:]])?$' \
             AND pg_catalog.btrim({text}) OPERATOR(pg_catalog.!~) '@[^@]*[.][.][^@]*$' \
             THEN '***@' OPERATOR(pg_catalog.||) pg_catalog.substring(pg_catalog.btrim({text}), '@([^@]*)$') \
             ELSE '{REDACTED}' END"
        ),
    };
    format!("CASE WHEN ({value}) IS NULL THEN NULL ELSE {masked} END")
}

/// What went wrong preparing a role, in words for a log line, `orca doctor` and the error a
/// masked caller gets.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SetupError {
    /// orca's role may not create or grant what the setup needs.
    #[error(
        "orca's database role cannot prepare masking ({0}); give it CREATEROLE and CREATE on the database, or have an administrator run what `orca masking setup --print` prints"
    )]
    Privileges(String),
    /// The setup ran, but the role can still read a masked column, or could read new ones.
    #[error("masking cannot be guaranteed on this database: {0}")]
    Unsafe(String),
    /// PostgreSQL refused the masked role's login.
    #[error(
        "PostgreSQL refused the login of the masked role `{role}` ({reason}); pg_hba.conf must let it connect the way orca's role does"
    )]
    Login { role: String, reason: String },
    /// The database could not be reached or failed otherwise.
    #[error("the database failed while preparing masking: {0}")]
    Database(String),
}

impl SetupError {
    fn from_sql(error: &sqlx::Error) -> SetupError {
        let code = error.as_database_error().and_then(|e| e.code().map(|c| c.into_owned()));
        let message = error
            .as_database_error()
            .map_or_else(|| "the database is unreachable".to_owned(), |e| e.message().to_owned());
        match code.as_deref() {
            Some("42501") => SetupError::Privileges(message),
            _ => SetupError::Database(message),
        }
    }

    /// Whether trying again soon may succeed (the database was unreachable).
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, SetupError::Database(_))
    }
}

/// The role-level statements: the role itself (created when missing) and its salt.
fn role_statements(role: &MaskRole, exists: bool) -> Vec<String> {
    let name = quote(&role.name);
    let password = &role.password;
    let mut statements = vec![if exists {
        format!("ALTER ROLE {name} WITH LOGIN NOINHERIT PASSWORD '{password}'")
    } else {
        format!(
            "CREATE ROLE {name} WITH LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '{password}'"
        )
    }];
    let keep = quote(KEEP_SCHEMA);
    statements.extend([
        format!("CREATE SCHEMA IF NOT EXISTS {keep}"),
        format!("REVOKE ALL ON SCHEMA {keep} FROM PUBLIC"),
        format!(
            "CREATE TABLE IF NOT EXISTS {keep}.salts (role text PRIMARY KEY, salt bytea NOT NULL)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keep}.prepared (role text PRIMARY KEY, fingerprint text NOT NULL, prepared_at timestamptz NOT NULL DEFAULT now())"
        ),
        format!("REVOKE ALL ON {keep}.salts, {keep}.prepared FROM PUBLIC"),
        format!(
            "INSERT INTO {keep}.salts (role, salt) VALUES ('{}', '\\x{}'::bytea) ON CONFLICT (role) DO UPDATE SET salt = EXCLUDED.salt",
            role.name,
            hex::encode(&role.salt)
        ),
    ]);
    statements
}

/// The statements that drop what an earlier setup of `role` built in this database.
fn drop_statements(existing: &[String]) -> Vec<String> {
    existing
        .iter()
        .map(|schema| format!("DROP SCHEMA IF EXISTS {} CASCADE", quote(schema)))
        .collect()
}

/// The masked schemas of `role` in the database `connection` is on.
async fn existing_schemas(
    connection: &mut PgConnection,
    role: &MaskRole,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT nspname::text FROM pg_catalog.pg_namespace \
         WHERE pg_catalog.starts_with(nspname, $1) ORDER BY 1",
    )
    .bind(format!("{}__", role.name))
    .fetch_all(connection)
    .await
}

/// Everything a setup runs, as a script for an administrator (`orca masking setup --print`).
///
/// # Errors
///
/// The database's, reading what exists.
pub(crate) async fn script(
    connection: &mut PgConnection,
    role: &MaskRole,
    plan: &Plan,
) -> Result<String, sqlx::Error> {
    let exists = role_exists(connection, role).await?;
    let existing = existing_schemas(connection, role).await?;
    let mut script = String::from("BEGIN;\n");
    let (database, me): (String, String) =
        sqlx::query_as("SELECT pg_catalog.current_database()::text, current_user::text")
            .fetch_one(connection)
            .await?;
    let lines = role_statements(role, exists)
        .into_iter()
        .chain(drop_statements(&existing))
        .chain(plan.statements.iter().cloned())
        .chain(plan.views.iter().map(|(_, view)| view.clone()))
        .chain(grant_statements(role, plan, &database))
        .chain([record_statement(role, plan)])
        .chain(reader_statements(&me));
    for line in lines {
        script.push_str(&line);
        script.push_str(";\n");
    }
    script.push_str("COMMIT;\n");
    Ok(script)
}

/// What lets orca's own role (`me`, when an administrator ran the setup for it) see that the
/// setup was made: what was built last, never the salts.
fn reader_statements(me: &str) -> Vec<String> {
    let keep = quote(KEEP_SCHEMA);
    vec![
        format!("GRANT USAGE ON SCHEMA {keep} TO {}", quote(me)),
        format!("GRANT SELECT ON {keep}.prepared TO {}", quote(me)),
    ]
}

fn grant_statements(role: &MaskRole, plan: &Plan, database: &str) -> Vec<String> {
    let mut statements: Vec<String> = plan
        .schemas
        .values()
        .map(|masked| {
            format!(
                "GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}",
                quote(masked),
                quote(&role.name)
            )
        })
        .collect();
    statements.push(format!(
        "GRANT CONNECT ON DATABASE {} TO {}",
        quote(database),
        quote(&role.name)
    ));
    statements
}

fn record_statement(role: &MaskRole, plan: &Plan) -> String {
    format!(
        "INSERT INTO {keep}.prepared (role, fingerprint) VALUES ('{}', '{}') ON CONFLICT (role) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, prepared_at = now()",
        role.name,
        plan.fingerprint,
        keep = quote(KEEP_SCHEMA)
    )
}

async fn role_exists(connection: &mut PgConnection, role: &MaskRole) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)")
        .bind(&role.name)
        .fetch_one(connection)
        .await
}

/// What [`apply`] found and did.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// Relations the role cannot read, with why (including views that failed to build).
    pub(crate) hidden: BTreeMap<QualifiedRelation, String>,
    /// Whether anything was (re)built.
    pub(crate) built: bool,
}

/// Run `plan` for `role` on the database `connection` is on, in one transaction, unless what it
/// builds is what was built last (then only the role's password and salt are checked). When
/// orca's role may not build it but an administrator ran the same script, that is accepted.
///
/// # Errors
///
/// [`SetupError`] naming what is missing.
pub(crate) async fn apply(
    connection: &mut PgConnection,
    role: &MaskRole,
    plan: &Plan,
) -> Result<Applied, SetupError> {
    let sql_error = |error: sqlx::Error| SetupError::from_sql(&error);
    let current = last_fingerprint(connection, role).await;
    let mut hidden = plan.hidden.clone();
    if current.as_deref() == Some(plan.fingerprint.as_str()) {
        return Ok(Applied {
            hidden: with_failed_views(connection, plan, hidden).await,
            built: false,
        });
    }
    sqlx::query("BEGIN").execute(&mut *connection).await.map_err(sql_error)?;
    let outcome = build(connection, role, plan, &mut hidden).await;
    match outcome {
        Ok(()) => {
            sqlx::query("COMMIT").execute(&mut *connection).await.map_err(sql_error)?;
            Ok(Applied { hidden, built: true })
        }
        Err(error) => {
            let _ = sqlx::query("ROLLBACK").execute(&mut *connection).await;
            Err(error)
        }
    }
}

/// The views of `plan` that do not exist (an earlier build left them out), added to `hidden`.
async fn with_failed_views(
    connection: &mut PgConnection,
    plan: &Plan,
    mut hidden: BTreeMap<QualifiedRelation, String>,
) -> BTreeMap<QualifiedRelation, String> {
    for ((schema, name), _) in &plan.views {
        let exists: Result<bool, _> = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n \
             ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)",
        )
        .bind(&plan.schemas[schema])
        .bind(name)
        .fetch_one(&mut *connection)
        .await;
        if matches!(exists, Ok(false)) {
            hidden.insert(
                (schema.clone(), name.clone()),
                "its definition cannot be read over the masked relations".to_owned(),
            );
        }
    }
    hidden
}

/// The fingerprint of what was built last for `role`, if anything was.
async fn last_fingerprint(connection: &mut PgConnection, role: &MaskRole) -> Option<String> {
    let statement =
        format!("SELECT fingerprint FROM {}.prepared WHERE role = $1", quote(KEEP_SCHEMA));
    sqlx::query_scalar(sqlx::AssertSqlSafe(statement))
        .bind(&role.name)
        .fetch_optional(connection)
        .await
        .ok()
        .flatten()
}

async fn build(
    connection: &mut PgConnection,
    role: &MaskRole,
    plan: &Plan,
    hidden: &mut BTreeMap<QualifiedRelation, String>,
) -> Result<(), SetupError> {
    let sql_error = |error: sqlx::Error| SetupError::from_sql(&error);
    sqlx::query("SELECT pg_catalog.pg_advisory_xact_lock($1)")
        .bind(role.lock_key())
        .execute(&mut *connection)
        .await
        .map_err(sql_error)?;
    sqlx::query("SET LOCAL lock_timeout = '10s'")
        .execute(&mut *connection)
        .await
        .map_err(sql_error)?;
    let exists = role_exists(connection, role).await.map_err(sql_error)?;
    let existing = existing_schemas(connection, role).await.map_err(sql_error)?;
    let database: String = sqlx::query_scalar("SELECT pg_catalog.current_database()::text")
        .fetch_one(&mut *connection)
        .await
        .map_err(sql_error)?;
    let fixed = role_statements(role, exists)
        .into_iter()
        .chain(drop_statements(&existing))
        .chain(plan.statements.iter().cloned());
    for statement in fixed {
        run(connection, &statement).await.map_err(sql_error)?;
    }
    for ((schema, name), view) in &plan.views {
        run(connection, "SAVEPOINT orca_mask_view").await.map_err(sql_error)?;
        match run(connection, view).await {
            Ok(()) => {
                run(connection, "RELEASE SAVEPOINT orca_mask_view").await.map_err(sql_error)?
            }
            Err(error) => {
                run(connection, "ROLLBACK TO SAVEPOINT orca_mask_view").await.map_err(sql_error)?;
                let reason = error
                    .as_database_error()
                    .map_or_else(String::new, |e| format!(" ({})", e.message()));
                hidden.insert(
                    (schema.clone(), name.clone()),
                    format!("its definition cannot be read over the masked relations{reason}"),
                );
            }
        }
    }
    for statement in grant_statements(role, plan, &database) {
        // CONNECT is usually PUBLIC's already; the login check says when it is not.
        if statement.starts_with("GRANT CONNECT") {
            run(connection, "SAVEPOINT orca_mask_connect").await.map_err(sql_error)?;
            if run(connection, &statement).await.is_err() {
                run(connection, "ROLLBACK TO SAVEPOINT orca_mask_connect")
                    .await
                    .map_err(sql_error)?;
            }
            continue;
        }
        run(connection, &statement).await.map_err(sql_error)?;
    }
    run(connection, &record_statement(role, plan)).await.map_err(sql_error)?;
    Ok(())
}

async fn run(connection: &mut PgConnection, statement: &str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_owned())).execute(connection).await.map(|_| ())
}

/// Where a database stands for one role, as `orca doctor` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Diagnosis {
    /// What the plan builds was built (by orca or by an administrator).
    Prepared,
    /// Not built as the plan would, but orca's role may build it.
    Preparable,
}

/// Whether `plan` was built for `role`, else whether orca's role may build it, without
/// changing anything.
///
/// # Errors
///
/// [`SetupError::Privileges`] naming what orca's role lacks.
pub(crate) async fn diagnose(
    connection: &mut PgConnection,
    role: &MaskRole,
    plan: &Plan,
) -> Result<Diagnosis, SetupError> {
    if last_fingerprint(connection, role).await.as_deref() == Some(plan.fingerprint.as_str()) {
        return Ok(Diagnosis::Prepared);
    }
    let sql_error = |error: sqlx::Error| SetupError::from_sql(&error);
    let (name, may_create_roles, may_create_schemas, role_exists): (String, bool, bool, bool) =
        sqlx::query_as(
            "SELECT current_user::text, r.rolsuper OR r.rolcreaterole,                     pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),                     EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)              FROM pg_catalog.pg_roles r WHERE r.rolname = current_user",
        )
        .bind(&role.name)
        .fetch_one(connection)
        .await
        .map_err(sql_error)?;
    let mut missing = Vec::new();
    if !may_create_roles {
        missing.push(if role_exists {
            format!("`{name}` may not set the password of the role `{}` (CREATEROLE)", role.name)
        } else {
            format!("`{name}` may not create the role `{}` (CREATEROLE)", role.name)
        });
    }
    if !may_create_schemas {
        missing.push(format!("`{name}` may not create schemas in this database (CREATE)"));
    }
    if missing.is_empty() {
        Ok(Diagnosis::Preparable)
    } else {
        Err(SetupError::Privileges(missing.join("; ")))
    }
}

/// Ask PostgreSQL what `role` can read that it must not: a column the policy masks in any
/// original relation (through `PUBLIC`'s privileges, say), a role it is a member of, a
/// superuser or row-security bypass, default privileges that would let it read tables created
/// later before orca masks them, or a function it may call that runs with its owner's rights.
///
/// # Errors
///
/// [`SetupError::Unsafe`] naming the first few findings, or the database's error.
pub(crate) async fn verify(
    connection: &mut PgConnection,
    role: &MaskRole,
    policy: &MaskingPolicy,
) -> Result<(), SetupError> {
    let sql_error = |error: sqlx::Error| SetupError::from_sql(&error);
    let attributes: (bool, bool, i64) = sqlx::query_as(
        "SELECT r.rolsuper, r.rolbypassrls, \
                (SELECT count(*) FROM pg_catalog.pg_auth_members m WHERE m.member = r.oid) \
         FROM pg_catalog.pg_roles r WHERE r.rolname = $1",
    )
    .bind(&role.name)
    .fetch_optional(&mut *connection)
    .await
    .map_err(sql_error)?
    .ok_or_else(|| SetupError::Privileges(format!("the role `{}` does not exist", role.name)))?;
    let mut findings = Vec::new();
    if attributes.0 || attributes.1 {
        findings.push(format!("the role `{}` is a superuser or bypasses row security", role.name));
    }
    if attributes.2 > 0 {
        findings.push(format!(
            "the role `{}` is a member of other roles and would hold their privileges",
            role.name
        ));
    }
    let masked: Vec<String> = policy.columns.keys().map(|name| name.to_lowercase()).collect();
    let readable: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT n.nspname::text, c.relname::text, a.attname::text \
         FROM pg_catalog.pg_attribute a \
         JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'f', 'v', 'm') \
           AND pg_catalog.lower(a.attname) = ANY($2) \
           AND NOT pg_catalog.starts_with(n.nspname, $3) \
           AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
           AND pg_catalog.has_column_privilege($1, c.oid, a.attnum, 'SELECT') \
         ORDER BY 1, 2, 3 LIMIT 5",
    )
    .bind(&role.name)
    .bind(&masked)
    .bind(format!("{}__", role.name))
    .fetch_all(&mut *connection)
    .await
    .map_err(sql_error)?;
    for (schema, table, column) in readable {
        findings.push(format!(
            "{schema}.{table}.{column} is readable unmasked (granted to PUBLIC or to the role); revoke that privilege"
        ));
    }
    let defaults: Vec<String> = sqlx::query_scalar(
        "SELECT coalesce(n.nspname::text, 'every schema') FROM pg_catalog.pg_default_acl d \
         LEFT JOIN pg_catalog.pg_namespace n ON n.oid = d.defaclnamespace, \
         LATERAL pg_catalog.aclexplode(d.defaclacl) acl \
         WHERE d.defaclobjtype = 'r' AND acl.privilege_type = 'SELECT' \
           AND (acl.grantee = 0 OR acl.grantee = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1)) \
         ORDER BY 1 LIMIT 5",
    )
    .bind(&role.name)
    .fetch_all(&mut *connection)
    .await
    .map_err(sql_error)?;
    for schema in defaults {
        findings.push(format!(
            "tables created later in {schema} are readable by PUBLIC by default (ALTER DEFAULT PRIVILEGES), so a masked column created later would be readable before orca masks it; revoke that default"
        ));
    }
    let definers: Vec<String> = sqlx::query_scalar(
        "SELECT n.nspname::text || '.' || p.proname::text FROM pg_catalog.pg_proc p \
         JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
         WHERE p.prosecdef AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema' \
           AND pg_catalog.has_schema_privilege($1, n.oid, 'USAGE') \
           AND pg_catalog.has_function_privilege($1, p.oid, 'EXECUTE') \
         ORDER BY 1 LIMIT 5",
    )
    .bind(&role.name)
    .fetch_all(&mut *connection)
    .await
    .map_err(sql_error)?;
    for function in definers {
        findings.push(format!(
            "the function {function} runs with its owner's rights (SECURITY DEFINER) and anyone may call it, so it could return masked columns unmasked; REVOKE EXECUTE ON FUNCTION {function} FROM PUBLIC"
        ));
    }
    if findings.is_empty() { Ok(()) } else { Err(SetupError::Unsafe(findings.join("; "))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> MaskingPolicy {
        MaskingPolicy {
            id: "People & co".to_owned(),
            columns: BTreeMap::from([
                ("email".to_owned(), MaskRule::KeepEmailDomain),
                ("Phone".to_owned(), MaskRule::KeepLast(4)),
                ("last_name".to_owned(), MaskRule::Hash),
            ]),
            kinds: BTreeMap::new(),
            salt: "pepper".to_owned(),
        }
    }

    fn relation(oid: i64, name: &str, kind: RelationKind, columns: &[&str]) -> Relation {
        Relation {
            oid,
            schema: "public".to_owned(),
            name: name.to_owned(),
            kind,
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            definition: None,
        }
    }

    #[test]
    fn a_role_is_named_after_its_policy_and_differs_with_its_rules_and_salt() {
        let role = MaskRole::of(&policy());
        assert!(role.name.starts_with("orca_mask_people___co_"), "{}", role.name);
        assert_eq!(role.name.len(), "orca_mask_people___co_".len() + 8);
        let mut other = policy();
        other.salt = "salt".to_owned();
        assert_ne!(MaskRole::of(&other).name, role.name);
        let mut other = policy();
        other.columns.insert("company".to_owned(), MaskRule::Null);
        assert_ne!(MaskRole::of(&other).name, role.name);
        assert_ne!(MaskRole::of(&other).password(), role.password());
        assert!(role.masked_schema("public").ends_with("__public"));
        assert!(role.masked_schema(&"s".repeat(60)).len() <= 63);
    }

    #[test]
    fn every_relation_gets_a_view_with_the_masked_columns_computed_and_nothing_else_granted() {
        let role = MaskRole::of(&policy());
        let catalog = Catalog {
            relations: vec![
                relation(1, "customer", RelationKind::Table, &["customer_id", "EMAIL", "phone"]),
                relation(2, "genre", RelationKind::Table, &["genre_id", "name"]),
            ],
            dependencies: vec![],
            schemas: vec!["public".to_owned(), "empty".to_owned()],
        };
        let plan = plan(&role, &policy(), &catalog);
        let masked = role.masked_schema("public");
        let text = plan.statements.join(";\n");
        assert!(text.contains(&format!("CREATE SCHEMA \"{masked}\"")), "{text}");
        assert!(text.contains(&format!("CREATE SCHEMA \"{}\"", role.masked_schema("empty"))));
        assert!(text.contains(&format!(
            "CREATE VIEW \"{masked}\".\"genre\" AS SELECT source.\"genre_id\", source.\"name\" FROM \"public\".\"genre\" AS source"
        )), "{text}");
        assert!(text.contains("AS \"EMAIL\""), "{text}");
        assert!(text.contains("AS \"phone\""), "{text}");
        assert!(!text.contains("GRANT SELECT ON \"public\""), "{text}");
        assert_eq!(plan.schemas["public"], masked);
        assert!(plan.hidden.is_empty());
    }

    #[test]
    fn a_materialized_view_of_a_masked_column_and_a_view_calling_own_functions_are_hidden() {
        let catalog = Catalog {
            relations: vec![
                relation(1, "customer", RelationKind::Table, &["customer_id", "email"]),
                relation(2, "contacts", RelationKind::View, &["customer_id", "contact"]),
                relation(3, "snapshot", RelationKind::MaterializedView, &["contact"]),
                relation(4, "ids", RelationKind::MaterializedView, &["customer_id"]),
                relation(5, "computed", RelationKind::View, &["x"]),
            ],
            dependencies: vec![
                Dependency::Column { view: 2, relation: 1, column: 2 },
                Dependency::Column { view: 3, relation: 2, column: 2 },
                Dependency::Column { view: 4, relation: 1, column: 1 },
                Dependency::UnsafeFunction { view: 5 },
            ],
            schemas: vec!["public".to_owned()],
        };
        let hidden = hidden_relations(&policy(), &catalog);
        let names: Vec<&str> = hidden.keys().map(|(_, name)| name.as_str()).collect();
        assert_eq!(names, ["computed", "snapshot"]);
    }

    #[test]
    fn a_view_reads_its_own_definition_over_the_masked_relations() {
        let role = MaskRole::of(&policy());
        let mut view = relation(2, "emails", RelationKind::View, &["email"]);
        view.definition = Some(" SELECT c.email\n   FROM public.customer c;".to_owned());
        let catalog = Catalog {
            relations: vec![relation(1, "customer", RelationKind::Table, &["email"]), view],
            dependencies: vec![Dependency::Column { view: 2, relation: 1, column: 1 }],
            schemas: vec!["public".to_owned()],
        };
        let plan = plan(&role, &policy(), &catalog);
        assert_eq!(plan.views.len(), 1);
        let masked = role.masked_schema("public");
        assert!(
            plan.views[0].1.contains(&format!("FROM \"{masked}\".customer c) AS source")),
            "{}",
            plan.views[0].1
        );
    }
}
