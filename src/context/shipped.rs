//! Tests of the context file orca ships (`context/supabase-sql-context.md`): it parses, every
//! section has entries, and every SQL example parses with PostgreSQL's grammar and names only
//! tables and columns that the bundled Chinook database really has.

use std::collections::{BTreeMap, BTreeSet};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use serde_json::Value;

use super::parse::{MAX_ENTRY_TOKENS, estimate_tokens};
use super::select::model_notes;
use super::syntax::{Section, markdown_options};
use super::{ContextDoc, parse, replace_schema_overview, select};

/// The shipped context file.
const SHIPPED: &str = include_str!("../../context/supabase-sql-context.md");

/// The Chinook script the demo database is loaded from.
const CHINOOK_SQL: &str = include_str!("../../data/chinook/chinook_postgres.sql");

fn shipped() -> ContextDoc {
    match parse(SHIPPED) {
        Ok(doc) => doc,
        Err(error) => panic!("the shipped context file does not parse: {error}"),
    }
}

#[test]
fn the_shipped_file_has_entries_in_every_section() {
    let doc = shipped();
    assert_eq!(doc.title(), Some("Supabase SQL Context Learning"));
    assert_eq!(doc.sections(), Section::KNOWN);
    let cases = [
        (Section::SchemaOverview, 1..=1),
        (Section::QueryPatterns, 6..=10),
        (Section::ErrorFixes, 5..=8),
        (Section::OptimizationInsights, 4..=6),
        (Section::ModelNotes, 8..=8),
    ];
    for (section, expected) in cases {
        let entries: Vec<&str> = doc.entries_in(&section).map(|entry| entry.title()).collect();
        assert!(expected.contains(&entries.len()), "{section:?}: {entries:?}");
        // No entry is split into chunks: titles are unique and every entry is small.
        let unique: BTreeSet<&str> = entries.iter().copied().collect();
        assert_eq!(unique.len(), entries.len(), "{section:?}: {entries:?}");
        for entry in doc.entries_in(&section) {
            assert!(estimate_tokens(entry.body()) <= MAX_ENTRY_TOKENS, "{}", entry.title());
            assert!(!entry.body().trim().is_empty(), "{}", entry.title());
        }
    }
    for entry in doc.entries_in(&Section::ErrorFixes) {
        assert!(entry.body().contains("**Error**: "), "{}", entry.title());
        assert!(entry.body().contains("\n**Fix**: "), "{}", entry.title());
    }
}

#[test]
fn the_shipped_overview_names_every_table_and_is_written_as_refresh_writes_it() {
    let doc = shipped();
    let overview = doc.schema_overview().unwrap_or_default();
    for table in chinook_schema().keys() {
        assert!(overview.contains(&format!("`{table}(")), "{table} missing from the overview");
    }
    assert_eq!(replace_schema_overview(SHIPPED, overview), SHIPPED);
}

#[test]
fn the_shipped_model_notes_serve_the_common_models() {
    let doc = shipped();
    let cases = [
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("claude-3-haiku-20240307", "claude-3-haiku"),
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("models/gemini-1.5-pro", "gemini-1.5-pro"),
        ("gemini-1.5-pro-002", "gemini-1.5-pro"),
        // orca's default models.
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("gemini-2.5-flash", "gemini-2.5-flash"),
    ];
    for (model, expected) in cases {
        let titles: Vec<&str> =
            model_notes(&doc, model).into_iter().map(|entry| entry.title()).collect();
        assert_eq!(titles, [expected], "{model}");
    }
}

#[test]
fn questions_about_chinook_find_the_matching_pattern_first() {
    let doc = shipped();
    let cases = [
        ("What is the revenue by customer?", "Revenue by customer"),
        ("top 10 tracks by sales", "Top tracks by sales"),
        ("sales by genre", "Sales by genre"),
        ("revenue by country", "Sales by country"),
        ("sales per month in 2024", "Sales by month"),
        (
            "which employees support which customers, and who is their manager",
            "Employees, their managers and the customers they support",
        ),
        ("how many tracks are in each playlist", "Playlists with their track counts and length"),
        ("number of albums for every artist", "Albums per artist"),
        ("longest tracks in minutes", "Longest tracks in minutes"),
    ];
    for (question, expected) in cases {
        let selection = select(&doc, question, "gpt-4o", 1_500);
        let first =
            selection.groups().iter().find(|(section, _)| *section == Section::QueryPatterns);
        let first = first.and_then(|(_, entries)| entries.first()).map(|entry| entry.title());
        assert_eq!(first, Some(expected), "{question:?}");
        assert!(selection.tokens_used <= 1_500);
        assert!(selection.render_markdown().contains("### gpt-4o\n"), "{question:?}");
    }
}

/// The `sql` code blocks of a markdown text.
fn sql_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for event in Parser::new_ext(markdown, markdown_options()) {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(language)))
                if &*language == "sql" =>
            {
                current = Some(String::new());
            }
            Event::Text(text) => {
                if let Some(block) = current.as_mut() {
                    block.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => blocks.extend(current.take()),
            _ => {}
        }
    }
    blocks
}

/// The parse tree of `sql` as JSON (through the protobuf tree's `Serialize`).
fn parse_tree(sql: &str) -> Value {
    match pg_query::parse(sql, 0) {
        Ok(parsed) => serde_json::to_value(&parsed.protobuf).unwrap_or_default(),
        Err(error) => panic!("does not parse: {error}\n{sql}"),
    }
}

/// Every value under `key` anywhere in `tree`.
fn find_all<'a>(tree: &'a Value, key: &str, found: &mut Vec<&'a Value>) {
    match tree {
        Value::Object(map) => {
            for (name, value) in map {
                if name == key {
                    found.push(value);
                }
                find_all(value, key, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| find_all(item, key, found)),
        _ => {}
    }
}

fn string_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |value, key| value.get(key)).and_then(Value::as_str)
}

/// Table name to column names, from the `CREATE TABLE` statements of the Chinook script.
fn chinook_schema() -> BTreeMap<String, BTreeSet<String>> {
    let mut schema = BTreeMap::new();
    for (index, _) in CHINOOK_SQL.match_indices("CREATE TABLE") {
        let end = CHINOOK_SQL[index..].find(");").map_or(CHINOOK_SQL.len(), |end| index + end + 2);
        let tree = parse_tree(&CHINOOK_SQL[index..end]);
        let mut statements = Vec::new();
        find_all(&tree, "CreateStmt", &mut statements);
        for statement in statements {
            let table =
                string_at(statement, &["relation", "relname"]).unwrap_or_default().to_owned();
            let mut columns = Vec::new();
            find_all(statement, "ColumnDef", &mut columns);
            let columns = columns.iter().filter_map(|column| string_at(column, &["colname"]));
            schema.insert(table, columns.map(str::to_owned).collect());
        }
    }
    schema
}

#[test]
fn the_chinook_schema_is_read_from_the_bundled_script() {
    let schema = chinook_schema();
    let tables: Vec<&str> = schema.keys().map(String::as_str).collect();
    assert_eq!(
        tables,
        [
            "album",
            "artist",
            "customer",
            "employee",
            "genre",
            "invoice",
            "invoice_line",
            "media_type",
            "playlist",
            "playlist_track",
            "track"
        ]
    );
    let columns = |table: &str| schema.get(table).cloned().unwrap_or_default();
    assert!(columns("customer").contains("support_rep_id"));
    assert!(columns("employee").contains("reports_to"));
    assert!(columns("track").contains("milliseconds"));
    assert!(columns("invoice").contains("total"));
}

/// Check that `sql` is one SELECT whose tables and columns all exist in `schema` (qualified
/// columns in their table; unqualified ones in some table, or as an output name).
fn check_sql(sql: &str, schema: &BTreeMap<String, BTreeSet<String>>) -> Result<(), String> {
    let tree = match pg_query::parse(sql, 0) {
        Ok(parsed) => serde_json::to_value(&parsed.protobuf).map_err(|error| error.to_string())?,
        Err(error) => return Err(format!("does not parse: {error}")),
    };
    let statements = tree.get("stmts").and_then(Value::as_array).map_or(0, Vec::len);
    if statements != 1 {
        return Err(format!("{statements} statements, not one"));
    }
    let mut selects = Vec::new();
    find_all(&tree, "SelectStmt", &mut selects);
    if selects.is_empty() {
        return Err("not a SELECT".to_owned());
    }

    // Table aliases (and table names) to tables; output names usable in ORDER BY.
    let mut relations: BTreeMap<&str, &str> = BTreeMap::new();
    let mut range_vars = Vec::new();
    find_all(&tree, "RangeVar", &mut range_vars);
    for range_var in range_vars {
        let table = string_at(range_var, &["relname"]).unwrap_or_default();
        if !schema.contains_key(table) {
            return Err(format!("no table {table}"));
        }
        relations.insert(table, table);
        if let Some(alias) = string_at(range_var, &["alias", "aliasname"]) {
            relations.insert(alias, table);
        }
    }
    let mut targets = Vec::new();
    find_all(&tree, "ResTarget", &mut targets);
    let outputs: BTreeSet<&str> =
        targets.iter().filter_map(|target| string_at(target, &["name"])).collect();
    let all_columns: BTreeSet<&str> = schema.values().flatten().map(String::as_str).collect();

    let mut references = Vec::new();
    find_all(&tree, "ColumnRef", &mut references);
    for reference in references {
        let mut names = Vec::new();
        find_all(reference, "sval", &mut names);
        let names: Vec<&str> = names.iter().filter_map(|name| name.as_str()).collect();
        match names.as_slice() {
            [qualifier, column] => {
                let Some(table) = relations.get(qualifier) else {
                    return Err(format!("unknown table or alias {qualifier}"));
                };
                if !schema.get(*table).is_some_and(|columns| columns.contains(*column)) {
                    return Err(format!("no column {table}.{column}"));
                }
            }
            [column] if all_columns.contains(column) || outputs.contains(column) => {}
            [column] => return Err(format!("no column or output named {column}")),
            [] => {} // `*`
            other => return Err(format!("unexpected column reference {other:?}")),
        }
    }
    Ok(())
}

#[test]
fn every_shipped_sql_example_parses_and_uses_only_real_tables_and_columns() {
    let schema = chinook_schema();
    let blocks = sql_blocks(SHIPPED);
    assert!(blocks.len() >= 6, "only {} sql blocks", blocks.len());
    for sql in &blocks {
        assert_eq!(check_sql(sql, &schema), Ok(()), "{sql}");
    }
}

#[test]
fn the_sql_check_catches_the_mistakes_the_file_warns_about() {
    let schema = chinook_schema();
    let cases = [
        ("SELECT t.name, t.milliseconds FROM track AS t ORDER BY t.milliseconds DESC", Ok(())),
        ("SELECT name AS track FROM track ORDER BY track", Ok(())),
        ("SELECT t.duration FROM track AS t", Err("no column track.duration")),
        ("SELECT amount FROM invoice", Err("no column or output named amount")),
        ("SELECT * FROM customers", Err("no table customers")),
        ("SELECT * FROM \"InvoiceLine\"", Err("no table InvoiceLine")),
        ("SELECT c.sales_rep_id FROM customer c", Err("no column customer.sales_rep_id")),
        ("SELECT x.name FROM artist AS a", Err("unknown table or alias x")),
        ("SELECT 1; SELECT 2", Err("2 statements, not one")),
        ("DELETE FROM track", Err("not a SELECT")),
    ];
    for (sql, expected) in cases {
        assert_eq!(check_sql(sql, &schema), expected.map_err(str::to_owned), "{sql}");
    }
    assert!(check_sql("SELEC 1", &schema).is_err_and(|error| error.starts_with("does not parse")));
}
