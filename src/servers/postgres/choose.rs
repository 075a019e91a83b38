//! Which database a `generate_sql` question is about, when the call names none: BM25 over every
//! database's table and column names and comments and its description, across databases. The
//! best one is used and `_meta.database` says why; when two score close, the caller is asked (the
//! `ask_for_disambiguation` prompt); when the tables a question names exist in no one database
//! together, the answer says that one statement cannot span them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::PostgresServer;
use crate::context::bm25;
use crate::servers::CallContext;
use crate::servers::sql_common::Database;
use crate::sql::DatabaseSchema;
use crate::tool::{ToolError, ToolOutput};

/// A runner-up scoring at least this share of the best is too close to choose between.
const CLOSE: f64 = 0.8;
/// How many of a database's best-matching tables add up to its score.
const TABLES_COUNTED: usize = 3;

/// One database's standing for a question.
#[derive(Debug, Clone)]
pub(crate) struct Standing {
    pub(crate) database: String,
    pub(crate) score: f64,
    /// Its best-matching tables, best first.
    pub(crate) tables: Vec<String>,
}

/// What the question points to.
#[derive(Debug)]
pub(crate) enum Choice {
    /// One database stands out.
    One { database: String, standings: Vec<Standing> },
    /// Two or more are too close to call.
    Close { standings: Vec<Standing> },
    /// The question names tables that no single database holds together: table -> databases.
    Spans { tables: BTreeMap<String, BTreeSet<String>> },
    /// Nothing in any schema or description matches.
    Nothing,
}

/// Rank the databases whose schemas are known for `question`.
pub(crate) fn choose(
    question: &str,
    databases: &[(String, Option<String>, Arc<DatabaseSchema>)],
) -> Choice {
    if let Some(tables) = spanned(question, databases) {
        return Choice::Spans { tables };
    }
    // One text per table, and one per database for its name and description: scores are
    // comparable across databases because the terms' rarity is counted over all of them.
    let mut owners: Vec<(usize, Option<String>)> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    for (index, (name, description, schema)) in databases.iter().enumerate() {
        owners.push((index, None));
        texts.push(format!("{name} {}", description.as_deref().unwrap_or_default()));
        for relation in &schema.relations {
            let mut text =
                format!("{} {}", relation.name, relation.comment.as_deref().unwrap_or(""));
            for column in &relation.columns {
                text.push(' ');
                text.push_str(&column.name);
                if let Some(comment) = &column.comment {
                    text.push(' ');
                    text.push_str(comment);
                }
            }
            owners.push((index, Some(relation.name.clone())));
            texts.push(text);
        }
    }
    let scores = bm25::Index::new(&texts).scores(question);
    let mut per_database: Vec<(f64, Vec<(f64, String)>)> = vec![(0.0, Vec::new()); databases.len()];
    for ((index, table), score) in owners.into_iter().zip(scores) {
        match table {
            None => per_database[index].0 += score,
            Some(table) if score > 0.0 => per_database[index].1.push((score, table)),
            Some(_) => {}
        }
    }
    let mut standings: Vec<Standing> = per_database
        .into_iter()
        .zip(databases)
        .map(|((described, mut tables), (name, _, _))| {
            tables.sort_by(|left, right| right.0.total_cmp(&left.0));
            let counted: f64 = tables.iter().take(TABLES_COUNTED).map(|(score, _)| score).sum();
            Standing {
                database: name.clone(),
                score: described + counted,
                tables: tables.into_iter().take(TABLES_COUNTED).map(|(_, table)| table).collect(),
            }
        })
        .collect();
    standings.sort_by(|left, right| right.score.total_cmp(&left.score));
    match standings.as_slice() {
        [] => Choice::Nothing,
        [best, ..] if best.score <= 0.0 => Choice::Nothing,
        [best, second, ..] if second.score >= best.score * CLOSE => {
            let floor = best.score * CLOSE;
            standings.retain(|standing| standing.score >= floor);
            Choice::Close { standings }
        }
        [best, ..] => Choice::One { database: best.database.clone(), standings },
    }
}

/// The tables a question names (a table's name, or every part of a name like `film_actor`),
/// when no database holds all of them: table -> the databases that have it.
fn spanned(
    question: &str,
    databases: &[(String, Option<String>, Arc<DatabaseSchema>)],
) -> Option<BTreeMap<String, BTreeSet<String>>> {
    let words: BTreeSet<String> = bm25::tokenize(question).into_iter().collect();
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, _, schema) in databases {
        for relation in &schema.relations {
            let parts = bm25::tokenize(&relation.name);
            // The whole name comes first, then its parts when it has several.
            let needed = if parts.len() > 1 { &parts[1..] } else { &parts[..] };
            if !needed.is_empty() && needed.iter().all(|part| words.contains(part)) {
                named.entry(relation.name.clone()).or_default().insert(name.clone());
            }
        }
    }
    // A table whose name is part of another named one (`film` in `film_actor`) adds nothing.
    let names: Vec<String> = named.keys().cloned().collect();
    named.retain(|table, _| {
        !names.iter().any(|other| other != table && other.split('_').any(|part| part == table))
    });
    let mut common: Option<BTreeSet<String>> = None;
    for holders in named.values() {
        common = Some(match common {
            None => holders.clone(),
            Some(common) => common.intersection(holders).cloned().collect(),
        });
    }
    match common {
        Some(common) if common.is_empty() => Some(named),
        _ => None,
    }
}

impl PostgresServer {
    /// `generate_sql` without `database` among several: choose one by the question, or ask.
    pub(super) async fn generate_sql_choosing(
        &self,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let question = arguments
            .as_ref()
            .and_then(|arguments| arguments.get("prompt"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut known = Vec::new();
        let mut skipped = Vec::new();
        for database in self.databases().iter() {
            match self.schema_of(database).await {
                Ok(schema) => {
                    known.push((database.name.clone(), database.description.clone(), schema));
                }
                Err(_) => skipped.push(database.name.clone()),
            }
        }
        let choice = choose(&question, &known);
        let names = |standings: &[Standing]| -> Vec<String> {
            standings.iter().map(|standing| standing.database.clone()).collect()
        };
        let ranking = |standings: &[Standing]| -> Value {
            standings
                .iter()
                .map(|standing| {
                    json!({
                        "database": standing.database,
                        "score": (standing.score * 1000.0).round() / 1000.0,
                        "tables": standing.tables,
                    })
                })
                .collect()
        };
        match choice {
            Choice::One { database, standings } => {
                let chosen = self.databases().resolve(Some(&database))?;
                context.chose_database(&chosen.name);
                let mut output = self.on(chosen).generate_sql(arguments, context).await;
                let best = &standings[0];
                let meta = json!({
                    "name": database,
                    "chosen_by": "question",
                    "why": format!(
                        "its schema and description match the question best (score {:.2}{}{})",
                        best.score,
                        if best.tables.is_empty() { String::new() } else { format!("; tables {}", best.tables.join(", ")) },
                        standings.get(1).map_or(String::new(), |next| format!("; next: {} at {:.2}", next.database, next.score)),
                    ),
                    "ranking": ranking(&standings),
                    "unreachable": skipped,
                });
                match &mut output {
                    Ok(output) => {
                        output.meta.insert("database".into(), meta);
                    }
                    Err(error) => {
                        let details = error.details.get_or_insert_with(|| Box::new(json!({})));
                        if let Value::Object(details) = details.as_mut() {
                            details.insert("database".into(), meta);
                        }
                    }
                }
                output
            }
            Choice::Close { standings } => {
                let candidates: Vec<String> = standings
                    .iter()
                    .map(|standing| match standing.tables.first() {
                        Some(table) => format!("{}.{table}", standing.database),
                        None => standing.database.clone(),
                    })
                    .collect();
                let table = standings
                    .iter()
                    .find_map(|standing| standing.tables.first().cloned())
                    .unwrap_or_else(|| question.chars().take(80).collect());
                let mut error = ToolError::invalid_input(format!(
                    "the question fits several databases about equally: {}; set `database` to the one meant",
                    names(&standings).join(", ")
                ))
                .with_hint("ask the user which database is meant (the ask_for_disambiguation prompt), then call again with `database`");
                error.details = Some(Box::new(json!({
                    "databases": names(&standings),
                    "ranking": ranking(&standings),
                    "prompt": {"name": "ask_for_disambiguation", "arguments": {"table": table, "candidates": candidates.join(", ")}},
                })));
                Err(error)
            }
            Choice::Spans { tables } => {
                let listed: Vec<String> = tables
                    .iter()
                    .map(|(table, holders)| {
                        format!(
                            "{table} in {}",
                            holders.iter().cloned().collect::<Vec<_>>().join(", ")
                        )
                    })
                    .collect();
                let databases: BTreeSet<&String> = tables.values().flatten().collect();
                let mut error = ToolError::invalid_input(format!(
                    "the question needs tables from more than one database ({}); one SQL statement runs on one database and cannot span them",
                    listed.join("; ")
                ))
                .not_retryable()
                .with_hint("ask one question per database (set `database`) and combine the answers, for example with format_results");
                error.details = Some(Box::new(json!({
                    "databases": databases,
                    "tables": tables,
                })));
                Err(error)
            }
            Choice::Nothing => {
                let mut error = ToolError::invalid_input(format!(
                    "nothing in the question matches a table or description of the databases ({}); set `database`",
                    self.databases().names().join(", ")
                ))
                .with_hint("res://catalogs describes each database");
                error.details = Some(Box::new(json!({
                    "databases": self.databases().names(),
                    "unreachable": skipped,
                })));
                Err(error)
            }
        }
    }

    /// A database's schema from its cache, for choosing.
    async fn schema_of(&self, database: &Database) -> Result<Arc<DatabaseSchema>, ToolError> {
        let (schema, _, _) = database
            .schema_cache
            .get(&database.target.pool, database.sql.schema_cache_ttl, false)
            .await
            .map_err(crate::servers::sql_common::sql_error)?;
        Ok(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(tables: &[(&str, &[&str])]) -> Arc<DatabaseSchema> {
        use crate::sql::introspect::{Column, Relation, RelationKind};
        let relations = tables
            .iter()
            .map(|(name, columns)| {
                let mut relation = Relation::empty("public", name, RelationKind::Table);
                relation.columns = columns
                    .iter()
                    .map(|column| Column {
                        name: (*column).to_owned(),
                        data_type: "text".to_owned(),
                        nullable: true,
                        default: None,
                        comment: None,
                        identity: None,
                        generated: None,
                    })
                    .collect();
                relation
            })
            .collect();
        Arc::new(DatabaseSchema {
            database: "db".to_owned(),
            schemas: Vec::new(),
            relations,
            enums: Vec::new(),
            domains: Vec::new(),
            sequences: Vec::new(),
        })
    }

    fn databases() -> Vec<(String, Option<String>, Arc<DatabaseSchema>)> {
        vec![
            (
                "music".into(),
                Some("Chinook, a digital music store: artists, albums, tracks, invoices".into()),
                schema(&[
                    ("artist", &["artist_id", "name"]),
                    ("album", &["album_id", "title", "artist_id"]),
                    ("track", &["track_id", "name", "milliseconds"]),
                    ("invoice", &["invoice_id", "total"]),
                    ("customer", &["customer_id", "first_name"]),
                ]),
            ),
            (
                "films".into(),
                Some("Pagila, a DVD rental store: films, actors, rentals".into()),
                schema(&[
                    ("film", &["film_id", "title", "rating"]),
                    ("actor", &["actor_id", "first_name"]),
                    ("film_actor", &["film_id", "actor_id"]),
                    ("rental", &["rental_id", "rental_date"]),
                    ("customer", &["customer_id", "first_name"]),
                ]),
            ),
            (
                "records".into(),
                Some("A record label's catalogue: the artists it signed and their albums".into()),
                schema(&[
                    ("artist", &["artist_id", "name", "label"]),
                    ("album", &["album_id", "title"]),
                ]),
            ),
        ]
    }

    #[test]
    fn a_question_about_films_chooses_the_films_database() {
        match choose("Which films were rented most often, and who acted in them?", &databases()) {
            Choice::One { database, .. } => assert_eq!(database, "films"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_question_about_tracks_and_invoices_chooses_music() {
        match choose("total invoice amount per track length", &databases()) {
            Choice::One { database, .. } => assert_eq!(database, "music"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_question_that_fits_two_databases_is_close() {
        match choose("list every artist with their albums", &databases()) {
            Choice::Close { standings } => {
                let names: Vec<&str> = standings.iter().map(|s| s.database.as_str()).collect();
                assert!(names.contains(&"music") && names.contains(&"records"), "{names:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tables_from_two_databases_span() {
        match choose("films whose title is also the title of an album", &databases()) {
            Choice::Spans { tables } => {
                assert_eq!(tables["film"], BTreeSet::from(["films".to_owned()]));
                assert!(tables["album"].contains("music"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_table_both_databases_hold_does_not_span() {
        match choose("customers with the most invoices", &databases()) {
            Choice::One { database, .. } => assert_eq!(database, "music"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_question_matching_nothing_chooses_nothing() {
        assert!(matches!(choose("zzz qqq", &databases()), Choice::Nothing));
    }
}
