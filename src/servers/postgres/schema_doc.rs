//! Renders an introspected database schema as Markdown for people, JSON for programs, and SQL DDL that recreates the structure.
//!
//! The DDL covers schemas, enum types, domains, sequences, tables (partitioned ones and their
//! partitions included), keys, checks, foreign keys, indexes, views, materialized views and
//! comments. It does not cover functions, triggers, grants, policies, collations or the data.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use crate::sql::introspect::{
    Column, DatabaseSchema, Domain, EnumType, ForeignKey, ForeignKeyAction, Identity,
    QualifiedName, Relation, RelationKind, Sequence,
};

/// Renders the schema as Markdown: per schema, each table with its columns, keys and indexes,
/// then views, enum types and domains, and with `include_relationships` a list of foreign keys.
///
/// Partitions are listed under their partitioned table rather than repeated in full.
pub(crate) fn markdown(schema: &DatabaseSchema, include_relationships: bool) -> String {
    MarkdownDocument { schema, include_relationships }.to_string()
}

/// Renders the schema as JSON in its serde form, without foreign keys unless `include_relationships`.
pub(crate) fn json(schema: &DatabaseSchema, include_relationships: bool) -> serde_json::Value {
    // Plain structs with string keys always serialize, so the default is never used.
    let mut value = serde_json::to_value(schema).unwrap_or_default();
    if !include_relationships
        && let Some(relations) =
            value.get_mut("relations").and_then(serde_json::Value::as_array_mut)
    {
        for relation in relations {
            if let Some(object) = relation.as_object_mut() {
                object.remove("foreign_keys");
            }
        }
    }
    value
}

/// Renders DDL that recreates the structure in an empty database, foreign keys only with `include_relationships`.
///
/// Statements come in dependency order: schemas, enum types, domains, sequences, tables and
/// partitions, sequence ownership, foreign keys, views and materialized views (those a view reads
/// first), indexes, comments. Foreign tables are named in a comment only, since their server is
/// not introspected.
pub(crate) fn sql(schema: &DatabaseSchema, include_relationships: bool) -> String {
    SqlDocument { schema, include_relationships }.to_string()
}

/// PostgreSQL's reserved key words and the ones reserved except as function or type names
/// (`reserved` and `reserved (can be function or type)` in the key word appendix), sorted.
const RESERVED_WORDS: [&str; 101] = [
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
];

/// Quotes an identifier for SQL when it needs it: when it is not a plain lowercase identifier
/// (`[a-z_][a-z0-9_]*`) or when it is a reserved word. Double quotes inside are doubled.
pub(crate) fn quote_ident(identifier: &str) -> String {
    let mut characters = identifier.chars();
    let plain = characters.next().is_some_and(|first| first.is_ascii_lowercase() || first == '_')
        && characters.all(|rest| rest.is_ascii_lowercase() || rest.is_ascii_digit() || rest == '_')
        && RESERVED_WORDS.binary_search(&identifier).is_err();
    if plain { identifier.to_owned() } else { format!("\"{}\"", identifier.replace('"', "\"\"")) }
}

/// Quotes a string as an SQL literal (standard conforming strings, so only single quotes are doubled).
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Quotes `schema.name`.
fn qualified(schema: &str, name: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(name))
}

/// Quotes a list of column names, comma-separated.
fn column_list(columns: &[String]) -> String {
    columns.iter().map(|column| quote_ident(column)).collect::<Vec<_>>().join(", ")
}

/// Maps each relation's qualified name to the relation.
fn relations_by_name(schema: &DatabaseSchema) -> HashMap<QualifiedName, &Relation> {
    schema.relations.iter().map(|relation| (relation.qualified_name(), relation)).collect()
}

/// Follows `partition_of` up to the topmost partitioned table, stopping at relations not in the map.
fn root_table<'a>(
    relation: &'a Relation,
    by_name: &HashMap<QualifiedName, &'a Relation>,
) -> &'a Relation {
    let mut current = relation;
    let mut steps = 0;
    while let Some(parent) = current.partition_of.as_ref().and_then(|parent| by_name.get(parent)) {
        current = parent;
        steps += 1;
        if steps > by_name.len() {
            break;
        }
    }
    current
}

/// The Markdown rendering, written through `Display`.
struct MarkdownDocument<'a> {
    schema: &'a DatabaseSchema,
    include_relationships: bool,
}

/// Wraps text in a Markdown code span, lengthening the fence when the text holds backticks.
fn code(text: &str) -> String {
    let fence = if text.contains('`') { "``" } else { "`" };
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// Makes text safe for one Markdown table cell: no line breaks, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// Names a relation for prose: bare in `public`, qualified elsewhere.
fn display_name(schema: &str, name: &str) -> String {
    if schema == "public" { name.to_owned() } else { format!("{schema}.{name}") }
}

/// Writes `table.column` or `table.(a, b)` for one side of a relationship.
fn relationship_side(table: &str, columns: &[String]) -> String {
    match columns {
        [column] => format!("{table}.{column}"),
        _ => format!("{table}.({})", columns.join(", ")),
    }
}

/// Writes a count with the singular or plural noun, such as `1 schema` or `3 tables`.
fn counted(count: usize, singular: &str, plural: &str) -> String {
    format!("{count} {}", if count == 1 { singular } else { plural })
}

/// Capitalizes the first letter, for headings such as `Materialized view`.
fn capitalized(words: &str) -> String {
    let mut characters = words.chars();
    match characters.next() {
        Some(first) => first.to_uppercase().chain(characters).collect(),
        None => String::new(),
    }
}

impl MarkdownDocument<'_> {
    /// Writes the heading, comment, columns, keys, indexes and partitions of one relation.
    fn write_relation(
        &self,
        out: &mut fmt::Formatter<'_>,
        relation: &Relation,
        partitions: &[&Relation],
    ) -> fmt::Result {
        let qualified_name = format!("{}.{}", relation.schema, relation.name);
        writeln!(out, "### {} {}", capitalized(relation.kind.words()), code(&qualified_name))?;
        writeln!(out)?;
        if let Some(comment) = &relation.comment {
            writeln!(out, "{comment}")?;
            writeln!(out)?;
        }
        if relation.kind != RelationKind::View {
            match relation.row_estimate {
                Some(rows) => writeln!(out, "Estimated rows: {rows}.")?,
                None => writeln!(out, "Estimated rows: unknown (not analyzed).")?,
            }
            writeln!(out)?;
        }
        if let Some(key) = &relation.partition_key {
            writeln!(out, "Partitioned by {}.", code(key))?;
            writeln!(out)?;
        }
        if let Some(parent) = &relation.partition_of {
            let bound = relation.partition_bound.as_deref().unwrap_or("");
            writeln!(out, "Partition of {} {}.", code(&parent.to_string()), code(bound))?;
            writeln!(out)?;
        }
        self.write_columns(out, relation)?;
        if let Some(primary_key) = &relation.primary_key {
            writeln!(out, "Primary key: {}.", code(&primary_key.columns.join(", ")))?;
        }
        for unique in &relation.unique_constraints {
            writeln!(
                out,
                "Unique: {} ({}).",
                code(&unique.columns.join(", ")),
                code(&unique.name)
            )?;
        }
        for check in relation.check_constraints.iter().chain(&relation.exclusion_constraints) {
            writeln!(out, "Constraint {}: {}.", code(&check.name), code(&check.definition))?;
        }
        if relation.primary_key.is_some()
            || !relation.unique_constraints.is_empty()
            || !relation.check_constraints.is_empty()
            || !relation.exclusion_constraints.is_empty()
        {
            writeln!(out)?;
        }
        if !relation.indexes.is_empty() {
            writeln!(out, "Indexes:")?;
            writeln!(out)?;
            for index in &relation.indexes {
                let method = index
                    .definition
                    .split_once(" USING ")
                    .map_or(index.definition.as_str(), |(_, rest)| rest);
                let mut traits = Vec::new();
                if index.primary {
                    traits.push("primary key");
                } else if index.unique {
                    traits.push("unique");
                }
                let traits = if traits.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", traits.join(", "))
                };
                writeln!(out, "- {}{traits}: {}", code(&index.name), code(method))?;
            }
            writeln!(out)?;
        }
        if !partitions.is_empty() {
            writeln!(out, "Partitions ({}):", partitions.len())?;
            writeln!(out)?;
            for partition in partitions {
                let name = display_name(&partition.schema, &partition.name);
                let bound = partition.partition_bound.as_deref().unwrap_or("");
                writeln!(out, "- {} {}", code(&name), code(bound))?;
            }
            writeln!(out)?;
        }
        if let Some(definition) = &relation.view_definition {
            writeln!(out, "```sql")?;
            writeln!(out, "{}", definition.trim())?;
            writeln!(out, "```")?;
            writeln!(out)?;
        }
        Ok(())
    }

    /// Writes the column table of one relation, with key markers for tables.
    fn write_columns(&self, out: &mut fmt::Formatter<'_>, relation: &Relation) -> fmt::Result {
        let table_like = relation.kind.is_table_like();
        if table_like {
            writeln!(out, "| Column | Type | Nullable | Default | Key | Comment |")?;
            writeln!(out, "|---|---|---|---|---|---|")?;
        } else {
            writeln!(out, "| Column | Type | Comment |")?;
            writeln!(out, "|---|---|---|")?;
        }
        for column in &relation.columns {
            let comment = column.comment.as_deref().map(cell).unwrap_or_default();
            if table_like {
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {comment} |",
                    cell(&column.name),
                    cell(&code(&column.data_type)),
                    if column.nullable { "yes" } else { "no" },
                    cell(&column_default_text(column)),
                    self.key_markers(relation, &column.name),
                )?;
            } else {
                writeln!(
                    out,
                    "| {} | {} | {comment} |",
                    cell(&column.name),
                    cell(&code(&column.data_type))
                )?;
            }
        }
        writeln!(out)
    }

    /// Lists the keys a column takes part in: `PK`, `FK` (with relationships only), `UQ`.
    fn key_markers(&self, relation: &Relation, column: &str) -> String {
        let has = |columns: &[String]| columns.iter().any(|name| name == column);
        let mut markers = Vec::new();
        if relation.primary_key.as_ref().is_some_and(|key| has(&key.columns)) {
            markers.push("PK");
        }
        if self.include_relationships && relation.foreign_keys.iter().any(|key| has(&key.columns)) {
            markers.push("FK");
        }
        if relation.unique_constraints.iter().any(|unique| has(&unique.columns)) {
            markers.push("UQ");
        }
        markers.join(", ")
    }

    /// Writes the relationships section: one line per foreign key, partitions folded into their parent.
    fn write_relationships(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let by_name = relations_by_name(self.schema);
        let mut seen = HashSet::new();
        let mut lines = Vec::new();
        for relation in &self.schema.relations {
            let root = root_table(relation, &by_name);
            for key in &relation.foreign_keys {
                let referenced = QualifiedName {
                    schema: key.referenced_schema.clone(),
                    name: key.referenced_table.clone(),
                };
                let referenced_root =
                    by_name.get(&referenced).map_or(referenced.clone(), |target| {
                        root_table(target, &by_name).qualified_name()
                    });
                let line = relationship_line(root, key, &referenced_root);
                if seen.insert(line.clone()) {
                    lines.push(line);
                }
            }
        }
        writeln!(out, "## Relationships")?;
        writeln!(out)?;
        if lines.is_empty() {
            writeln!(out, "No foreign keys.")?;
        }
        for line in lines {
            writeln!(out, "- {line}")?;
        }
        writeln!(out)
    }
}

/// Formats one foreign key as `album.artist_id -> artist.artist_id`, with non-default actions.
fn relationship_line(from: &Relation, key: &ForeignKey, to: &QualifiedName) -> String {
    let mut line = format!(
        "{} -> {}",
        relationship_side(&display_name(&from.schema, &from.name), &key.columns),
        relationship_side(&display_name(&to.schema, &to.name), &key.referenced_columns),
    );
    let mut actions = Vec::new();
    if key.on_delete != ForeignKeyAction::NoAction {
        actions.push(format!("on delete {}", key.on_delete.sql().to_lowercase()));
    }
    if key.on_update != ForeignKeyAction::NoAction {
        actions.push(format!("on update {}", key.on_update.sql().to_lowercase()));
    }
    if !actions.is_empty() {
        let _ = write!(line, " ({})", actions.join(", "));
    }
    line
}

/// Describes what fills a column when no value is given: its default, identity or generation expression.
fn column_default_text(column: &Column) -> String {
    match (&column.identity, &column.generated, &column.default) {
        (Some(Identity::Always), _, _) => "identity (always)".to_owned(),
        (Some(Identity::ByDefault), _, _) => "identity (by default)".to_owned(),
        (None, Some(expression), _) => format!("generated: {}", code(expression)),
        (None, None, Some(default)) => code(default),
        (None, None, None) => String::new(),
    }
}

impl fmt::Display for MarkdownDocument<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let schema = self.schema;
        let partition_count =
            schema.relations.iter().filter(|relation| relation.partition_of.is_some()).count();
        writeln!(out, "# Database {}", code(&schema.database))?;
        writeln!(out)?;
        writeln!(
            out,
            "{}, {} ({} of them partitions), {}, {}, {}.",
            counted(schema.schemas.len(), "schema", "schemas"),
            counted(schema.table_count(), "table", "tables"),
            partition_count,
            counted(schema.relations.len() - schema.table_count(), "view", "views"),
            counted(schema.enums.len(), "enum type", "enum types"),
            counted(schema.domains.len(), "domain", "domains"),
        )?;
        writeln!(out)?;

        let by_name = relations_by_name(schema);
        let mut partitions: HashMap<QualifiedName, Vec<&Relation>> = HashMap::new();
        for relation in &schema.relations {
            if let Some(parent) = &relation.partition_of
                && by_name.contains_key(parent)
            {
                partitions.entry(parent.clone()).or_default().push(relation);
            }
        }
        for namespace in &schema.schemas {
            writeln!(out, "## Schema {}", code(&namespace.name))?;
            writeln!(out)?;
            if let Some(comment) = &namespace.comment {
                writeln!(out, "{comment}")?;
                writeln!(out)?;
            }
            let in_schema = |relation: &&Relation| relation.schema == namespace.name;
            // Tables first, then views, each by name; partitions appear under their parent.
            for tables_pass in [true, false] {
                for relation in schema.relations.iter().filter(in_schema) {
                    let folded = relation
                        .partition_of
                        .as_ref()
                        .is_some_and(|parent| by_name.contains_key(parent));
                    if relation.kind.is_table_like() != tables_pass || folded {
                        continue;
                    }
                    let own_partitions = partitions
                        .get(&relation.qualified_name())
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    self.write_relation(out, relation, own_partitions)?;
                }
            }
            write_enums(out, schema.enums.iter().filter(|item| item.schema == namespace.name))?;
            write_domains(out, schema.domains.iter().filter(|item| item.schema == namespace.name))?;
        }
        if self.include_relationships {
            self.write_relationships(out)?;
        }
        Ok(())
    }
}

/// Writes the enum types of one schema, if any.
fn write_enums<'a>(
    out: &mut fmt::Formatter<'_>,
    enums: impl Iterator<Item = &'a EnumType>,
) -> fmt::Result {
    let mut enums = enums.peekable();
    if enums.peek().is_none() {
        return Ok(());
    }
    writeln!(out, "### Enum types")?;
    writeln!(out)?;
    for item in enums {
        let labels: Vec<String> = item.labels.iter().map(|label| quote_literal(label)).collect();
        write!(
            out,
            "- {}: {}",
            code(&format!("{}.{}", item.schema, item.name)),
            labels.join(", ")
        )?;
        match &item.comment {
            Some(comment) => writeln!(out, " ({comment})")?,
            None => writeln!(out)?,
        }
    }
    writeln!(out)
}

/// Writes the domains of one schema, if any.
fn write_domains<'a>(
    out: &mut fmt::Formatter<'_>,
    domains: impl Iterator<Item = &'a Domain>,
) -> fmt::Result {
    let mut domains = domains.peekable();
    if domains.peek().is_none() {
        return Ok(());
    }
    writeln!(out, "### Domains")?;
    writeln!(out)?;
    for domain in domains {
        let mut parts = vec![code(&domain.base_type)];
        if domain.not_null {
            parts.push("not null".to_owned());
        }
        if let Some(default) = &domain.default {
            parts.push(format!("default {}", code(default)));
        }
        for check in &domain.check_constraints {
            parts.push(code(&check.definition));
        }
        write!(
            out,
            "- {}: {}",
            code(&format!("{}.{}", domain.schema, domain.name)),
            parts.join(", ")
        )?;
        match &domain.comment {
            Some(comment) => writeln!(out, " ({comment})")?,
            None => writeln!(out)?,
        }
    }
    writeln!(out)
}

/// The DDL rendering, written through `Display`.
struct SqlDocument<'a> {
    schema: &'a DatabaseSchema,
    include_relationships: bool,
}

/// Returns the relations to create as tables, parents before their partitions, otherwise by name.
fn tables_in_creation_order(schema: &DatabaseSchema) -> Vec<&Relation> {
    let by_name = relations_by_name(schema);
    let depth = |relation: &Relation| {
        let mut depth = 0;
        let mut current = relation;
        while let Some(parent) =
            current.partition_of.as_ref().and_then(|parent| by_name.get(parent))
        {
            current = parent;
            depth += 1;
            if depth > by_name.len() {
                break;
            }
        }
        depth
    };
    let mut tables: Vec<(usize, &Relation)> = schema
        .relations
        .iter()
        .filter(|relation| {
            matches!(relation.kind, RelationKind::Table | RelationKind::PartitionedTable)
        })
        .map(|relation| (depth(relation), relation))
        .collect();
    // The sort is stable, so relations keep their (schema, name) order within a depth.
    tables.sort_by_key(|(depth, _)| *depth);
    tables.into_iter().map(|(_, relation)| relation).collect()
}

/// Returns views and materialized views so that each comes after the introspected views it reads.
fn views_in_creation_order(schema: &DatabaseSchema) -> Vec<&Relation> {
    let views: Vec<&Relation> =
        schema.relations.iter().filter(|relation| !relation.kind.is_table_like()).collect();
    let view_names: HashSet<QualifiedName> =
        views.iter().map(|view| view.qualified_name()).collect();
    let mut created: HashSet<QualifiedName> = HashSet::new();
    let mut ordered = Vec::with_capacity(views.len());
    let mut remaining = views;
    while !remaining.is_empty() {
        let (ready, waiting): (Vec<&Relation>, Vec<&Relation>) =
            remaining.into_iter().partition(|view| {
                view.depends_on.iter().all(|name| {
                    !view_names.contains(name)
                        || created.contains(name)
                        || *name == view.qualified_name()
                })
            });
        if ready.is_empty() {
            // A cycle cannot be created in PostgreSQL; keep the rest in name order rather than loop.
            ordered.extend(waiting);
            break;
        }
        created.extend(ready.iter().map(|view| view.qualified_name()));
        ordered.extend(ready);
        remaining = waiting;
    }
    ordered
}

/// Writes one column definition of `CREATE TABLE`.
fn column_definition(column: &Column) -> String {
    let mut definition = format!("{} {}", quote_ident(&column.name), column.data_type);
    match (&column.identity, &column.generated, &column.default) {
        (Some(Identity::Always), _, _) => definition.push_str(" GENERATED ALWAYS AS IDENTITY"),
        (Some(Identity::ByDefault), _, _) => {
            definition.push_str(" GENERATED BY DEFAULT AS IDENTITY")
        }
        (None, Some(expression), _) => {
            let _ = write!(definition, " GENERATED ALWAYS AS ({expression}) STORED");
        }
        (None, None, Some(default)) => {
            let _ = write!(definition, " DEFAULT {default}");
        }
        (None, None, None) => {}
    }
    if !column.nullable {
        definition.push_str(" NOT NULL");
    }
    definition
}

/// Lists the table-level constraints a `CREATE TABLE` declares itself (not inherited ones, not foreign keys).
fn table_constraints(relation: &Relation) -> Vec<String> {
    let mut constraints = Vec::new();
    if let Some(key) = relation.primary_key.as_ref().filter(|key| !key.inherited) {
        constraints.push(format!(
            "CONSTRAINT {} PRIMARY KEY ({})",
            quote_ident(&key.name),
            column_list(&key.columns)
        ));
    }
    for unique in relation.unique_constraints.iter().filter(|unique| !unique.inherited) {
        constraints.push(format!(
            "CONSTRAINT {} UNIQUE ({})",
            quote_ident(&unique.name),
            column_list(&unique.columns)
        ));
    }
    for check in relation.check_constraints.iter().chain(&relation.exclusion_constraints) {
        if !check.inherited {
            constraints.push(format!(
                "CONSTRAINT {} {}",
                quote_ident(&check.name),
                check.definition
            ));
        }
    }
    constraints
}

/// Writes the `CREATE TABLE` statement of a table, partitioned table or partition.
fn write_create_table(out: &mut fmt::Formatter<'_>, relation: &Relation) -> fmt::Result {
    let name = qualified(&relation.schema, &relation.name);
    let constraints = table_constraints(relation);
    if let Some(parent) = &relation.partition_of {
        write!(
            out,
            "CREATE TABLE {name} PARTITION OF {}",
            qualified(&parent.schema, &parent.name)
        )?;
        if !constraints.is_empty() {
            write!(out, " (\n    {}\n)", constraints.join(",\n    "))?;
        }
        write!(out, " {}", relation.partition_bound.as_deref().unwrap_or("DEFAULT"))?;
    } else {
        let lines: Vec<String> =
            relation.columns.iter().map(column_definition).chain(constraints).collect();
        if lines.is_empty() {
            write!(out, "CREATE TABLE {name} ()")?;
        } else {
            write!(out, "CREATE TABLE {name} (\n    {}\n)", lines.join(",\n    "))?;
        }
    }
    if let Some(key) = &relation.partition_key {
        write!(out, " PARTITION BY {key}")?;
    }
    writeln!(out, ";")?;
    writeln!(out)
}

/// Writes `CREATE SEQUENCE` with all its parameters.
fn write_create_sequence(out: &mut fmt::Formatter<'_>, sequence: &Sequence) -> fmt::Result {
    writeln!(
        out,
        "CREATE SEQUENCE {} AS {} START WITH {} INCREMENT BY {} MINVALUE {} MAXVALUE {} CACHE {}{};",
        qualified(&sequence.schema, &sequence.name),
        sequence.data_type,
        sequence.start,
        sequence.increment,
        sequence.min_value,
        sequence.max_value,
        sequence.cache,
        if sequence.cycle { " CYCLE" } else { "" },
    )
}

/// Writes `ALTER TABLE .. ADD CONSTRAINT .. FOREIGN KEY`.
fn write_foreign_key(
    out: &mut fmt::Formatter<'_>,
    relation: &Relation,
    key: &ForeignKey,
) -> fmt::Result {
    write!(
        out,
        "ALTER TABLE {} ADD CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({})",
        qualified(&relation.schema, &relation.name),
        quote_ident(&key.name),
        column_list(&key.columns),
        qualified(&key.referenced_schema, &key.referenced_table),
        column_list(&key.referenced_columns),
    )?;
    if key.on_update != ForeignKeyAction::NoAction {
        write!(out, " ON UPDATE {}", key.on_update.sql())?;
    }
    if key.on_delete != ForeignKeyAction::NoAction {
        write!(out, " ON DELETE {}", key.on_delete.sql())?;
    }
    writeln!(out, ";")
}

/// Returns the word `COMMENT ON` uses for a relation kind.
fn comment_target(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::Table | RelationKind::PartitionedTable => "TABLE",
        RelationKind::View => "VIEW",
        RelationKind::MaterializedView => "MATERIALIZED VIEW",
        RelationKind::ForeignTable => "FOREIGN TABLE",
    }
}

impl SqlDocument<'_> {
    /// Writes every `COMMENT ON` statement.
    fn write_comments(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let schema = self.schema;
        for namespace in &schema.schemas {
            if let Some(comment) = &namespace.comment {
                writeln!(
                    out,
                    "COMMENT ON SCHEMA {} IS {};",
                    quote_ident(&namespace.name),
                    quote_literal(comment)
                )?;
            }
        }
        for item in &schema.enums {
            if let Some(comment) = &item.comment {
                writeln!(
                    out,
                    "COMMENT ON TYPE {} IS {};",
                    qualified(&item.schema, &item.name),
                    quote_literal(comment)
                )?;
            }
        }
        for domain in &schema.domains {
            if let Some(comment) = &domain.comment {
                let name = qualified(&domain.schema, &domain.name);
                writeln!(out, "COMMENT ON DOMAIN {name} IS {};", quote_literal(comment))?;
            }
        }
        for relation in
            schema.relations.iter().filter(|relation| relation.kind != RelationKind::ForeignTable)
        {
            let name = qualified(&relation.schema, &relation.name);
            if let Some(comment) = &relation.comment {
                writeln!(
                    out,
                    "COMMENT ON {} {name} IS {};",
                    comment_target(relation.kind),
                    quote_literal(comment)
                )?;
            }
            for column in &relation.columns {
                if let Some(comment) = &column.comment {
                    let column_name = quote_ident(&column.name);
                    writeln!(
                        out,
                        "COMMENT ON COLUMN {name}.{column_name} IS {};",
                        quote_literal(comment)
                    )?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for SqlDocument<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let schema = self.schema;
        writeln!(out, "-- Structure of database {}.", schema.database)?;
        writeln!(out)?;
        for namespace in &schema.schemas {
            writeln!(out, "CREATE SCHEMA IF NOT EXISTS {};", quote_ident(&namespace.name))?;
        }
        writeln!(out)?;
        for item in &schema.enums {
            let labels: Vec<String> =
                item.labels.iter().map(|label| quote_literal(label)).collect();
            writeln!(
                out,
                "CREATE TYPE {} AS ENUM ({});",
                qualified(&item.schema, &item.name),
                labels.join(", ")
            )?;
        }
        for domain in &schema.domains {
            write!(
                out,
                "CREATE DOMAIN {} AS {}",
                qualified(&domain.schema, &domain.name),
                domain.base_type
            )?;
            if let Some(default) = &domain.default {
                write!(out, " DEFAULT {default}")?;
            }
            if domain.not_null {
                write!(out, " NOT NULL")?;
            }
            for check in &domain.check_constraints {
                write!(out, " CONSTRAINT {} {}", quote_ident(&check.name), check.definition)?;
            }
            writeln!(out, ";")?;
        }
        for sequence in &schema.sequences {
            write_create_sequence(out, sequence)?;
        }
        writeln!(out)?;

        for relation in tables_in_creation_order(schema) {
            write_create_table(out, relation)?;
        }
        for relation in
            schema.relations.iter().filter(|relation| relation.kind == RelationKind::ForeignTable)
        {
            let name = qualified(&relation.schema, &relation.name);
            writeln!(
                out,
                "-- Foreign table {name} is not recreated: its server and options are not introspected."
            )?;
        }
        for sequence in &schema.sequences {
            if let Some(owner) = &sequence.owned_by {
                writeln!(
                    out,
                    "ALTER SEQUENCE {} OWNED BY {}.{};",
                    qualified(&sequence.schema, &sequence.name),
                    qualified(&owner.schema, &owner.table),
                    quote_ident(&owner.column),
                )?;
            }
        }
        writeln!(out)?;

        if self.include_relationships {
            for relation in &schema.relations {
                for key in relation.foreign_keys.iter().filter(|key| !key.inherited) {
                    write_foreign_key(out, relation, key)?;
                }
            }
            writeln!(out)?;
        }

        for view in views_in_creation_order(schema) {
            let name = qualified(&view.schema, &view.name);
            let definition =
                view.view_definition.as_deref().unwrap_or("SELECT").trim().trim_end_matches(';');
            if view.kind == RelationKind::MaterializedView {
                writeln!(out, "CREATE MATERIALIZED VIEW {name} AS\n{definition}\nWITH NO DATA;")?;
            } else {
                writeln!(out, "CREATE VIEW {name} AS\n{definition};")?;
            }
            writeln!(out)?;
        }

        // Indexes behind constraints come with the constraints, and a partition's part of a parent
        // index comes with the parent's index, which without ONLY also indexes every partition.
        for relation in
            schema.relations.iter().filter(|relation| relation.kind != RelationKind::ForeignTable)
        {
            for index in relation
                .indexes
                .iter()
                .filter(|index| index.constraint.is_none() && !index.inherited)
            {
                writeln!(out, "{};", index.definition.replacen(" ON ONLY ", " ON ", 1))?;
            }
        }
        writeln!(out)?;
        self.write_comments(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::introspect::{Column, PrimaryKey, Schema};

    #[test]
    fn identifiers_are_quoted_only_when_needed() {
        let cases = [
            ("album", "album"),
            ("artist_id", "artist_id"),
            ("_private", "_private"),
            ("t2", "t2"),
            ("Album", "\"Album\""),
            ("2fast", "\"2fast\""),
            ("first name", "\"first name\""),
            ("user", "\"user\""),
            ("order", "\"order\""),
            ("table", "\"table\""),
            ("with", "\"with\""),
            ("year", "year"),
            ("name", "name"),
            ("say\"hi", "\"say\"\"hi\""),
            ("bıgınt", "\"bıgınt\""),
            ("a$b", "\"a$b\""),
            ("", "\"\""),
        ];
        for (identifier, expect) in cases {
            assert_eq!(quote_ident(identifier), expect, "quoting {identifier:?}");
        }
    }

    #[test]
    fn reserved_words_are_sorted_for_binary_search() {
        assert!(RESERVED_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn literals_double_single_quotes() {
        let cases = [("plain", "'plain'"), ("it's", "'it''s'"), ("back\\slash", "'back\\slash'")];
        for (text, expect) in cases {
            assert_eq!(quote_literal(text), expect);
        }
    }

    /// A one-table database for rendering checks.
    fn one_table() -> DatabaseSchema {
        let column = |name: &str, data_type: &str, nullable: bool| Column {
            name: name.to_owned(),
            data_type: data_type.to_owned(),
            nullable,
            default: None,
            comment: None,
            identity: None,
            generated: None,
        };
        DatabaseSchema {
            database: "shop".to_owned(),
            schemas: vec![Schema { name: "public".to_owned(), comment: None }],
            relations: vec![Relation {
                schema: "public".to_owned(),
                name: "Order".to_owned(),
                kind: RelationKind::Table,
                comment: Some("Customer's orders | all of them".to_owned()),
                row_estimate: Some(3),
                partition_of: None,
                partition_bound: None,
                partition_key: None,
                columns: vec![column("id", "integer", false), column("note", "text", true)],
                primary_key: Some(PrimaryKey {
                    name: "order_pkey".to_owned(),
                    columns: vec!["id".to_owned()],
                    inherited: false,
                }),
                unique_constraints: Vec::new(),
                foreign_keys: Vec::new(),
                check_constraints: Vec::new(),
                exclusion_constraints: Vec::new(),
                indexes: Vec::new(),
                view_definition: None,
                depends_on: Vec::new(),
            }],
            enums: Vec::new(),
            domains: Vec::new(),
            sequences: Vec::new(),
        }
    }

    #[test]
    fn sql_quotes_names_and_comments() {
        let ddl = sql(&one_table(), true);
        let expected = [
            "CREATE TABLE public.\"Order\" (\n    id integer NOT NULL,\n    note text,\n    CONSTRAINT order_pkey PRIMARY KEY (id)\n);",
            "COMMENT ON TABLE public.\"Order\" IS 'Customer''s orders | all of them';",
        ];
        for fragment in expected {
            assert!(ddl.contains(fragment), "missing {fragment:?} in:\n{ddl}");
        }
    }

    #[test]
    fn markdown_escapes_table_cells() {
        let text = markdown(&one_table(), true);
        let expected = [
            "### Table `public.Order`",
            "| id | `integer` | no |  | PK |  |",
            "| note | `text` | yes |  |  |  |",
            "Estimated rows: 3.",
        ];
        for fragment in expected {
            assert!(text.contains(fragment), "missing {fragment:?} in:\n{text}");
        }
    }
}
