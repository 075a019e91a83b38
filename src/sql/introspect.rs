//! Reads the structure of a PostgreSQL database (schemas, tables, views, keys, indexes, enums, domains, sequences) from `pg_catalog` into plain data.
//!
//! [`introspect`] runs a fixed set of nine catalog queries, one per kind of object, inside one
//! read-only repeatable-read transaction, whatever the number of tables; the rows are then put
//! together in Rust by relation oid. System schemas and the `orca` schema (the gateway's own
//! state) are left out, and so are objects that belong to an extension.
//!
//! # Design notes
//!
//! `introspect.rs` reads the catalog in a constant 9 queries; `records.rs` maps JSON records onto a
//! table and inserts them (multi-row `INSERT`, or `COPY` into a staging table for large uniform
//! batches).

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use sqlx::PgPool;

/// The structure of one database as seen by the connecting user.
///
/// Every list is ordered by schema, then name (byte order, as PostgreSQL's `name` type sorts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DatabaseSchema {
    /// The database name, from `current_database()`.
    pub(crate) database: String,
    /// The user schemas, including empty ones.
    pub(crate) schemas: Vec<Schema>,
    /// Tables, views, materialized views, partitioned tables, partitions and foreign tables.
    pub(crate) relations: Vec<Relation>,
    /// Enum types.
    pub(crate) enums: Vec<EnumType>,
    /// Domains.
    pub(crate) domains: Vec<Domain>,
    /// Sequences, apart from the ones behind identity columns.
    pub(crate) sequences: Vec<Sequence>,
}

/// A schema (namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Schema {
    /// The schema name.
    pub(crate) name: String,
    /// The comment set with `COMMENT ON SCHEMA`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
}

/// What a relation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RelationKind {
    /// An ordinary table, partitions included (`relkind` `r`).
    Table,
    /// A view (`v`).
    View,
    /// A materialized view (`m`).
    MaterializedView,
    /// A partitioned table, the parent of partitions (`p`).
    PartitionedTable,
    /// A foreign table (`f`).
    ForeignTable,
}

impl RelationKind {
    /// Maps a `pg_class.relkind` letter to a kind, or `None` for kinds that are not introspected.
    fn from_relkind(relkind: &str) -> Option<Self> {
        match relkind {
            "r" => Some(Self::Table),
            "v" => Some(Self::View),
            "m" => Some(Self::MaterializedView),
            "p" => Some(Self::PartitionedTable),
            "f" => Some(Self::ForeignTable),
            _ => None,
        }
    }

    /// Returns the words for this kind in prose and in DDL, such as `materialized view`.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::View => "view",
            Self::MaterializedView => "materialized view",
            Self::PartitionedTable => "partitioned table",
            Self::ForeignTable => "foreign table",
        }
    }

    /// Tells whether the relation stores rows and has keys (not a view).
    pub(crate) fn is_table_like(self) -> bool {
        matches!(self, Self::Table | Self::PartitionedTable | Self::ForeignTable)
    }
}

/// A schema-qualified name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub(crate) struct QualifiedName {
    /// The schema name.
    pub(crate) schema: String,
    /// The object name.
    pub(crate) name: String,
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}.{}", self.schema, self.name)
    }
}

/// A table, view, materialized view, partitioned table, partition or foreign table.
///
/// Optional and list fields are left out of the serialized form when empty, except
/// `row_estimate`, which is `null` when PostgreSQL has no estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Relation {
    /// The schema name.
    pub(crate) schema: String,
    /// The relation name.
    pub(crate) name: String,
    /// What the relation is.
    pub(crate) kind: RelationKind,
    /// The comment set with `COMMENT ON`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
    /// The planner's row estimate (`reltuples`), `None` when the table was never analyzed.
    pub(crate) row_estimate: Option<i64>,
    /// For a partition, the table it is a partition of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) partition_of: Option<QualifiedName>,
    /// For a partition, its bound, such as `FOR VALUES FROM (..) TO (..)` or `DEFAULT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) partition_bound: Option<String>,
    /// For a partitioned table, its partition key, such as `RANGE (payment_date)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) partition_key: Option<String>,
    /// The columns in ordinal order.
    pub(crate) columns: Vec<Column>,
    /// The primary key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) primary_key: Option<PrimaryKey>,
    /// Unique constraints, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unique_constraints: Vec<UniqueConstraint>,
    /// Foreign keys declared on this relation, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) foreign_keys: Vec<ForeignKey>,
    /// Check constraints, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) check_constraints: Vec<CheckConstraint>,
    /// Exclusion constraints, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) exclusion_constraints: Vec<CheckConstraint>,
    /// Indexes, including the ones behind primary keys and unique constraints, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) indexes: Vec<Index>,
    /// For a view or materialized view, its query as `pg_get_viewdef` prints it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) view_definition: Option<String>,
    /// For a view or materialized view, the introspected relations its query reads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) depends_on: Vec<QualifiedName>,
}

impl Relation {
    /// A relation with no columns, constraints or statistics, for tests.
    #[cfg(test)]
    pub(crate) fn empty(schema: &str, name: &str, kind: RelationKind) -> Relation {
        Relation {
            schema: schema.to_owned(),
            name: name.to_owned(),
            kind,
            comment: None,
            row_estimate: None,
            partition_of: None,
            partition_bound: None,
            partition_key: None,
            columns: Vec::new(),
            primary_key: None,
            unique_constraints: Vec::new(),
            foreign_keys: Vec::new(),
            check_constraints: Vec::new(),
            exclusion_constraints: Vec::new(),
            indexes: Vec::new(),
            view_definition: None,
            depends_on: Vec::new(),
        }
    }

    /// Returns the schema-qualified name.
    pub(crate) fn qualified_name(&self) -> QualifiedName {
        QualifiedName { schema: self.schema.clone(), name: self.name.clone() }
    }
}

/// A column of a relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Column {
    /// The column name.
    pub(crate) name: String,
    /// The type as `format_type(atttypid, atttypmod)` prints it, such as `character varying(160)`.
    #[serde(rename = "type")]
    pub(crate) data_type: String,
    /// Whether the column accepts nulls.
    pub(crate) nullable: bool,
    /// The default expression, such as `nextval('film_film_id_seq'::regclass)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) default: Option<String>,
    /// The comment set with `COMMENT ON COLUMN`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
    /// How the column is an identity column, if it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) identity: Option<Identity>,
    /// For a stored generated column, the generation expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) generated: Option<String>,
}

/// How an identity column takes its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Identity {
    /// `GENERATED ALWAYS AS IDENTITY`.
    Always,
    /// `GENERATED BY DEFAULT AS IDENTITY`.
    ByDefault,
}

/// A primary key constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PrimaryKey {
    /// The constraint name.
    pub(crate) name: String,
    /// The key columns in key order.
    pub(crate) columns: Vec<String>,
    /// Whether the constraint comes from a parent table (a partition's copy of its parent's key).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) inherited: bool,
}

/// A unique constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct UniqueConstraint {
    /// The constraint name.
    pub(crate) name: String,
    /// The key columns in key order.
    pub(crate) columns: Vec<String>,
    /// Whether the constraint comes from a parent table.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) inherited: bool,
}

/// A foreign key constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ForeignKey {
    /// The constraint name.
    pub(crate) name: String,
    /// The referencing columns, in key order.
    pub(crate) columns: Vec<String>,
    /// The schema of the referenced table.
    pub(crate) referenced_schema: String,
    /// The referenced table.
    pub(crate) referenced_table: String,
    /// The referenced columns, matching `columns` one for one.
    pub(crate) referenced_columns: Vec<String>,
    /// What happens to referencing rows when the referenced row is deleted.
    pub(crate) on_delete: ForeignKeyAction,
    /// What happens to referencing rows when the referenced key is updated.
    pub(crate) on_update: ForeignKeyAction,
    /// Whether the constraint comes from a parent table.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) inherited: bool,
}

/// A referential action of a foreign key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ForeignKeyAction {
    /// `NO ACTION`, the default.
    NoAction,
    /// `RESTRICT`.
    Restrict,
    /// `CASCADE`.
    Cascade,
    /// `SET NULL`.
    SetNull,
    /// `SET DEFAULT`.
    SetDefault,
}

impl ForeignKeyAction {
    /// Maps a `pg_constraint.confdeltype` or `confupdtype` letter to an action.
    fn from_letter(letter: &str) -> Self {
        match letter {
            "r" => Self::Restrict,
            "c" => Self::Cascade,
            "n" => Self::SetNull,
            "d" => Self::SetDefault,
            _ => Self::NoAction,
        }
    }

    /// Returns the SQL words for the action, such as `SET NULL`.
    pub(crate) fn sql(self) -> &'static str {
        match self {
            Self::NoAction => "NO ACTION",
            Self::Restrict => "RESTRICT",
            Self::Cascade => "CASCADE",
            Self::SetNull => "SET NULL",
            Self::SetDefault => "SET DEFAULT",
        }
    }
}

/// A check or exclusion constraint, kept as PostgreSQL prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CheckConstraint {
    /// The constraint name.
    pub(crate) name: String,
    /// The definition from `pg_get_constraintdef`, such as `CHECK ((VALUE >= 1901))`.
    pub(crate) definition: String,
    /// Whether the constraint comes from a parent table.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) inherited: bool,
}

/// An index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Index {
    /// The index name.
    pub(crate) name: String,
    /// The full `CREATE INDEX` statement from `pg_get_indexdef`.
    pub(crate) definition: String,
    /// Whether the index is unique.
    pub(crate) unique: bool,
    /// Whether the index backs the primary key.
    pub(crate) primary: bool,
    /// The primary key, unique or exclusion constraint the index backs, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) constraint: Option<String>,
    /// Whether the index is a partition's part of an index on its parent.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) inherited: bool,
}

/// An enum type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct EnumType {
    /// The schema name.
    pub(crate) schema: String,
    /// The type name.
    pub(crate) name: String,
    /// The labels in sort order.
    pub(crate) labels: Vec<String>,
    /// The comment set with `COMMENT ON TYPE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
}

/// A domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Domain {
    /// The schema name.
    pub(crate) schema: String,
    /// The domain name.
    pub(crate) name: String,
    /// The underlying type as `format_type` prints it.
    pub(crate) base_type: String,
    /// Whether the domain rejects nulls.
    pub(crate) not_null: bool,
    /// The default expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) default: Option<String>,
    /// The check constraints, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) check_constraints: Vec<CheckConstraint>,
    /// The comment set with `COMMENT ON DOMAIN`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
}

/// A sequence that is not behind an identity column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Sequence {
    /// The schema name.
    pub(crate) schema: String,
    /// The sequence name.
    pub(crate) name: String,
    /// The value type, such as `bigint`.
    pub(crate) data_type: String,
    /// The start value.
    pub(crate) start: i64,
    /// The increment.
    pub(crate) increment: i64,
    /// The minimum value.
    pub(crate) min_value: i64,
    /// The maximum value.
    pub(crate) max_value: i64,
    /// How many values are cached.
    pub(crate) cache: i64,
    /// Whether the sequence wraps around.
    pub(crate) cycle: bool,
    /// The column that owns the sequence (`OWNED BY`, as for `serial` columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) owned_by: Option<SequenceOwner>,
}

/// The column that owns a sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SequenceOwner {
    /// The schema of the owning table.
    pub(crate) schema: String,
    /// The owning table.
    pub(crate) table: String,
    /// The owning column.
    pub(crate) column: String,
}

/// Lets serde leave `false` flags out.
fn is_false(flag: &bool) -> bool {
    !*flag
}

/// Why a relation name did not resolve to exactly one relation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LookupError {
    /// The name is empty or not a valid `table` or `schema.table` name.
    #[error("invalid relation name {name:?}: {reason}")]
    Invalid {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No relation has the name; `closest` holds the most similar names, best first.
    #[error("no table or view named {name:?}{}", closest_hint(closest))]
    NotFound {
        /// The name as given.
        name: String,
        /// Similar qualified names, best first.
        closest: Vec<String>,
    },
    /// The name matches relations in several schemas, or several relations that differ only in case.
    #[error("relation name {name:?} is ambiguous: it matches {}", candidates.join(", "))]
    Ambiguous {
        /// The name as given.
        name: String,
        /// The matching qualified names.
        candidates: Vec<String>,
    },
}

/// Formats the "did you mean" tail of a not-found message.
fn closest_hint(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", closest.join(", "))
    }
}

/// The most names a not-found error suggests.
const MAX_SUGGESTIONS: usize = 5;

/// One part of a relation name as a user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamePart {
    /// The text, without quotes and with doubled quotes undone.
    text: String,
    /// Whether the part was double-quoted, which makes it match case-sensitively only.
    quoted: bool,
}

impl NamePart {
    /// Tells whether `actual` matches this part exactly.
    fn matches_exactly(&self, actual: &str) -> bool {
        self.text == actual
    }

    /// Tells whether `actual` matches this part, ignoring case unless the part was quoted.
    fn matches_loosely(&self, actual: &str) -> bool {
        if self.quoted {
            self.text == actual
        } else {
            self.text.to_lowercase() == actual.to_lowercase()
        }
    }
}

/// Splits `table` or `schema.table` (each part optionally double-quoted) into its parts.
fn parse_relation_name(name: &str) -> Result<(Option<NamePart>, NamePart), &'static str> {
    let mut parts = Vec::new();
    let mut chars = name.trim().chars().peekable();
    loop {
        while chars.next_if(|character| character.is_whitespace()).is_some() {}
        let mut text = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        text.push('"');
                    }
                    Some('"') => break,
                    Some(character) => text.push(character),
                    None => return Err("unterminated double quote"),
                }
            }
            while chars.next_if(|character| character.is_whitespace()).is_some() {}
        } else {
            while let Some(&character) = chars.peek() {
                if character == '.' {
                    break;
                }
                if character == '"' {
                    return Err("double quote inside an unquoted name");
                }
                text.push(character);
                chars.next();
            }
            text = text.trim().to_owned();
        }
        if text.is_empty() {
            return Err("empty name part");
        }
        parts.push(NamePart { text, quoted });
        match chars.next() {
            None => break,
            Some('.') => {}
            Some(_) => return Err("unexpected text after a quoted name"),
        }
    }
    let mut parts = parts.into_iter();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(table), None, None) => Ok((None, table)),
        (Some(schema), Some(table), None) => Ok((Some(schema), table)),
        _ => Err("expected table or schema.table"),
    }
}

/// Counts the single-character edits between two strings (Levenshtein distance).
pub(crate) fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut previous: Vec<usize> = (0..=right.len()).collect();
    let mut current = vec![0; right.len() + 1];
    for (i, left_char) in left.chars().enumerate() {
        current[0] = i + 1;
        for (j, right_char) in right.iter().enumerate() {
            let substitution = previous[j] + usize::from(left_char != *right_char);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[right.len()]
}

impl DatabaseSchema {
    /// Counts the tables: ordinary tables, partitioned tables, partitions and foreign tables, not views.
    pub(crate) fn table_count(&self) -> usize {
        self.relations.iter().filter(|relation| relation.kind.is_table_like()).count()
    }

    /// Finds a relation by a user-given name: `table` or `schema.table`, each part optionally double-quoted.
    ///
    /// An exact (case-sensitive) match wins; failing that, unquoted parts match ignoring case.
    /// Without a schema, a name found in several schemas is ambiguous.
    ///
    /// # Errors
    ///
    /// [`LookupError::Invalid`] when the name cannot be parsed, [`LookupError::Ambiguous`] with the
    /// candidates when several relations match at the best level, and [`LookupError::NotFound`] with
    /// the closest names by edit distance when none does.
    pub(crate) fn find_relation(&self, name: &str) -> Result<&Relation, LookupError> {
        let (schema, table) = parse_relation_name(name)
            .map_err(|reason| LookupError::Invalid { name: name.to_owned(), reason })?;
        let matches_schema = |relation: &Relation, loose: bool| match &schema {
            None => true,
            Some(part) if loose => part.matches_loosely(&relation.schema),
            Some(part) => part.matches_exactly(&relation.schema),
        };
        for loose in [false, true] {
            let found: Vec<&Relation> = self
                .relations
                .iter()
                .filter(|relation| {
                    matches_schema(relation, loose)
                        && if loose {
                            table.matches_loosely(&relation.name)
                        } else {
                            table.matches_exactly(&relation.name)
                        }
                })
                .collect();
            match found.as_slice() {
                [] => {}
                [relation] => return Ok(relation),
                several => {
                    return Err(LookupError::Ambiguous {
                        name: name.to_owned(),
                        candidates: several
                            .iter()
                            .map(|relation| relation.qualified_name().to_string())
                            .collect(),
                    });
                }
            }
        }
        Err(LookupError::NotFound {
            name: name.to_owned(),
            closest: self.closest_names(schema.as_ref(), &table),
        })
    }

    /// Lists the qualified names closest to a name that matched nothing, best first.
    ///
    /// Names are compared ignoring case. With a schema, a relation of the right name in another
    /// schema counts as one edit away, so `sales.artist` suggests `public.artist`.
    fn closest_names(&self, schema: Option<&NamePart>, table: &NamePart) -> Vec<String> {
        let wanted_table = table.text.to_lowercase();
        let wanted_schema = schema.map(|schema| schema.text.to_lowercase());
        let limit = (wanted_table.chars().count() / 3).max(2);
        let mut scored: Vec<(usize, String)> = self
            .relations
            .iter()
            .filter_map(|relation| {
                let table_distance = edit_distance(&wanted_table, &relation.name.to_lowercase());
                let distance = match &wanted_schema {
                    None => table_distance,
                    Some(wanted_schema) => {
                        let schema_distance =
                            edit_distance(wanted_schema, &relation.schema.to_lowercase());
                        table_distance + schema_distance.min(1)
                    }
                };
                (distance <= limit).then(|| (distance, relation.qualified_name().to_string()))
            })
            .collect();
        scored.sort();
        scored.into_iter().take(MAX_SUGGESTIONS).map(|(_, name)| name).collect()
    }
}

/// The schemas that introspection skips, as a condition on `n.nspname`.
///
/// PostgreSQL reserves the `pg_` prefix for system schemas (`pg_catalog`, `pg_toast`, `pg_temp_N`,
/// `pg_toast_temp_N`), so one pattern covers them; orca's state is `orca`, and what masked
/// callers read lives under `orca_mask` (`privacy::setup`).
macro_rules! user_schema_filter {
    () => {
        "n.nspname NOT LIKE 'pg\\_%' AND n.nspname NOT LIKE 'orca\\_mask%' \
         AND n.nspname NOT IN ('information_schema', 'orca')"
    };
}

/// Starts the read-only, repeatable-read transaction that gives all catalog queries one snapshot.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";

/// Catalog query 1: the database name.
const DATABASE_QUERY: &str = "SELECT current_database()::text AS name";

/// Catalog query 2: the user schemas with their comments.
const SCHEMAS_QUERY: &str = concat!(
    "SELECT n.nspname::text AS name, d.description AS comment
     FROM pg_catalog.pg_namespace n
     LEFT JOIN pg_catalog.pg_description d
       ON d.objoid = n.oid AND d.classoid = 'pg_catalog.pg_namespace'::regclass AND d.objsubid = 0
     WHERE ",
    user_schema_filter!(),
    " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
                      WHERE e.classid = 'pg_catalog.pg_namespace'::regclass AND e.objid = n.oid AND e.deptype = 'e')
     ORDER BY n.nspname"
);

/// Catalog query 3: the relations with comment, estimate, partition parent, view text and view dependencies.
const RELATIONS_QUERY: &str = concat!(
    "SELECT c.oid::int8 AS oid, n.nspname::text AS schema, c.relname::text AS name, c.relkind::text AS kind,
            d.description AS comment,
            CASE WHEN c.reltuples < 0 THEN NULL ELSE c.reltuples::int8 END AS row_estimate,
            pn.nspname::text AS parent_schema, pc.relname::text AS parent_name,
            CASE WHEN c.relispartition THEN pg_catalog.pg_get_expr(c.relpartbound, c.oid) END AS partition_bound,
            CASE WHEN c.relkind = 'p' THEN pg_catalog.pg_get_partkeydef(c.oid) END AS partition_key,
            CASE WHEN c.relkind IN ('v', 'm') THEN pg_catalog.pg_get_viewdef(c.oid) END AS view_definition,
            CASE WHEN c.relkind IN ('v', 'm') THEN ARRAY(
              SELECT DISTINCT dep.refobjid::int8
              FROM pg_catalog.pg_rewrite r
              JOIN pg_catalog.pg_depend dep
                ON dep.classid = 'pg_catalog.pg_rewrite'::regclass AND dep.objid = r.oid
               AND dep.refclassid = 'pg_catalog.pg_class'::regclass
              WHERE r.ev_class = c.oid AND dep.refobjid <> c.oid
            ) ELSE '{}'::int8[] END AS depends_on
     FROM pg_catalog.pg_class c
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_description d
       ON d.objoid = c.oid AND d.classoid = 'pg_catalog.pg_class'::regclass AND d.objsubid = 0
     LEFT JOIN pg_catalog.pg_inherits i ON c.relispartition AND i.inhrelid = c.oid
     LEFT JOIN pg_catalog.pg_class pc ON pc.oid = i.inhparent
     LEFT JOIN pg_catalog.pg_namespace pn ON pn.oid = pc.relnamespace
     WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND ",
    user_schema_filter!(),
    " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
                      WHERE e.classid = 'pg_catalog.pg_class'::regclass AND e.objid = c.oid AND e.deptype = 'e')
     ORDER BY n.nspname, c.relname"
);

/// Catalog query 4: the columns of all relations, in ordinal order.
const COLUMNS_QUERY: &str = concat!(
    "SELECT a.attrelid::int8 AS relation_oid, a.attname::text AS name,
            pg_catalog.format_type(a.atttypid, a.atttypmod) AS data_type,
            NOT a.attnotnull AS nullable,
            pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) AS expression,
            a.attidentity::text AS identity, a.attgenerated::text AS generated,
            d.description AS comment
     FROM pg_catalog.pg_attribute a
     JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
     LEFT JOIN pg_catalog.pg_description d
       ON d.objoid = a.attrelid AND d.classoid = 'pg_catalog.pg_class'::regclass AND d.objsubid = a.attnum
     WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'm', 'p', 'f') AND ",
    user_schema_filter!(),
    " ORDER BY a.attrelid, a.attnum"
);

/// Catalog query 5: primary key, unique, foreign key, check and exclusion constraints of relations.
const CONSTRAINTS_QUERY: &str = concat!(
    "SELECT con.conrelid::int8 AS relation_oid, con.conname::text AS name, con.contype::text AS kind,
            ARRAY(SELECT a.attname::text
                  FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, position)
                  JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
                  ORDER BY k.position) AS columns,
            fn.nspname::text AS referenced_schema, fc.relname::text AS referenced_table,
            ARRAY(SELECT a.attname::text
                  FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, position)
                  JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
                  ORDER BY k.position) AS referenced_columns,
            con.confdeltype::text AS on_delete, con.confupdtype::text AS on_update,
            CASE WHEN con.contype IN ('c', 'x') THEN pg_catalog.pg_get_constraintdef(con.oid) END AS definition,
            (con.conparentid <> 0 OR NOT con.conislocal) AS inherited
     FROM pg_catalog.pg_constraint con
     JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_class fc ON fc.oid = con.confrelid
     LEFT JOIN pg_catalog.pg_namespace fn ON fn.oid = fc.relnamespace
     WHERE con.contype IN ('p', 'u', 'f', 'c', 'x') AND ",
    user_schema_filter!(),
    " ORDER BY n.nspname, c.relname, con.conname"
);

/// Catalog query 6: the indexes of relations, with the constraint each one backs.
const INDEXES_QUERY: &str = concat!(
    "SELECT i.indrelid::int8 AS relation_oid, ic.relname::text AS name,
            pg_catalog.pg_get_indexdef(i.indexrelid) AS definition,
            i.indisunique AS is_unique, i.indisprimary AS is_primary,
            con.conname::text AS constraint_name, ic.relispartition AS inherited
     FROM pg_catalog.pg_index i
     JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
     JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_constraint con
       ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid AND con.contype IN ('p', 'u', 'x')
     WHERE c.relkind IN ('r', 'm', 'p', 'f') AND ",
    user_schema_filter!(),
    " ORDER BY n.nspname, c.relname, ic.relname"
);

/// Catalog query 7: enum types with their labels in sort order.
const ENUMS_QUERY: &str = concat!(
    "SELECT n.nspname::text AS schema, t.typname::text AS name,
            ARRAY(SELECT e.enumlabel::text FROM pg_catalog.pg_enum e
                  WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder) AS labels,
            d.description AS comment
     FROM pg_catalog.pg_type t
     JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
     LEFT JOIN pg_catalog.pg_description d
       ON d.objoid = t.oid AND d.classoid = 'pg_catalog.pg_type'::regclass AND d.objsubid = 0
     WHERE t.typtype = 'e' AND ",
    user_schema_filter!(),
    " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
                      WHERE e.classid = 'pg_catalog.pg_type'::regclass AND e.objid = t.oid AND e.deptype = 'e')
     ORDER BY n.nspname, t.typname"
);

/// Catalog query 8: domains with their base type, default and check constraints.
const DOMAINS_QUERY: &str = concat!(
    "SELECT n.nspname::text AS schema, t.typname::text AS name,
            pg_catalog.format_type(t.typbasetype, t.typtypmod) AS base_type,
            t.typnotnull AS not_null,
            pg_catalog.pg_get_expr(t.typdefaultbin, 0) AS default_expression,
            ARRAY(SELECT con.conname::text FROM pg_catalog.pg_constraint con
                  WHERE con.contypid = t.oid AND con.contype = 'c' ORDER BY con.conname) AS check_names,
            ARRAY(SELECT pg_catalog.pg_get_constraintdef(con.oid) FROM pg_catalog.pg_constraint con
                  WHERE con.contypid = t.oid AND con.contype = 'c' ORDER BY con.conname) AS check_definitions,
            d.description AS comment
     FROM pg_catalog.pg_type t
     JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
     LEFT JOIN pg_catalog.pg_description d
       ON d.objoid = t.oid AND d.classoid = 'pg_catalog.pg_type'::regclass AND d.objsubid = 0
     WHERE t.typtype = 'd' AND ",
    user_schema_filter!(),
    " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
                      WHERE e.classid = 'pg_catalog.pg_type'::regclass AND e.objid = t.oid AND e.deptype = 'e')
     ORDER BY n.nspname, t.typname"
);

/// Catalog query 9: sequences that are not behind identity columns, with their owning column.
const SEQUENCES_QUERY: &str = concat!(
    "SELECT n.nspname::text AS schema, c.relname::text AS name,
            pg_catalog.format_type(s.seqtypid, NULL) AS data_type,
            s.seqstart AS start, s.seqincrement AS increment, s.seqmin AS min_value, s.seqmax AS max_value,
            s.seqcache AS cache, s.seqcycle AS cycle,
            own.owner_schema, own.owner_table, own.owner_column
     FROM pg_catalog.pg_sequence s
     JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN LATERAL (
       SELECT tn.nspname::text AS owner_schema, tc.relname::text AS owner_table, ta.attname::text AS owner_column
       FROM pg_catalog.pg_depend dep
       JOIN pg_catalog.pg_class tc ON tc.oid = dep.refobjid
       JOIN pg_catalog.pg_namespace tn ON tn.oid = tc.relnamespace
       JOIN pg_catalog.pg_attribute ta ON ta.attrelid = dep.refobjid AND ta.attnum = dep.refobjsubid
       WHERE dep.classid = 'pg_catalog.pg_class'::regclass AND dep.objid = c.oid
         AND dep.refclassid = 'pg_catalog.pg_class'::regclass AND dep.deptype = 'a'
       LIMIT 1
     ) own ON true
     WHERE ",
    user_schema_filter!(),
    " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
                      WHERE e.classid = 'pg_catalog.pg_class'::regclass AND e.objid = c.oid
                        AND e.deptype IN ('i', 'e'))
     ORDER BY n.nspname, c.relname"
);

/// The catalog queries [`introspect`] runs, once each and in this order, whatever the database holds.
pub(crate) const CATALOG_QUERIES: [&str; 9] = [
    DATABASE_QUERY,
    SCHEMAS_QUERY,
    RELATIONS_QUERY,
    COLUMNS_QUERY,
    CONSTRAINTS_QUERY,
    INDEXES_QUERY,
    ENUMS_QUERY,
    DOMAINS_QUERY,
    SEQUENCES_QUERY,
];

/// A row of [`DATABASE_QUERY`].
#[derive(sqlx::FromRow)]
struct DatabaseRow {
    name: String,
}

/// A row of [`SCHEMAS_QUERY`].
#[derive(sqlx::FromRow)]
struct SchemaRow {
    name: String,
    comment: Option<String>,
}

/// A row of [`RELATIONS_QUERY`].
#[derive(sqlx::FromRow)]
struct RelationRow {
    oid: i64,
    schema: String,
    name: String,
    kind: String,
    comment: Option<String>,
    row_estimate: Option<i64>,
    parent_schema: Option<String>,
    parent_name: Option<String>,
    partition_bound: Option<String>,
    partition_key: Option<String>,
    view_definition: Option<String>,
    depends_on: Vec<i64>,
}

/// A row of [`COLUMNS_QUERY`].
#[derive(sqlx::FromRow)]
struct ColumnRow {
    relation_oid: i64,
    name: String,
    data_type: String,
    nullable: bool,
    expression: Option<String>,
    identity: String,
    generated: String,
    comment: Option<String>,
}

/// A row of [`CONSTRAINTS_QUERY`].
#[derive(sqlx::FromRow)]
struct ConstraintRow {
    relation_oid: i64,
    name: String,
    kind: String,
    columns: Vec<String>,
    referenced_schema: Option<String>,
    referenced_table: Option<String>,
    referenced_columns: Vec<String>,
    on_delete: String,
    on_update: String,
    definition: Option<String>,
    inherited: bool,
}

/// A row of [`INDEXES_QUERY`].
#[derive(sqlx::FromRow)]
struct IndexRow {
    relation_oid: i64,
    name: String,
    definition: String,
    is_unique: bool,
    is_primary: bool,
    constraint_name: Option<String>,
    inherited: bool,
}

/// A row of [`ENUMS_QUERY`].
#[derive(sqlx::FromRow)]
struct EnumRow {
    schema: String,
    name: String,
    labels: Vec<String>,
    comment: Option<String>,
}

/// A row of [`DOMAINS_QUERY`].
#[derive(sqlx::FromRow)]
struct DomainRow {
    schema: String,
    name: String,
    base_type: String,
    not_null: bool,
    default_expression: Option<String>,
    check_names: Vec<String>,
    check_definitions: Vec<String>,
    comment: Option<String>,
}

/// A row of [`SEQUENCES_QUERY`].
#[derive(sqlx::FromRow)]
struct SequenceRow {
    schema: String,
    name: String,
    data_type: String,
    start: i64,
    increment: i64,
    min_value: i64,
    max_value: i64,
    cache: i64,
    cycle: bool,
    owner_schema: Option<String>,
    owner_table: Option<String>,
    owner_column: Option<String>,
}

/// Reads the structure of the database behind `pool`.
///
/// Runs the nine [`CATALOG_QUERIES`] on one connection inside a read-only repeatable-read
/// transaction, so the parts agree with each other even while DDL runs elsewhere.
///
/// # Errors
///
/// Returns the `sqlx` error of the first query that fails, or of acquiring the connection.
pub(crate) async fn introspect(pool: &PgPool) -> Result<DatabaseSchema, sqlx::Error> {
    let mut transaction = pool.begin_with(BEGIN_SNAPSHOT).await?;
    let database: DatabaseRow = sqlx::query_as(DATABASE_QUERY).fetch_one(&mut *transaction).await?;
    let schemas: Vec<SchemaRow> =
        sqlx::query_as(SCHEMAS_QUERY).fetch_all(&mut *transaction).await?;
    let relations: Vec<RelationRow> =
        sqlx::query_as(RELATIONS_QUERY).fetch_all(&mut *transaction).await?;
    let columns: Vec<ColumnRow> =
        sqlx::query_as(COLUMNS_QUERY).fetch_all(&mut *transaction).await?;
    let constraints: Vec<ConstraintRow> =
        sqlx::query_as(CONSTRAINTS_QUERY).fetch_all(&mut *transaction).await?;
    let indexes: Vec<IndexRow> = sqlx::query_as(INDEXES_QUERY).fetch_all(&mut *transaction).await?;
    let enums: Vec<EnumRow> = sqlx::query_as(ENUMS_QUERY).fetch_all(&mut *transaction).await?;
    let domains: Vec<DomainRow> =
        sqlx::query_as(DOMAINS_QUERY).fetch_all(&mut *transaction).await?;
    let sequences: Vec<SequenceRow> =
        sqlx::query_as(SEQUENCES_QUERY).fetch_all(&mut *transaction).await?;
    transaction.commit().await?;

    Ok(DatabaseSchema {
        database: database.name,
        schemas: schemas
            .into_iter()
            .map(|row| Schema { name: row.name, comment: row.comment })
            .collect(),
        relations: assemble_relations(relations, columns, constraints, indexes),
        enums: enums
            .into_iter()
            .map(|row| EnumType {
                schema: row.schema,
                name: row.name,
                labels: row.labels,
                comment: row.comment,
            })
            .collect(),
        domains: domains.into_iter().map(domain_from_row).collect(),
        sequences: sequences.into_iter().map(sequence_from_row).collect(),
    })
}

/// Puts relations together from the rows of the relation, column, constraint and index queries.
///
/// Rows whose relation is not among the relation rows (an extension's table, say) are dropped.
fn assemble_relations(
    relation_rows: Vec<RelationRow>,
    column_rows: Vec<ColumnRow>,
    constraint_rows: Vec<ConstraintRow>,
    index_rows: Vec<IndexRow>,
) -> Vec<Relation> {
    let names_by_oid: HashMap<i64, QualifiedName> = relation_rows
        .iter()
        .map(|row| (row.oid, QualifiedName { schema: row.schema.clone(), name: row.name.clone() }))
        .collect();
    let mut position_by_oid = HashMap::with_capacity(relation_rows.len());
    let mut relations = Vec::with_capacity(relation_rows.len());
    for row in relation_rows {
        let Some(kind) = RelationKind::from_relkind(&row.kind) else { continue };
        let partition_of = match (row.parent_schema, row.parent_name) {
            (Some(schema), Some(name)) => Some(QualifiedName { schema, name }),
            _ => None,
        };
        let mut depends_on: Vec<QualifiedName> =
            row.depends_on.iter().filter_map(|oid| names_by_oid.get(oid).cloned()).collect();
        depends_on.sort();
        position_by_oid.insert(row.oid, relations.len());
        relations.push(Relation {
            schema: row.schema,
            name: row.name,
            kind,
            comment: row.comment,
            row_estimate: row.row_estimate,
            partition_of,
            partition_bound: row.partition_bound,
            partition_key: row.partition_key,
            columns: Vec::new(),
            primary_key: None,
            unique_constraints: Vec::new(),
            foreign_keys: Vec::new(),
            check_constraints: Vec::new(),
            exclusion_constraints: Vec::new(),
            indexes: Vec::new(),
            view_definition: row.view_definition,
            depends_on,
        });
    }

    for row in column_rows {
        let Some(&position) = position_by_oid.get(&row.relation_oid) else { continue };
        let (default, generated) = match row.generated.as_str() {
            "" => (row.expression, None),
            _ => (None, row.expression),
        };
        relations[position].columns.push(Column {
            name: row.name,
            data_type: row.data_type,
            nullable: row.nullable,
            default,
            comment: row.comment,
            identity: match row.identity.as_str() {
                "a" => Some(Identity::Always),
                "d" => Some(Identity::ByDefault),
                _ => None,
            },
            generated,
        });
    }

    for row in constraint_rows {
        let Some(&position) = position_by_oid.get(&row.relation_oid) else { continue };
        let relation = &mut relations[position];
        match row.kind.as_str() {
            "p" => {
                relation.primary_key = Some(PrimaryKey {
                    name: row.name,
                    columns: row.columns,
                    inherited: row.inherited,
                });
            }
            "u" => relation.unique_constraints.push(UniqueConstraint {
                name: row.name,
                columns: row.columns,
                inherited: row.inherited,
            }),
            "f" => {
                let (Some(referenced_schema), Some(referenced_table)) =
                    (row.referenced_schema, row.referenced_table)
                else {
                    continue;
                };
                relation.foreign_keys.push(ForeignKey {
                    name: row.name,
                    columns: row.columns,
                    referenced_schema,
                    referenced_table,
                    referenced_columns: row.referenced_columns,
                    on_delete: ForeignKeyAction::from_letter(&row.on_delete),
                    on_update: ForeignKeyAction::from_letter(&row.on_update),
                    inherited: row.inherited,
                });
            }
            "c" | "x" => {
                let constraint = CheckConstraint {
                    name: row.name,
                    definition: row.definition.unwrap_or_default(),
                    inherited: row.inherited,
                };
                if row.kind == "c" {
                    relation.check_constraints.push(constraint);
                } else {
                    relation.exclusion_constraints.push(constraint);
                }
            }
            _ => {}
        }
    }

    for row in index_rows {
        let Some(&position) = position_by_oid.get(&row.relation_oid) else { continue };
        relations[position].indexes.push(Index {
            name: row.name,
            definition: row.definition,
            unique: row.is_unique,
            primary: row.is_primary,
            constraint: row.constraint_name,
            inherited: row.inherited,
        });
    }
    relations
}

/// Builds a domain from its row, pairing check names with definitions.
fn domain_from_row(row: DomainRow) -> Domain {
    Domain {
        schema: row.schema,
        name: row.name,
        base_type: row.base_type,
        not_null: row.not_null,
        default: row.default_expression,
        check_constraints: row
            .check_names
            .into_iter()
            .zip(row.check_definitions)
            .map(|(name, definition)| CheckConstraint { name, definition, inherited: false })
            .collect(),
        comment: row.comment,
    }
}

/// Builds a sequence from its row.
fn sequence_from_row(row: SequenceRow) -> Sequence {
    let owned_by = match (row.owner_schema, row.owner_table, row.owner_column) {
        (Some(schema), Some(table), Some(column)) => Some(SequenceOwner { schema, table, column }),
        _ => None,
    };
    Sequence {
        schema: row.schema,
        name: row.name,
        data_type: row.data_type,
        start: row.start,
        increment: row.increment,
        min_value: row.min_value,
        max_value: row.max_value,
        cache: row.cache,
        cycle: row.cycle,
        owned_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a table with no columns.
    fn table(schema: &str, name: &str) -> Relation {
        Relation::empty(schema, name, RelationKind::Table)
    }

    /// A database with names that collide across schemas and across case.
    fn sample() -> DatabaseSchema {
        DatabaseSchema {
            database: "sample".to_owned(),
            schemas: Vec::new(),
            relations: vec![
                table("public", "Customer"),
                table("public", "album"),
                table("public", "artist"),
                table("public", "invoice_line"),
                table("public", "mixed"),
                table("public", "MIXED"),
                table("sales", "customer"),
                table("sales", "invoice"),
                table("sales", "album"),
                table("weird", "a.b"),
            ],
            enums: Vec::new(),
            domains: Vec::new(),
            sequences: Vec::new(),
        }
    }

    /// Looks a name up and describes the outcome as text, for compact expectations.
    fn check(name: &str, expect: &str) {
        let actual = match sample().find_relation(name) {
            Ok(relation) => format!("ok {}", relation.qualified_name()),
            Err(LookupError::Invalid { reason, .. }) => format!("invalid: {reason}"),
            Err(LookupError::NotFound { closest, .. }) => {
                format!("not found: {}", closest.join(", "))
            }
            Err(LookupError::Ambiguous { candidates, .. }) => {
                format!("ambiguous: {}", candidates.join(", "))
            }
        };
        assert_eq!(actual, expect, "looking up {name:?}");
    }

    #[test]
    fn relation_names_resolve_as_documented() {
        let cases = [
            ("artist", "ok public.artist"),
            ("ARTIST", "ok public.artist"),
            ("public.artist", "ok public.artist"),
            ("Public.Artist", "ok public.artist"),
            (" public . artist ", "ok public.artist"),
            ("\"public\".\"artist\"", "ok public.artist"),
            ("\"Artist\"", "not found: public.artist"),
            ("Customer", "ok public.Customer"),
            ("\"Customer\"", "ok public.Customer"),
            ("customer", "ok sales.customer"),
            ("CUSTOMER", "ambiguous: public.Customer, sales.customer"),
            ("sales.CUSTOMER", "ok sales.customer"),
            ("public.customer", "ok public.Customer"),
            ("album", "ambiguous: public.album, sales.album"),
            ("sales.album", "ok sales.album"),
            ("mixed", "ok public.mixed"),
            ("Mixed", "ambiguous: public.mixed, public.MIXED"),
            ("\"weird\".\"a.b\"", "ok weird.a.b"),
            ("\"a.b\"", "ok weird.a.b"),
            ("invoiceline", "not found: public.invoice_line"),
            ("invoices", "not found: sales.invoice"),
            ("sales.invoices", "not found: sales.invoice"),
            ("sales.artist", "not found: public.artist"),
            ("sales.albumz", "not found: sales.album, public.album"),
            ("nowhere.customer", "not found: public.Customer, sales.customer"),
            ("zzzzzzzz", "not found: "),
            ("", "invalid: empty name part"),
            ("a.b.c", "invalid: expected table or schema.table"),
            ("public.", "invalid: empty name part"),
            ("\"open", "invalid: unterminated double quote"),
            ("ab\"c\"", "invalid: double quote inside an unquoted name"),
            ("\"a\"x", "invalid: unexpected text after a quoted name"),
            (" \"public\" . \"artist\" ", "ok public.artist"),
            ("\"say \"\"hi\"\"\"", "not found: "),
        ];
        for (name, expect) in cases {
            check(name, expect);
        }
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        let cases = [
            ("", "", 0),
            ("abc", "", 3),
            ("", "abc", 3),
            ("kitten", "sitting", 3),
            ("album", "albums", 1),
        ];
        for (left, right, expect) in cases {
            assert_eq!(edit_distance(left, right), expect, "{left:?} vs {right:?}");
        }
    }

    #[test]
    fn lookup_errors_read_as_sentences() {
        let cases = [
            (
                LookupError::NotFound {
                    name: "albm".to_owned(),
                    closest: vec!["public.album".to_owned()],
                },
                "no table or view named \"albm\"; did you mean public.album?",
            ),
            (
                LookupError::NotFound { name: "x".to_owned(), closest: Vec::new() },
                "no table or view named \"x\"",
            ),
            (
                LookupError::Ambiguous {
                    name: "album".to_owned(),
                    candidates: vec!["public.album".to_owned(), "sales.album".to_owned()],
                },
                "relation name \"album\" is ambiguous: it matches public.album, sales.album",
            ),
        ];
        for (error, expect) in cases {
            assert_eq!(error.to_string(), expect);
        }
    }

    #[test]
    fn table_count_leaves_views_out() {
        let mut schema = sample();
        schema.relations[0].kind = RelationKind::View;
        schema.relations[1].kind = RelationKind::MaterializedView;
        schema.relations[2].kind = RelationKind::PartitionedTable;
        assert_eq!(schema.table_count(), 8);
    }

    #[test]
    fn every_catalog_query_is_a_select() {
        for query in CATALOG_QUERIES {
            assert!(query.starts_with("SELECT "), "{query}");
        }
    }
}
