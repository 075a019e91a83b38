//! Statement classification with the real PostgreSQL grammar (pg_query): for every statement its
//! kind, the tables it names, every function it calls in any position, what it would change,
//! anything it uses that orca never runs, and its parameter placeholders. Pure: no database, no
//! I/O.
//!
//! The parse tree is walked generically (through its own `Serialize` implementation, see
//! `tree.rs`) so that no node type and no field is skipped: a function hidden in a FROM clause, a window's FILTER, a subscript, a
//! `LIMIT` or a writable CTE is found wherever it sits.
//!
//! # Design notes
//!
//! `classify.rs` parses with pg_query and walks the **whole** parse tree, so that no node type or
//! field is skipped: `tree.rs` walks the tree by driving its own derived `Serialize` with a
//! `serde::Serializer` that consumes the events as they come (no copy of the tree is built, source
//! locations are not visited), recognising nodes by their tag and structs by their fields, and
//! holding relation names written without a schema until the statement whose `WITH` clause may
//! define them ends: kind of each statement, tables, functions in any position (including attribute
//! notation), operators, the parameter placeholders (`ParamRef` numbers), and effects (writes
//! anywhere, `SELECT INTO`, locking clauses, `MERGE` actions); `EXPLAIN ANALYZE x` is `x`.

use std::collections::BTreeSet;

use pg_query::NodeEnum;
use pg_query::protobuf::Node;

use super::statement::{Classification, Effect, ParseError, Statement, StatementKind};
use super::{policy, tree};

/// Classify every statement of `sql`.
///
/// # Errors
///
/// [`ParseError`] when PostgreSQL's grammar rejects the text (the message is the parser's).
pub fn classify(sql: &str) -> Result<Classification, ParseError> {
    let parsed = pg_query::parse(sql, 0).map_err(|error| ParseError {
        message: match error {
            // The parser may quote the rest of the input (an unterminated comment): keep it short.
            pg_query::Error::Parse(message) if message.len() > 300 => {
                let cut = (0..=300).rev().find(|&i| message.is_char_boundary(i)).unwrap_or(0);
                format!("{}…", &message[..cut])
            }
            pg_query::Error::Parse(message) => message,
            pg_query::Error::Conversion(_) => "the text contains a NUL byte".to_owned(),
            // The parse tree is deeper than the protobuf decoder accepts (about 50 nested
            // expressions, such as a long chain of `+` or `||`); its own message repeats the path.
            pg_query::Error::Decode(_) => {
                "the statement is nested too deeply to classify; simplify it".to_owned()
            }
            other => other.to_string(),
        },
    })?;
    let mut statements = Vec::with_capacity(parsed.protobuf.stmts.len());
    for raw in &parsed.protobuf.stmts {
        let Some(node) = raw.stmt.as_deref() else { continue };
        let text = statement_text(sql, raw.stmt_location, raw.stmt_len);
        statements.push(classify_node(node, text)?);
    }
    Ok(Classification { statements })
}

/// The slice of `sql` a statement occupies (`len` 0 means "to the end"), trimmed.
fn statement_text(sql: &str, location: i32, len: i32) -> String {
    let start = usize::try_from(location).unwrap_or(0).min(sql.len());
    let end = match usize::try_from(len) {
        Ok(0) | Err(_) => sql.len(),
        Ok(len) => start.saturating_add(len).min(sql.len()),
    };
    sql.get(start..end).unwrap_or(sql).trim().to_owned()
}

fn classify_node(node: &Node, text: String) -> Result<Statement, ParseError> {
    let body = match node.node.as_ref() {
        None => return Ok(Statement::empty(StatementKind::Utility("UNKNOWN"), text)),
        Some(NodeEnum::ExplainStmt(explain)) => {
            let analyze = explain.options.iter().any(|option| {
                matches!(&option.node, Some(NodeEnum::DefElem(def))
                    if def.defname == "analyze" && !def.arg.as_deref().is_some_and(is_false_option))
            });
            let mut statement = match explain.query.as_deref() {
                Some(inner) => classify_node(inner, text)?,
                None => Statement::empty(StatementKind::Utility("UNKNOWN"), text),
            };
            if analyze {
                statement.explain_analyze = true;
                statement.cursor_capable = false;
                return Ok(statement);
            }
            // Nothing inside a plain EXPLAIN runs: it reads the catalog and plans.
            statement.kind = StatementKind::Read;
            statement.effects.clear();
            statement.plain_explain = true;
            statement.cursor_capable = false;
            return Ok(statement);
        }
        Some(body) => body,
    };
    let facts = tree::walk(node).map_err(|error| ParseError {
        message: format!("the parse tree could not be read: {error}"),
    })?;
    let tag = facts.tag.unwrap_or("");
    let kind = kind_of(tag, body);
    let mut statement = Statement::empty(kind, text);
    statement.cursor_capable = matches!(body, NodeEnum::SelectStmt(_));
    statement.effects = facts.effects;
    match kind {
        StatementKind::Insert => {
            statement.effects.insert(Effect::Insert);
        }
        StatementKind::Update => {
            statement.effects.insert(Effect::Update);
        }
        StatementKind::Delete => {
            statement.effects.insert(Effect::Delete);
        }
        StatementKind::Create => {
            statement.effects.insert(Effect::Create);
        }
        StatementKind::Alter => {
            statement.effects.insert(Effect::Alter);
        }
        StatementKind::Drop => {
            statement.effects.insert(Effect::Drop);
        }
        StatementKind::Truncate => {
            statement.effects.insert(Effect::Truncate);
        }
        _ => {}
    }
    statement.tables = facts.tables.into_iter().collect();
    statement.functions = facts.functions.into_iter().collect();
    statement.attribute_names = facts.attribute_names.into_iter().collect();
    statement.operators = facts.operators.into_iter().collect();
    // `$n` in a function's SQL body or a prepared statement names that body's own arguments.
    if !matches!(body, NodeEnum::CreateFunctionStmt(_) | NodeEnum::PrepareStmt(_)) {
        statement.parameters =
            facts.parameters.into_iter().filter_map(|n| u32::try_from(n).ok()).collect();
    }
    statement.denied = policy::denied(&statement);
    // DDL names schemas as plain identifiers (`DROP SCHEMA orca`, `ALTER SCHEMA orca ...`).
    let ddl = matches!(
        kind,
        StatementKind::Create
            | StatementKind::Alter
            | StatementKind::Drop
            | StatementKind::Truncate
            | StatementKind::Utility(_)
    );
    if ddl && facts.names_state_schema {
        statement.denied.push(format!(
            "schema {} holds orca's own state and is not reachable through orca",
            policy::STATE_SCHEMA
        ));
    }
    if matches!(body, NodeEnum::CopyStmt(copy) if copy.is_program) {
        statement.denied.push("COPY ... PROGRAM runs a shell command on the server".to_owned());
    }
    Ok(statement)
}

/// `EXPLAIN (ANALYZE false)`, `(ANALYZE off)`, `(ANALYZE 0)`.
fn is_false_option(arg: &Node) -> bool {
    match &arg.node {
        Some(NodeEnum::Boolean(boolean)) => !boolean.boolval,
        Some(NodeEnum::String(text)) => {
            matches!(text.sval.to_ascii_lowercase().as_str(), "false" | "off" | "no" | "0")
        }
        Some(NodeEnum::Integer(integer)) => integer.ival == 0,
        _ => false,
    }
}

/// The kind of a top-level statement from its node tag.
fn kind_of(tag: &str, body: &NodeEnum) -> StatementKind {
    match (tag, body) {
        ("SelectStmt", NodeEnum::SelectStmt(select)) if select.into_clause.is_some() => {
            StatementKind::Create
        }
        ("SelectStmt" | "VariableShowStmt", _) => StatementKind::Read,
        ("InsertStmt", _) => StatementKind::Insert,
        ("UpdateStmt", _) => StatementKind::Update,
        ("DeleteStmt", _) => StatementKind::Delete,
        ("MergeStmt", _) => StatementKind::Merge,
        ("TruncateStmt", _) => StatementKind::Truncate,
        ("TransactionStmt" | "ConstraintsSetStmt", _) => StatementKind::Transaction,
        // `SET TRANSACTION ...` parses as a `SET` of the pseudo-variable `TRANSACTION`.
        ("VariableSetStmt", NodeEnum::VariableSetStmt(set)) if set.name == "TRANSACTION" => {
            StatementKind::Transaction
        }
        ("VariableSetStmt" | "DiscardStmt", _) => StatementKind::Session,
        ("CopyStmt", _) => StatementKind::Utility("copy"),
        ("VacuumStmt", NodeEnum::VacuumStmt(vacuum)) if !vacuum.is_vacuumcmd => {
            StatementKind::Utility("analyze")
        }
        ("VacuumStmt", _) => StatementKind::Utility("vacuum"),
        ("LockStmt", _) => StatementKind::Utility("lock"),
        ("DoStmt", _) => StatementKind::Utility("do"),
        ("CallStmt", _) => StatementKind::Utility("call"),
        ("PrepareStmt", _) => StatementKind::Utility("prepare"),
        ("ExecuteStmt", _) => StatementKind::Utility("execute"),
        ("DeallocateStmt", _) => StatementKind::Utility("deallocate"),
        ("ListenStmt", _) => StatementKind::Utility("listen"),
        ("UnlistenStmt", _) => StatementKind::Utility("unlisten"),
        ("NotifyStmt", _) => StatementKind::Utility("notify"),
        ("ClusterStmt", _) => StatementKind::Utility("cluster"),
        ("ReindexStmt", _) => StatementKind::Utility("reindex"),
        ("CheckPointStmt", _) => StatementKind::Utility("checkpoint"),
        ("LoadStmt", _) => StatementKind::Utility("load"),
        ("DeclareCursorStmt", _) => StatementKind::Utility("declare cursor"),
        ("FetchStmt", _) => StatementKind::Utility("fetch"),
        ("ClosePortalStmt", _) => StatementKind::Utility("close"),
        ("RefreshMatViewStmt", _) => StatementKind::Utility("refresh materialized view"),
        ("AlterSystemStmt", _) => StatementKind::Utility("alter system"),
        ("CreatedbStmt" | "DropdbStmt" | "AlterDatabaseStmt" | "AlterDatabaseSetStmt", _) => {
            StatementKind::Utility("database")
        }
        (
            "DropStmt"
            | "DropRoleStmt"
            | "DropTableSpaceStmt"
            | "DropOwnedStmt"
            | "DropSubscriptionStmt"
            | "DropUserMappingStmt",
            _,
        ) => StatementKind::Drop,
        (
            "ViewStmt"
            | "IndexStmt"
            | "DefineStmt"
            | "RuleStmt"
            | "CompositeTypeStmt"
            | "CreateTableAsStmt"
            | "ImportForeignSchemaStmt",
            _,
        ) => StatementKind::Create,
        (
            "RenameStmt" | "GrantStmt" | "GrantRoleStmt" | "CommentStmt" | "SecLabelStmt"
            | "ReassignOwnedStmt",
            _,
        ) => StatementKind::Alter,
        (other, _) if other.starts_with("Create") => StatementKind::Create,
        (other, _) if other.starts_with("Alter") => StatementKind::Alter,
        _ => StatementKind::Utility("other"),
    }
}

impl Statement {
    fn empty(kind: StatementKind, text: String) -> Statement {
        Statement {
            kind,
            text,
            tables: Vec::new(),
            functions: Vec::new(),
            attribute_names: Vec::new(),
            operators: Vec::new(),
            effects: BTreeSet::new(),
            denied: Vec::new(),
            parameters: Vec::new(),
            plain_explain: false,
            explain_analyze: false,
            cursor_capable: false,
        }
    }
}
