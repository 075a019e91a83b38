//! What classification says about SQL: a statement's kind, the names it uses, its effects, and
//! the parse error. Plain data shared by the classifier (`classify.rs`), the parse-tree walk
//! (`tree.rs`) and the policy (`policy.rs`); it uses none of them.
//!
//! # Design notes
//!
//! `statement.rs` holds what classification says (`Statement`, `StatementKind`, `Effect`,
//! `QualifiedName`, `Classification`, `ParseError`), plain data that `classify.rs`, `tree.rs` and
//! `policy.rs` share without using each other in a circle.

use std::collections::BTreeSet;
use std::fmt;

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

impl StatementKind {
    /// The SQL keyword of the kind (`SELECT` for a read), as a span names an operation.
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            StatementKind::Read => "SELECT",
            StatementKind::Insert => "INSERT",
            StatementKind::Update => "UPDATE",
            StatementKind::Delete => "DELETE",
            StatementKind::Merge => "MERGE",
            StatementKind::Create => "CREATE",
            StatementKind::Alter => "ALTER",
            StatementKind::Drop => "DROP",
            StatementKind::Truncate => "TRUNCATE",
            StatementKind::Transaction => "TRANSACTION",
            StatementKind::Session => "SET",
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
    /// The numbers of the statement's parameter placeholders (`$1`, `$2` ...), in order, each
    /// once; empty when it has none. (Those of a function body or a `PREPARE` are the body's
    /// own and are not counted.)
    pub parameters: Vec<u32>,
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

    /// A low-cardinality summary for traces (`db.query.summary`): the operation, then the
    /// kind's keyword when the operation is another (`EXPLAIN SELECT`), then the first tables
    /// named. No text, no values.
    pub(crate) fn summary(&self, operation: Option<&str>) -> String {
        let mut summary = String::new();
        if let Some(operation) = operation {
            summary.push_str(operation);
            summary.push(' ');
        }
        summary.push_str(self.kind.keyword());
        for table in self.tables.iter().take(4) {
            summary.push(' ');
            summary.push_str(&table.to_string());
        }
        summary
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
