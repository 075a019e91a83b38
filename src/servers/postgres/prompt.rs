//! The prompt `generate_sql` sends: a system prompt that asks for one PostgreSQL statement in
//! a fenced block, then one user turn holding the schema (compact, from the cached
//! introspection, cut to a token budget by relevance to the question), the context entries
//! chosen for the question (see `context::select`), and the question itself.
//!
//! When the schema does not fit its budget, tables are ranked by BM25 of the question against
//! each table's name, columns and comment; the best go in first, then the tables their foreign
//! keys point to, then the rest by size, and the names of the ones left out are listed.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::context::{self, bm25};
use crate::sql::introspect::{DatabaseSchema, Relation};

/// The system prompt of `generate_sql`.
pub(crate) const SQL_SYSTEM_PROMPT: &str = "You are an expert PostgreSQL SQL generator. \
Return only valid, executable SQL: exactly one statement for PostgreSQL, in a ```sql fenced \
block, with no explanation. Use only the tables and columns of the schema you are given, \
qualified or quoted exactly as shown. Write a read (SELECT) unless the request clearly asks to \
change data. Never use transaction control, SET, COPY, DO or CALL.";

/// What one request of `generate_sql` holds besides the question.
#[derive(Debug, Clone)]
pub(crate) struct BuiltPrompt {
    pub(crate) user: String,
    /// Titles of the context entries included, in order.
    pub(crate) context_entries: Vec<String>,
    pub(crate) context_tokens: usize,
    pub(crate) tables_shown: usize,
    pub(crate) tables_total: usize,
}

/// Estimated tokens of a text: about four characters each.
pub(crate) fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Build the user turn for `question`.
pub(crate) fn build(
    schema: &DatabaseSchema,
    context: Option<&context::ContextDoc>,
    question: &str,
    model: &str,
    schema_budget_tokens: usize,
    context_budget_tokens: usize,
) -> BuiltPrompt {
    let (schema_text, tables_shown, tables_total) =
        compact_schema(schema, question, schema_budget_tokens);
    let mut user = String::new();
    let _ = writeln!(user, "# Database Context\n\nPostgreSQL database `{}`.\n", schema.database);
    user.push_str(&schema_text);
    let mut context_entries = Vec::new();
    let mut context_tokens = 0;
    if let Some(doc) = context {
        let selection = context::select(doc, question, model, context_budget_tokens);
        context_entries = selection.titles();
        context_tokens = selection.tokens_used;
        let rendered = selection.render_markdown();
        if !rendered.trim().is_empty() {
            user.push_str("\n# Learned Context\n\n");
            user.push_str(rendered.trim_end());
            user.push('\n');
        }
    }
    let _ = write!(user, "\n# User Request\n\n{}\n", question.trim());
    BuiltPrompt { user, context_entries, context_tokens, tables_shown, tables_total }
}

/// The schema, one line per table or view, within `budget_tokens`; with how many relations
/// were shown out of how many.
pub(crate) fn compact_schema(
    schema: &DatabaseSchema,
    question: &str,
    budget_tokens: usize,
) -> (String, usize, usize) {
    let relations: Vec<&Relation> =
        schema.relations.iter().filter(|relation| relation.partition_of.is_none()).collect();
    let only_public = relations.iter().all(|relation| relation.schema == "public");
    let lines: Vec<String> =
        relations.iter().map(|relation| relation_line(relation, only_public)).collect();
    let mut enums = String::new();
    for enumeration in &schema.enums {
        let _ = writeln!(
            enums,
            "enum {}: {}",
            name(&enumeration.schema, &enumeration.name, only_public),
            enumeration.labels.join(", ")
        );
    }
    let total_tokens: usize =
        lines.iter().map(|line| estimate_tokens(line) + 1).sum::<usize>() + estimate_tokens(&enums);
    let mut out = String::from("## Schema\n\n");
    if total_tokens <= budget_tokens {
        for line in &lines {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&enums);
        return (out, relations.len(), relations.len());
    }

    // Too big: the most relevant relations first, then what they reference, then the largest.
    let texts: Vec<String> = relations.iter().map(|relation| relevance_text(relation)).collect();
    let scores = bm25::Index::new(&texts).scores(question);
    let mut order: Vec<usize> = (0..relations.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let relevant: Vec<usize> = order.iter().copied().filter(|&index| scores[index] > 0.0).collect();
    let mut referenced = Vec::new();
    for &index in &relevant {
        for key in &relations[index].foreign_keys {
            if let Some(target) = relations.iter().position(|relation| {
                relation.schema == key.referenced_schema && relation.name == key.referenced_table
            }) {
                referenced.push(target);
            }
        }
    }
    let mut by_size: Vec<usize> = (0..relations.len()).collect();
    by_size.sort_by_key(|&index| std::cmp::Reverse(relations[index].row_estimate.unwrap_or(0)));
    let mut chosen = Vec::new();
    let mut seen = HashSet::new();
    let mut used = estimate_tokens(&enums);
    for index in relevant.into_iter().chain(referenced).chain(by_size) {
        if !seen.insert(index) {
            continue;
        }
        let cost = estimate_tokens(&lines[index]) + 1;
        if used + cost <= budget_tokens {
            used += cost;
            chosen.push(index);
        }
    }
    chosen.sort_unstable();
    for &index in &chosen {
        out.push_str(&lines[index]);
        out.push('\n');
    }
    out.push_str(&enums);
    let shown: HashSet<usize> = chosen.iter().copied().collect();
    let left_out: Vec<String> = (0..relations.len())
        .filter(|index| !shown.contains(index))
        .map(|index| name(&relations[index].schema, &relations[index].name, only_public))
        .collect();
    if !left_out.is_empty() {
        let mut note = format!("-- {} more relations not shown:", left_out.len());
        for (position, relation_name) in left_out.iter().enumerate() {
            if note.len() + relation_name.len() > 2_000 {
                let _ = write!(note, " and {} more", left_out.len() - position);
                break;
            }
            note.push(' ');
            note.push_str(relation_name);
        }
        out.push_str(&note);
        out.push('\n');
    }
    (out, chosen.len(), relations.len())
}

fn name(schema: &str, relation: &str, only_public: bool) -> String {
    let relation = crate::servers::postgres::schema_doc::quote_ident(relation);
    if only_public {
        relation
    } else {
        format!("{}.{relation}", crate::servers::postgres::schema_doc::quote_ident(schema))
    }
}

/// `customer(customer_id integer PK, first_name varchar(40) NOT NULL, support_rep_id integer
/// -> employee.employee_id) -- 59 rows; comment`.
fn relation_line(relation: &Relation, only_public: bool) -> String {
    let mut line = name(&relation.schema, &relation.name, only_public);
    if !relation.kind.is_table_like() {
        let _ = write!(line, " [{}]", relation.kind.words());
    }
    line.push('(');
    let primary: &[String] =
        relation.primary_key.as_ref().map_or(&[], |key| key.columns.as_slice());
    for (index, column) in relation.columns.iter().enumerate() {
        if index > 0 {
            line.push_str(", ");
        }
        let _ = write!(
            line,
            "{} {}",
            crate::servers::postgres::schema_doc::quote_ident(&column.name),
            column.data_type
        );
        if primary.len() == 1 && primary[0] == column.name {
            line.push_str(" PK");
        } else if !column.nullable {
            line.push_str(" NOT NULL");
        }
        for key in &relation.foreign_keys {
            if key.columns.len() == 1 && key.columns[0] == column.name {
                let _ = write!(
                    line,
                    " -> {}.{}",
                    name(&key.referenced_schema, &key.referenced_table, only_public),
                    key.referenced_columns.join(",")
                );
            }
        }
    }
    line.push(')');
    if primary.len() > 1 {
        let _ = write!(line, " PK({})", primary.join(", "));
    }
    for key in relation.foreign_keys.iter().filter(|key| key.columns.len() > 1) {
        let _ = write!(
            line,
            " FK({}) -> {}({})",
            key.columns.join(", "),
            name(&key.referenced_schema, &key.referenced_table, only_public),
            key.referenced_columns.join(", ")
        );
    }
    let mut notes = Vec::new();
    if let Some(rows) = relation.row_estimate.filter(|rows| *rows >= 0) {
        notes.push(format!("~{rows} rows"));
    }
    if let Some(comment) = relation.comment.as_deref().filter(|comment| !comment.is_empty()) {
        notes.push(comment.chars().take(200).collect());
    }
    if !notes.is_empty() {
        let _ = write!(line, " -- {}", notes.join("; "));
    }
    line
}

fn relevance_text(relation: &Relation) -> String {
    let mut text = format!("{} {}", relation.name, relation.name);
    for column in &relation.columns {
        text.push(' ');
        text.push_str(&column.name);
    }
    if let Some(comment) = &relation.comment {
        text.push(' ');
        text.push_str(comment);
    }
    text
}

/// The user turn that asks for another attempt after `error`.
pub(crate) fn retry_message(error: &str) -> String {
    format!("Previous attempt failed: {error}. Please fix and try again.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::introspect::{Column, ForeignKey, ForeignKeyAction, RelationKind};

    fn column(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            data_type: "integer".to_owned(),
            nullable: true,
            default: None,
            comment: None,
            identity: None,
            generated: None,
        }
    }

    /// 1,000 tables of 10 columns; `orders` references `customers`.
    fn big_schema() -> DatabaseSchema {
        let mut relations: Vec<Relation> = (0..998)
            .map(|index| {
                let mut relation =
                    Relation::empty("public", &format!("filler_{index:04}"), RelationKind::Table);
                relation.columns = (0..10).map(|c| column(&format!("value_{c}"))).collect();
                relation.row_estimate = Some(index);
                relation
            })
            .collect();
        let mut customers = Relation::empty("public", "customers", RelationKind::Table);
        customers.columns = vec![column("customer_id"), column("name")];
        let mut orders = Relation::empty("public", "orders", RelationKind::Table);
        orders.columns = vec![column("order_id"), column("customer_id"), column("amount")];
        orders.foreign_keys = vec![ForeignKey {
            name: "orders_customer".to_owned(),
            columns: vec!["customer_id".to_owned()],
            referenced_schema: "public".to_owned(),
            referenced_table: "customers".to_owned(),
            referenced_columns: vec!["customer_id".to_owned()],
            on_delete: ForeignKeyAction::NoAction,
            on_update: ForeignKeyAction::NoAction,
            inherited: false,
        }];
        relations.push(customers);
        relations.push(orders);
        DatabaseSchema {
            database: "shop".to_owned(),
            schemas: Vec::new(),
            relations,
            enums: Vec::new(),
            domains: Vec::new(),
            sequences: Vec::new(),
        }
    }

    #[test]
    fn a_schema_too_big_for_the_budget_keeps_the_relevant_tables_and_names_the_rest() {
        let schema = big_schema();
        let (text, shown, total) = compact_schema(&schema, "total order amount per order", 500);
        assert_eq!(total, 1_000);
        assert!(shown < total, "{shown}");
        // The relevant table, then the table its foreign key points to.
        assert!(text.contains("orders(order_id integer, customer_id integer -> customers.customer_id, amount integer)"), "{text}");
        assert!(text.contains("customers(customer_id integer, name integer)"), "{text}");
        // Then the largest, within the budget; the rest are named.
        assert!(text.contains("filler_0997("), "{text}");
        assert!(
            text.contains(&format!("-- {} more relations not shown:", total - shown)),
            "{text}"
        );
        let body: usize = text
            .lines()
            .filter(|line| line.contains('('))
            .map(|line| estimate_tokens(line) + 1)
            .sum();
        assert!(body <= 500, "{body}");
    }

    #[test]
    fn a_schema_within_the_budget_is_shown_whole() {
        let schema = big_schema();
        let (text, shown, total) = compact_schema(&schema, "anything", usize::MAX);
        assert_eq!((shown, total), (1_000, 1_000));
        assert!(!text.contains("not shown"), "{text}");
    }
}
