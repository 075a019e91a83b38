//! Statement classification with the real PostgreSQL grammar (pg_query): for every statement its
//! kind, the tables it names, every function it calls in any position, what it would change,
//! and anything it uses that orca never runs. Pure: no database, no I/O.
//!
//! The parse tree is walked generically (through its serde form) so that no node type and no
//! field is skipped: a function hidden in a FROM clause, a window's FILTER, a subscript, a
//! `LIMIT` or a writable CTE is found wherever it sits.

use std::collections::BTreeSet;
use std::fmt;

use super::policy;
use super::tree::Tree;

/// What a statement is, by its top-level form. `EXPLAIN ANALYZE x` is the kind of `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatementKind {
    /// `SELECT`, `VALUES`, `TABLE`, `SHOW`, and `EXPLAIN` without `ANALYZE`.
    Read,
    Insert,
    Update,
    Delete,
    Merge,
    /// DDL that creates: tables, views, indexes, types, functions, roles, `SELECT INTO` ...
    Create,
    /// DDL that alters: `ALTER`, `RENAME`, `COMMENT ON`, `GRANT`, `REVOKE` ...
    Alter,
    Drop,
    Truncate,
    /// `BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`, `SET TRANSACTION`, `SET CONSTRAINTS`.
    Transaction,
    /// `SET`, `RESET`, `DISCARD`, `SET ROLE`, `SET SESSION AUTHORIZATION`.
    Session,
    /// Everything else (`COPY`, `VACUUM`, `LOCK`, `DO`, `CALL`, `PREPARE` ...), by its keyword.
    Utility(&'static str),
}

impl StatementKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StatementKind::Read => "read",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Merge => "merge",
            StatementKind::Create => "create",
            StatementKind::Alter => "alter",
            StatementKind::Drop => "drop",
            StatementKind::Truncate => "truncate",
            StatementKind::Transaction => "transaction",
            StatementKind::Session => "session",
            StatementKind::Utility(keyword) => keyword,
        }
    }
}

impl fmt::Display for StatementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change a statement makes, wherever in the statement it sits (a `DELETE` inside a CTE
/// of a `SELECT` is a `Delete` effect of that `SELECT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    Insert,
    Update,
    Delete,
    /// `SELECT ... FOR UPDATE / SHARE`: takes row locks.
    LockRows,
    Create,
    Alter,
    Drop,
    Truncate,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Insert => "insert",
            Effect::Update => "update",
            Effect::Delete => "delete",
            Effect::LockRows => "lock rows",
            Effect::Create => "create",
            Effect::Alter => "alter",
            Effect::Drop => "drop",
            Effect::Truncate => "truncate",
        }
    }
}

/// A possibly schema-qualified name as written (unquoted identifiers already folded to lower case
/// by the grammar).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QualifiedName {
    pub schema: Option<String>,
    pub name: String,
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "{schema}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// One classified statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub kind: StatementKind,
    /// The statement's own text, without the separating semicolon.
    pub text: String,
    /// Relations named anywhere in the statement (CTE names excluded).
    pub tables: Vec<QualifiedName>,
    /// Functions called anywhere in the statement.
    pub functions: Vec<QualifiedName>,
    /// Names used in attribute position (`(row).name`, `t.name`), which PostgreSQL may resolve
    /// to a one-argument function call.
    pub attribute_names: Vec<String>,
    /// Operators written anywhere in the statement (they are functions too).
    pub operators: Vec<QualifiedName>,
    /// What the statement changes; empty for a pure read.
    pub effects: BTreeSet<Effect>,
    /// Why orca never runs this statement (dangerous functions or relations); empty when none.
    pub denied: Vec<String>,
    /// Whether the top level is `EXPLAIN` without `ANALYZE` (nothing inside runs).
    pub plain_explain: bool,
    /// Whether the top level is `EXPLAIN ANALYZE` (which runs what it explains, and which
    /// neither a cursor nor another `EXPLAIN` accepts).
    pub(crate) explain_analyze: bool,
    /// Whether the top level is a `SELECT` or `VALUES` (what a cursor accepts).
    pub(crate) cursor_capable: bool,
}

impl Statement {
    /// Whether the statement changes anything (data, schema, session or server state).
    pub fn writes(&self) -> bool {
        self.kind != StatementKind::Read || !self.effects.is_empty()
    }

    /// Whether the statement is a read that uses nothing orca denies. Function volatility is
    /// checked separately against the database (`policy::check_read`).
    pub fn is_read(&self) -> bool {
        !self.writes() && self.denied.is_empty()
    }

    /// Whether the statement may run through a cursor (`DECLARE ... CURSOR FOR`), which only
    /// takes `SELECT` and `VALUES`.
    pub(crate) fn is_cursor_query(&self) -> bool {
        self.kind == StatementKind::Read && !self.plain_explain && self.cursor_capable
    }
}

/// Every statement of a text, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub statements: Vec<Statement>,
}

/// The text is not SQL that PostgreSQL would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
}

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
        let tree = Tree::of(node).map_err(|error| ParseError {
            message: format!("the parse tree could not be read: {error}"),
        })?;
        let text = statement_text(sql, raw.stmt_location, raw.stmt_len);
        statements.push(classify_tree(&tree, text));
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

/// The `(tag, body)` of a parse-tree node.
fn tagged(value: &Tree) -> Option<(&str, &Tree)> {
    value.tagged()
}

fn classify_tree(tree: &Tree, text: String) -> Statement {
    let Some((tag, body)) = tagged(tree) else {
        return Statement::empty(StatementKind::Utility("UNKNOWN"), text);
    };
    if tag == "ExplainStmt" {
        let analyze = body.get("options").and_then(Tree::as_array).is_some_and(|options| {
            options.iter().any(|option| {
                tagged(option).is_some_and(|(tag, def)| {
                    tag == "DefElem"
                        && def.get("defname").and_then(Tree::as_str) == Some("analyze")
                        && !def.get("arg").is_some_and(is_false_option)
                })
            })
        });
        let inner = body.get("query").unwrap_or(&Tree::Null);
        if analyze {
            let mut statement = classify_tree(inner, text);
            statement.explain_analyze = true;
            statement.cursor_capable = false;
            return statement;
        }
        let mut statement = classify_tree(inner, text);
        // Nothing inside a plain EXPLAIN runs: it reads the catalog and plans.
        statement.kind = StatementKind::Read;
        statement.effects.clear();
        statement.plain_explain = true;
        statement.cursor_capable = false;
        return statement;
    }
    let kind = kind_of(tag, body);
    let mut statement = Statement::empty(kind, text);
    statement.cursor_capable = matches!(tag, "SelectStmt");
    let mut walker = Walker::default();
    walker.visit(tree);
    statement.effects = walker.effects;
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
    statement.tables = walker.tables.into_iter().collect();
    statement.functions = walker.functions.into_iter().collect();
    statement.attribute_names = walker.attribute_names.into_iter().collect();
    statement.operators = walker.operators.into_iter().collect();
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
    if ddl && walker.identifiers.contains(policy::STATE_SCHEMA) {
        statement.denied.push(format!(
            "schema {} holds orca's own state and is not reachable through orca",
            policy::STATE_SCHEMA
        ));
    }
    if tag == "CopyStmt" && body.get("is_program").and_then(Tree::as_bool) == Some(true) {
        statement.denied.push("COPY ... PROGRAM runs a shell command on the server".to_owned());
    }
    statement
}

/// `EXPLAIN (ANALYZE false)`, `(ANALYZE off)`, `(ANALYZE 0)`.
fn is_false_option(arg: &Tree) -> bool {
    match tagged(arg) {
        Some(("Boolean", body)) => body.get("boolval").and_then(Tree::as_bool) != Some(true),
        Some(("String", body)) => matches!(
            body.get("sval").and_then(Tree::as_str).map(str::to_ascii_lowercase).as_deref(),
            Some("false" | "off" | "no" | "0")
        ),
        Some(("Integer", body)) => body.get("ival").and_then(Tree::as_i64).unwrap_or(0) == 0,
        _ => false,
    }
}

/// The kind of a top-level statement from its node tag.
fn kind_of(tag: &str, body: &Tree) -> StatementKind {
    match tag {
        "SelectStmt" => {
            if body.get("into_clause").is_some() {
                StatementKind::Create
            } else {
                StatementKind::Read
            }
        }
        "VariableShowStmt" => StatementKind::Read,
        "InsertStmt" => StatementKind::Insert,
        "UpdateStmt" => StatementKind::Update,
        "DeleteStmt" => StatementKind::Delete,
        "MergeStmt" => StatementKind::Merge,
        "TruncateStmt" => StatementKind::Truncate,
        "TransactionStmt" | "ConstraintsSetStmt" => StatementKind::Transaction,
        // `SET TRANSACTION ...` parses as a `SET` of the pseudo-variable `TRANSACTION`.
        "VariableSetStmt" if body.get("name").and_then(Tree::as_str) == Some("TRANSACTION") => {
            StatementKind::Transaction
        }
        "VariableSetStmt" | "DiscardStmt" => StatementKind::Session,
        "CopyStmt" => StatementKind::Utility("copy"),
        "VacuumStmt" if body.get("is_vacuumcmd").and_then(Tree::as_bool) != Some(true) => {
            StatementKind::Utility("analyze")
        }
        "VacuumStmt" => StatementKind::Utility("vacuum"),
        "LockStmt" => StatementKind::Utility("lock"),
        "DoStmt" => StatementKind::Utility("do"),
        "CallStmt" => StatementKind::Utility("call"),
        "PrepareStmt" => StatementKind::Utility("prepare"),
        "ExecuteStmt" => StatementKind::Utility("execute"),
        "DeallocateStmt" => StatementKind::Utility("deallocate"),
        "ListenStmt" => StatementKind::Utility("listen"),
        "UnlistenStmt" => StatementKind::Utility("unlisten"),
        "NotifyStmt" => StatementKind::Utility("notify"),
        "ClusterStmt" => StatementKind::Utility("cluster"),
        "ReindexStmt" => StatementKind::Utility("reindex"),
        "CheckPointStmt" => StatementKind::Utility("checkpoint"),
        "LoadStmt" => StatementKind::Utility("load"),
        "DeclareCursorStmt" => StatementKind::Utility("declare cursor"),
        "FetchStmt" => StatementKind::Utility("fetch"),
        "ClosePortalStmt" => StatementKind::Utility("close"),
        "RefreshMatViewStmt" => StatementKind::Utility("refresh materialized view"),
        "AlterSystemStmt" => StatementKind::Utility("alter system"),
        "CreatedbStmt" | "DropdbStmt" | "AlterDatabaseStmt" | "AlterDatabaseSetStmt" => {
            StatementKind::Utility("database")
        }
        "DropStmt"
        | "DropRoleStmt"
        | "DropTableSpaceStmt"
        | "DropOwnedStmt"
        | "DropSubscriptionStmt"
        | "DropUserMappingStmt" => StatementKind::Drop,
        "ViewStmt"
        | "IndexStmt"
        | "DefineStmt"
        | "RuleStmt"
        | "CompositeTypeStmt"
        | "CreateTableAsStmt"
        | "ImportForeignSchemaStmt" => StatementKind::Create,
        "RenameStmt" | "GrantStmt" | "GrantRoleStmt" | "CommentStmt" | "SecLabelStmt"
        | "ReassignOwnedStmt" => StatementKind::Alter,
        other if other.starts_with("Create") => StatementKind::Create,
        other if other.starts_with("Alter") => StatementKind::Alter,
        _ => StatementKind::Utility("other"),
    }
}

/// Collects what a statement uses while visiting every node and every field.
#[derive(Default)]
struct Walker {
    tables: BTreeSet<QualifiedName>,
    functions: BTreeSet<QualifiedName>,
    attribute_names: BTreeSet<String>,
    operators: BTreeSet<QualifiedName>,
    /// The CTE names visible where the walk is, one entry per enclosing `WITH`. An unqualified
    /// relation name is a CTE only inside the scope of a `WITH` that defines it.
    cte_scopes: Vec<Vec<String>>,
    effects: BTreeSet<Effect>,
    /// Every identifier written as a name (not string constants).
    identifiers: BTreeSet<String>,
}

impl Walker {
    fn visit(&mut self, value: &Tree) {
        match value {
            Tree::Seq(items) => {
                for item in items {
                    self.visit(item);
                }
            }
            Tree::Struct(fields) => {
                if let Some((tag, body)) = tagged(value) {
                    self.node(tag, body);
                } else {
                    self.fields(value, fields);
                }
            }
            // A `oneof` other than a node's: its content is visited like any other.
            Tree::Variant(_, inner) => self.visit(inner),
            Tree::Null | Tree::Bool(_) | Tree::Int(_) | Tree::Str(_) => {}
        }
    }

    /// Any object: untagged structs (a `RangeVar` in `InsertStmt.relation`, `larg`/`rarg` of a
    /// set operation, a `WithClause`) are recognised by their fields.
    fn fields(&mut self, node: &Tree, fields: &[(&'static str, Tree)]) {
        if let Some(name) = relation_name(node) {
            let names_a_cte = name.schema.is_none()
                && self.cte_scopes.iter().any(|scope| scope.contains(&name.name));
            if !names_a_cte {
                self.tables.insert(name);
            }
        }
        if node.get("into_clause").is_some() {
            self.effects.insert(Effect::Create);
        }
        if node.get("locking_clause").and_then(Tree::as_array).is_some_and(|l| !l.is_empty()) {
            self.effects.insert(Effect::LockRows);
        }
        match node.get("with_clause") {
            Some(with) => self.with_scope(with, fields),
            None => {
                for (_, field) in fields {
                    self.visit(field);
                }
            }
        }
    }

    /// A statement with a `WITH` clause. Each CTE sees the CTEs before it (all of them, itself
    /// included, under `RECURSIVE`); the rest of the statement sees all of them. A name used
    /// outside that scope, or inside a CTE before the one that defines it, is a real relation.
    fn with_scope(&mut self, with: &Tree, statement: &[(&'static str, Tree)]) {
        let recursive = with.get("recursive").and_then(Tree::as_bool) == Some(true);
        let ctes = with.get("ctes").and_then(Tree::as_array).unwrap_or_default();
        let names: Vec<String> = ctes
            .iter()
            .filter_map(|cte| tagged(cte)?.1.get("ctename")?.as_str().map(str::to_owned))
            .collect();
        for cte in ctes {
            let name = tagged(cte).and_then(|(_, body)| body.get("ctename")?.as_str());
            let visible = if recursive {
                names.clone()
            } else {
                let before = names.iter().position(|n| Some(n.as_str()) == name);
                names[..before.unwrap_or(names.len())].to_vec()
            };
            self.cte_scopes.push(visible);
            self.visit(cte);
            self.cte_scopes.pop();
        }
        self.cte_scopes.push(names);
        for (key, field) in statement {
            if *key != "with_clause" {
                self.visit(field);
            }
        }
        self.cte_scopes.pop();
    }

    fn node(&mut self, tag: &str, body: &Tree) {
        if tag == "String"
            && let Some(name) = body.get("sval").and_then(Tree::as_str)
        {
            self.identifiers.insert(name.to_owned());
        }
        if matches!(tag, "InsertStmt" | "UpdateStmt" | "DeleteStmt" | "MergeStmt") {
            // The target of a change is always a relation, never a CTE of the same name.
            if let Some(name) = body.get("relation").and_then(relation_name) {
                self.tables.insert(name);
            }
        }
        match tag {
            "FuncCall" => {
                if let Some(name) = body.get("funcname").and_then(qualified_name) {
                    self.functions.insert(name);
                }
            }
            "AExpr" => {
                if let Some(name) = body.get("name").and_then(qualified_name) {
                    self.operators.insert(name);
                }
            }
            "ColumnRef" => {
                if let Some(fields) = body.get("fields").and_then(Tree::as_array) {
                    for field in fields.iter().skip(1) {
                        if let Some(name) = string_node(field) {
                            self.attribute_names.insert(name.to_owned());
                        }
                    }
                }
            }
            "AIndirection" => {
                if let Some(items) = body.get("indirection").and_then(Tree::as_array) {
                    for item in items {
                        if let Some(name) = string_node(item) {
                            self.attribute_names.insert(name.to_owned());
                        }
                    }
                }
            }
            "InsertStmt" => {
                self.effects.insert(Effect::Insert);
                let conflict_action = body
                    .get("on_conflict_clause")
                    .and_then(|clause| clause.get("action"))
                    .and_then(Tree::as_i64);
                if conflict_action
                    == Some(pg_query::protobuf::OnConflictAction::OnconflictUpdate as i64)
                {
                    self.effects.insert(Effect::Update);
                }
            }
            "UpdateStmt" => {
                self.effects.insert(Effect::Update);
            }
            "DeleteStmt" => {
                self.effects.insert(Effect::Delete);
            }
            "MergeStmt" => self.merge(body),
            _ => {}
        }
        if let Tree::Struct(fields) = body {
            self.fields(body, fields);
        }
    }

    /// A `MERGE` changes rows in the ways its `WHEN` clauses say.
    fn merge(&mut self, body: &Tree) {
        use pg_query::protobuf::CmdType;
        let clauses = body.get("merge_when_clauses").and_then(Tree::as_array);
        for clause in clauses.into_iter().flatten() {
            let Some((_, clause)) = tagged(clause) else { continue };
            let command = clause.get("command_type").and_then(Tree::as_i64);
            let effect = match command {
                Some(c) if c == CmdType::CmdInsert as i64 => Effect::Insert,
                Some(c) if c == CmdType::CmdUpdate as i64 => Effect::Update,
                Some(c) if c == CmdType::CmdDelete as i64 => Effect::Delete,
                Some(c) if c == CmdType::CmdNothing as i64 => continue,
                // Unknown actions are counted as every kind of change.
                _ => {
                    self.effects.extend([Effect::Insert, Effect::Update, Effect::Delete]);
                    continue;
                }
            };
            self.effects.insert(effect);
        }
    }
}

/// The name of a `RangeVar` (any object with a `relname`).
fn relation_name(node: &Tree) -> Option<QualifiedName> {
    let relname = node.get("relname")?.as_str()?;
    let schema = node.get("schemaname").and_then(Tree::as_str).filter(|s| !s.is_empty());
    Some(QualifiedName { schema: schema.map(str::to_owned), name: relname.to_owned() })
}

/// The text of a `String` node.
fn string_node(value: &Tree) -> Option<&str> {
    match tagged(value) {
        Some(("String", body)) => body.get("sval").and_then(Tree::as_str),
        _ => None,
    }
}

/// A name written as a list of `String` nodes (`schema.name` or `name`; three parts keep the last two).
fn qualified_name(list: &Tree) -> Option<QualifiedName> {
    let parts: Vec<&str> = list.as_array()?.iter().filter_map(string_node).collect();
    let (name, rest) = parts.split_last()?;
    Some(QualifiedName { schema: rest.last().map(|s| (*s).to_owned()), name: (*name).to_owned() })
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
            plain_explain: false,
            explain_analyze: false,
            cursor_capable: false,
        }
    }
}
